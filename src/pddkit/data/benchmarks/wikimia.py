"""WikiMIA (Shi et al. 2024, "Detecting pretraining data from large language models"):
Wikipedia event texts from before 2017 (members of most models' pre-training data) vs
after 2023; its paraphrased and perturbed variants (Zhang et al. 2024, Min-K%++); and
WikiMIA-24 (Fu et al. 2024, MIA-Tuner: members 2015-2016 events, non-members 2024).

A perturbed variant scores the original (or paraphrased) texts and carries each one's
released perturbations as its neighbours (`Dataset.meta["neighbors"]`, id -> texts),
which the `neighbor` method uses when no `mask_model` or `neighbors_file` is given.
`length=all` loads every length into one data set, `subset` = "length=N".
"""

from __future__ import annotations

import logging
from pathlib import Path

from pddkit.data.benchmarks.files import Rows, choose, row_id, split_rows, tagged
from pddkit.data.benchmarks.registry import register_benchmark
from pddkit.data.records import rows_to_dataset
from pddkit.data.samples import Dataset, Sample, Skipped, make_dataset
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

REPO = "swj0419/WikiMIA"
VARIANT_REPO = "zjysteven/WikiMIA_paraphrased_perturbed"
REPO24 = "wjfu99/WikiMIA-24"
WIKIMIA_LENGTHS = (32, 64, 128, 256)
VARIANT_LENGTHS = (32, 64, 128)  # the paraphrased / perturbed sets
WIKIMIA24_LENGTHS = (32, 64, 128, 256)
VARIANTS = ("original", "paraphrased", "perturbed", "paraphrased_perturbed")
MIN_OVERLAP = 0.5  # word overlap a perturbation keeps with its text (it swaps a few words)


@register_benchmark("wikimia", "WikiMIA (Shi et al. 2024): Wikipedia events before 2017 vs after "
                    "2023; length=32|64|128|256|all, variant=original|paraphrased|perturbed|"
                    "paraphrased_perturbed (Min-K%++)")
def wikimia(data_dir: str | Path | None, on_invalid: str, *, length: str = "32",
            variant: str = "original") -> Dataset:
    variant = choose("wikimia variant", variant, VARIANTS)
    valid = WIKIMIA_LENGTHS if variant == "original" else VARIANT_LENGTHS
    what = "wikimia length" if variant == "original" else f"wikimia variant {variant} length"
    lengths = _lengths(what, length, valid)
    name = f"wikimia:length={length}" + ("" if variant == "original" else f",variant={variant}")
    parts = [_one_length(data_dir, n, variant, on_invalid, len(lengths) > 1) for n in lengths]
    return _merge(name, parts)


@register_benchmark("wikimia24", "WikiMIA-24 (Fu et al. 2024): Wikipedia events of 2015-2016 vs "
                    "2024; length=32|64|128|256|all")
def wikimia24(data_dir: str | Path | None, on_invalid: str, *, length: str = "32") -> Dataset:
    lengths = _lengths("wikimia24 length", length, WIKIMIA24_LENGTHS)
    parts = []
    for n in lengths:
        rows, where, unit = split_rows(data_dir, f"WikiMIA_length{n}", REPO24)
        parts.append((_dataset(rows, where, unit, n, len(lengths) > 1, on_invalid), None))
    return _merge(f"wikimia24:length={length}", parts)


def _lengths(what: str, length: object, valid: tuple[int, ...]) -> list[int]:
    if str(length) == "all":
        return list(valid)
    return [int(choose(what, length, (*valid, "all")))]


def _dataset(rows: Rows, where: str, unit: str, n: int, several: bool, on_invalid: str) -> Dataset:
    prefix, subset = (f"length={n}/", f"length={n}") if several else ("", None)
    return rows_to_dataset(tagged(rows, prefix, subset), where, where, on_invalid=on_invalid,
                           unit=unit)


