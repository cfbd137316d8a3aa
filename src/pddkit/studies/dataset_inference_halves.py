"""The false-positive check's two halves of the reference set (studies/dataset_inference.py):
whole documents on each side when the reference texts carry a `group` (windows of one
document never sit on both sides), text by text otherwise (the sentence that says which:
reporting/dataset_inference_text.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError
from pddkit.reporting.dataset_inference_text import check_split_sentence

MIN_PER_HALF = 4  # texts per half of a set: one half fits the classifier, one is tested


@dataclass(frozen=True)
class CheckSplit:
    """How the false-positive check cut the reference set: by whole documents (`group`) or
    text by text; texts and (by group) documents on each side."""

    by: str  # "group" or "text"
    texts: tuple[int, int]
    groups: tuple[int, int] | None = None  # documents per half (by group)
    ungrouped: int = 0  # reference texts without a group, each its own document

    def sentence(self) -> str:
        """The split in one sentence (reporting/dataset_inference_text.py writes it)."""
        return check_split_sentence(self)

    def to_dict(self) -> dict:
        return {"by": self.by, "texts": list(self.texts),
                "groups": None if self.groups is None else list(self.groups),
                "ungrouped": self.ungrouped, "sentence": self.sentence()}


def split_groups(groups: Sequence[str | None], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of two halves made of whole documents: the documents (a text whose group
    is None: a document of its own) in a seeded random order, then largest first (ties keep
    that order), each to the half holding fewer texts so far."""
    rows: dict = {}
    for i, g in enumerate(groups):
        rows.setdefault(("doc", g) if g is not None else ("text", i), []).append(i)
    docs = list(rows.values())
    docs = [docs[i] for i in np.random.default_rng(seed).permutation(len(docs))]
    docs.sort(key=len, reverse=True)  # stable: equal sizes keep the shuffled order
    halves: tuple[list[int], list[int]] = ([], [])
    for d in docs:
        halves[0 if len(halves[0]) <= len(halves[1]) else 1].extend(d)
    return np.array(sorted(halves[0]), dtype=int), np.array(sorted(halves[1]), dtype=int)


def reference_halves(n_reference: int, seed: int = 0,
                     groups: Sequence[str | None] | None = None
                     ) -> tuple[np.ndarray, np.ndarray, CheckSplit]:
    """Row indices of the false-positive check's two halves of the reference set and how they
    were cut: by whole documents when `groups` is given (`split_groups`), else the set
    shuffled (seeded) and cut text by text."""
    if groups is None:
        perm = np.random.default_rng(seed).permutation(n_reference)
        a, b = perm[:n_reference // 2], perm[n_reference // 2:]
        return a, b, CheckSplit("text", (len(a), len(b)))
    if len(groups) != n_reference:
        raise PddkitError(f"{len(groups)} reference groups for {n_reference} reference texts")
    a, b = split_groups(groups, seed)
    docs = lambda idx: len({groups[i] if groups[i] is not None else ("text", i)  # noqa: E731
                            for i in idx})
    return a, b, CheckSplit("group", (len(a), len(b)), (docs(a), docs(b)),
                            sum(g is None for g in groups))


def check_halves(n_reference: int, seed: int = 0,
                 groups: Sequence[str | None] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, CheckSplit]:
    """`reference_halves`, or one sentence when a half made of whole documents holds fewer
    than 2 * MIN_PER_HALF texts."""
    a, b, split = reference_halves(n_reference, seed, groups)
    if min(len(a), len(b)) < 2 * MIN_PER_HALF:
        raise PddkitError(
            f"the false-positive check splits the reference set by document ('group'), but "
            f"its {n_reference} texts from {sum(split.groups)} documents give halves of "
            f"{len(a)} and {len(b)} texts, and each needs at least {2 * MIN_PER_HALF}; "
            "give more reference documents or `false_positive_check=False`")
    return a, b, split


def split_reference(reference: np.ndarray, seed: int = 0,
                    groups: Sequence[str | None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The reference set cut into two halves (`reference_halves`): a pretend suspect set and
    a pretend reference set, neither of them trained on."""
    R = np.asarray(reference)
    a, b, _ = reference_halves(len(R), seed, groups)
    return R[a], R[b]
