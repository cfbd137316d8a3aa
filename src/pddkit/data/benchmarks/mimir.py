"""MIMIR (Duan et al. 2024, "Do membership inference attacks work on large language
models?"): texts of the Pile's train split (members of the Pythia models' training data,
label 1) and of its test split (non-members, label 0), paired by position, per domain and
n-gram de-duplication threshold; and the hub's other sources, labelled by the hub's member
(train) and non-member (test) files as they are: `full_pile` (the Pile's domains mixed),
`c4` (C4 texts), `temporal_arxiv` (non-members: arXiv papers of one month from 2020-08 on)
and `temporal_wiki` (non-members: Wikipedia articles from 2023-08 on).

The hub repo (`iamgroot42/mimir`) is a loading script that `datasets>=4` refuses to run,
so its raw files are read, from `data_dir` or downloaded: `{cache}/train/{stem}.jsonl`
(members) and `{cache}/test/{stem}.jsonl` (non-members), one JSON string per line, with
`stem` = `{domain}_{split}`, or `{domain}` alone for the sources the hub gives no split
(its split is then named `none`: full_pile, c4, temporal_wiki), and `cache` =
`cache_100_200_1000_512` (`cache_100_200_10000_512` for full_pile), as the hub's loading
script (version 1.3.0) names them. Ids are
`{stem}/member-{i}` and `{stem}/nonmember-{i}` (i from 0, the row of the pair), so
MIMIR's pre-computed neighbours (`{train,test}_neighbors/{stem}_neighbors_25_bert_in_place_swap.jsonl`,
one line per text) are found by id: pass that folder or file as `neighbors_file`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pddkit.data.benchmarks.files import choose, jsonl_values
from pddkit.data.benchmarks.registry import register_benchmark
from pddkit.data.hub import hub_file
from pddkit.data.records import rows_to_dataset
from pddkit.data.samples import Dataset, Sample, Skipped, make_dataset
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

REPO = "iamgroot42/mimir"
PILE_DOMAINS = ("arxiv", "dm_mathematics", "github", "hackernews", "pile_cc", "pubmed_central",
                "wikipedia_(en)")
NGRAM_SPLITS = ("ngram_13_0.8", "ngram_13_0.2", "ngram_7_0.2")
MONTHS = ("2020_08", "2021_01", "2021_06", "2022_01", "2022_06", "2023_01", "2023_06")
SPLITS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(PILE_DOMAINS, NGRAM_SPLITS),
    "full_pile": ("none",),  # the hub's configs without subsets: split "none", file {domain}.jsonl
    "c4": ("none",),
    "temporal_arxiv": MONTHS,
    "temporal_wiki": ("none",),
}
DEFAULT_SPLIT = "ngram_13_0.8"


def cache_dir(domain: str) -> str:
    return "cache_100_200_10000_512" if domain == "full_pile" else "cache_100_200_1000_512"


def stem(domain: str, split: str) -> str:
    """MIMIR's file stem of a domain and split (a domain without splits has split "none")."""
    return domain if split == "none" else f"{domain}_{split}"


@register_benchmark("mimir", "MIMIR (Duan et al. 2024): the Pile's train vs test texts for the "
                    "Pythia models; domain=all (the seven Pile domains)|arxiv|dm_mathematics|"
                    "github|hackernews|pile_cc|pubmed_central|wikipedia_(en)|full_pile|c4|"
                    "temporal_arxiv|temporal_wiki, split=ngram_13_0.8|ngram_13_0.2|ngram_7_0.2 "
                    "(temporal_arxiv: a month such as 2021_06; full_pile, c4, temporal_wiki: "
                    "none, their only split, taken by default)")
def mimir(data_dir: str | Path | None, on_invalid: str, *, domain: str = "all",
          split: str = DEFAULT_SPLIT) -> Dataset:
    domains = list(PILE_DOMAINS) if domain == "all" else [
        choose("mimir domain", domain, (*SPLITS, "all"))]
    samples: list[Sample] = []
    skipped: list[Skipped] = []
    unpaired = 0
    for d in domains:
        valid = SPLITS[d]
        # the default names the Pile domains' split; a domain with one split takes that one
        s = valid[0] if split == DEFAULT_SPLIT and len(valid) == 1 else choose(
            f"mimir split of domain {d}", split, valid)
        part, extra = _pairs(data_dir, d, str(s), on_invalid, subset=d if domain == "all" else None)
        samples.extend(part.samples)
        skipped.extend(part.skipped)
        unpaired += extra
    meta = {"language": "en", "unpaired_left_out": unpaired}
    return make_dataset(f"mimir:domain={domain},split={split}", samples, skipped, meta)


def _file(data_dir: str | Path | None, domain: str, side: str, name: str) -> Path:
    rel = f"{cache_dir(domain)}/{side}/{name}"
    if data_dir is None:
        return hub_file(REPO, rel)
    for base in (Path(data_dir), Path(data_dir) / cache_dir(domain)):  # the repo or its cache folder
        if (base / side / name).is_file():
            return base / side / name
    raise PddkitError(f"`data_dir` {data_dir} has no {rel} (MIMIR's layout)")


def _pairs(data_dir, domain: str, split: str, on_invalid: str,
           subset: str | None) -> tuple[Dataset, int]:
    """(members then non-members of one domain and split, texts left without a partner)."""
    name = stem(domain, split)
    sides = {side: _file(data_dir, domain, side, f"{name}.jsonl") for side in ("train", "test")}
    values = {side: jsonl_values(path) for side, path in sides.items()}
    n = min(len(v) for v in values.values())
    extra = sum(len(v) for v in values.values()) - 2 * n
    if extra:  # the hub rows zip the two files: a text without a partner is no row
        logger.info("mimir %s: %d texts without a partner left out (%d members, %d non-members)",
                    name, extra, len(values["train"]), len(values["test"]))
    samples: list[Sample] = []
    skipped: list[Skipped] = []
    for side, label, kind in (("train", 1, "member"), ("test", 0, "nonmember")):
        rows = ((no, _row(v, f"{name}/{kind}-{i}", label, subset))
                for i, (no, v) in enumerate(values[side][:n]))
        part = rows_to_dataset(rows, name, str(sides[side]), on_invalid=on_invalid, unit="line")
        samples.extend(part.samples)
        skipped.extend(part.skipped)
    return Dataset(name, tuple(samples), tuple(skipped)), extra


def _row(value: object, sid: str, label: int, subset: str | None) -> object:
    """A line's JSON string (or an object with a `text`) as a row; anything else is left
    for records.py to name."""
    if isinstance(value, str):
        value = {"text": value}
    if isinstance(value, dict):
        return {**value, "id": sid, "label": label, "subset": subset}
    return value