def _one_length(data_dir, n: int, variant: str, on_invalid: str, several: bool):
    """(Dataset of one length, its neighbours {id: texts} or None)."""
    base = f"WikiMIA_length{n}"
    if variant in ("original", "paraphrased"):
        split = base if variant == "original" else f"{base}_paraphrased"
        rows, where, unit = split_rows(data_dir, split, REPO if variant == "original" else VARIANT_REPO)
        return _dataset(rows, where, unit, n, several, on_invalid), None
    pert, pert_where, pert_unit = split_rows(data_dir, f"{base}_{variant}", VARIANT_REPO)
    prefix = f"length={n}/" if several else ""
    key = _list_field(pert)
    if key is not None:  # each row holds its text and a list of its perturbations
        ds = _dataset(pert, pert_where, pert_unit, n, several, on_invalid)
        return ds, {row_id(no, r, prefix): list(r[key]) for no, r in pert if isinstance(r, dict)}
    text_split = base if variant == "perturbed" else f"{base}_paraphrased"
    rows, where, unit = split_rows(data_dir, text_split, REPO if variant == "perturbed" else VARIANT_REPO)
    neighbours = _by_position(rows, where, pert, pert_where, prefix)
    return _dataset(rows, where, unit, n, several, on_invalid), neighbours


def _list_field(rows: Rows) -> str | None:
    """The field holding a list of texts in every row, if the rows have one."""
    first = next((r for _, r in rows if isinstance(r, dict)), None)
    if first is None:
        return None
    for key, value in first.items():
        texts = isinstance(value, list) and value and all(isinstance(v, str) for v in value)
        if texts and all(isinstance(r, dict) and isinstance(r.get(key), list) for _, r in rows):
            return key
    return None


def _text(row: object) -> str:
    if isinstance(row, dict):
        text = row.get("input", row.get("text"))
        if isinstance(text, str):
            return text
    return ""


def _overlap(a: str, b: str) -> float:
    wa, wb = set(a.lower().split()), set(b.lower().split())
    return len(wa & wb) / max(1, len(wa | wb))


def _by_position(rows: Rows, where: str, pert: Rows, pert_where: str, prefix: str) -> dict:
    """Perturbed rows released flat, k per text: text i's are rows i*k .. i*k+k-1 (the
    Min-K%++ layout) or rows i, N+i, 2N+i, ...; the order whose rows share most words with
    their texts is taken, and one sharing few is refused."""
    n, texts = len(rows), [_text(r) for _, r in pert]
    if not n or not texts or len(texts) % n:
        raise PddkitError(f"{pert_where} has {len(texts)} rows, not a whole number of "
                          f"perturbations for each of the {n} texts of {where}")
    k = len(texts) // n
    layouts = {"grouped": lambda i, j: i * k + j, "interleaved": lambda i, j: j * n + i}
    probe = range(0, n, max(1, n // 20))
    fit = {name: sum(_overlap(_text(rows[i][1]), texts[at(i, j)]) for i in probe for j in range(k))
           / (len(probe) * k) for name, at in layouts.items()}
    best = max(fit, key=fit.get)
    if fit[best] < MIN_OVERLAP:
        raise PddkitError(f"the rows of {pert_where} do not line up with the texts of {where} "
                          f"({k} per text; they share {fit[best]:.0%} of their words at best)")
    logger.info("%s: %d perturbations per text of %s (%s)", pert_where, k, where, best)
    at = layouts[best]
    return {row_id(no, r, prefix) if isinstance(r, dict) else f"{prefix}{no}":
            [texts[at(i, j)] for j in range(k)] for i, (no, r) in enumerate(rows)}


def _merge(name: str, parts: list[tuple[Dataset, dict | None]]) -> Dataset:
    samples: list[Sample] = []
    skipped: list[Skipped] = []
    neighbours: dict = {}
    for ds, nbs in parts:
        samples.extend(ds.samples)
        skipped.extend(ds.skipped)
        neighbours.update(nbs or {})
    meta: dict = {"language": "en"}
    if neighbours:
        meta["neighbors"] = neighbours
    return make_dataset(name, samples, skipped, meta)
