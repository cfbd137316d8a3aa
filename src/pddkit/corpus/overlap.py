"""How much of each text the corpus holds: the share of its token n-grams found in the
index (OLMo-Detect's label check: a non-member is kept only below 20% of its 13-grams),
the longest run found, and the count of the whole text.

A text cut from the middle of a document starts with a word that, inside the document,
follows a space: byte-level BPE tokenizers spell the two differently ("The" and " The").
A text's first n-gram (and its whole-text count) is therefore looked up both ways when
the two spellings differ only in the first token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
    runs = index.match_lengths(a)  # runs[i]: longest match starting at token i
    ngrams = max(len(a) - n + 1, 0)
    found = [runs[i] >= n for i in range(ngrams)]
    longest = max(runs, default=0)
    count = index.count(a) if a else 0
    if a and len(b) == len(a) and b[1:] == a[1:] and b[0] != a[0]:
        first = index.longest_prefix(b)
        if ngrams:
            found[0] = found[0] or first >= n
        longest = max(longest, first)
        count += index.count(b)
    return TextOverlap(len(a), ngrams, sum(found), longest, count)


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
