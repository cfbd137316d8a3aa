"""Document-level scores from text-level scores.

A document is the set of texts sharing a `group`; its label is its texts' label (a
document holding both labels is an error). `mean`: the document's score is the mean of
its texts' scores. `share` (Meeus et al. 2024, "SoK: Membership Inference Attacks on
LLMs are Rushing Nowhere", their document_level/from_seq_to_doc_level.py): documents are
split 50/50, seeded and stratified by label, into a calibration and an evaluation half;
the threshold tau is, among 500 evenly spaced values between the calibration texts'
lowest and highest score, the one maximising text-level accuracy of `score >= tau`
(ties: the last, as the authors' `acc >= best_acc`); a document's score is the share of
its texts scoring at or above tau. Metrics are then over the evaluation documents.

evaluation/document_level.py composes them into a run's document level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError

THRESHOLDS = 500  # candidate thresholds of `share` (SPEC 3c)


@dataclass(frozen=True)
class Documents:
    """Texts grouped into documents: `names[d]`, `labels[d]`, and `index[i]` = the
    document of text i."""

    names: tuple[str, ...]
    labels: np.ndarray  # [D] int
    index: np.ndarray  # [N] int, document of each text

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.index, minlength=len(self.names))  # [D] texts per document


def group_documents(groups: Sequence[str | None], labels: Sequence[int],
                    labelled: bool = True, sources: Sequence[str] | None = None) -> Documents:
    """Documents in order of first appearance; one sentence for texts without a group
    and for a group holding both labels (naming a text's `sources` entry, e.g. "data.jsonl
    line 3", when given). Unlabelled (`labelled=False`): labels are -1."""
    where = (lambda i: f" ({sources[i]})") if sources is not None else (lambda i: "")
    missing = [i for i, g in enumerate(groups) if g is None]
    if missing:
        raise PddkitError(f"document level needs a document id (the group column) for every "
                          f"text; {len(missing)} of {len(groups)} texts have none, the first "
                          f"text {missing[0] + 1}{where(missing[0])}")
    names: dict[str, int] = {}
    index = np.fromiter((names.setdefault(str(g), len(names)) for g in groups), dtype=np.int64,
                        count=len(groups))
    if not labelled:
        return Documents(tuple(names), np.full(len(names), -1, dtype=np.int64), index)
    y = np.asarray(labels, dtype=np.int64)
    sizes = np.bincount(index, minlength=len(names))  # [D]
    ones = np.bincount(index, weights=y, minlength=len(names))  # [D] member texts
    mixed = [d for d in range(len(names)) if 0 < ones[d] < sizes[d]]
    if mixed:
        d = mixed[0]
        first = {lab: int(np.flatnonzero((index == d) & (y == lab))[0]) for lab in (0, 1)}
        raise PddkitError(f"document {list(names)[d]!r} holds both member and non-member texts "
                          f"(member{where(first[1])}, non-member{where(first[0])}; {len(mixed)} "
                          "such documents); a document's texts share its label")
    return Documents(tuple(names), (ones > 0).astype(np.int64), index)


def mean_scores(scores: np.ndarray, docs: Documents) -> np.ndarray:
    """[D] mean of each document's texts' scores."""
    total = np.bincount(docs.index, weights=scores, minlength=len(docs.names))
    return total / docs.sizes


def calibration_split(docs: Documents, seed: int) -> np.ndarray:
    """[D] bool, True for the calibration half: each label's documents shuffled with
    `seed` and the first half (rounded down) of each taken."""
    rng = np.random.default_rng(seed)
    calib = np.zeros(len(docs.names), dtype=bool)
    for label in (0, 1):
        members = np.flatnonzero(docs.labels == label)
        calib[rng.permutation(members)[: len(members) // 2]] = True
    return calib


def share_threshold(scores: np.ndarray, labels: np.ndarray, n: int = THRESHOLDS) -> float:
    """The tau among `n` evenly spaced values between min and max of `scores` that
    maximises the accuracy of `scores >= tau` against `labels`; the last on ties."""
    taus = np.linspace(scores.min(), scores.max(), n)  # [n]
    correct = ((scores[None, :] >= taus[:, None]) == (labels[None, :] == 1)).sum(axis=1)  # [n]
    return float(taus[len(taus) - 1 - np.argmax(correct[::-1])])


def share_scores(scores: np.ndarray, docs: Documents, tau: float) -> np.ndarray:
    """[D] share of each document's texts scoring at or above `tau`."""
    above = np.bincount(docs.index, weights=(scores >= tau).astype(np.float64),
                        minlength=len(docs.names))
    return above / docs.sizes


def share_level(scores: np.ndarray, labels: Sequence[int], docs: Documents,
                seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(document scores [D], calibration mask [D], tau): tau fitted on the calibration
    documents' texts; one sentence when a half lacks a class."""
    calib = calibration_split(docs, seed)
    for name, mask in (("calibration", calib), ("evaluation", ~calib)):
        if len(np.unique(docs.labels[mask])) < 2:
            raise PddkitError(f"the {name} half of the documents has only one class: "
                              "the share of texts above a threshold needs at least 2 member "
                              "and 2 non-member documents")
    on = calib[docs.index]  # [N] texts of calibration documents
    tau = share_threshold(scores[on], np.asarray(labels)[on])
    return share_scores(scores, docs, tau), calib, tau


def texts_per_document_steps(largest: int) -> list[int]:
    """1, 2, 4, ... below `largest`, then `largest` (the SoK's x axis)."""
    steps, k = [], 1
    while k < largest:
        steps.append(k)
        k *= 2
    return [*steps, largest]


def subsample(docs: Documents, k: int, seed: int) -> np.ndarray:
    """[N] bool: a seeded random min(k, size) of each document's texts."""
    key = np.random.default_rng([seed, k]).random(len(docs.index))  # [N]
    order = np.lexsort((key, docs.index))  # texts by document, then by random key
    starts = np.searchsorted(docs.index[order], docs.index[order])  # [N] first slot of its document
    keep = np.zeros(len(docs.index), dtype=bool)
    keep[order[np.arange(len(order)) - starts < k]] = True
    return keep
