"""Greedy rare word selection, the third blind attack of Das et al. 2024 ("Blind baselines
beat membership inference attacks for foundation models"), as a base model of the blind
baseline (blind/baseline.py).

On the training rows only: among the word 1-3-grams (lower-cased) present in at least
`min_df` training documents, pick the n-gram whose presence flags the most documents of the
target class per document of the other class (smoothed ratio of the two classes' shares,
i.e. TPR/FPR of the rule "contains it"), remove every document it covers, and repeat on the
rest, up to `k` n-grams or until no n-gram flags the target class more than the other one.
This is done twice, once with members and once with non-members as the target class. Each
selected n-gram keeps its log ratio at selection time as its weight; a document's score is
the largest weight of a member-flagging n-gram it contains minus the largest weight of a
non-member-flagging one (0 for a side with none), so the rule "contains any selected
n-gram" becomes a ranking.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy import sparse

logger = logging.getLogger(__name__)

GRID = ((5, 50), (5, 200), (10, 50), (10, 200))  # (min_df, k) values for BlindBaseline(greedy=)
SMOOTHING = 0.5  # added to both classes' counts, so an n-gram never seen in one class is finite


def greedy_select(B: sparse.spmatrix, y: np.ndarray, target: int, min_df: int, k: int,
                  smoothing: float = SMOOTHING) -> tuple[np.ndarray, np.ndarray]:
    """Greedy selection on binary document x n-gram matrix `B` [n, V] with labels `y`.

    Returns (columns, weights) in selection order: each step takes the column with the
    highest log((a + s) / (n_t + 2s)) - log((b + s) / (n_o + 2s)), where a and b are the
    still-uncovered target and other documents containing it and n_t, n_o the class sizes;
    only columns with document frequency >= `min_df` in `B` and a >= 1 compete, ties go to
    the lower column. Stops after `k` columns or when no log ratio is positive.
    """
    B = sparse.csr_matrix(B, dtype=np.float64, copy=True)
    B.data[:] = 1.0
    B.eliminate_zeros()
    y = np.asarray(y)
    tgt = (y == target).astype(np.float64)
    oth = 1.0 - tgt
    n_t, n_o = tgt.sum(), oth.sum()
    eligible = np.asarray(B.sum(axis=0)).ravel() >= min_df
    a = np.asarray(B.T @ tgt).ravel()
    b = np.asarray(B.T @ oth).ravel()
    Bc = B.tocsc()
    uncovered = np.ones(B.shape[0], dtype=bool)
    base = np.log((n_o + 2 * smoothing) / (n_t + 2 * smoothing))
    cols, weights = [], []
    for _ in range(k):
        ratio = np.log(a + smoothing) - np.log(b + smoothing) + base
        ratio[~eligible | (a < 1)] = -np.inf
        j = int(np.argmax(ratio))
        if not ratio[j] > 0:
            break
        cols.append(j)
        weights.append(float(ratio[j]))
        eligible[j] = False
        docs = Bc.indices[Bc.indptr[j]:Bc.indptr[j + 1]]
        docs = docs[uncovered[docs]]
        uncovered[docs] = False
        removed = B[docs]
        a -= np.asarray(removed.T @ tgt[docs]).ravel()
        b -= np.asarray(removed.T @ oth[docs]).ravel()
    return np.asarray(cols, dtype=np.int64), np.asarray(weights)


def flag_score(B: sparse.spmatrix, cols: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of `B`: the largest weight among the selected columns it contains, else 0."""
    if not len(cols):
        return np.zeros(B.shape[0])
    X = sparse.csr_matrix(B)[:, cols]
    X = (X > 0).astype(np.float64).multiply(weights[None, :]).tocsr()
    return np.asarray(X.max(axis=1).todense()).ravel()


class GreedyWords:
    """Base model `greedy` of the blind baseline; its grid values are (min_df, k) pairs."""

    name, param = "greedy", "min_df,k"

    def __init__(self, word13: sparse.csr_matrix, grid) -> None:
        self.word13 = word13
        self.min_df_floor = min(int(d) for d, _ in grid)
        self.k_max = max(int(k) for _, k in grid)
        self._cache: tuple = (None, None, {})

    def _selection(self, X, y, min_df: int, target: int):
        """The first `k_max` selections; a smaller k takes their prefix (same X, y, min_df)."""
        cx, cy, sel = self._cache
        if cx is not X or not np.array_equal(cy, y):
            self._cache = (X, y, {})
            sel = self._cache[2]
        if (min_df, target) not in sel:
            sel[min_df, target] = greedy_select(X, y, target, min_df, self.k_max)
        return sel[min_df, target]

    def prepare(self, train: np.ndarray):
        df = np.asarray((self.word13[train] > 0).sum(axis=0)).ravel()
        keep = np.flatnonzero(df >= self.min_df_floor)
        return lambda rows: self.word13[rows][:, keep]

    def fit_score(self, X, y, Xt, value) -> np.ndarray:
        min_df, k = value
        score = np.zeros(Xt.shape[0])
        for target, sign in ((1, 1.0), (0, -1.0)):
            cols, w = self._selection(X, y, int(min_df), target)
            score += sign * flag_score(Xt, cols[:int(k)], w[:int(k)])
        return score
