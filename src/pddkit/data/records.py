"""Rows (dicts from any table: JSONL line, CSV row, Parquet/Arrow record, hub row) ->
Samples, with the field names a data set uses.

Labels are 1 (member) or 0 (non-member): the numbers, booleans, or the strings "1"/"0",
"true"/"false", "member"/"nonmember" (any case; "non-member" and "non_member" too).
A bad row (no text, empty text, bad label) is `BadRow` with the reason; the caller
applies the `on_invalid` policy and names the file and line or row.

Column names are matched as written first; a column named with other case (`Label`,
`TEXT`) is used when it is the only such column, and the log says which column was used
(two, `Label` and `LABEL`: one sentence asking to name one).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from pddkit.data.samples import Dataset, Sample, Skipped, make_dataset
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

DEFAULT_LABEL = "label"
DOCUMENT_COLUMNS = ("title", "author", "source")  # kept per id in meta (decop's question)
TEXT_NAMES = ("text", "input")  # the text column when none is named: the first present
LABEL_STRINGS = {"1": 1, "0": 0, "true": 1, "false": 0, "member": 1, "nonmember": 0,
                 "non-member": 0, "non_member": 0}


class BadRow(Exception):  # noqa: N818  (internal signal, never escapes to users)
    pass


@dataclass(frozen=True)
class Fields:
    """Which column holds what. `text=None`: the first of "text", "input" present."""

    text: str | None = None
    label: str = DEFAULT_LABEL
    id: str = "id"
    group: str = "group"
    subset: str = "subset"

    def named_optional(self) -> dict[str, str]:
        """The optional columns given names other than the defaults: {"label": "is_member"}."""
        return {what: name for what, name, default in (
            ("label", self.label, DEFAULT_LABEL), ("id", self.id, "id"),
            ("group", self.group, "group"), ("subset", self.subset, "subset")) if name != default}

    def text_key(self, row: dict) -> str | None:
        if self.text is not None:
            return self.text if self.text in row else None
        return next((k for k in TEXT_NAMES if k in row), None)

    def describe_text(self) -> str:
        return f"'{self.text}'" if self.text is not None else "'text' (or 'input')"

    def check_columns(self, columns: Iterable[str], where: str) -> Fields:
        """These fields as `where`'s columns spell them (`resolve`); a table whose header
        lacks the text column, or a column the user named: one sentence naming the columns
        it has (the label column is optional: unlabelled data is scored)."""
        cols = [str(c) for c in columns]
        have = ", ".join(map(repr, cols)) or "none"
        fields = self.resolve(cols, where)
        if fields.text_key(dict.fromkeys(cols)) is None:
            raise PddkitError(f"{where} has no {self.describe_text()} column; its columns are "
                              f"{have} (name the text column with `text_field`)")
        for what, name in fields.named_optional().items():  # named by the user, so wanted
            if name not in cols:
                raise PddkitError(f"{where} has no '{name}' {what} column; its columns are {have}")
        return fields

    def has_text(self, columns: Iterable[str]) -> bool:
        """Whether `columns` hold the text column, as written or with other case."""
        folded = {str(c).casefold() for c in columns}
        return any(n.casefold() in folded for n in ((self.text,) if self.text else TEXT_NAMES))

    def resolve(self, columns: Iterable[str], where: str) -> Fields:
        """These fields with each name absent from `columns` replaced by the one column
        that spells it with other case (`label` -> `Label`), said in the log; two such
        columns: one sentence asking to name one."""
        cols = list(dict.fromkeys(map(str, columns)))
        changes: dict[str, str] = {}

        def match(name: str, what: str, option: str) -> str | None:
            if name in cols:
                return name
            same = [c for c in cols if c.casefold() == name.casefold()]
            if len(same) > 1:
                raise PddkitError(f"{where} has {len(same)} columns that read as the {what} "
                                  f"column {name!r} ({', '.join(map(repr, same))}): name one "
                                  f"with `{option}`")
            if same:
                changes[what] = same[0]
                logger.info("%s has no %r column: its column %r is used as the %s column "
                            "(`%s` names another)", where, name, same[0], what, option)
                return same[0]
            return None

        text = self.text
        if text is None:  # "text", else "input", as written; then with other case
            if not any(k in cols for k in TEXT_NAMES):
                text = match("text", "text", "text_field") or match("input", "text", "text_field")
        else:
            text = match(text, "text", "text_field") or text
        found = {what: match(getattr(self, what), what, f"{what}_field") or getattr(self, what)
                 for what in ("label", "id", "group", "subset")}
        if not changes:
            return self
        return dataclasses.replace(self, text=text, **found)


DEFAULT_FIELDS = Fields()


def parse_label(value: object) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in LABEL_STRINGS:
        return LABEL_STRINGS[value.strip().lower()]
    raise BadRow(f"has label {value!r}; labels must be 0 (non-member) or 1 (member), "
                 "or the strings member/nonmember, true/false")


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and value != value)  # NaN: empty


def parse_row(row: object, number: int, source: str, fields: Fields = DEFAULT_FIELDS) -> Sample:
    """One row -> Sample, or BadRow with the reason. `number` is its line or row number
    (the default id), `source` where it came from ("data.csv line 3")."""
    if not isinstance(row, dict):
        raise BadRow(f"is a JSON {type(row).__name__}, not an object with a 'text' field")
    key = fields.text_key(row)
    if key is None:
        raise BadRow(f"has no {fields.describe_text()} field")
    text = row[key]
    if not isinstance(text, str):
        raise BadRow(f"has a '{key}' field that is a {type(text).__name__}, not a string")
    if not text.strip():
        raise BadRow("has an empty or whitespace-only text")
    label = parse_label(row[fields.label]) if _present(row.get(fields.label)) else None
    sid = str(row[fields.id]) if _present(row.get(fields.id)) else str(number)
    group = str(row[fields.group]) if _present(row.get(fields.group)) else None
    subset = str(row[fields.subset]) if _present(row.get(fields.subset)) else None
    return Sample(id=sid, text=text, label=label, source=source, group=group, subset=subset)


def rows_to_dataset(rows: Iterable[tuple[int, object]], name: str, where: str,
                    fields: Fields = DEFAULT_FIELDS, on_invalid: str = "error", unit: str = "row",
                    meta: dict | None = None) -> Dataset:
    """(number, row) pairs -> Dataset; `where` names the file or hub split in messages,
    `unit` is "line" or "row". A row may be a BadRow: the reader's verdict on it."""
    if on_invalid not in ("error", "skip"):
        raise PddkitError(f"`on_invalid` must be 'error' or 'skip', not {on_invalid!r}")
    samples: list[Sample] = []
    skipped: list[Skipped] = []
    columns: dict[str, None] = {}  # every column any row has, in order of appearance
    documents: dict[str, dict[str, str]] = {}  # id -> title, author, source (decop)
    for number, row in rows:
        source = f"{where} {unit} {number}"
        if isinstance(row, dict):
            columns.update(dict.fromkeys(row))
        try:
            if isinstance(row, BadRow):  # a reader's verdict (bad UTF-8, bad JSON)
                raise row
            samples.append(parse_row(row, number, source, fields))
            kept = {k: str(row[k]) for k in DOCUMENT_COLUMNS if _present(row.get(k)) and str(row[k])}
            if "title" in kept or "author" in kept:  # a `source` column alone says nothing
                documents[samples[-1].id] = kept
        except BadRow as bad:
            if on_invalid == "error":
                raise PddkitError(f"{source} {bad} (use `on_invalid='skip'` to leave such "
                                  f"{unit}s out and count them)") from None
            skipped.append(Skipped(source=source, reason=str(bad)))
    samples, contradicting = without_contradictions(samples, where, on_invalid)
    meta = dict(meta or {})
    if documents:  # the document fields decop's question names (data/paraphrases.py)
        meta["document_fields"] = documents
    if contradicting:
        skipped += contradicting
        meta["contradicting_labels_left_out"] = len(contradicting)
    if samples and all(s.label is None for s in samples):  # said by the run (engine/prepare.py)
        meta["unlabelled"], meta["unlabelled_warn"] = unlabelled_note(list(columns), fields, where)
    return make_dataset(name, samples, skipped, meta=meta)


