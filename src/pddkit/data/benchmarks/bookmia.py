"""BookMIA (Shi et al. 2024, "Detecting pretraining data from large language models"):
9,870 512-word snippets of books; label 1 = books memorised by ChatGPT (Chang et al.
2023), 0 = books first published in 2023. `group` = the book, so folds and validation
keep a book whole; NUL characters in snippets are removed and counted."""

from __future__ import annotations

import logging
from pathlib import Path

from pddkit.data.benchmarks.files import jsonl_values
from pddkit.data.benchmarks.registry import register_benchmark
from pddkit.data.hub import hub_rows
from pddkit.data.records import rows_to_dataset
from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

REPO = "swj0419/BookMIA"
FILE = "book_data.jsonl"


@register_benchmark("bookmia", "BookMIA (Shi et al. 2024): book snippets memorised by ChatGPT vs "
                    "books of 2023; group = book")
def bookmia(data_dir: str | Path | None, on_invalid: str) -> Dataset:
    if data_dir is not None:
        path = Path(data_dir) / FILE
        if not path.is_file():
            raise PddkitError(f"`data_dir` {data_dir} has no {FILE}")
        rows, where, unit = jsonl_values(path), str(path), "line"
    else:
        rows = [(i, dict(r)) for i, r in enumerate(hub_rows(REPO, split="train"), start=1)]
        where, unit = f"{REPO} train", "row"
    ids = [_id(r) for _, r in rows]
    unique = None not in ids and len(set(ids)) == len(ids)
    nul = {"characters": 0, "snippets": 0}
    out = [(no, _row(r, unique, nul)) for no, r in rows]
    if nul["characters"]:
        logger.info("bookmia: removed %d NUL characters from %d snippets", nul["characters"],
                    nul["snippets"])
    return rows_to_dataset(out, "bookmia", where, on_invalid=on_invalid, unit=unit,
                           meta={"language": "en", "nul_characters_removed": nul["characters"],
                                 "snippets_with_nul": nul["snippets"]})


def _id(row: object) -> str | None:
    return str(row["snippet_id"]) if isinstance(row, dict) and row.get("snippet_id") is not None \
        else None


def _row(row: object, unique_ids: bool, nul: dict) -> object:
    """A release row as a pddkit row: text = snippet without NULs, group = book, id =
    snippet_id (prefixed with the book when snippet ids repeat across books)."""
    if not isinstance(row, dict):
        return row
    text = row.get("snippet")
    if isinstance(text, str) and "\x00" in text:
        nul["characters"] += text.count("\x00")
        nul["snippets"] += 1
        text = text.replace("\x00", "")
    sid = _id(row)
    if sid is not None and not unique_ids:
        sid = f"{row.get('book')}/{sid}"
    return {"text": text, "label": row.get("label"), "group": row.get("book"),
            **({"id": sid} if sid is not None else {})}
