"""Two WikiMIA sets with newer non-members.

WikiMIA-25 (hub `SimMIA/WikiMIA-25`, its dataset card): Wikipedia texts built the way
WikiMIA-24 was, with non-members recent enough for 2025 models; splits `WikiMIA_length32`,
`WikiMIA_length64`, `WikiMIA_length128` and `paper_subset` (stored as
`data/{split}-*.parquet`), fields `input` (the text) and `label` (1 member, 0 non-member);
subset = `length=N` with `length=all`; ids are `{split}/{line or row}`.

WikiMIA-2024 Hard (hub `hallisky/wikiMIA-2024-hard`; Hallinan et al., "The Surprising
Effectiveness of Membership Inference with Simple N-Gram Coverage", CoLM 2025; built by
`data/wikiMIA_hard/filter_articles.py` of shallinan1/membership-inference): the same
Wikipedia article twice, its 2016 summary as the member (label 1) and its summary after
the 2024 edits as the non-member (label 0), both cut to 256 words and of similar length;
rows `{"title", "date", "input", "id", "diff", "label"}`, the pair sharing `id` within a
split. Hub splits `train`, `validation`, `test` (files `train.jsonl`, `val.jsonl`,
`test.jsonl`; the authors evaluate on `test`). `group` = the article, so folds keep a pair
together; ids are `{split}/{line or row}`.
"""

from __future__ import annotations

from pathlib import Path

from pddkit.data.benchmarks.files import Rows, choose
from pddkit.data.benchmarks.registry import register_benchmark
from pddkit.data.benchmarks.release_files import merge_parts, read_split
from pddkit.data.records import rows_to_dataset
from pddkit.data.samples import Dataset, make_dataset

REPO25 = "SimMIA/WikiMIA-25"
LENGTHS25 = ("32", "64", "128")
PAPER_SUBSET = "paper_subset"
REPO_HARD = "hallisky/wikiMIA-2024-hard"
HARD_SPLITS = {"train": "train", "validation": "val", "test": "test"}  # hub split -> file stem


@register_benchmark("wikimia25", "WikiMIA-25 (SimMIA): Wikipedia texts, non-members recent "
                    "enough for 2025 models; length=32|64|128|all|paper_subset (the card's "
                    "paper_subset split)")
def wikimia25(data_dir: str | Path | None, on_invalid: str, *, length: str = "32") -> Dataset:
    length = str(choose("wikimia25 length", length, (*LENGTHS25, "all", PAPER_SUBSET)))
    splits = ([f"WikiMIA_length{n}" for n in LENGTHS25] if length == "all" else
              [PAPER_SUBSET] if length == PAPER_SUBSET else [f"WikiMIA_length{length}"])
    parts = []
    for split in splits:
        rows, where, unit = read_split(data_dir, split, REPO25)
        subset = split.replace("WikiMIA_length", "length=") if len(splits) > 1 else None
        parts.append(rows_to_dataset(_tag(rows, f"{split}/", subset), where, where,
                                     on_invalid=on_invalid, unit=unit))
    return make_dataset(f"wikimia25:length={length}", *merge_parts(parts, {"language": "en"}))


@register_benchmark("wikimia24-hard", "WikiMIA-2024 Hard (Hallinan et al. 2025): one Wikipedia "
                    "article's 2016 summary 1 vs its summary after 2024 edits 0; "
                    "split=test|train|validation|all; group = article")
def wikimia24_hard(data_dir: str | Path | None, on_invalid: str, *, split: str = "test") -> Dataset:
    split = str(choose("wikimia24-hard split", split, (*HARD_SPLITS, "all")))
    splits = list(HARD_SPLITS) if split == "all" else [split]
    parts = []
    for s in splits:
        rows, where, unit = read_split(data_dir, HARD_SPLITS[s], REPO_HARD, hub_split=s)
        parts.append(rows_to_dataset(_pairs(rows, s, len(splits) > 1), where, where,
                                     on_invalid=on_invalid, unit=unit))
    return make_dataset(f"wikimia24-hard:split={split}", *merge_parts(parts, {"language": "en"}))


def _tag(rows: Rows, prefix: str, subset: str | None) -> Rows:
    out: Rows = []
    for no, row in rows:
        if isinstance(row, dict):
            row = {**row, "id": f"{prefix}{no}", **({"subset": subset} if subset else {})}
        out.append((no, row))
    return out


def _pairs(rows: Rows, split: str, several: bool) -> Rows:
    """Rows with id `{split}/{number}` and group = the article (its title, else the pair's
    own `id`), subset = split when several are loaded."""
    out: Rows = []
    for no, row in rows:
        if isinstance(row, dict):
            article = row.get("title") if row.get("title") else row.get("id")
            row = {k: v for k, v in row.items() if k != "id"} | {"id": f"{split}/{no}"}
            if article is not None:
                row["group"] = f"{split}/{article}"
            if several:
                row["subset"] = split
        out.append((no, row))
    return out