# column names (lower-cased) that usually hold membership labels, besides any name
# containing "label" or "member"
LABEL_LIKE = frozenset({"target", "targets", "is_train", "in_train", "seen", "is_seen", "gold",
                        "y", "class", "contaminated", "leaked", "in_training", "trained"})


def unlabelled_note(columns: list[str], fields: Fields, where: str) -> tuple[str, bool]:
    """Why a table gives no labels, naming its columns, and whether that is worth a warning:
    a label column empty in every row, or one that looks like membership labels under
    another name (warnings), or no label column at all."""
    used = {fields.text_key(dict.fromkeys(columns)), fields.id, fields.group, fields.subset}
    have = ", ".join(map(repr, columns)) or "none"
    if fields.label in columns:
        return (f"{where} has a '{fields.label}' column but no row gives a label "
                f"(its columns: {have})"), True
    like = [c for c in columns if c not in used and (
        "label" in c.lower() or "member" in c.lower() or c.lower() in LABEL_LIKE)]
    if like:
        return (f"{where} has no '{fields.label}' column, but {', '.join(map(repr, like))} "
                f"looks like membership labels (name it with `label_field`; its columns: "
                f"{have})"), True
    return f"{where} has no '{fields.label}' column (its columns: {have})", False


def without_contradictions(samples: list[Sample], where: str,
                           on_invalid: str) -> tuple[list[Sample], list[Skipped]]:
    """The same text (after whitespace folding) labelled both member and non-member: the
    ground truth contradicts itself. One sentence with the count and the first ids; with
    `on_invalid="skip"`, every copy of such a text is left out and listed with its reason."""
    from pddkit.data.overlap import normalise

    labels: dict[str, set[int]] = {}
    for s in samples:
        if s.label is not None:
            labels.setdefault(normalise(s.text), set()).add(s.label)
    both = {t for t, ls in labels.items() if len(ls) == 2}
    if not both:
        return samples, []
    copies: dict[str, list[Sample]] = {}
    for s in samples:
        if s.label is not None and normalise(s.text) in both:
            copies.setdefault(normalise(s.text), []).append(s)
    groups = list(copies.values())
    first = groups[0]
    one = next(s for s in first if s.label == 1)
    zero = next(s for s in first if s.label == 0)
    if on_invalid != "skip":
        more = "" if len(groups) == 1 else (
            "; first ids of the others: " + ", ".join(
                "/".join(s.id for s in g[:2]) for g in groups[1:4]) + (
                ", ..." if len(groups) > 4 else ""))
        raise PddkitError(
            f"{where}: {len(groups)} text{'s occur' if len(groups) > 1 else ' occurs'} with "
            f"both labels, so the ground truth contradicts itself (e.g. id {one.id} at "
            f"{one.source} is labelled 1 and id {zero.id} at {zero.source} is labelled 0, "
            f"the same text up to whitespace{more}): correct the labels, or use "
            "`on_invalid='skip'` to leave every copy out and count them")
    out = {id(s) for g in groups for s in g}
    left = [Skipped(s.source, "the same text occurs with both labels (1 and 0) in "
                    f"{where}: every copy left out") for g in groups for s in g]
    return [s for s in samples if id(s) not in out], left
