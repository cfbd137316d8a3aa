"""cutoff: members and non-members split by a date (the WikiMIA recipe, Shi et al. 2024;
PatentMIA, Zhang et al. 2024 / DC-PDD).

From dated documents (JSONL lines with `text` and a date, ISO such as 2023-01-05 or
20230105 as in Google Patents' tables), members are those whose `member_date_field` is
before `member_before`, non-members those whose `nonmember_date_field` is after
`nonmember_after` (both fields `date` by default; PatentMIA takes the publication date of
members and the priority date of non-members: a patent filed after the cutoff cannot be in
the training data, one published before it could be). A document needs at least one of the
two fields; one lacking a field cannot be on that field's side, and is counted. Documents
on neither side are dropped and counted; one on both (possible only with two fields) is an
error naming it. For each length N in `words`, each document gives one
N-word snippet: at a seeded random word offset (`snippet='random'`), or its first N words
(`snippet='first'`, WikiMIA's recipe); shorter documents are dropped. Each length is a
bucket (`subset` = N), balanced by seeded down-sampling of its larger side. With `index`
(an infini-gram index of the training corpus, corpus_filter.py), non-member snippets the
corpus contains are dropped before the balancing, and counted.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from pddkit.corpus.overlap import DEFAULT_MAX_OVERLAP, DEFAULT_N
from pddkit.data.builders.corpus_filter import CorpusFilter, open_filter
from pddkit.data.builders.registry import Built, paths, register_builder, source, word_counts
from pddkit.data.builders.words import snippet as cut
from pddkit.data.builders.words import word_spans
from pddkit.data.jsonl import read_lines
from pddkit.data.records import BadRow
from pddkit.errors import PddkitError

SNIPPETS = ("random", "first")


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    member_day: date | None  # its member_date_field (None: it has none)
    nonmember_day: date | None  # its nonmember_date_field
    where: str  # "file line n"


_COMPACT = re.compile(r"\d{8}")


def parse_date(value: object) -> date:
    """An ISO date ("2023-05-01"), date-time ("2023-05-01T12:00:00Z") or compact date
    (20230501 or "20230501", Google Patents' tables) -> date."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(value)
    text = value.strip()
    if _COMPACT.fullmatch(text):
        return date(int(text[:4]), int(text[4:6]), int(text[6:]))
    try:
        return date.fromisoformat(text)
    except ValueError:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).date()


def _cutoff_date(value: object, name: str) -> date:
    if isinstance(value, date):
        return value
    if value is None:
        raise PddkitError(f"the cutoff needs `{name}` (an ISO date such as 2023-01-01)")
    try:
        return parse_date(value)
    except ValueError:
        raise PddkitError(f"`{name}` {value!r} is not an ISO date such as 2023-01-01") from None


def read_documents(path: Path, member_field: str = "date", nonmember_field: str = "date",
                   text_field: str | None = None) -> tuple[list[Document], bytes]:
    """The dated documents of one JSONL file (and its bytes, for the manifest); the text is
    `text_field` (None: `text`, else `input`)."""
    if not path.is_file():
        raise PddkitError(f"input file {path} does not exist")
    raw = path.read_bytes()
    docs = []
    # lines end at "\n" only (a JSON string may hold U+2028 and the like); a line that is
    # not UTF-8 or not JSON is an error naming the file and line
    for number, row in read_lines(path):
        where = f"{path} line {number}"
        if isinstance(row, BadRow):
            raise PddkitError(f"{where} {row}")
        if not isinstance(row, dict):
            raise PddkitError(f"{where} is a JSON {type(row).__name__}, not an object with a "
                              "text and a date")
        key = text_field or next((k for k in ("text", "input") if k in row), "text")
        text = row.get(key)
        if not isinstance(text, str) or not text.strip():
            named = f"'{text_field}'" if text_field else "'text' (or 'input')"
            raise PddkitError(f"{where} " + (f"has an empty or non-string {named} field"
                                             if key in row else f"is missing the text field "
                                             f"{named}; its fields are {_fields(row)} (name the "
                                             "text field with `text_field`)"))
        days = {f: _row_date(row, f, where) for f in dict.fromkeys((member_field, nonmember_field))}
        if all(d is None for d in days.values()):
            names = " and ".join(map(repr, days))
            which = "the date field" if len(days) == 1 else "both date fields,"
            raise PddkitError(f"{where} is missing {which} {names}; its fields are "
                              f"{_fields(row)} (name the documents' date field with "
                              "`date_field`)")
        doc_id = str(row["id"]) if row.get("id") is not None else f"{path.stem}:{number}"
        docs.append(Document(doc_id, text, days[member_field], days[nonmember_field], where))
    return docs, raw


