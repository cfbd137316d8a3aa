"""How much of each text the corpus holds: the share of its token n-grams found in the
index (OLMo-Detect's label check: a non-member is kept only below 20% of its 13-grams),
the longest run found, and the count of the whole text.

A text cut from the middle of a document starts with a word that, inside the document,
follows a space: byte-level BPE tokenizers spell the two differently ("to" may be "t o"
at a start and " to" inside). So when the first n-gram of a text's own spelling (all of
it, when shorter than n) is not found, the spelling of " " + text is measured too, and
the one with the larger share found is reported whole (tokens, n-grams, n-grams found,
longest match; the text's own on a tie). The whole-text count covers both spellings.
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
    from pddkit.progress import bar

    out: list[TextOverlap] = []
    with bar(len(texts), "texts against the corpus", unit="text") as progress:
        for lo in range(0, len(texts), batch):
            chunk = [normalize_text(t) if index.normalize else t for t in texts[lo:lo + batch]]
            plain = encode_texts(index.tokenizer, chunk)
            spaced = encode_texts(index.tokenizer, [" " + t for t in chunk])
            out.extend(_one(index, a, b, n) for a, b in zip(plain, spaced))
            progress.update(len(chunk))
    return out


def _one(index: CorpusIndex, a: list[int], b: list[int], n: int) -> TextOverlap:
    """`a`: the text's ids; `b`: those of " " + text (its spelling inside a document)."""
    first, runs = _spelling(index, a, n)
    count = _count(index, a, b, first.count)
    if b == a or not a or runs[0] >= min(n, len(a)):
        return replace(first, count=count)
    second, runs_b = _spelling(index, b, n)
    better = _share(second, runs_b) > _share(first, runs)
    return replace(second if better else first, count=count)


def _share(o: TextOverlap, runs: list[int]) -> float:
    """The share found; for a text shorter than n, 1 when the whole of it is found."""
    if o.ngrams:
        return o.ngrams_found / o.ngrams
    return float(bool(runs) and runs[0] >= len(runs))


def _count(index: CorpusIndex, a: list[int], b: list[int], count_a: int) -> int:
    """Occurrences of the text in either spelling. When one spelling ends with the other
    (SentencePiece spells " " + text as an extra "▁" before the text's own tokens), every
    occurrence of the longer holds one of the shorter: the shorter's count is the answer."""
    if not b or b == a:
        return count_a
    if len(b) > len(a) and b[len(b) - len(a):] == a:
        return count_a
    count_b = index.count(b)
    if len(a) > len(b) and a[len(a) - len(b):] == b:
        return count_b
    return count_a + count_b  # two sequences, neither inside the other's occurrences


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


def contradicted_by(overlaps: Sequence[TextOverlap], labels: Sequence[int | None],
                    max_overlap: float = DEFAULT_MAX_OVERLAP,
                    whole_training_set: bool = False) -> list[str | None]:
    """Per text, the reason its label is contradicted (`contradictions`), or None."""
    reasons: list[str | None] = [None] * len(overlaps)
    for c in contradictions(overlaps, labels, max_overlap, whole_training_set):
        reasons[c.position] = c.reason
    return reasons
