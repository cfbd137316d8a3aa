"""The blind baseline's nearest-neighbour vote (blind/baseline.py) and, for many texts,
its neighbour search done once instead of per fold.

`NeighbourVote` (base model `neighbours`): score_i = sum over the `k` training texts j most
cosine-similar to text i, in word 1-2-gram TF-IDF, of s_ij^p * (+1 member, -1 non-member)
(a similarity-weighted vote, Dudani 1976).

- exact (`BlindBaseline(neighbours_exact_max=...)` texts or fewer): per fold, the TF-IDF
  is fitted on the training rows and every scored row is compared with every training
  row, in blocks: cost quadratic in the number of texts.
- approximate (more texts): `NeighbourGraph` finds, once and without labels, each text's
  `candidates` most similar texts of a pool (all texts, or the sample a model is fitted
  on), with the TF-IDF fitted on the pool; the similarity counts only the terms in at most
  `max_df` pool texts (the cosine's share carried by distinctive terms: function words,
  shared by nearly every pair, decide little among close neighbours and make an all-pairs
  product quadratic). Each pair of texts sharing such a term meets in a sparse product,
  so the cost is at most `max_df` x the number of kept term occurrences: linear in the
  number of texts. A fold's vote then takes, per scored text, its first `k` candidates
  among that fold's training rows. Which texts are near which is label-free, so no
  scored text's label enters its score; only training texts vote.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy import sparse

from pddkit.blind.counts import FoldTfidf

logger = logging.getLogger(__name__)


class NeighbourGraph:
    """`fit(counts, pool, totals) -> self`: `index_` [n, candidates] (row numbers of pool
    texts, most similar first, -1 where fewer were found) and `sim_` [n, candidates]
    (their similarities) for every row of `counts`; a row never lists itself."""

    def __init__(self, candidates: int = 150, max_df: int = 300, max_features: int | None = 50000,
                 chunk: int = 2000) -> None:
        if candidates < 1 or max_df < 1:
            raise ValueError(f"the neighbour search needs candidates and max_df of at least 1, "
                             f"not {candidates} and {max_df}")
        self.candidates = candidates
        self.max_df = max_df
        self.max_features = max_features
        self.chunk = chunk

    def fit(self, counts: sparse.csr_matrix, pool: np.ndarray | None = None,
            totals: tuple[np.ndarray, np.ndarray] | None = None) -> NeighbourGraph:
        n = counts.shape[0]
        pool = np.arange(n) if pool is None else np.asarray(pool)
        tfidf = FoldTfidf(self.max_features).fit(counts, None if len(pool) == n else pool,
                                                 totals)
        X = tfidf.transform(counts)                                  # [n, V] unit rows
        df = np.bincount(X[pool].indices, minlength=X.shape[1])
        rare = (df <= self.max_df).astype(np.float32)
        P = (X @ sparse.diags(rare)).astype(np.float32).tocsr()      # [n, V] distinctive terms
        P.eliminate_zeros()
        PT = P[pool].T.tocsr()                                       # [V, n_pool]
        C = self.candidates
        self.index_ = np.full((n, C), -1, dtype=np.int32)
        self.sim_ = np.zeros((n, C), dtype=np.float32)
        for lo in range(0, n, self.chunk):
            S = (P[lo:lo + self.chunk] @ PT).tocsr()                 # [chunk, n_pool]
            for r in range(S.shape[0]):
                a, b = S.indptr[r], S.indptr[r + 1]
                cols, vals = pool[S.indices[a:b]], S.data[a:b]
                mine = cols != lo + r
                cols, vals = cols[mine], vals[mine]
                if len(vals) > C:
                    top = np.argpartition(-vals, C - 1)[:C]
                    cols, vals = cols[top], vals[top]
                order = np.argsort(-vals, kind="stable")
                self.index_[lo + r, :len(order)] = cols[order]
                self.sim_[lo + r, :len(order)] = vals[order]
        short = float((self.index_[:, -1] < 0).mean())
        logger.info("neighbour search: %d texts, %d candidates each among %d (terms in at most "
                    "%d of them), %.1f%% with fewer", n, C, len(pool), self.max_df, 100 * short)
        return self

    def vote(self, train: np.ndarray, y: np.ndarray, rows: np.ndarray, k: int) -> tuple:
        """(similarities, signs) [len(rows), candidates] of each row's first `k` candidates
        among the `train` rows (labels `y`), zero elsewhere."""
        n = self.index_.shape[0]
        sign = np.zeros(n)
        sign[train] = 2.0 * np.asarray(y) - 1.0
        idx = self.index_[rows]                                      # [n_rows, C]
        ok = (idx >= 0) & (sign[idx] != 0)
        ok &= np.cumsum(ok, axis=1) <= k
        return np.where(ok, self.sim_[rows], 0.0), np.where(ok, sign[idx], 0.0)


class NeighbourVote:
    """Base model `neighbours` (see the module docstring); exact on fold TF-IDF matrices,
    or from `feats.graph` (a NeighbourGraph) when the features hold one."""

    name, param = "neighbours", "p"
    CHUNK = 512  # scored rows per similarity block: memory [CHUNK, n_train]

    def __init__(self, feats, k: int) -> None:
        if k < 1:
            raise ValueError(f"the neighbour vote needs at least 1 neighbour, not {k}")
        self.f = feats
        self.k = k
        self._cache: tuple = (None, None, None)

    def prepare(self, train: np.ndarray):
        if getattr(self.f, "graph", None) is not None:  # the rows themselves: the graph knows
            return lambda rows: np.asarray(rows)
        a = FoldTfidf(self.f.max_features).fit(self.f.word12, train, self.f.totals("word12"))
        return lambda rows: a.transform(self.f.word12, rows)

    def _nearest(self, X, Xt) -> tuple[np.ndarray, np.ndarray]:
        """(indices, similarities) [n_test, k] of each test row's k most similar training
        rows, computed once per (X, Xt) for all values of p."""
        if self._cache[0] is X and self._cache[1] is Xt:
            return self._cache[2]
        k = min(self.k, X.shape[0])
        idx, sim = np.zeros((Xt.shape[0], k), dtype=np.int64), np.zeros((Xt.shape[0], k))
        for lo in range(0, Xt.shape[0], self.CHUNK):
            S = (Xt[lo:lo + self.CHUNK] @ X.T).toarray()                  # [chunk, n_train]
            top = np.argpartition(-S, k - 1, axis=1)[:, :k]               # [chunk, k]
            idx[lo:lo + len(S)], sim[lo:lo + len(S)] = top, np.take_along_axis(S, top, 1)
        self._cache = (X, Xt, (idx, sim))
        return idx, sim

    def fit_score(self, X, y, Xt, p: float) -> np.ndarray:
        if not p > 0:
            raise ValueError(f"the neighbour vote's power p must be positive, not {p}")
        if isinstance(X, np.ndarray):  # row numbers: the graph's candidates
            if not (self._cache[0] is X and self._cache[1] is Xt):
                self._cache = (X, Xt, self.f.graph.vote(X, y, Xt, self.k))
            sim, sign = self._cache[2]
            return (np.clip(sim, 0.0, None) ** p * sign).sum(axis=1)
        idx, sim = self._nearest(X, Xt)
        sign = 2.0 * np.asarray(y) - 1.0
        return (np.clip(sim, 0.0, None) ** p * sign[idx]).sum(axis=1)