def _fields(row: dict) -> str:
    """A row's field names, for an error: 'text', 'published' (the first 8)."""
    names = list(row)
    return ", ".join(map(repr, names[:8])) + (", ..." if len(names) > 8 else "") or "none"


def _row_date(row: dict, name: str, where: str) -> date | None:
    """The row's date field `name` (None where the row has none)."""
    if row.get(name) is None:
        return None
    try:
        return parse_date(row[name])
    except ValueError:
        raise PddkitError(f"{where} has {name} {row[name]!r}, which is not an ISO date such "
                          "as 2023-01-01") from None


def _sides(docs: list[Document], before: date, after: date, member_field: str,
           nonmember_field: str) -> dict[int, list[Document]]:
    """Members (label 1) and non-members (label 0); a document on both is an error."""
    sides: dict[int, list[Document]] = {1: [], 0: []}
    for d in docs:
        member = d.member_day is not None and d.member_day < before
        nonmember = d.nonmember_day is not None and d.nonmember_day > after
        if member and nonmember:
            raise PddkitError(f"{d.where} would be both a member ({member_field} {d.member_day}, "
                              f"before {before}) and a non-member ({nonmember_field} "
                              f"{d.nonmember_day}, after {after}); check the date fields")
        if member or nonmember:
            sides[1 if member else 0].append(d)
    for label, name, rel, day, field_ in ((1, "member", "before", before, member_field),
                                          (0, "non-member", "after", after, nonmember_field)):
        if sides[label]:
            continue
        dated = sorted(x for d in docs if (x := d.member_day if label else d.nonmember_day))
        by = "" if member_field == nonmember_field else f" by its {field_}"
        span = (f"{field_} runs from {dated[0]} to {dated[-1]}" if dated
                else f"no document has a {field_}")
        raise PddkitError(f"no document is dated {rel} {day}{by}, so the cutoff leaves no "
                          f"{name}s ({span})")
    return sides


def _snippets(docs: list[Document], n: int, mode: str, language: str,
              rng: random.Random) -> list[tuple[Document, str]]:
    out = []
    for d in docs:
        spans = word_spans(d.text, language)
        if len(spans) < n:
            continue
        start = 0 if mode == "first" else rng.randint(0, len(spans) - n)
        out.append((d, cut(d.text, spans, start, n)))
    return out


@register_builder("cutoff", "Shi et al. 2024 (WikiMIA), Zhang et al. 2024 (PatentMIA): "
                  "dated JSONL documents split at a date; N-word snippets; subset = length")
def cutoff(*, inputs: object = (), member_before: object = None, nonmember_after: object = None,
           words: object = (32, 64, 128, 256), snippet: str = "random", language: str = "en",
           seed: int = 0, date_field: str | None = None, member_date_field: str | None = None,
           nonmember_date_field: str | None = None, text_field: str | None = None,
           index: object = (), index_tokenizer: str | None = None, index_n: int = DEFAULT_N,
           max_overlap: float = DEFAULT_MAX_OVERLAP) -> Built:
    """Balanced member / non-member snippets per length; see the module docstring.
    `date_field` names the date of both sides (default `date`); `member_date_field` /
    `nonmember_date_field` name one side's; `text_field` the text (default `text`, else
    `input`); `index` (folders), `index_tokenizer` (a public index's), `index_n`,
    `max_overlap`: non-members the corpus contains are dropped."""
    return _cutoff(inputs, member_before, nonmember_after, words, snippet, language, seed,
                   date_field, member_date_field, nonmember_date_field, text_field,
                   ("date", "date"), open_filter(index, index_tokenizer, index_n, max_overlap))


