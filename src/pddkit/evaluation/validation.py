"""Hyperparameters chosen on validation data.

Authors report each method at the value that did best on the test set itself. Here the
value is chosen on a separate validation split (`choose` sees validation scores and
labels only) and its metrics are measured on the test part; the test-set optimum is
reported beside it, marked as an oracle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pddkit.evaluation.metrics import Metrics, compute_metrics


def column_aucs(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """AUC of every column of [N, G] scores."""
    from sklearn.metrics import roc_auc_score

    return np.array([roc_auc_score(labels, scores[:, g]) for g in range(scores.shape[1])])


def choose(val_scores: np.ndarray, val_labels: np.ndarray) -> tuple[int, np.ndarray]:
    """Index of the grid point with the best validation AUC (first on ties), and all
    validation AUCs. Reads validation data only."""
    aucs = column_aucs(val_scores, val_labels)
    return int(np.argmax(aucs)), aucs


@dataclass(frozen=True)
class Validated:
    """One method's hyperparameters: default, chosen on validation, and the test oracle."""

    method: str
    grid: list[dict]
    val_auc: np.ndarray  # [G]
    chosen: dict
    test: Metrics  # at the chosen value, on the test part
    oracle: dict  # best on the test part itself: reported, never used
    oracle_auc: float
    default: dict | None = None  # the default value when it is not the method's parameters

    def to_dict(self) -> dict:
        return {"grid_size": len(self.grid), "default": self.default, "chosen": self.chosen,
                "chosen_val_auc": float(self.val_auc.max()), "test": self.test.to_dict(),
                "oracle": {"params": self.oracle, "auc": self.oracle_auc,
                           "note": "best value on the test set itself (not a real result)"},
                "val_auc_grid": self.val_auc.tolist()}


def validate(method: str, grid: list[dict], scores: np.ndarray, labels: np.ndarray,
             val_idx: np.ndarray, test_idx: np.ndarray, n_bootstrap: int = 1000,
             seed: int = 0, default: dict | None = None) -> Validated:
    """`scores` [N, G] for every text and grid point; labels [N]."""
    best, val_auc = choose(scores[val_idx], labels[val_idx])
    test_scores, test_labels = scores[test_idx], labels[test_idx]
    test_auc = column_aucs(test_scores, test_labels)
    oracle = int(np.argmax(test_auc))
    return Validated(method, grid, val_auc, grid[best],
                     compute_metrics(test_scores[:, best], test_labels, n_bootstrap, seed),
                     grid[oracle], float(test_auc[oracle]), default)
