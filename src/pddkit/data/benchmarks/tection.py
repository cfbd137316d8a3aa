"""BookTection and arXivTection (Duarte et al., "DE-COP: Detecting Copyrighted Content in
Language Models Training Data", ICML 2024, arXiv 2402.09910; hub `avduarte333/BookTection`,
`avduarte333/arXivTection`; the authors' repository avduarte333/DE-COP_Method).

Each row is one passage of a book or paper and three paraphrases of it (written by Claude
v2.0): columns `ID` (the book as `Title_-_Author`, or the paper's title), `Example_A` ...
`Example_D` (the four options), `Answer` (the letter of the verbatim passage), `Label`
(the document's: 1 = a book published before 2022 / a paper before 2022, in training data;
0 = published in 2023) and, in BookTection, `Length` (`small`, `medium`, `large`: about 64,
128 and 256 tokens). Both have one split, `train` (BookTection's hub file
`0_BookTection_data.csv`). The text scored is the option `Answer` names; `group` = the
document, so folds keep a book or paper whole; the title and author (BookTection:
`ID` split at `_-_`, underscores read as spaces, as `2_decop_hf.py` does; arXivTection: the
title, asked about as an arXiv paper) reach `decop`'s question. Ids are the file's row or
line numbers. `data_dir`: the hub repo's CSV file, or `train.jsonl`, `train.csv`, a
`train/` save_to_disk folder or `data/train-*.parquet`.
"""

from __future__ import annotations

from pathlib import Path

from pddkit.data.benchmarks.files import Rows, choose
from pddkit.data.benchmarks.registry import register_benchmark
from pddkit.data.benchmarks.release_files import csv_rows, layouts, local_split, read_split
from pddkit.data.records import BadRow, rows_to_dataset
from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError

BOOK_REPO = "avduarte333/BookTection"
BOOK_FILE = "0_BookTection_data.csv"
ARXIV_REPO = "avduarte333/arXivTection"
LENGTHS = ("small", "medium", "large")
LETTERS = ("A", "B", "C", "D")


@register_benchmark("booktection", "BookTection (Duarte et al. 2024, DE-COP): passages of books "
                    "published before 2022 1 vs in 2023 0; length=small|medium|large|all "
                    "(~64/128/256 tokens; the paper's main table: medium); group = book")
def booktection(data_dir: str | Path | None, on_invalid: str, *, length: str = "medium") -> Dataset:
    length = str(choose("booktection length", length, (*LENGTHS, "all")))
    rows, where, unit = _release(data_dir, BOOK_REPO, BOOK_FILE)
    keep = set(LENGTHS) if length == "all" else {length}
    picked: Rows = []
    for no, row in rows:
        if isinstance(row, dict):
            if row.get("Length") not in LENGTHS:
                row = BadRow(f"has Length {row.get('Length')!r}, not one of {', '.join(LENGTHS)}")
            elif row["Length"] not in keep:
                continue
            else:
                row = _row(row, no, book=True, subset=row["Length"] if length == "all" else None)
        picked.append((no, row))
    return rows_to_dataset(picked, f"booktection:length={length}", where, on_invalid=on_invalid,
                           unit=unit, meta={"language": "en"})


@register_benchmark("arxivtection", "arXivTection (Duarte et al. 2024, DE-COP): passages of arXiv "
                    "papers before 2022 1 vs of 2023 0; group = paper")
def arxivtection(data_dir: str | Path | None, on_invalid: str) -> Dataset:
    rows, where, unit = _release(data_dir, ARXIV_REPO, None)
    out = [(no, _row(r, no, book=False, subset=None) if isinstance(r, dict) else r)
           for no, r in rows]
    return rows_to_dataset(out, "arxivtection", where, on_invalid=on_invalid, unit=unit,
                           meta={"language": "en"})


def _release(data_dir: str | Path | None, repo: str, known: str | None) -> tuple[Rows, str, str]:
    """The release's one split: from the hub (`train`), or from `data_dir`: the CSV file
    named `known`, a `train` split in any local layout, or the folder's only CSV file."""
    if data_dir is None:
        return read_split(None, "train", repo)
    base = Path(data_dir)
    if base.is_file() and base.suffix == ".csv":
        return csv_rows(base), str(base), "row"
    if known and (base / known).is_file():
        return csv_rows(base / known), str(base / known), "row"
    found = local_split(base, "train") if base.is_dir() else None
    if found is not None:
        return found
    csvs = sorted(base.glob("*.csv")) if base.is_dir() else []
    if len(csvs) == 1:
        return csv_rows(csvs[0]), str(csvs[0]), "row"
    named = f"{known}, " if known else ""
    if len(csvs) > 1:
        raise PddkitError(f"`data_dir` {data_dir} holds {len(csvs)} CSV files "
                          f"({', '.join(c.name for c in csvs[:3])}): pass the {repo} file itself")
    raise PddkitError(f"`data_dir` {data_dir} has no copy of {repo}: expected {named}a CSV file "
                      f"of its rows, or {layouts('train')}")


def _row(row: dict, no: int, book: bool, subset: str | None) -> object:
    """The verbatim option as text, the document as group, title and author, label."""
    answer = str(row.get("Answer", "")).strip().upper()
    if answer not in LETTERS:
        return BadRow(f"has Answer {row.get('Answer')!r}, not one of A, B, C, D (the verbatim "
                      "option's letter)")
    text = row.get(f"Example_{answer}")
    # the DE-COP repository's own arXivTection CSV names the paper's column Paper_Name
    doc = row.get("ID") if row.get("ID") is not None or book else row.get("Paper_Name")
    if not isinstance(doc, str) or not doc.strip():
        return BadRow("has no ID (the book or paper it is from)" if book else
                      "has no ID or Paper_Name (the paper it is from)")
    out: dict = {"text": text, "label": row.get("Label"), "id": str(no), "group": doc}
    if book:
        title, sep, author = doc.partition("_-_")
        out["title"] = title.replace("_", " ").strip()
        if sep:
            out["author"] = author.replace("_", " ").strip()
    else:
        out["title"], out["source"] = doc, "arXiv"
    if subset is not None:
        out["subset"] = subset
    return out
