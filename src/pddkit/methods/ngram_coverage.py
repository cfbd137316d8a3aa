"""N-gram coverage of one generation against a reference text (SPEC 3e, `ngram`; the authors'
NGramCoverageAttack compute_ngram_coverage.py:148-157,187-245,264-269 and
compute_creativity_index.py:59-146, rewritten).

Words: g = `nltk.casual_tokenize(unidecode(G))`. The greedy scan keeps a window [f, e) of
g, starting at [0, 3): while e <= |g|, when `MosesDetokenizer("en").detokenize(g[f:e])` is a
substring of unidecode(R) (characters, case-sensitive), [f, e) is recorded (it replaces the
last record when it contains it) and e grows by one; otherwise a 3-word window slides
(f and e grow by one) and a longer one drops its first word (f grows). The records are the
maximal matched runs the scan finds, each at least `min_ngram` words long.

coverage = |union of the records| / |g| (0 when |g| < 3 or nothing matched);
creativity-style index `ci` = sum over n = 2..12 of the coverage by the records of
length >= n (the authors' `get_ngram_coverage(min_gram=n)`, normalised by |g|).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

MIN_NGRAM = 3  # compute_ngram_coverage.py --min_ngram default
CI_LOW, CI_HIGH = 2, 12  # compute_creativity_index.py:53-54


@functools.lru_cache(maxsize=1)
def _detokenizer():
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang="en")


def words(text: str) -> list[str]:
    """casual_tokenize(unidecode(text)): the word tokens coverage counts."""
    from nltk.tokenize.casual import casual_tokenize
    from unidecode import unidecode

    return casual_tokenize(unidecode(text))


def reference_text(reference: str) -> str:
    """unidecode(R): the string the n-grams are looked up in."""
    from unidecode import unidecode

    return unidecode(reference)


@dataclass(frozen=True)
class Coverage:
    """The scan of one generation: its word count and its records [start, end)."""

    length: int
    records: tuple[tuple[int, int], ...]

    def share(self, at_least: int = 1) -> float:
        """The share of the generation's words inside a record of `at_least` words or more."""
        if self.length == 0:
            return 0.0
        covered = set()
        for f, e in self.records:
            if e - f >= at_least:
                covered.update(range(f, e))
        return len(covered) / self.length

    def index(self, low: int = CI_LOW, high: int = CI_HIGH) -> float:
        """sum over n = low..high of share(n)."""
        return float(sum(self.share(n) for n in range(low, high + 1)))


def scan(tokens: Sequence[str], reference: str, min_ngram: int = MIN_NGRAM) -> Coverage:
    """The greedy scan of `tokens` (words()) against `reference` (reference_text())."""
    if len(tokens) < min_ngram:
        return Coverage(len(tokens), ())
    detok = _detokenizer().detokenize
    records: list[tuple[int, int]] = []
    f, e = 0, min_ngram
    while e <= len(tokens):
        if detok(list(tokens[f:e])) in reference:
            if records and f <= records[-1][0] and records[-1][1] <= e:
                records[-1] = (f, e)
            else:
                records.append((f, e))
            e += 1
        elif e - f == min_ngram:
            f, e = f + 1, e + 1
        else:
            f += 1
    return Coverage(len(tokens), tuple(records))


@functools.lru_cache(maxsize=1 << 14)
def coverage_of(generation: str, reference: str, min_ngram: int = MIN_NGRAM) -> Coverage:
    """The scan of one generation against the reference text R (both raw strings); kept for
    the calls of one run that score the same continuations (`stat=ci`, another `agg`)."""
    return scan(words(generation), reference_text(reference), min_ngram)
