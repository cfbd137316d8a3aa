"""dolma-book (SURP, Zhang & Wu 2024): head, middle and tail segments of member and
non-member books.

Each book (a Project Gutenberg .txt, header and licence footer stripped) is cut into
consecutive N-word segments; `head` is the first, `middle` segment `len // 2`, `tail` the
last. One row per book, position and N: `subset` = position ("head/512" when several N
are built), `group` = book, so folds keep a book whole. A book with fewer than three
segments of N words (head, middle and tail would repeat a text) is skipped for that N and
counted in the manifest (`skipped_too_short`). With `index` (an infini-gram index of the
training corpus, corpus_filter.py), non-member segments the corpus contains are dropped
and counted.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pddkit.corpus.overlap import DEFAULT_MAX_OVERLAP, DEFAULT_N
from pddkit.data.builders.corpus_filter import open_filter
from pddkit.data.builders.registry import Built, paths, register_builder, source, word_counts
from pddkit.data.builders.words import snippet, word_spans
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

POSITIONS = ("head", "middle", "tail")
MIN_SEGMENTS = len(POSITIONS)  # fewer segments would make positions share a text


def book_files(given: object, name: str) -> list[tuple[str, Path]]:
    """(book name, file) for a folder of .txt files (searched recursively; the name is the
    path inside the folder) or for files named one by one (the name is the file name)."""
    found: list[tuple[str, Path]] = []
    for p in paths(given):
        if p.is_dir():
            found += [(f.relative_to(p).with_suffix("").as_posix(), f)
                      for f in sorted(p.rglob("*.txt")) if f.is_file()]
        elif p.is_file():
            found.append((p.stem, p))
        else:
            raise PddkitError(f"`{name}` {p} is neither a folder nor a file")
    if not found:
        raise PddkitError(f"`{name}` names no .txt books")
    names = [n for n, _ in found]
    for n, f in found:
        if names.count(n) > 1:
            raise PddkitError(f"`{name}` holds two books named {n!r} ({f}); give each book "
                              "its own name")
    return found


def positions(n_segments: int) -> dict[str, int]:
    """Segment index of each position: head 0, middle len // 2, tail the last."""
    return {"head": 0, "middle": n_segments // 2, "tail": n_segments - 1}


@register_builder("dolma-book", "SURP, Zhang & Wu 2024: head/middle/tail N-word segments "
                  "of member and non-member Gutenberg books; subset = position")
def dolma_book(*, members: object = None, nonmembers: object = None,
               words: object = (512, 1024), language: str = "en", index: object = (),
               index_tokenizer: str | None = None, index_n: int = DEFAULT_N,
               max_overlap: float = DEFAULT_MAX_OVERLAP) -> Built:
    """Rows for every member (label 1) and non-member (label 0) book; see the module doc.
    `index` (folders), `index_tokenizer` (a public index's), `index_n`, `max_overlap`:
    non-member segments the corpus contains are dropped."""
    from pddkit.data.gutenberg import strip_gutenberg

    if members is None or nonmembers is None:
        raise PddkitError("dolma-book needs `members` and `nonmembers` (folders of .txt books)")
    corpus = open_filter(index, index_tokenizer, index_n, max_overlap)
    lengths = word_counts(words)
    books = {1: book_files(members, "members"), 0: book_files(nonmembers, "nonmembers")}
    both = {n for n, _ in books[1]} & {n for n, _ in books[0]}
    if both:
        raise PddkitError(f"book {sorted(both)[0]!r} is among both `members` and `nonmembers`")
    rows: list[dict] = []
    sources = []
    too_short = {str(n): 0 for n in lengths}
    undecodable = 0
    for label, found in books.items():
        role = "member" if label else "nonmember"
        for name, path in found:
            raw = path.read_bytes()
            sources.append(source(path, role, raw))
            try:
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                text = raw.decode("utf-8", errors="replace")
                undecodable += 1
            text = strip_gutenberg(text.replace("\r\n", "\n"))
            spans = word_spans(text, language)
            for n in lengths:
                count = len(spans) // n
                if count < MIN_SEGMENTS:
                    too_short[str(n)] += 1
                    continue
                for pos, index in positions(count).items():
                    subset = f"{pos}/{n}" if len(lengths) > 1 else pos
                    rows.append({"text": snippet(text, spans, index * n, n), "label": label,
                                 "id": f"{name}#{pos}/{n}", "group": name, "subset": subset})
    skipped = sum(too_short.values())
    notes = []
    if skipped:
        notes.append(f"dolma-book skipped {skipped} (book, length) pairs shorter than "
                     f"{MIN_SEGMENTS} segments: "
                     f"{', '.join(f'{v} at {k} words' for k, v in too_short.items() if v)}")
    if undecodable:
        notes.append(f"dolma-book read {undecodable} books that are not UTF-8 with replacement "
                     "characters")
    if corpus is not None and any(r["label"] == 0 for r in rows):
        nonmembers = [r for r in rows if r["label"] == 0]
        kept = iter(corpus.nonmembers_to_keep([r["text"] for r in nonmembers],
                                              [r["id"] for r in nonmembers]))
        rows = [r for r in rows if r["label"] == 1 or next(kept)]
        notes.append(corpus.note("dolma-book"))
        if not any(r["label"] == 0 for r in rows):
            raise PddkitError(f"the corpus contains every non-member segment ({len(nonmembers)} "
                              f"found at or above `max_overlap` {corpus.max_overlap:g}): no "
                              "non-member is left")
    if not any(r["label"] == 1 for r in rows) or not any(r["label"] == 0 for r in rows):
        side = "member" if not any(r["label"] == 1 for r in rows) else "non-member"
        raise PddkitError(f"no {side} book is at least {MIN_SEGMENTS} x {lengths[0]} words "
                          "long, so dolma-book has nothing to compare")
    counts = {"books": {"members": len(books[1]), "nonmembers": len(books[0])},
              "skipped_too_short": too_short, "undecodable_books": undecodable,
              "rows_per_subset": _per_subset(rows)}
    if corpus is not None:
        counts["corpus_check"] = corpus.record()
    return Built(rows=tuple(rows), sources=tuple(sources), counts=counts, language=language,
                 notes=tuple(notes))


def _per_subset(rows: list[dict]) -> dict:
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        c = out.setdefault(r["subset"], {"members": 0, "nonmembers": 0})
        c["members" if r["label"] == 1 else "nonmembers"] += 1
    return out
