"""The blind baseline's small fits without scikit-learn's per-call input checks, to the last
bit of scikit-learn's results.

The baseline fits ~250 small models per run (5 outer folds x 4 inner folds x 11 grid
values, and the refits): on a few hundred texts each fit's arithmetic takes well under a
millisecond, while scikit-learn's validation of its inputs (types, finiteness, targets,
parameters) takes several. Here:
- `roc_auc`: scikit-learn's `roc_auc_score` for 0/1 labels: its ROC points (the distinct
  scores from the highest down, collinear points dropped as `roc_curve`'s
  `drop_intermediate` does) and the trapezoid area under them, the same operations on the
  same numbers, so the same float (compared over tied and untied scores in
  tests/test_blind_lean_fits.py), which decides the hyperparameter a grid keeps (not
  evaluation/metrics.py `roc_points`: it keeps every point and divides before any would be
  dropped, and its trapezoid differs from scikit-learn's in the last bits, which can turn
  a tie between two grid values);
- `naive_bayes_log_odds`: `MultinomialNB(alpha).fit(X, y).predict_joint_log_proba(Xt)`
  (class 1 minus class 0), the counts, smoothing and log-likelihoods written out;
- `lean_sklearn()`: a context in which scikit-learn skips its parameter validation and
  finiteness checks (the logistic regressions: the matrices are built here and finite).
"""

from __future__ import annotations

import contextlib

import numpy as np


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """sklearn.metrics.roc_auc_score(labels, scores) for labels in {0, 1}; NaN when one
    class is missing (recent scikit-learn returns NaN with a warning, older versions raise;
    the baseline's folds always hold both classes)."""
    from scipy.integrate import trapezoid  # what scikit-learn's `auc` integrates with

    y = np.asarray(labels)
    s = np.asarray(scores)
    order = np.argsort(s, kind="mergesort")[::-1]                 # [n] highest score first
    s, y = s[order], (y[order] == 1)
    last = np.r_[np.flatnonzero(np.diff(s)), s.size - 1]          # last index of each score
    tps = np.cumsum(y, dtype=np.float64)[last]                    # [k] members above each
    fps = 1 + last - tps                                          # [k] non-members above each
    if tps[-1] <= 0 or fps[-1] <= 0:
        return float("nan")
    if fps.size > 2:  # drop the points on a straight line between their neighbours
        keep = np.flatnonzero(np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True])
        fps, tps = fps[keep], tps[keep]
    fpr = np.r_[0.0, fps] / fps[-1]
    tpr = np.r_[0.0, tps] / tps[-1]
    return float(trapezoid(tpr, fpr))


def naive_bayes_log_odds(X, y: np.ndarray, Xt, alpha: float) -> np.ndarray:
    """[len(Xt)] log P(member, x) - log P(non-member, x) of multinomial naive Bayes with
    additive smoothing `alpha` and the training classes' shares as prior, fitted on count
    rows X (sparse or dense, non-negative) with labels y in {0, 1}."""
    Y = np.stack([np.asarray(y) != 1, np.asarray(y) == 1], axis=1).astype(np.int64)  # [n, 2]
    feature_count = np.zeros((2, X.shape[1]))
    feature_count += np.asarray(X.T @ Y).T                        # [2, V] exact: whole counts
    class_count = np.zeros(2) + Y.sum(axis=0)                     # [2]
    smoothed = feature_count + alpha
    log_prob = np.log(smoothed) - np.log(smoothed.sum(axis=1).reshape(-1, 1))  # [2, V]
    with np.errstate(divide="ignore"):
        prior = np.log(class_count) - np.log(class_count.sum())   # [2]
    joint = np.asarray(Xt @ log_prob.T) + prior                   # [len(Xt), 2]
    return joint[:, 1] - joint[:, 0]


@contextlib.contextmanager
def lean_sklearn():
    """scikit-learn without parameter validation and finiteness checks, for fits on
    matrices the baseline built itself."""
    from sklearn import config_context

    with config_context(assume_finite=True, skip_parameter_validation=True):
        yield
