"""StackMIA (Ye et al., "Data Contamination Calibration for Black-box LLMs", ACL 2024,
arXiv 2405.11930; the PAC repository yyy01/PAC): Stack Exchange posts, labelled by date.
The benchmark is StackMIAsub (hub `darklight03/StackMIAsub`, one file `StackMIAsub.jsonl`,
lines `{"snippet": ..., "label": 1 or 0}`, 1 member, 0 non-member, as the card and the
authors' `attack.py` read it), for models released before May 2024 and trained on Stack
Exchange; its non-members are posts from after the models' cutoffs (the hub's StackMIA
holds such posts per month, `data/2023-5.jsonl` ... `2023-12.jsonl`, without labels or
members: not loaded here, its rows' fields were not seen). Ids are the line numbers."""

from __future__ import annotations

from pathlib import Path

from pddkit.data.benchmarks.files import jsonl_values
from pddkit.data.benchmarks.registry import register_benchmark
from pddkit.data.hub import hub_file
from pddkit.data.records import BadRow, rows_to_dataset
from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError

REPO = "darklight03/StackMIAsub"
FILE = "StackMIAsub.jsonl"


@register_benchmark("stackmia", "StackMIA (Ye et al. 2024): StackMIAsub's Stack Exchange "
                    "posts, members 1 vs posts after the cutoff 0 (models released before "
                    "May 2024)")
def stackmia(data_dir: str | Path | None, on_invalid: str) -> Dataset:
    if data_dir is not None:
        path = Path(data_dir) / FILE
        if not path.is_file():
            raise PddkitError(f"`data_dir` {data_dir} has no {FILE} (the hub repo {REPO}'s file)")
    else:
        path = hub_file(REPO, FILE)
    rows = [(no, _row(r)) for no, r in jsonl_values(path)]
    return rows_to_dataset(rows, "stackmia", str(path), on_invalid=on_invalid, unit="line",
                           meta={"language": "en"})


def _row(row: object) -> object:
    """`snippet` is the text; a line without a label is bad (the release labels every one)."""
    if not isinstance(row, dict):
        return row
    if row.get("label") is None:
        return BadRow("has no label (StackMIAsub labels every snippet: 1 member, 0 non-member)")
    if "snippet" not in row:
        return BadRow("has no 'snippet' field (StackMIAsub's text)")
    return {k: v for k, v in row.items() if k not in ("text", "input", "snippet")} | {
        "text": row["snippet"]}
