"""JSONL loader (SPEC section 5): `text` (or `input`), optional `label` 0/1, optional `id`,
optional `group` (the document a text was cut from; cross-validation keeps groups together).

Policy for a bad line (not UTF-8, not JSON, no text, empty text, bad label):
`on_invalid="error"` (default) stops with one sentence naming the file and line;
`on_invalid="skip"` leaves the line out and records it, so the count reaches results.json.
"""

from __future__ import annotations

import json
from pathlib import Path

from pddkit.data.samples import Dataset, Sample, Skipped, make_dataset
from pddkit.errors import PddkitError

TEXT_FIELDS = ("text", "input")


class _BadLine(Exception):  # noqa: N818  (internal signal, never escapes)
    pass


def _parse_label(value: object) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    raise _BadLine(f"has label {value!r}; labels must be 0 (non-member) or 1 (member)")


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


def parse_record(obj: object, line_no: int, where: str) -> Sample:
    """One decoded JSON value -> Sample, or _BadLine with the reason."""
    if not isinstance(obj, dict):
        raise _BadLine(f"is a JSON {type(obj).__name__}, not an object with a 'text' field")
    key = next((k for k in TEXT_FIELDS if k in obj), None)
    if key is None:
        raise _BadLine("has no 'text' (or 'input') field")
    text = obj[key]
    if not isinstance(text, str):
        raise _BadLine(f"has a '{key}' field that is a {type(text).__name__}, not a string")
    if not text.strip():
        raise _BadLine("has an empty or whitespace-only text")
    label = _parse_label(obj["label"]) if obj.get("label") is not None else None
    sid = str(obj["id"]) if obj.get("id") is not None else str(line_no)
    group = str(obj["group"]) if obj.get("group") is not None else None
    return Sample(id=sid, text=text, label=label, source=f"{where} line {line_no}", group=group)


def load_jsonl(path: str | Path, on_invalid: str = "error", name: str | None = None) -> Dataset:
    """Read a JSONL file of texts; see the module docstring for the bad-line policy."""
    if on_invalid not in ("error", "skip"):
        raise PddkitError(f"`on_invalid` must be 'error' or 'skip', not {on_invalid!r}")
    path = Path(path)
    if not path.is_file():
        raise PddkitError(f"data file {path} does not exist")
    samples: list[Sample] = []
    skipped: list[Skipped] = []
    blank = 0
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            try:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise _BadLine(f"is not valid UTF-8 (byte {e.start})") from None
                if not line.strip():
                    blank += 1
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise _BadLine(f"is not valid JSON ({e.msg} at column {e.colno})") from None
                samples.append(parse_record(obj, line_no, str(path)))
            except _BadLine as bad:
                if on_invalid == "error":
                    raise PddkitError(
                        f"{path} line {line_no} {bad} (use `on_invalid='skip'` to leave such "
                        "lines out and count them)"
                    ) from None
                skipped.append(Skipped(source=f"{path} line {line_no}", reason=str(bad)))
    return make_dataset(name or str(path), samples, skipped, meta={"blank_lines": blank})
