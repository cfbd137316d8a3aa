"""Copyright traps (Meeus et al., "Copyright Traps for Large Language Models", ICML 2024,
arXiv 2402.09363): synthetic sequences of 25, 50 or 100 LLaMA-2 tokens, each injected 10,
100 or 1,000 times into the training data of CroissantLLM (label 1), against traps made
the same way and held out (label 0). The paper's target model is `croissantllm/base_190k`
(its `ref` is the perplexity ratio against LLaMA-2-7B).

The release (hub `imperial-cpg/copyright-traps`, as read by the authors' benchmark,
computationalprivacy/mia_llms_benchmark: README.md and config_template_traps.yaml) has one
split per cell, `seq_len_{L}_n_rep_{R}` (L = 25, 50, 100; R = 10, 100, 1000), columns
`text`, `label` (1 injected, 0 held out) and `perplexity_bucket`. Each split holds its
cell's members and the held-out traps of its length that the authors compare them with
(their table_2 notebook: each (L, R) cell's members against the non-members of length L),
so a held-out trap is in the subset of the split it is released in; if the release repeats
one in several splits of its length, it is kept in each (with an id per split) and counted
in `meta["nonmembers_in_several_subsets"]`. `subset` = "length=L,repeats=R"; ids are
`seq_len_{L}_n_rep_{R}/{row}` (the row's own `id`, else its row or line number from 1).

`extra=yes` adds `imperial-cpg/copyright-traps-extra-non-members` (splits `seq_len_{L}`,
more held-out traps made the same way, which the authors use as auxiliary non-members,
never in their evaluation: their probe draws 4,000 from `seq_len_100`; label 0): the i-th
extra trap of length L (from 0) goes to the subset (L, [10, 100, 1000][i % 3]) whether
or not `repeats` selects it, with id
`extra/seq_len_{L}/{row}`, so each text is in one subset and ids and subsets do not move
with the filter. By default they are left out, keeping the paper's balanced cells.

`data_dir`, offline: per split S, `S.jsonl`, or a `datasets` save_to_disk folder (the
DatasetDict's folder, holding `S/`), or Parquet as the hub repo stores it
(`data/S-*.parquet`; also `S.parquet`, `S-*.parquet`, `S/*.parquet`, `default/S/*.parquet`); the extra
non-members in the same layout in `data_dir` or its folder `copyright-traps-extra-non-members`.
The hub files' exact names were not seen (no copy of the hub repo was at hand): the split
and column names above are what the authors' code loads.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pddkit.data.benchmarks.files import Rows, arrow_rows, choose, jsonl_values, row_id
from pddkit.data.benchmarks.registry import register_benchmark
from pddkit.data.hub import hub_rows
from pddkit.data.overlap import normalise
from pddkit.data.records import BadRow, parse_label, parse_row, without_contradictions
from pddkit.data.samples import Dataset, Sample, Skipped, make_dataset
from pddkit.errors import PddkitError, install_hint

logger = logging.getLogger(__name__)

REPO = "imperial-cpg/copyright-traps"
EXTRA_REPO = "imperial-cpg/copyright-traps-extra-non-members"
EXTRA_FOLDER = "copyright-traps-extra-non-members"  # in data_dir, as the hub repo is named
LENGTHS = (25, 50, 100)
REPEATS = (10, 100, 1000)
PARQUET_GLOBS = ("{s}.parquet", "{s}-*.parquet", "{s}/*.parquet", "data/{s}.parquet",
                 "data/{s}-*.parquet", "default/{s}/*.parquet")


def split_name(length: int, repeats: int) -> str:
    """The release's split of one cell: `seq_len_25_n_rep_10`."""
    return f"seq_len_{length}_n_rep_{repeats}"


def extra_split(length: int) -> str:
    """The extra non-members' split of one length: `seq_len_25`."""
    return f"seq_len_{length}"


def subset_name(length: int, repeats: int) -> str:
    return f"length={length},repeats={repeats}"


@register_benchmark("copyright-traps", "Copyright traps (Meeus et al. 2024): trap sequences "
                    "injected into CroissantLLM's training data vs held-out traps; length=25|"
                    "50|100|all, repeats=10|100|1000|all, extra=yes adds the extra non-member "
                    "traps; subset = length x repeats")
def copyright_traps(data_dir: str | Path | None, on_invalid: str, *, length: str = "all",
                    repeats: str = "all", extra: bool = False) -> Dataset:
    lengths = _pick("copyright-traps length", length, LENGTHS)
    counts = _pick("copyright-traps repeats", repeats, REPEATS)
    name = f"copyright-traps:length={length},repeats={repeats}" + (",extra=yes" if extra else "")
    if on_invalid not in ("error", "skip"):
        raise PddkitError(f"`on_invalid` must be 'error' or 'skip', not {on_invalid!r}")
    samples: list[Sample] = []
    skipped: list[Skipped] = []
    n_extra = 0
    for n in lengths:
        for r in counts:
            s = split_name(n, r)
            rows, where, unit = _split_rows(data_dir, REPO, s, [data_dir] if data_dir else [])
            _parse(_trap_rows(rows, f"{s}/", subset_name(n, r)), where, unit, on_invalid,
                   samples, skipped)
        if extra:
            s = extra_split(n)
            bases = [data_dir, Path(data_dir) / EXTRA_FOLDER] if data_dir else []
            rows, where, unit = _split_rows(data_dir, EXTRA_REPO, s, bases)
            before = len(samples)
            _parse(_extra_rows(rows, n, set(counts)), where, unit, on_invalid, samples, skipped)
            n_extra += len(samples) - before
    # one check over every split: a text injected in one cell and held out in another
    samples, contradicting = without_contradictions(samples, name, on_invalid)
    skipped.extend(contradicting)
    meta: dict = {"language": "en", "nonmembers_in_several_subsets": _shared_nonmembers(samples)}
    if contradicting:
        meta["contradicting_labels_left_out"] = len(contradicting)
    if extra:
        meta["extra_nonmembers"] = n_extra
    if meta["nonmembers_in_several_subsets"]:
        logger.info("copyright-traps: %d held-out traps are in more than one subset (as released)",
                    meta["nonmembers_in_several_subsets"])
    return make_dataset(name, samples, skipped, meta)


