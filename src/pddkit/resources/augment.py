"""Word-swap augmentations of `pac` (Ye et al. 2024, "Data Contamination Calibration for
Black-box LLMs", arXiv 2405.11930; the authors' `src/eda.py` random swap).

The rule: the text is split on single spaces (`text.split(" ")`, so runs of spaces give
empty words, as the reference code's), `max(1, floor(swap * #words))` times two distinct
word positions are drawn and their words swapped (each swap on the result of the one
before), and the words are re-joined with single spaces. A text of one word has no two
distinct positions: its copies are the text itself (`pac` scores it 0 and counts it).

Each text's copies come from a generator seeded by the run seed, the swap rate and the
text itself (sha256 of its UTF-8), never its position or batch: the same text gets the
same copies in any order, batch size or run. Copy j depends only on the draws before it,
so `n` copies are the first `n` of any larger number (calls that differ only in n_aug
share one set, generated for the largest).

Where pddkit differs from the reference code: the reference seeds Python's `random` once
for the whole data set (a text's copies depend on the texts before it), and its
`swap_word` gives up after drawing the same position four times, leaving that swap out;
here the second position is drawn among the other words, so every swap exchanges two
distinct positions. Like the reference (its `eda` here does no cleaning), the
words are not lower-cased or stripped of punctuation.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from pddkit.errors import PddkitError


class AugmentParams(NamedTuple):
    """What decides a text's augmentations besides the run seed; n_aug only slices."""

    swap: float

    @classmethod
    def of(cls, params: Mapping) -> AugmentParams:
        return cls(float(params["swap"]))

    def label(self) -> str:
        return f"swap={self.swap:g}"


def check(n_aug: int, swap: float) -> None:
    """One sentence for augmentation parameters the rule cannot use."""
    if isinstance(n_aug, bool) or not isinstance(n_aug, (int, np.integer)) or n_aug < 1:
        raise PddkitError(f"n_aug must be a whole number of at least 1, not {n_aug!r}")
    if not 0 < swap <= 1:
        raise PddkitError(f"swap must be in (0, 1], not {swap}")


def n_swaps(n_words: int, swap: float) -> int:
    """max(1, floor(swap * #words))."""
    return max(1, math.floor(swap * n_words))


def _rng(text: str, swap: float, seed: int) -> np.random.Generator:
    digest = hashlib.sha256(f"pddkit-pac\0{int(seed)}\0{float(swap)!r}\0".encode()
                            + text.encode("utf-8", "surrogatepass")).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


def augment(text: str, n_aug: int, swap: float, seed: int) -> tuple[str, ...]:
    """`n_aug` word-swapped copies of `text` (module docstring); a one-word text's copies
    are the text itself."""
    check(n_aug, swap)
    words = text.split(" ")
    if len(words) < 2:
        return (text,) * n_aug
    rng = _rng(text, swap, seed)
    m = n_swaps(len(words), swap)
    out = []
    for _ in range(n_aug):
        w = list(words)
        for _ in range(m):
            i = int(rng.integers(len(w)))
            j = int(rng.integers(len(w) - 1))
            j += j >= i  # a position other than i, uniformly
            w[i], w[j] = w[j], w[i]
        out.append(" ".join(w))
    return tuple(out)


def one_word(text: str) -> bool:
    """No two distinct positions to swap: the text holds no single space."""
    return " " not in text