def _cutoff(inputs: object, member_before: object, nonmember_after: object, words: object,
            snippet: str, language: str, seed: int, date_field: str | None,
            member_date_field: str | None, nonmember_date_field: str | None,
            text_field: str | None, default_fields: tuple[str, str],
            corpus: CorpusFilter | None = None) -> Built:
    """cutoff and patentmia: the date fields not given are `date_field`, else
    `default_fields` (member side, non-member side); `corpus` drops the non-member snippets
    the training corpus contains."""
    files = paths(inputs)
    if not files:
        raise PddkitError("the cutoff needs `inputs` (JSONL files with text and date)")
    if snippet not in SNIPPETS:
        raise PddkitError(f"`snippet` must be random or first, not {snippet!r}")
    before = _cutoff_date(member_before, "member_before")
    after = _cutoff_date(nonmember_after, "nonmember_after")
    if after < before:
        raise PddkitError(f"`nonmember_after` {after} is earlier than `member_before` {before}, "
                          "so a document could be both")
    lengths = word_counts(words)
    docs: list[Document] = []
    sources = []
    for name, value in (("date_field", date_field), ("member_date_field", member_date_field),
                        ("nonmember_date_field", nonmember_date_field),
                        ("text_field", text_field)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise PddkitError(f"`{name}` must name a field of the documents, not {value!r}")
    member_date_field = member_date_field or date_field or default_fields[0]
    nonmember_date_field = nonmember_date_field or date_field or default_fields[1]
    for f in files:
        read, raw = read_documents(f, member_date_field, nonmember_date_field, text_field)
        docs += read
        sources.append(source(f, "documents", raw))
    seen: dict[str, str] = {}
    for d in docs:
        if d.id in seen:
            raise PddkitError(f"{d.where} repeats id {d.id!r} of {seen[d.id]}")
        seen[d.id] = d.where
    sides = _sides(docs, before, after, member_date_field, nonmember_date_field)
    rows: list[dict] = []
    buckets: dict[str, dict] = {}
    for n in lengths:
        rng = random.Random(f"{seed}:{n}")
        cut_docs = {label: _snippets(sides[label], n, snippet, language, rng) for label in (1, 0)}
        if not cut_docs[1] or not cut_docs[0]:
            name = "member" if not cut_docs[1] else "non-member"
            raise PddkitError(f"no {name} document has {n} words; leave {n} out of `words`")
        long_enough = len(cut_docs[0])
        if corpus is not None:  # before the balancing: the buckets stay balanced
            before = corpus.tally["nonmembers_dropped"]
            kept = corpus.nonmembers_to_keep([t for _, t in cut_docs[0]],
                                             [f"{d.id}@{n}" for d, _ in cut_docs[0]])
            cut_docs[0] = [x for x, k in zip(cut_docs[0], kept) if k]
            if not cut_docs[0]:
                raise PddkitError(f"the corpus contains every non-member snippet of {n} words "
                                  f"({corpus.tally['nonmembers_dropped'] - before} found at or "
                                  f"above `max_overlap` {corpus.max_overlap:g}): no non-member "
                                  f"is left at {n} words")
        keep = min(len(cut_docs[1]), len(cut_docs[0]))
        for label in (1, 0):
            picked = sorted(rng.sample(range(len(cut_docs[label])), keep))
            rows += [{"text": cut_docs[label][i][1], "label": label,
                      "id": f"{cut_docs[label][i][0].id}@{n}", "group": cut_docs[label][i][0].id,
                      "subset": str(n)} for i in picked]
        buckets[str(n)] = {"members": keep, "nonmembers": keep,
                           "members_long_enough": len(cut_docs[1]),
                           "nonmembers_long_enough": long_enough}
        if corpus is not None:
            buckets[str(n)]["nonmembers_in_corpus"] = long_enough - len(cut_docs[0])
    counts = {"documents": len(docs), "members": len(sides[1]), "nonmembers": len(sides[0]),
              "between_cutoffs": len(docs) - len(sides[1]) - len(sides[0]), "buckets": buckets}
    missing = {member_date_field: sum(d.member_day is None for d in docs),
               nonmember_date_field: sum(d.nonmember_day is None for d in docs)}
    notes = []
    if any(missing.values()):
        counts["without_date_field"] = missing
        notes = [f"cutoff: {n} of {len(docs)} documents have no {name}, so they cannot be "
                 f"{'members' if name == member_date_field else 'non-members'} (counted among "
                 "those between the cutoffs when not on the other side)"
                 for name, n in missing.items() if n]
    if corpus is not None:
        counts["corpus_check"] = corpus.record()
        notes.append(corpus.note("cutoff"))
    return Built(rows=tuple(rows), sources=tuple(sources), counts=counts, language=language,
                 notes=tuple(notes))


@register_builder("patentmia", "Zhang et al. 2024 (DC-PDD): the cutoff with PatentMIA's "
                  "settings (Chinese, 512 jieba words, members published before 2023-01-01, "
                  "non-members with a priority date after 2024-03-01)")
def patentmia(*, inputs: object = (), member_before: object = "2023-01-01",
              nonmember_after: object = "2024-03-01", words: object = (512,),
              snippet: str = "random", language: str = "zh", seed: int = 0,
              date_field: str | None = None, member_date_field: str | None = None,
              nonmember_date_field: str | None = None, text_field: str | None = None,
              index: object = (), index_tokenizer: str | None = None, index_n: int = DEFAULT_N,
              max_overlap: float = DEFAULT_MAX_OVERLAP) -> Built:
    """The cutoff builder with the PatentMIA paper's settings as defaults: members by
    publication date, non-members by priority date (the paper's section 3); `date_field`
    replaces both; `index` as cutoff's."""
    return _cutoff(inputs, member_before, nonmember_after, words, snippet, language, seed,
                   date_field, member_date_field, nonmember_date_field, text_field,
                   ("publication_date", "priority_date"),
                   open_filter(index, index_tokenizer, index_n, max_overlap))