def _pick(what: str, value: object, valid: tuple[int, ...]) -> list[int]:
    """All of `valid` for "all", else the one value given (one sentence naming the rest)."""
    if str(value) == "all":
        return list(valid)
    return [int(choose(what, value, (*valid, "all")))]


def _parse(rows: Rows, where: str, unit: str, on_invalid: str, samples: list[Sample],
           skipped: list[Skipped]) -> None:
    """Rows -> samples (records.py's parse_row), a bad row following `on_invalid` as in
    records.rows_to_dataset; labels are checked across all splits afterwards."""
    for number, row in rows:
        source = f"{where} {unit} {number}"
        try:
            if isinstance(row, BadRow):
                raise row
            samples.append(parse_row(row, number, source))
        except BadRow as bad:
            if on_invalid == "error":
                raise PddkitError(f"{source} {bad} (use `on_invalid='skip'` to leave such "
                                  f"{unit}s out and count them)") from None
            skipped.append(Skipped(source=source, reason=str(bad)))


def _trap_rows(rows: Rows, prefix: str, subset: str) -> Rows:
    """A cell's rows with id and subset; a row without a label is bad (its label is the
    only thing telling an injected trap from a held-out one)."""
    out: Rows = []
    for no, row in rows:
        if isinstance(row, dict):
            if row.get("label") is None:
                row = BadRow("has no label (1 = injected trap, 0 = held-out trap)")
            else:
                row = {**row, "id": row_id(no, row, prefix), "subset": subset}
        out.append((no, row))
    return out


def _extra_rows(rows: Rows, length: int, selected: set[int]) -> Rows:
    """The extra non-members of one length, label 0, the i-th in the subset of
    REPEATS[i % 3]; those of the repeats not selected are left out (by the filter)."""
    out: Rows = []
    for i, (no, row) in enumerate(rows):
        r = REPEATS[i % len(REPEATS)]
        if r not in selected:
            continue
        if isinstance(row, dict):
            row = _extra_row(row, no, length, r)
        out.append((no, row))
    return out


def _extra_row(row: dict, no: int, length: int, repeats: int) -> object:
    label = row.get("label")
    if label is not None:
        try:
            if parse_label(label) != 0:
                return BadRow(f"is an extra non-member trap labelled {label!r}, not 0")
        except BadRow as bad:
            return bad
    return {**row, "label": 0, "id": row_id(no, row, f"extra/{extra_split(length)}/"),
            "subset": subset_name(length, repeats)}


def _shared_nonmembers(samples: list[Sample]) -> int:
    """Held-out traps (label 0) whose text is in more than one subset: each copy counted."""
    where: dict[str, set[str | None]] = {}
    for s in samples:
        if s.label == 0:
            where.setdefault(normalise(s.text), set()).add(s.subset)
    shared = {t for t, subsets in where.items() if len(subsets) > 1}
    return sum(1 for s in samples if s.label == 0 and normalise(s.text) in shared)


def _split_rows(data_dir: str | Path | None, repo: str, split: str,
                bases: list) -> tuple[Rows, str, str]:
    """(rows, where, unit) of one split: from the first of `bases` holding it, else (no
    `data_dir`) from the hub."""
    if data_dir is None:
        rows = hub_rows(repo, split=split)
        return [(i, dict(r)) for i, r in enumerate(rows, start=1)], f"{repo} {split}", "row"
    for base in map(Path, bases):
        found = _local_split(base, split)
        if found is not None:
            return found
    also = f" (nor its folder {EXTRA_FOLDER})" if repo == EXTRA_REPO else ""
    raise PddkitError(f"`data_dir` {data_dir}{also} has no split {split} of {repo}: expected "
                      f"{split}.jsonl, a {split} folder saved by datasets' save_to_disk, or "
                      f"data/{split}-*.parquet as the hub repo stores it")


def _local_split(base: Path, split: str) -> tuple[Rows, str, str] | None:
    if (base / f"{split}.jsonl").is_file():
        path = base / f"{split}.jsonl"
        return jsonl_values(path), str(path), "line"
    if (base / split).is_dir() and any((base / split).glob("*.arrow")):
        return arrow_rows(base / split), str(base / split), "row"
    for pattern in PARQUET_GLOBS:
        files = sorted(base.glob(pattern.format(s=split)))
        if files:
            where = str(files[0]) if len(files) == 1 else str(base / pattern.format(s=split))
            return _parquet_rows(files), where, "row"
    return None


def _parquet_rows(files: list[Path]) -> Rows:
    """The rows of a split's Parquet shards, in file order, numbered from 1."""
    try:
        import pyarrow as pa
        import pyarrow.parquet
    except ImportError:
        raise PddkitError(f"reading {files[0]} needs pyarrow: {install_hint('tables')}") from None
    rows: list[dict] = []
    for f in files:
        try:
            rows.extend(pa.parquet.read_table(f).to_pylist())
        except (pa.ArrowException, OSError) as e:
            raise PddkitError(f"{f} is not a readable Parquet file ({type(e).__name__})") from None
    return list(enumerate(rows, start=1))
