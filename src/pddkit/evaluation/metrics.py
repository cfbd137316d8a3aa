"""AUC and TPR at low FPR with 95% percentile-bootstrap intervals.

One routine computes both for many weightings of the samples at once: weights of ones
give the point estimate (equal to sklearn's roc_auc_score / roc_curve), and multinomial
resample counts give the bootstrap, so 1000 resamples cost one vectorised pass. The
bootstrap is stratified: members and non-members are resampled separately, so every
resample has both classes and none is lost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError

FPR_TARGETS = (0.01, 0.05, 0.10)
BOOTSTRAP_SCHEME = "stratified"  # members and non-members resampled separately (SPEC section 4)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class Metrics:
    """Separation of members from non-members by one score. `tpr` is keyed by FPR bound."""

    auc: float
    tpr: dict[float, float]
    auc_ci: Interval
    tpr_ci: dict[float, Interval]
    n_members: int
    n_nonmembers: int
    n_bootstrap: int

    def tpr_at(self, fpr: float) -> float:
        return self.tpr[fpr]

    def to_dict(self) -> dict:
        d = {"auc": self.auc, "auc_ci": [self.auc_ci.low, self.auc_ci.high]}
        for t in sorted(self.tpr):
            key = f"tpr@{t:g}"
            d[key] = self.tpr[t]
            d[key + "_ci"] = [self.tpr_ci[t].low, self.tpr_ci[t].high]
        d.update(n_members=self.n_members, n_nonmembers=self.n_nonmembers,
                 n_bootstrap=self.n_bootstrap, bootstrap=BOOTSTRAP_SCHEME)
        return d


def false_positives_allowed(fpr: float, n_nonmembers: int) -> int:
    """How many non-members may score above the threshold of TPR@`fpr` (the largest TPR at
    FPR <= fpr, FPR being a count over n_nonmembers): floor(fpr x n_nonmembers). Zero below
    `nonmembers_needed(fpr)`: the TPR is then the share of members scoring above every
    non-member, set by the single highest-scoring one."""
    # fpr x n is one rounding of an exact product (relative error 1.1e-16), far inside the
    # 1e-9 that keeps a product landing on a whole number (0.01 x 100) from flooring below it
    return math.floor(fpr * n_nonmembers + 1e-9)


def nonmembers_needed(fpr: float) -> int:
    """The fewest non-members with which TPR@`fpr` allows one false positive: ceil(1/fpr)
    (100 for 1%, 20 for 5%, 10 for 10%)."""
    return math.ceil(1.0 / fpr - 1e-9)  # 1/0.01 = 100.00000000000001 in floating point


def roc_points(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fpr, tpr) at (0, 0) and at each distinct score from the highest down: sklearn's
    roc_curve(labels, scores, drop_intermediate=False) without its thresholds (and without
    importing sklearn); the trapezoid area under them is the AUC with ties counted one half."""
    order = np.argsort(-scores, kind="mergesort")
    s, y = scores[order], np.asarray(labels)[order].astype(float)  # [n] each
    last = np.r_[np.flatnonzero(np.diff(s)), s.size - 1]  # last index of each distinct score
    tps = np.r_[0.0, np.cumsum(y)[last]]
    fps = np.r_[0.0, 1.0 + last - tps[1:]]
    return fps / max(fps[-1], 1.0), tps / max(tps[-1], 1.0)


def weighted_roc(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray,
                 fpr_targets=FPR_TARGETS) -> tuple[np.ndarray, np.ndarray]:
    """AUC [B] and TPR at each FPR bound [B, len(fpr_targets)] for B weightings [B, n].

    ROC points sit at each distinct score (sklearn's drop_intermediate=False); ties count
    one half in the AUC; TPR@t is the largest TPR among points with FPR <= t. A weighting
    with no member or no non-member gives NaN.
    """
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order].astype(bool)
    W = weights[:, order].astype(np.float64)  # [B, n]
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True])  # [G] last index of each score value
    tp = np.cumsum(np.where(y, W, 0.0), axis=1)[:, ends]  # [B, G]
    fp = np.cumsum(np.where(y, 0.0, W), axis=1)[:, ends]  # [B, G]
    P, N = tp[:, -1:], fp[:, -1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpr = np.concatenate([np.zeros_like(P), tp / P], axis=1)  # [B, G+1] from (0, 0)
        fpr = np.concatenate([np.zeros_like(N), fp / N], axis=1)
    auc = np.sum(np.diff(fpr, axis=1) * (tpr[:, 1:] + tpr[:, :-1]) / 2, axis=1)  # [B]
    at = np.stack([np.where(fpr <= t, tpr, 0.0).max(axis=1) for t in fpr_targets], axis=1)
    bad = (P[:, 0] == 0) | (N[:, 0] == 0)
    auc[bad] = np.nan
    at[bad] = np.nan
    return auc, at


def _stratified_counts(rng: np.random.Generator, labels: np.ndarray, b: int) -> np.ndarray:
    """[b, n] resample counts: each row draws n_members members from the members and
    n_nonmembers non-members from the non-members, with replacement, so every resample
    holds both classes in their original numbers."""
    n = labels.shape[0]
    counts = np.zeros((b, n), dtype=np.int64)
    rows = np.arange(b)[:, None]  # [b, 1]
    for c in (1, 0):
        members_of_c = np.flatnonzero(labels == c)  # [n_c]
        picks = members_of_c[rng.integers(0, members_of_c.size, size=(b, members_of_c.size))]
        np.add.at(counts, (rows, picks), 1)  # [b, n_c] draws -> counts
    return counts


def compute_metrics(scores, labels, n_bootstrap: int = 1000, seed: int = 0,
                    confidence: float = 0.95, block: int = 100) -> Metrics:
    """Point estimates and percentile-bootstrap intervals (members and non-members
    resampled separately, fixed seed; every one of the n_bootstrap resamples counts)."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels)
    n = scores.shape[0]
    if labels.shape != scores.shape:
        raise ValueError("scores and labels differ in length")
    n_pos = int((labels == 1).sum())
    if n_pos == 0 or n_pos == n:
        raise PddkitError("metrics need both members (label 1) and non-members (label 0)")
    if not np.isfinite(scores).all():
        raise ValueError("scores contain NaN or inf")
    auc, tpr = weighted_roc(scores, labels, np.ones((1, n)))
    rng = np.random.default_rng(seed)
    boot_auc, boot_tpr = [], []
    for start in range(0, n_bootstrap, block):
        b = min(block, n_bootstrap - start)
        a, t = weighted_roc(scores, labels, _stratified_counts(rng, labels, b))
        boot_auc.append(a)
        boot_tpr.append(t)
    lo_q, hi_q = 50 * (1 - confidence), 50 * (1 + confidence)

    def interval(x: np.ndarray) -> Interval:
        if x.size == 0:
            return Interval(float("nan"), float("nan"))
        return Interval(float(np.percentile(x, lo_q)), float(np.percentile(x, hi_q)))

    A = np.concatenate(boot_auc) if boot_auc else np.empty(0)
    T = np.concatenate(boot_tpr) if boot_tpr else np.empty((0, len(FPR_TARGETS)))
    return Metrics(
        auc=float(auc[0]),
        tpr={t: float(tpr[0, j]) for j, t in enumerate(FPR_TARGETS)},
        auc_ci=interval(A),
        tpr_ci={t: interval(T[:, j]) for j, t in enumerate(FPR_TARGETS)},
        n_members=n_pos,
        n_nonmembers=n - n_pos,
        n_bootstrap=int(A.size),
    )
