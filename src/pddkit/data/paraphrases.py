"""`decop`'s inputs besides the texts: three paraphrases of each text, and the title and
author of the document it comes from.

Paraphrases file (`paraphrases`): JSONL (one object per line) or CSV, with the text's `id`
and `paraphrases`, a list of exactly 3 strings (in CSV, a JSON list in the cell). It may
also hold `title`, `author` and `source` per id. Ids of the file that are not in the data
are not used (a file may cover more texts); a text of the data without a line, a line with
other than 3 non-empty paraphrases, or a paraphrase equal to the text itself (the quiz
would have two verbatim options) is one sentence naming the file, line and id.

Title and author (`document_fields`): the data's `title` and `author` columns, else the
paraphrases file's. A text whose `source` says arXiv (any case: "arxiv", "arXiv paper")
and which has no author is asked about as an arXiv paper (the reference's arXivTection
prompt); any other text without a title, or without an author, is one sentence naming
the column and the first texts lacking it.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pddkit.errors import PddkitError

COUNT = 3  # paraphrases per text (SPEC 3e)
COLUMNS = ("title", "author", "source")  # document fields a data set or the file may carry
NAMED = 3  # ids named in a sentence, at most


@dataclass(frozen=True)
class Document:
    """What the quiz's question names: the title, and the author (None: an arXiv paper)."""

    title: str
    author: str | None

    @property
    def arxiv(self) -> bool:
        return self.author is None


@dataclass(frozen=True)
class ParaphraseFile:
    """Per id: the 3 paraphrases, and the document fields the file gives."""

    path: str
    paraphrases: dict[str, tuple[str, str, str]]
    fields: dict[str, dict[str, str]]
    lines: dict[str, int]  # id -> its line (or CSV row)


def _first(ids: Sequence[str]) -> str:
    more = f" (and {len(ids) - NAMED} more)" if len(ids) > NAMED else ""
    return ", ".join(map(repr, ids[:NAMED])) + more


def _rows(path: Path) -> list[tuple[int, dict]]:
    where = str(path)
    if not path.is_file():
        raise PddkitError(f"paraphrases file {where} does not exist (`paraphrases`)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PddkitError(f"cannot read paraphrases file {where}: {e}") from None
    rows: list[tuple[int, dict]] = []
    if path.suffix.lower() == ".csv":
        for n, row in enumerate(csv.DictReader(text.splitlines()), start=2):
            cell = row.get("paraphrases")
            try:
                value = json.loads(cell) if cell is not None else None
            except ValueError:
                raise PddkitError(f"{where} row {n}: the 'paraphrases' cell is not a JSON list "
                                  "of 3 strings") from None
            rows.append((n, {**row, "paraphrases": value}))
        return rows
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise PddkitError(f"{where} line {n} is not valid JSON") from None
        if not isinstance(row, dict):
            raise PddkitError(f"{where} line {n} is not a JSON object with 'id' and 'paraphrases'")
        rows.append((n, row))
    return rows


def load_paraphrases(path: str, ids: Sequence[str], texts: Sequence[str]) -> ParaphraseFile:
    """The paraphrases of the texts `ids` (with their `texts`, to refuse a paraphrase that
    is the text itself) from `path`; one sentence for anything decop cannot use."""
    p = Path(path)
    unit = "row" if p.suffix.lower() == ".csv" else "line"
    got: dict[str, tuple[str, str, str]] = {}
    fields: dict[str, dict[str, str]] = {}
    lines: dict[str, int] = {}
    for n, row in _rows(p):
        where = f"{path} {unit} {n}"
        if row.get("id") is None or row.get("paraphrases") is None:
            raise PddkitError(f"{where} needs an 'id' and a 'paraphrases' list of {COUNT} strings")
        sid = str(row["id"])
        if sid in got:
            raise PddkitError(f"{where} repeats id {sid!r} (first at {unit} {lines[sid]})")
        value = row["paraphrases"]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PddkitError(f"{where} (id {sid!r}): 'paraphrases' must be a list of {COUNT} "
                              "strings")
        if len(value) != COUNT or not all(v.strip() for v in value):
            have = sum(bool(v.strip()) for v in value)
            raise PddkitError(f"{where} (id {sid!r}) has {have} non-empty paraphrase"
                              f"{'' if have == 1 else 's'} of {len(value)}; decop needs exactly "
                              f"{COUNT} per text")
        got[sid] = (value[0], value[1], value[2])
        lines[sid] = n
        fields[sid] = {k: str(row[k]) for k in COLUMNS if row.get(k) not in (None, "")}
    missing = [i for i in ids if i not in got]
    if missing:
        raise PddkitError(f"paraphrases file {path} has no paraphrases for {len(missing)} of "
                          f"the {len(ids)} texts (ids {_first(missing)}): add a line per text "
                          "('id', 'paraphrases')")
    for sid, text in zip(ids, texts):
        same = [k + 1 for k, para in enumerate(got[sid]) if " ".join(para.split()) == " ".join(text.split())]
        if same:
            raise PddkitError(f"{path} {unit} {lines[sid]} (id {sid!r}): paraphrase {same[0]} is "
                              "the text itself; the quiz would have two verbatim options")
    return ParaphraseFile(str(path), got, fields, lines)


def is_arxiv(source: str | None) -> bool:
    return source is not None and "arxiv" in source.lower()


def document_fields(ids: Sequence[str], given: dict | None,
                    file_fields: dict | None = None) -> list[Document]:
    """Each text's Document: `given` (the data's columns, id -> {title, author, source};
    a text cut from a row by `split_words`, id "ROW@k", is looked up by the row's id), else
    the paraphrases file's fields. One sentence naming the column and the first texts
    that lack it."""
    given, file_fields = given or {}, file_fields or {}
    out: list[Document] = []
    no_title: list[str] = []
    no_author: list[str] = []
    for sid in ids:
        row = dict(file_fields.get(sid, {}))
        row.update(given.get(sid) or given.get(sid.rsplit("@", 1)[0]) or {})
        title, author = row.get("title"), row.get("author")
        if not title:
            no_title.append(sid)
        elif not author and not is_arxiv(row.get("source")):
            no_author.append(sid)
        else:
            out.append(Document(str(title), str(author) if author else None))
    for column, lacking, why in (("title", no_title, "the question names the document's title"),
                                 ("author", no_author, "the question names the book's author; "
                                  "an arXiv paper needs a 'source' column saying arxiv instead")):
        if lacking:
            raise PddkitError(f"decop needs a '{column}' column in the data (or the paraphrases "
                              f"file): {len(lacking)} of {len(ids)} texts have none (ids "
                              f"{_first(lacking)}); {why}")
    return out
