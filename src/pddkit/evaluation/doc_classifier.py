"""Meeus et al. 2024's document classifier ("Did the Neurons Read your Book? Document-level
Membership Inference for Large Language Models", USENIX Security 2024).

Per-token values log p(token) - log freq(token) (their token-frequency normalisation), one
feature vector per document (a histogram over fixed, label-free edges taken from all
documents' values, or aggregate statistics), a random forest cross-validated by document:
each document is scored only by the forest of the fold it was held out of.
Choices of pddkit, not yet checked against the authors' code (src/meta_classifier.py,
src/feature_extraction.py of computationalprivacy/document-level-membership-inference):
histogram edges are quantiles of all documents' values (label-free); token frequencies are
counted over all texts under test with add-one smoothing when no table is given; 500 trees
and sklearn's other forest defaults; the percentiles of the `stats` features.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)


def token_values(stats, log_freq: np.ndarray | None) -> list[np.ndarray]:
    """Per text, the [n_i] values L - log freq(id); counts over the texts (add-one) if no table."""
    if log_freq is None:
        vocab = 1 + max((int(s.ids.max()) for s in stats if len(s)), default=0)
        counts = np.ones(vocab, dtype=np.float64)  # [V] add-one smoothing
        for s in stats:
            np.add.at(counts, s.ids, 1.0)
        log_freq = np.log(counts / counts.sum())
    return [s.L.astype(np.float64) - log_freq[s.ids] for s in stats]  # each [n_i]


@dataclass(frozen=True)
class DocumentClassifier:
    """Random forest over per-document features, out-of-fold scores by document."""

    features: str = "histogram"
    bins: int = 10
    trees: int = 500
    folds: int = 5
    seed: int = 0

    def _features(self, values: list[np.ndarray], edges: np.ndarray) -> np.ndarray:
        rows = []
        for v in values:  # v: [n] all values of one document
            if self.features == "histogram":
                h, _ = np.histogram(np.clip(v, edges[0], edges[-1]), bins=edges)
                rows.append(h / max(len(v), 1))
            else:
                rows.append([v.mean(), v.min(), v.max(), v.std(),
                             *np.percentile(v, [1, 5, 10, 25, 50, 75, 90, 95, 99])])
        return np.asarray(rows, dtype=np.float64)  # [D, F]

    def cross_val_scores(self, token_values: Sequence[np.ndarray], groups: Sequence[str],
                         labels_by_group: Mapping[str, int]) -> dict[str, float]:
        """Out-of-fold probability of "member" for every document."""
        from sklearn.ensemble import RandomForestClassifier
        from sklearn.model_selection import StratifiedKFold

        docs = sorted(set(groups))
        by_doc: dict[str, list[np.ndarray]] = {d: [] for d in docs}
        for v, g in zip(token_values, groups, strict=True):
            by_doc[g].append(v)
        values = [np.concatenate(by_doc[d]) for d in docs]
        y = np.array([labels_by_group[d] for d in docs])  # [D]
        smallest = min(int((y == 1).sum()), int((y == 0).sum()))
        if smallest < 2:
            raise PddkitError("the document classifier needs at least 2 documents of each class")
        folds = min(self.folds, smallest)
        if folds < self.folds:
            logger.warning("document classifier: %d folds instead of %d (too few documents)",
                           folds, self.folds)
        edges = np.quantile(np.concatenate(values), np.linspace(0, 1, self.bins + 1))
        x = self._features(values, edges)
        scores = np.zeros(len(docs))
        cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=self.seed)
        for train, test in cv.split(x, y):
            forest = RandomForestClassifier(n_estimators=self.trees, random_state=self.seed)
            forest.fit(x[train], y[train])
            scores[test] = forest.predict_proba(x[test])[:, 1]
        return {d: float(s) for d, s in zip(docs, scores, strict=True)}
