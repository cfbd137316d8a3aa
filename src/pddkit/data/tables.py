"""Any table of texts as data: JSONL, CSV, TSV, Parquet, a `datasets` save_to_disk
folder, or a hub id (online, `pip install -e '.[hub]'`).

The format follows the file's suffix (.csv, .tsv/.tab, .parquet/.pq, a folder; anything
else is read as JSONL). Column names come from `Fields` (defaults: `text`
or `input`, `label`, `id`, `group`, `subset`); labels may be 0/1, booleans or the strings
"0"/"1", "true"/"false", "member"/"nonmember". Every bad row follows the `on_invalid`
policy of records.py and is named by file and line (CSV, JSONL) or row (Parquet, Arrow).
"""

from __future__ import annotations

import csv
import itertools
import json
import logging
from pathlib import Path

from pddkit.data.jsonl import load_jsonl
from pddkit.data.records import DEFAULT_FIELDS, BadRow, Fields, rows_to_dataset
from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

DELIMITERS = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
PARQUET = (".parquet", ".pq")


def load_table(source: str | Path, fields: Fields = DEFAULT_FIELDS, on_invalid: str = "error",
               name: str | None = None, split: str | None = None,
               language: str | None = None) -> Dataset:
    """The texts of `source` (a file, a save_to_disk folder, or a hub id) as a Dataset.
    `split` picks a split of a DatasetDict folder or hub id (default: the only one, or
    "train"); `language` ("en", "zh", ...) is recorded for the methods that depend on it."""
    path = Path(source)
    name = name or str(source)
    if path.is_dir():
        dataset = _arrow_folder(path, fields, on_invalid, name, split)
    elif path.is_file():
        if split is not None:
            raise PddkitError(f"{path} is one file, without splits: `data_split` is for a hub "
                              "id or a datasets folder holding several")
        suffix = path.suffix.lower()
        if suffix in DELIMITERS:
            dataset = _delimited(path, DELIMITERS[suffix], fields, on_invalid, name)
        elif suffix in PARQUET:
            dataset = _parquet(path, fields, on_invalid, name)
        else:
            dataset = load_jsonl(path, on_invalid=on_invalid, name=name, fields=fields)
    elif _looks_like_hub_id(path):
        dataset = _hub(str(source), fields, on_invalid, name, split)
    else:
        raise PddkitError(f"data file {source} does not exist")
    language = language or _built_language(path)
    if language is not None:
        dataset = dataset.with_meta(language=language)
    return dataset


FILE_SUFFIXES = (".jsonl", ".json", ".ndjson", ".txt", *DELIMITERS, *PARQUET, ".arrow")


def _looks_like_hub_id(path: Path) -> bool:
    """owner/name that is not a missing local file (no file suffix, no existing folder)."""
    parts = str(path).split("/")
    return (len(parts) == 2 and all(parts) and not str(path).startswith((".", "~"))
            and path.suffix.lower() not in FILE_SUFFIXES and not path.parent.is_dir())


