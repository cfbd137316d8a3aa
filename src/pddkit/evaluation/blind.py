"""Blind baseline (Das et al. 2024, "Blind baselines beat membership inference attacks for
foundation models"): a classifier that never looks at the model.

Word 1-2-gram and character 3-5-gram TF-IDF features, logistic regression; scores are
out-of-fold member probabilities from stratified k-fold cross-validation, with a
document's texts kept in one fold when groups are given. An AUC of at least 0.60 means
the benchmark separates members from non-members without any model, so detection AUCs
on it prove little.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

WARN_AUC = 0.60


@dataclass(frozen=True)
class BlindVerdict:
    auc: float
    warn: bool

    def sentence(self) -> str:
        if self.warn:
            return (f"Warning: the blind baseline (no model, n-gram features only) reaches AUC "
                    f"{self.auc:.3f} >= {WARN_AUC:.2f}: this data separates members from "
                    "non-members without any model, so the other AUCs here prove little.")
        return (f"The blind baseline (no model) reaches AUC {self.auc:.3f} < {WARN_AUC:.2f}: "
                "members and non-members do not differ in surface features it can see.")


def verdict(auc: float) -> BlindVerdict:
    return BlindVerdict(auc=float(auc), warn=bool(auc >= WARN_AUC))


class BlindBaseline:
    """`fit(texts, labels) -> self`; `predict_proba(texts)`; `cross_val_scores(...)`."""

    def __init__(self, n_splits: int = 5, C: float = 1.0, max_features: int = 50000,
                 seed: int = 0) -> None:
        self.n_splits = n_splits
        self.C = C
        self.max_features = max_features
        self.seed = seed

    def _pipeline(self):
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline, make_union

        features = make_union(
            TfidfVectorizer(analyzer="word", ngram_range=(1, 2), sublinear_tf=True,
                            max_features=self.max_features, lowercase=True),
            TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True,
                            max_features=self.max_features, lowercase=False),
        )
        return make_pipeline(features, LogisticRegression(C=self.C, max_iter=2000))

    def fit(self, texts: Sequence[str], labels: Sequence[int]) -> BlindBaseline:
        self.model_ = self._pipeline().fit(list(texts), np.asarray(labels))
        return self

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        return self.model_.predict_proba(list(texts))[:, 1]

    def cross_val_scores(self, texts: Sequence[str], labels: Sequence[int],
                         groups: Sequence[str] | None = None) -> np.ndarray:
        """Out-of-fold member probabilities [n]: each text scored by a model that never saw
        it (nor, with groups, any text of its document)."""
        from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

        y = np.asarray(labels)
        texts = list(texts)
        if groups is not None:
            g = np.asarray(groups)
            per_class = min(len(set(g[y == c])) for c in (0, 1))
            k = min(self.n_splits, per_class)
            folds = StratifiedGroupKFold(k, shuffle=True, random_state=self.seed) if k >= 2 \
                else None
            splits = None if folds is None else folds.split(texts, y, g)
        else:
            per_class = min(int((y == c).sum()) for c in (0, 1))
            k = min(self.n_splits, per_class)
            splits = None if k < 2 else StratifiedKFold(k, shuffle=True,
                                                        random_state=self.seed).split(texts, y)
        if splits is None:
            raise PddkitError("the blind baseline needs at least 2 members and 2 non-members "
                              "(2 documents of each with groups)")
        scores = np.full(len(texts), np.nan)
        for train, test in splits:
            model = self._pipeline().fit([texts[i] for i in train], y[train])
            scores[test] = model.predict_proba([texts[i] for i in test])[:, 1]
        self.n_splits_used_ = k
        return scores
