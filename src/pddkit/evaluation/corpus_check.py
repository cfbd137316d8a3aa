"""A run's labels checked against the training corpus (engine/corpus_stage.py measures
it): per text, how much of it the corpus holds and whether its label is contradicted;
per method, the metrics with the contradicted texts left out, beside those on all texts.

The overlap is a property of a text and a corpus, measured with the index's tokenizer
(not the model's). Texts shorter than one n-gram have no overlap and contradict nothing:
they are counted (`too_short`), and stay in both sets of metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from pddkit.evaluation.metrics import Metrics, compute_metrics

if TYPE_CHECKING:
    from pddkit.corpus.overlap import TextOverlap

# scores.jsonl's columns, in this order, beside each text's scores
COLUMNS = ("tokens", "ngrams", "ngrams_found", "overlap", "longest_match", "count",
           "contradicted")
NONMEMBER_FOUND, MEMBER_NOT_FOUND = "non-member found", "member not found"


@dataclass(frozen=True)
class CorpusCheck:
    """The check of one run: the index and its settings, each text's overlap and
    contradiction (in the run's `ids` order), and per method label the metrics without the
    contradicted texts (None: one class is left, or the method has no metrics)."""

    index: str  # the index folder(s), comma-separated
    tokenizer: str  # the tokenizer the texts were measured with: the index's
    built_by_pddkit: bool  # False: a public index (no pddkit manifest; tokenizer the user's word)
    normalize: bool | None  # the texts were normalised as the index was built (None: unknown)
    n: int
    max_overlap: float
    whole_training_set: bool
    overlaps: tuple[TextOverlap, ...]
    contradicted: tuple[str | None, ...]  # per text: the reason, or None
    evaluated: tuple[int, ...]  # the texts the metrics are on (the test part when validating)
    metrics: dict = field(default_factory=dict)  # method label -> Metrics | None

    def columns(self, i: int) -> dict:
        """Text i's columns in scores.jsonl (COLUMNS)."""
        return {**self.overlaps[i].as_row(), "contradicted": self.contradicted[i]}

    def counts(self, labels: Sequence[int] | None) -> dict:
        """How many texts were checked, too short, contradicted (by reason, and among the
        texts the metrics are on)."""
        n = len(self.overlaps)
        short = [i for i, o in enumerate(self.overlaps) if o.overlap is None]
        reasons = [r for r in self.contradicted if r is not None]
        labelled = labels is not None
        return {
            "texts": n,
            "checked": n - len(short),
            "too_short": len(short),
            "too_short_members": sum(labels[i] == 1 for i in short) if labelled else None,
            "too_short_nonmembers": sum(labels[i] == 0 for i in short) if labelled else None,
            "contradicted": len(reasons),
            "nonmembers_found": reasons.count(NONMEMBER_FOUND),
            "members_not_found": reasons.count(MEMBER_NOT_FOUND),
            "left_out_of_metrics": sum(self.contradicted[i] is not None for i in self.evaluated),
        }

    def to_dict(self, labels: Sequence[int] | None) -> dict:
        """results.json's `corpus_check` (the per-text columns are in scores.jsonl)."""
        return {"index": self.index, "tokenizer": self.tokenizer,
                "built_by_pddkit": self.built_by_pddkit, "normalize": self.normalize,
                "n": self.n, "max_overlap": self.max_overlap,
                "whole_training_set": self.whole_training_set,
                "counts": self.counts(labels)}


def metrics_without(contradicted: Sequence[str | None], evaluated: Sequence[int],
                    scores: dict[str, np.ndarray], labels: Sequence[int],
                    n_bootstrap: int, seed: int) -> dict[str, Metrics | None]:
    """Per method label, the metrics on the `evaluated` texts whose label the corpus does
    not contradict; None where a class is left without texts."""
    keep = np.array([i for i in evaluated if contradicted[i] is None], dtype=int)
    y = np.asarray(labels)[keep]
    if not len(keep) or y.min() == y.max():
        return dict.fromkeys(scores)
    return {label: compute_metrics(s[keep], y, n_bootstrap=n_bootstrap, seed=seed)
            for label, s in scores.items()}
