"""The documents file `traps inject` reads and writes back: JSONL, CSV, TSV or Parquet (the
format follows the suffix as in data/tables.py: .csv, .tsv/.tab, .parquet/.pq, anything
else JSONL). Every row and column is kept; writing changes only the text of the documents
that received a trap, under the input's file name in another folder. Each row needs an id
(`id_field`, unique); a text (`text_field`) may be missing or null in some rows (no
document: skipped by `traps inject`, counted, written back as it was), not in all."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pddkit.data.jsonl import read_lines
from pddkit.data.records import BadRow
from pddkit.data.tables import DELIMITERS, PARQUET, _pyarrow
from pddkit.errors import PddkitError


@dataclass(frozen=True)
class DocumentTable:
    path: Path
    format: str  # "jsonl", "csv", "tsv" or "parquet"
    rows: tuple[dict, ...]  # as read, every column
    id_field: str
    text_field: str
    columns: tuple[str, ...]  # the header (CSV, TSV), the schema's names (Parquet), or ()
    schema: Any = None  # Parquet: the pyarrow schema, kept for writing

    @property
    def documents(self) -> list[tuple[str, str | None]]:
        """(id, text) per row, in file order (ids as strings; no text: None)."""
        return [(str(r[self.id_field]), r.get(self.text_field)) for r in self.rows]

    @property
    def without_text(self) -> int:
        """Rows whose text is missing or null."""
        return sum(r.get(self.text_field) is None for r in self.rows)


def document_format(path: str | Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix in DELIMITERS:
        return "csv" if DELIMITERS[suffix] == "," else "tsv"
    return "parquet" if suffix in PARQUET else "jsonl"


def read_documents(path: str | Path, *, id_field: str = "id",
                   text_field: str = "text") -> DocumentTable:
    """Every row of a documents file; one sentence for a row without an id, a text that
    is not a string, an id used twice, or a file where no row has a text."""
    path = Path(path)
    if not path.is_file():
        raise PddkitError(f"documents file {path} does not exist")
    fmt = document_format(path)
    schema = None
    if fmt == "jsonl":
        numbered, columns = list(_jsonl_rows(path)), ()
    elif fmt == "parquet":
        pa = _pyarrow(f"Parquet file {path}")
        try:
            table = pa.parquet.read_table(path)
        except (pa.ArrowException, OSError) as e:
            raise PddkitError(f"{path} is not a readable Parquet file ({type(e).__name__})") \
                from None
        schema, columns = table.schema, tuple(table.column_names)
        numbered = list(enumerate(table.to_pylist(), start=1))
    else:
        numbered, columns = _delimited_rows(path, "," if fmt == "csv" else "\t")
    for name, what in ((id_field, "id_field"), (text_field, "text_field")):
        if columns and name not in columns:
            raise PddkitError(f"{path} has no '{name}' column; its columns are "
                              f"{', '.join(map(repr, columns))} (name it with `{what}`)")
    unit = "row" if fmt == "parquet" else "line"
    where: dict[str, int] = {}
    for no, row in numbered:
        doc_id, text = row.get(id_field), row.get(text_field)
        if doc_id is None or str(doc_id) == "":
            raise PddkitError(f"{path} {unit} {no} has no '{id_field}' (each document needs "
                              "an id; name its column with `id_field`)")
        if text is not None and not isinstance(text, str):
            raise PddkitError(f"{path} {unit} {no} has a '{text_field}' that is not a string "
                              f"({type(text).__name__}); name the text column with `text_field`")
        if str(doc_id) in where:
            raise PddkitError(f"{path} {unit}s {where[str(doc_id)]} and {no} share the id "
                              f"{str(doc_id)!r}: document ids must be unique")
        where[str(doc_id)] = no
    if not any(row.get(text_field) is not None for _, row in numbered):
        raise PddkitError(f"no {unit} of {path} has the text field '{text_field}': name the "
                          "field holding the documents' texts with `text_field`")
    return DocumentTable(path, fmt, tuple(r for _, r in numbered), id_field, text_field,
                         columns, schema)


def write_documents(table: DocumentTable, documents: Sequence[tuple[str, str]],
                    out_dir: str | Path) -> Path:
    """`table`'s rows with the texts of `documents` ((id, text) in the table's order, as
    inject_traps returns them), in the table's format, as OUT_DIR/<the input's name>."""
    out = Path(out_dir) / table.path.name
    if out.resolve() == table.path.resolve():
        raise PddkitError(f"writing the documents to {out} would replace the input: choose "
                          "another `output` folder")
    if [str(r[table.id_field]) for r in table.rows] != [d for d, _ in documents]:
        raise ValueError("documents must be the table's ids in the table's order")
    rows = []
    for row, (_, text) in zip(table.rows, documents):
        old = row.get(table.text_field)  # a row without text stays without
        rows.append(row if text == old or (old is None and not text)
                    else {**row, table.text_field: text})
    out.parent.mkdir(parents=True, exist_ok=True)
    if table.format == "jsonl":
        with out.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    elif table.format == "parquet":
        pa = _pyarrow(f"Parquet file {out}")
        pa.parquet.write_table(pa.Table.from_pylist(rows, schema=table.schema), out)
    else:
        with out.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(table.columns),
                                    delimiter="," if table.format == "csv" else "\t")
            writer.writeheader()
            writer.writerows(rows)
    return out


def _jsonl_rows(path: Path):
    for no, obj in read_lines(path):
        if isinstance(obj, BadRow):
            raise PddkitError(f"{path} line {no} {obj}")
        if not isinstance(obj, dict):
            raise PddkitError(f"{path} line {no} is not a JSON object")
        yield no, obj


def _delimited_rows(path: Path, delimiter: str) -> tuple[list, tuple[str, ...]]:
    csv.field_size_limit(2**31 - 1)  # a cell may hold a whole book
    kind = "CSV" if delimiter == "," else "TSV"
    rows = []
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh, delimiter=delimiter)
            header = tuple(reader.fieldnames or ())
            for row in reader:
                if None in row:
                    raise PddkitError(f"{path} line {reader.line_num} has more cells than the "
                                      f"header's {len(header)} columns")
                rows.append((reader.line_num, row))
    except UnicodeDecodeError as e:
        raise PddkitError(f"{path} is not valid UTF-8 (byte {e.start})") from None
    except csv.Error as e:
        raise PddkitError(f"{path} is not valid {kind} ({e})") from None
    return rows, header
