"""How much of each text the corpus holds: the share of its token n-grams found in the
index (OLMo-Detect's label check: a non-member is kept only below 20% of its 13-grams),
the longest run found, and the count of the whole text.

A text cut from the middle of a document starts with a word that, inside the document,
follows a space: byte-level BPE tokenizers spell the two differently ("to" may be "t o"
at a start and " to" inside). A text whose first n-gram is not found in its own spelling
is therefore measured in that of " " + text too; the spelling with the larger share found
is reported (its tokens and n-grams), the longest match is the longer of the two, and
the whole-text count always adds both spellings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pddkit.corpus.encode import encode_texts
from pddkit.corpus.index import CorpusIndex
from pddkit.corpus.normalize import normalize_text

DEFAULT_N = 13
DEFAULT_MAX_OVERLAP = 0.2


@dataclass(frozen=True)
class TextOverlap:
    """One text against the corpus; `overlap` is None when it has fewer than n tokens."""

    tokens: int
    ngrams: int
    ngrams_found: int
    longest_match: int
    count: int

    @property
    def overlap(self) -> float | None:
        return self.ngrams_found / self.ngrams if self.ngrams else None

    def as_row(self) -> dict:
        return {"tokens": self.tokens, "ngrams": self.ngrams, "ngrams_found": self.ngrams_found,
                "overlap": self.overlap, "longest_match": self.longest_match, "count": self.count}


def measure_overlap(index: CorpusIndex, texts: Sequence[str], n: int = DEFAULT_N,
                    batch: int = 256) -> list[TextOverlap]:
    """TextOverlap of each text, encoded as the index was built (normalised when it was)."""
    if n < 1:
        raise ValueError("`n` must be at least 1")
    out: list[TextOverlap] = []
    for lo in range(0, len(texts), batch):
        chunk = [normalize_text(t) if index.normalize else t for t in texts[lo:lo + batch]]
        plain = encode_texts(index.tokenizer, chunk)
        spaced = encode_texts(index.tokenizer, [" " + t for t in chunk])
        out.extend(_one(index, a, b, n) for a, b in zip(plain, spaced))
    return out


def _one(index: CorpusIndex, a: list[int], b: list[int], n: int) -> TextOverlap:
    """`a`: the text's ids; `b`: those of " " + text (its spelling inside a document).
    b is measured only when a's first n-gram (a whole, when shorter) is not found: the
    spellings differ in the first word only. The whole-text count adds both."""
    first, runs = _spelling(index, a, n)
    if b == a or not a or runs[0] >= min(n, len(a)):
        return replace(first, count=first.count + (index.count(b) if b and b != a else 0))
    second, _ = _spelling(index, b, n)
    best = second if (second.ngrams and second.ngrams_found / second.ngrams
                      > (first.ngrams_found / first.ngrams if first.ngrams else 0)) else first
    # counts of two different token sequences: their occurrences are distinct
    return TextOverlap(best.tokens, best.ngrams, best.ngrams_found,
                       max(first.longest_match, second.longest_match), first.count + second.count)


def _spelling(index: CorpusIndex, ids: list[int], n: int) -> tuple[TextOverlap, list[int]]:
    runs = index.match_lengths(ids)  # runs[i]: longest match starting at token i
    ngrams = max(len(ids) - n + 1, 0)
    found = sum(1 for i in range(ngrams) if runs[i] >= n)
    return TextOverlap(len(ids), ngrams, found, max(runs, default=0),
                       index.count(ids) if ids else 0), runs


@dataclass(frozen=True)
class Contradiction:
    """A label the corpus contradicts: `position` in the checked texts."""

    position: int
    label: int
    reason: str  # "non-member found" | "member not found"


def contradictions(overlaps: Sequence[TextOverlap], labels: Sequence[int | None],
                   max_overlap: float = DEFAULT_MAX_OVERLAP,
                   whole_training_set: bool = False) -> list[Contradiction]:
    """Non-members with overlap >= `max_overlap`; with `whole_training_set` (the corpus is
    all the model was trained on), members none of whose n-grams the corpus holds. Texts
    shorter than n and unlabelled texts contradict nothing."""
    out = []
    for i, (o, label) in enumerate(zip(overlaps, labels)):
        if o.overlap is None or label is None:
            continue
        if label == 0 and o.overlap >= max_overlap:
            out.append(Contradiction(i, 0, "non-member found"))
        elif label == 1 and whole_training_set and o.ngrams_found == 0:
            out.append(Contradiction(i, 1, "member not found"))
    return out