def _built_language(path: Path) -> str | None:
    """The language a pddkit builder recorded in manifest.json beside its data.jsonl."""
    manifest = path.parent / "manifest.json"
    if not path.is_file() or not manifest.is_file():
        return None
    try:
        meta = json.loads(manifest.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return meta.get("language") if isinstance(meta, dict) and meta.get("builder") else None


def _delimited(path: Path, delimiter: str, fields: Fields, on_invalid: str, name: str) -> Dataset:
    """CSV / TSV with a header line; an empty cell of label, id, group or subset is absent.
    A header without the text column under the suffix's delimiter is tried with the others
    (`;`, tab, `|`, `,`): one that gives the text column is used, and said."""
    csv.field_size_limit(2**31 - 1)  # a cell may hold a whole book
    if path.stat().st_size == 0:
        raise PddkitError(f"data file {path} is empty (0 bytes): give a header line naming the "
                          "columns (text, label, ...) and one row per text")
    delimiter, fields = _delimiter(path, delimiter, fields)
    kind = {",": "CSV", "\t": "TSV"}.get(delimiter, f"{delimiter!r}-separated")
    try:
        fh = path.open(newline="", encoding="utf-8-sig")  # a BOM (Excel) is not in a name
        reader = csv.DictReader(fh, delimiter=delimiter)
        header = reader.fieldnames or []
    except UnicodeDecodeError as e:
        raise PddkitError(f"{path} is not valid UTF-8 (byte {e.start})") from None
    except csv.Error as e:
        raise PddkitError(f"{path} line {reader.line_num} is not valid {kind} ({e})") from None
    optional = {fields.label, fields.id, fields.group, fields.subset}

    def rows():
        try:
            for row in reader:
                # DictReader's line_num is the line the row ends on (quoted cells may span lines)
                if None in row:  # cells beyond the header's columns: nothing is dropped silently
                    yield reader.line_num, BadRow(f"has {len(row[None])} more cells than the "
                                                  f"header's {len(header)} columns")
                    continue
                yield reader.line_num, {k: (None if k in optional and v == "" else v)
                                        for k, v in row.items()}
        except UnicodeDecodeError as e:
            raise PddkitError(f"{path} after line {reader.line_num} is not valid UTF-8 "
                              f"(byte {e.start})") from None
        except csv.Error as e:
            raise PddkitError(f"{path} line {reader.line_num} is not valid {kind} ({e})") from None

    with fh:
        found = rows()
        first = next(found, None)
        if first is None:
            raise PddkitError(f"data file {path} has a header line ({', '.join(map(repr, header))}) "
                              "but no rows: give one row per text")
        return rows_to_dataset(itertools.chain([first], found), name, str(path), fields,
                               on_invalid, unit="line")


SEPARATORS = (",", ";", "\t", "|")  # tried in this order on a header that lacks the text column
_SHOWN = {",": "','", ";": "';'", "\t": "a tab", "|": "'|'"}


def _header(path: Path, delimiter: str) -> list[str]:
    """The first non-blank row of `path` read with `delimiter`."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            return next((r for r in csv.reader(fh, delimiter=delimiter) if r), [])
    except UnicodeDecodeError as e:
        raise PddkitError(f"{path} is not valid UTF-8 (byte {e.start})") from None
    except csv.Error:
        return []


def _delimiter(path: Path, delimiter: str, fields: Fields) -> tuple[str, Fields]:
    """(delimiter, fields as the header spells them): the suffix's `delimiter` when its header
    has the text column; else the first other separator that splits the header into more
    columns, the text column among them (logged); else one sentence naming the header's
    columns, and the separator it seems to have when another splits it."""
    header = _header(path, delimiter)
    if not fields.has_text(header):
        others = [(d, _header(path, d)) for d in SEPARATORS if d != delimiter]
        for other, columns in others:
            if len(columns) > len(header) and fields.has_text(columns):
                logger.info("%s is separated by %s, not %s: read so (its columns: %s)", path,
                            _SHOWN[other], _SHOWN[delimiter], ", ".join(map(repr, columns)))
                return other, fields.check_columns(columns, str(path))
        other, columns = max(others, key=lambda o: len(o[1]))
        if len(header) <= 1 < len(columns):
            raise PddkitError(
                f"{path} seems separated by {_SHOWN[other]}, not {_SHOWN[delimiter]} (its "
                f"header reads as the columns {', '.join(map(repr, columns))}), and none of "
                f"them is {fields.describe_text()}: name the text column with `text_field`")
    return delimiter, fields.check_columns(header, str(path))


def _pyarrow(what: str):
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise PddkitError(f"reading {what} needs pyarrow: `pip install -e '.[tables]'` in "
                          "pddkit's checkout") from None
    return pyarrow


def _parquet(path: Path, fields: Fields, on_invalid: str, name: str) -> Dataset:
    pa = _pyarrow(f"Parquet file {path}")
    try:
        table = pa.parquet.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise PddkitError(f"{path} is not a readable Parquet file ({type(e).__name__})") from None
    return _from_arrow(table, str(path), fields, on_invalid, name)


def _from_arrow(table, where: str, fields: Fields, on_invalid: str, name: str) -> Dataset:
    fields = fields.check_columns(table.column_names, where)
    rows = enumerate(table.to_pylist(), start=1)
    return rows_to_dataset(rows, name, where, fields, on_invalid, unit="row")


def _arrow_folder(path: Path, fields: Fields, on_invalid: str, name: str,
                  split: str | None) -> Dataset:
    """A `datasets` save_to_disk folder: one split (state.json + data-*.arrow), or a
    DatasetDict (dataset_dict.json + one folder per split)."""
    dict_file = path / "dataset_dict.json"
    if dict_file.is_file():
        splits = json.loads(dict_file.read_text()).get("splits", [])
        pick = split or (splits[0] if len(splits) == 1 else "train")
        if pick not in splits:
            raise PddkitError(f"{path} holds the splits {', '.join(splits)}, not {pick!r} "
                              "(choose one with `data_split`)")
        return _arrow_folder(path / pick, fields, on_invalid, name, None)
    return _from_arrow(arrow_folder_table(path), str(path), fields, on_invalid, name)


def arrow_folder_table(path: Path):
    """The pyarrow Table of one split saved by `datasets` save_to_disk (data-*.arrow in
    the order state.json lists them)."""
    files = sorted(path.glob("*.arrow"))
    state = path / "state.json"
    if state.is_file():
        listed = [path / f["filename"] for f in json.loads(state.read_text()).get("_data_files", [])]
        files = listed or files
    if not files:
        raise PddkitError(f"{path} is a folder without data: expected a datasets save_to_disk "
                          "folder (state.json and data-*.arrow files)")
    pa = _pyarrow(f"the Arrow folder {path}")
    tables = []
    for f in files:
        try:
            with pa.memory_map(str(f)) as source:
                try:
                    tables.append(pa.ipc.open_stream(source).read_all())
                except pa.ArrowInvalid:  # the file format, not the stream format
                    tables.append(pa.ipc.open_file(source).read_all())
        except (pa.ArrowException, OSError) as e:
            raise PddkitError(f"{f} is not a readable Arrow file ({type(e).__name__})") from None
    return pa.concat_tables(tables)


def _hub(repo: str, fields: Fields, on_invalid: str, name: str, split: str | None) -> Dataset:
    from pddkit.data.hub import hub_rows

    pick = split or "train"
    rows = hub_rows(repo, split=pick)
    fields = fields.check_columns(rows.column_names, f"{repo} split {pick}")
    return rows_to_dataset(((i, dict(r)) for i, r in enumerate(rows, start=1)), name,
                           f"{repo} split {pick}", fields, on_invalid, unit="row")
