"""The Pile document collections of Puerto et al., "Scaling Up Membership Inference: When
and How Attacks Succeed on Large Language Models" (NAACL 2025 Findings, arXiv 2411.00154;
code parameterlab/mia-scaling, read at 406880e): per Pile domain, the documents of the
Pile's first training shard (`00`) in that domain as members of the Pythia models'
training data (label 1) and the Pile's validation and test documents of the domain as
non-members (label 0).

Hub: `parameterlab/scaling_mia_the_pile_00_{domain}` (first published as
`haritzpuerto/the_pile_00_{domain}`), splits `train`, `validation`, `test` with a `text`
column, stored as `data/{split}-*.parquet`. As `precompute_collection_mia_scores.py` does,
the non-members are validation then test, all of them, and the members are as many train
documents, drawn with `datasets`' `shuffle(seed)` (numpy's `default_rng(seed)`
permutation) and taken from its start; `min_chars` > 0 first keeps only documents longer
than that many characters in every split (the script's `--filter_outliers`, 100 there).
`seed` 42 is the README's; the script's default is 0.

Ids: `{domain}/{split}/{i}` with i the row in that split (after the `min_chars` filter),
so each text can be found in the release; subset = domain with `domain=all`. `data_dir`:
the domain's hub repo folder (holding `data/`), or a folder holding
`scaling_mia_the_pile_00_{domain}/` per domain (as `snapshot_download` lays them out);
per split also `{split}.jsonl` or a save_to_disk folder. Only the members drawn are read
from the train shards' Parquet files, one row group at a time.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pddkit.data.benchmarks.files import Rows, choose
from pddkit.data.benchmarks.registry import register_benchmark
from pddkit.data.benchmarks.release_files import (
    layouts,
    local_split,
    merge_parts,
    parquet_count,
    parquet_files,
    parquet_rows,
    parquet_take,
)
from pddkit.data.hub import hub_rows
from pddkit.data.records import rows_to_dataset, without_contradictions
from pddkit.data.samples import Dataset, make_dataset
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

PREFIX = "scaling_mia_the_pile_00_"
OWNER = "parameterlab"
DOMAINS = ("Pile-CC", "arxiv", "DM_Mathematics", "Enron_Emails", "EuroParl", "FreeLaw",
           "Github", "Gutenberg_PG-19", "HackerNews", "NIH_ExPorter", "OpenSubtitles",
           "OpenWebText2", "PhilPapers", "PubMed_Abstracts", "PubMed_Central", "StackExchange",
           "Ubuntu_IRC", "USPTO_Backgrounds", "wiki", "YoutubeSubtitles")
NONMEMBER_SPLITS = ("validation", "test")


@register_benchmark("scaling-mia", "Pile document collections of Puerto et al. 2025 (Scaling Up "
                    "MIA): the Pile's training shard 00 1 vs its validation and test documents 0, "
                    "per domain, for the Pythia models; domain=arxiv|Pile-CC|Github|wiki|... "
                    "(20 Pile domains)|all, seed (members drawn as datasets' shuffle), min_chars "
                    "(0 = all documents; the authors' filter: 100)")
def scaling_mia(data_dir: str | Path | None, on_invalid: str, *, domain: str = "arxiv",
                seed: int = 42, min_chars: int = 0) -> Dataset:
    by_lower = {d.lower(): d for d in DOMAINS}
    picked = str(choose("scaling-mia domain", str(domain).lower(), (*by_lower, "all")))
    domains = list(DOMAINS) if picked == "all" else [by_lower[picked]]
    if min_chars < 0:
        raise PddkitError(f"scaling-mia min_chars must be 0 or more, not {min_chars}")
    name = f"scaling-mia:domain={domain},seed={seed},min_chars={min_chars}"
    parts = []
    for d in domains:
        rows = _domain_rows(data_dir, d, seed, min_chars, subset=d if len(domains) > 1 else None)
        parts += [rows_to_dataset(part, where, where, on_invalid=on_invalid, unit=unit)
                  for where, unit, part in rows]
    samples, skipped, meta = merge_parts(parts, {"language": "en"})
    samples, contradicting = without_contradictions(samples, name, on_invalid)
    skipped.extend(contradicting)
    if contradicting:  # a document of the Pile's train shard also in its validation or test
        meta["contradicting_labels_left_out"] = (meta.get("contradicting_labels_left_out", 0)
                                                 + len(contradicting))
    return make_dataset(name, samples, skipped, meta)


def member_indices(n_train: int, n_nonmembers: int, seed: int) -> list[int]:
    """The train rows the authors take: `ds["train"].shuffle(seed).select(range(n))`."""
    import numpy as np

    if n_nonmembers > n_train:
        raise PddkitError(f"scaling-mia: {n_nonmembers} non-members but only {n_train} train "
                          "documents to draw as many members from")
    return [int(i) for i in np.random.default_rng(seed).permutation(n_train)[:n_nonmembers]]


def _domain_rows(data_dir, domain: str, seed: int, min_chars: int, subset: str | None):
    """[(where, unit, rows)] for the non-member splits then the members of one domain."""
    source = _Source(data_dir, domain)
    parts = []
    n_nonmembers = 0
    for split in NONMEMBER_SPLITS:
        rows = _long(source.rows(split), min_chars)
        n_nonmembers += len(rows)
        parts.append((source.where(split), source.unit(split),
                      _tagged(rows, domain, split, 0, subset)))
    n_train, take = source.train(min_chars)
    idx = member_indices(n_train, n_nonmembers, seed)
    members = list(zip(idx, take(idx)))
    parts.append((source.where("train"), source.unit("train"),
                  _tagged(members, domain, "train", 1, subset)))
    logger.info("scaling-mia %s: %d non-members (validation, test), %d members drawn from %d "
                "train documents (seed %d)", domain, n_nonmembers, len(members), n_train, seed)
    return parts


def _long(rows: list[tuple[int, object]], min_chars: int) -> list[tuple[int, object]]:
    """Rows renumbered from 0 after keeping those whose text is longer than `min_chars`
    (all rows when 0; a row that is not an object is kept for records.py to name)."""
    kept = [r for _, r in rows if min_chars == 0 or not isinstance(r, dict)
            or len(str(r.get("text") or "")) > min_chars]
    return list(enumerate(kept))


def _tagged(rows, domain: str, split: str, label: int, subset: str | None) -> Rows:
    out: Rows = []
    for i, row in rows:
        if isinstance(row, dict):
            row = {"text": row.get("text"), "label": label, "id": f"{domain}/{split}/{i}",
                   **({"subset": subset} if subset else {})}
        out.append((i + 1, row))
    return out


class _Source:
    """One domain's splits: Parquet shards or other local files under `data_dir`, or the hub."""

    def __init__(self, data_dir, domain: str):
        self.domain = domain
        self.repo = f"{OWNER}/{PREFIX}{domain}"
        self.base: Path | None = None
        self._hub: dict = {}
        if data_dir is not None:
            base = Path(data_dir)
            self.base = base / f"{PREFIX}{domain}" if (base / f"{PREFIX}{domain}").is_dir() else base

    def _files(self, split: str) -> list[Path]:
        return parquet_files(self.base, split) if self.base is not None else []

    def where(self, split: str) -> str:
        if self.base is None:
            return f"{self.repo} {split}"
        files = self._files(split)
        return str(files[0]) if len(files) == 1 else f"{self.base} {split}"

    def unit(self, split: str) -> str:
        return "row"

    def _missing(self, split: str) -> PddkitError:
        return PddkitError(f"`data_dir` {self.base} has no split {split} of {self.repo}: expected "
                           f"{layouts(split)} (or a folder {PREFIX}{self.domain}/ holding them)")

    def rows(self, split: str) -> list[tuple[int, object]]:
        if self.base is None:
            return [(i, dict(r)) for i, r in enumerate(self._hub_split(split))]
        files = self._files(split)
        if files:
            return [(i - 1, r) for i, r in parquet_rows(files, columns=["text"])]
        found = local_split(self.base, split)
        if found is None:
            raise self._missing(split)
        return [(i, r) for i, (_, r) in enumerate(found[0])]

    def train(self, min_chars: int):
        """(train documents after the filter, a function taking rows at given indices)."""
        if self.base is None:
            ds = self._hub_split("train")
            if min_chars:
                ds = ds.filter(lambda x: len(x["text"]) > min_chars)
            return len(ds), lambda idx: [dict(r) for r in ds.select(idx)]
        files = self._files("train")
        if files and not min_chars:
            return parquet_count(files), lambda idx: parquet_take(files, idx, columns=["text"])
        kept = [r for _, r in _long(self.rows("train"), min_chars)]
        return len(kept), lambda idx: [kept[i] for i in idx]

    def _hub_split(self, split: str):
        if split not in self._hub:
            self._hub[split] = hub_rows(self.repo, split=split)
        return self._hub[split]
