"""cutoff: members and non-members split by a date (the WikiMIA recipe, Shi et al. 2024;
PatentMIA, Zhang et al. 2024 / DC-PDD).

From dated documents (JSONL lines with `text` and `date`, ISO dates), members are those
dated before `member_before`, non-members those dated after `nonmember_after`; documents
in between are dropped and counted. For each length N in `words`, each document gives one
N-word snippet: at a seeded random word offset (`snippet='random'`), or its first N words
(`snippet='first'`, WikiMIA's recipe); shorter documents are dropped. Each length is a
bucket (`subset` = N), balanced by seeded down-sampling of its larger side.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from pddkit.data.builders import Built, paths, register_builder, source, word_counts
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
    day: date
    where: str  # "file line n"


def parse_date(value: object) -> date:
    """An ISO date ("2023-05-01") or date-time ("2023-05-01T12:00:00Z") -> date."""
    if not isinstance(value, str):
        raise ValueError(value)
    text = value.strip()
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


def read_documents(path: Path) -> tuple[list[Document], bytes]:
    """The dated documents of one JSONL file (and its bytes, for the manifest)."""
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
        text = row.get("text", row.get("input")) if isinstance(row, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise PddkitError(f"{where} has no 'text' string")
        try:
            day = parse_date(row.get("date"))
        except ValueError:
            raise PddkitError(f"{where} has date {row.get('date')!r}, which is not an ISO date "
                              "such as 2023-01-01") from None
        doc_id = str(row["id"]) if row.get("id") is not None else f"{path.stem}:{number}"
        docs.append(Document(doc_id, text, day, where))
    return docs, raw


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
           seed: int = 0) -> Built:
    """Balanced member / non-member snippets per length; see the module docstring."""
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
    for f in files:
        read, raw = read_documents(f)
        docs += read
        sources.append(source(f, "documents", raw))
    seen: dict[str, str] = {}
    for d in docs:
        if d.id in seen:
            raise PddkitError(f"{d.where} repeats id {d.id!r} of {seen[d.id]}")
        seen[d.id] = d.where
    sides = {1: [d for d in docs if d.day < before], 0: [d for d in docs if d.day > after]}
    for label, name, rel, day in ((1, "member", "before", before), (0, "non-member", "after", after)):
        if not sides[label]:
            raise PddkitError(f"no document is dated {rel} {day}, so the cutoff leaves no "
                              f"{name}s (dates run from {min(d.day for d in docs)} to "
                              f"{max(d.day for d in docs)})")
    rows: list[dict] = []
    buckets: dict[str, dict] = {}
    for n in lengths:
        rng = random.Random(f"{seed}:{n}")
        cut_docs = {label: _snippets(sides[label], n, snippet, language, rng) for label in (1, 0)}
        if not cut_docs[1] or not cut_docs[0]:
            name = "member" if not cut_docs[1] else "non-member"
            raise PddkitError(f"no {name} document has {n} words; leave {n} out of `words`")
        keep = min(len(cut_docs[1]), len(cut_docs[0]))
        for label in (1, 0):
            picked = sorted(rng.sample(range(len(cut_docs[label])), keep))
            rows += [{"text": cut_docs[label][i][1], "label": label,
                      "id": f"{cut_docs[label][i][0].id}@{n}", "group": cut_docs[label][i][0].id,
                      "subset": str(n)} for i in picked]
        buckets[str(n)] = {"members": keep, "nonmembers": keep,
                           "members_long_enough": len(cut_docs[1]),
                           "nonmembers_long_enough": len(cut_docs[0])}
    counts = {"documents": len(docs), "members": len(sides[1]), "nonmembers": len(sides[0]),
              "between_cutoffs": len(docs) - len(sides[1]) - len(sides[0]), "buckets": buckets}
    return Built(rows=tuple(rows), sources=tuple(sources), counts=counts, language=language)


@register_builder("patentmia", "Zhang et al. 2024 (DC-PDD): the cutoff with PatentMIA's "
                  "settings (Chinese, 512 words, members before 2023-01-01, non-members "
                  "after 2024-03-01)")
def patentmia(*, inputs: object = (), member_before: object = "2023-01-01",
              nonmember_after: object = "2024-03-01", words: object = (512,),
              snippet: str = "random", language: str = "zh", seed: int = 0) -> Built:
    """The cutoff builder with the PatentMIA paper's settings as defaults."""
    return cutoff(inputs=inputs, member_before=member_before, nonmember_after=nonmember_after,
                  words=words, snippet=snippet, language=language, seed=seed)
