"""Hyperparameters chosen on validation data.

Authors report each method at the value that did best on the test set itself. Here the
value is chosen on a separate validation split (`choose` sees validation scores and
labels only) and its metrics are measured on the test part; the test-set optimum is
reported beside it, marked as an oracle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError
from pddkit.evaluation.metrics import Metrics, compute_metrics


def stratified_split(labels: Sequence[int], fraction: float, seed: int = 0,
                     groups: Sequence[str | None] | None = None,
                     what: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(validation indices, test indices): about `fraction` of each class, seeded, with
    every `group` (the document a text was cut from) wholly on one side. A text without a
    group is a group of its own, so without groups the split is exact per class.

    Groups are visited in seeded random order; a group joins validation while that does
    not overshoot any class's target share by more than half the group's own count.
    `what` names the split in errors (default: `val_fraction` and its value)."""
    if not 0 < fraction < 1:
        raise PddkitError(f"`val_fraction` must be between 0 and 1, not {fraction}")
    y = np.asarray(labels)
    keys = [f"\0text {i}" if groups is None or groups[i] is None else str(groups[i])
            for i in range(len(y))]
    members: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        members.setdefault(k, []).append(i)
    target = {c: fraction * int((y == c).sum()) for c in (0, 1)}
    in_val = {0: 0, 1: 0}
    val: list[int] = []
    order = np.random.default_rng(seed).permutation(len(members))
    names = list(members)
    for g in order:
        idx = members[names[g]]
        have = {c: int((y[idx] == c).sum()) for c in (0, 1)}
        if all(in_val[c] + have[c] <= target[c] + have[c] / 2 for c in (0, 1) if have[c]):
            val.extend(idx)
            for c in (0, 1):
                in_val[c] += have[c]
    val_idx = np.sort(np.array(val, dtype=int))
    test_idx = np.setdiff1d(np.arange(len(y)), val_idx)
    for c, name in ((1, "member"), (0, "non-member")):
        if not (y[val_idx] == c).any() or not (y[test_idx] == c).any():
            grouped = groups is not None and any(g is not None for g in groups)
            n_units = len({keys[i] for i in np.flatnonzero(y == c)})
            units = f"{n_units} documents with {name}s" if grouped else f"{n_units} {name}s"
            split, sides = ((f"`val_fraction` {fraction}", "validation and test each") if what is None
                            else (what, "both sides"))
            raise PddkitError(f"{split} leaves no {name} on one side "
                              f"({units}): {sides} need both classes")
    return val_idx, test_idx


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
