"""JSONL loader: `text` (or `input`), optional `label`, optional `id`, optional `group` (the
document a text was cut from; cross-validation keeps groups together), optional `subset`
(reported on its own too); other names via `Fields`.

Policy for a bad line (not UTF-8, not JSON, no text, empty text, bad label):
`on_invalid="error"` (default) stops with one sentence naming the file and line;
`on_invalid="skip"` leaves the line out and records it, so the count reaches results.json.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from pddkit.data.records import DEFAULT_FIELDS, BadRow, Fields, rows_to_dataset
from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError

TEXT_FIELDS = ("text", "input")


def text_of_line(line: str) -> str | None:
    """The `text` (or `input`) string of one JSONL line, or None if it has none."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    text = next((obj[k] for k in TEXT_FIELDS if k in obj), None)
    return text if isinstance(text, str) else None


def json_error(e: json.JSONDecodeError, at: str = "column") -> str:
    """json's message and where: "Expecting ',' delimiter at column 16"; a message that
    ends in "at" ("Invalid control character at") is not given a second one."""
    where = f"{at} {e.colno if at == 'column' else e.lineno}"
    return f"{e.msg} {where}" if e.msg.endswith(" at") else f"{e.msg} at {where}"


def read_lines(path: Path, meta: dict | None = None):
    """(line number, decoded JSON value or BadRow) per non-blank line; blank lines are
    counted in `meta["blank_lines"]` when `meta` is given."""
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")  # a BOM
            except UnicodeDecodeError as e:
                yield line_no, BadRow(f"is not valid UTF-8 (byte {e.start})")
                continue
            if not line.strip():
                if meta is not None:
                    meta["blank_lines"] = meta.get("blank_lines", 0) + 1
                continue
            try:
                yield line_no, json.loads(line)
            except json.JSONDecodeError as e:
                yield line_no, BadRow(f"is not valid JSON ({json_error(e)})")


def load_jsonl(path: str | Path, on_invalid: str = "error", name: str | None = None,
               fields: Fields = DEFAULT_FIELDS) -> Dataset:
    """Read a JSONL file of texts; see the module docstring for the bad-line policy. The
    columns are those of the first JSON object (a `Label` there is the label column)."""
    path = Path(path)
    if not path.is_file():
        raise PddkitError(f"data file {path} does not exist")
    if path.stat().st_size == 0:
        raise PddkitError(f"data file {path} is empty (0 bytes): give one JSON object per "
                          "line, with the text under 'text' (or 'input')")
    meta = {"blank_lines": 0}
    lines = read_lines(path, meta)
    head: list[tuple[int, object]] = []
    for number, row in lines:  # up to the first object, whose fields name the columns
        head.append((number, row))
        if isinstance(row, dict):
            fields = fields.check_columns(row, f"{path} line {number}")
            break
    if not head:
        raise PddkitError(f"data file {path} holds only blank lines: give one JSON object per "
                          "line, with the text under 'text' (or 'input')")
    return rows_to_dataset(itertools.chain(head, lines), name or str(path), str(path), fields,
                           on_invalid, unit="line", meta=meta)
