"""Vectorised hyperparameter grids: every text x every grid value from statistics already
computed (no forward pass), for choosing hyperparameters on validation data.

Each function returns [N, G] scores equal to calling the method's own per-text function
(methods/*.py) with each grid value; tests pin that equality.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pddkit.stats import TokenStats

GRIDS: dict[str, dict[str, list[float]]] = {
    "mink": {"k": [round(0.05 * i, 2) for i in range(1, 21)]},
    "minkpp": {"k": [round(0.05 * i, 2) for i in range(1, 21)]},
    "surp": {"entropy_threshold": [0.5 * i for i in range(1, 21)],
             "k": [float(10 * i) for i in range(1, 11)]},
    "dcpdd": {"a": [0.001, 0.01, 0.1, 1.0, 10.0]},
}


@dataclass(frozen=True)
class Padded:
    """[N, T] statistics padded with NaN past each text's n tokens."""

    L: np.ndarray
    H: np.ndarray
    M2: np.ndarray
    ids: np.ndarray  # [N, T] int64, -1 past the end
    n: np.ndarray  # [N]

    @classmethod
    def of(cls, stats: Sequence[TokenStats]) -> Padded:
        N, T = len(stats), max(len(s) for s in stats)
        arrays = {k: np.full((N, T), np.nan) for k in ("L", "H", "M2")}
        ids = np.full((N, T), -1, dtype=np.int64)
        for i, s in enumerate(stats):
            for k in arrays:
                arrays[k][i, :len(s)] = getattr(s, k)
            ids[i, :len(s)] = s.ids
        return cls(ids=ids, n=np.array([len(s) for s in stats]), **arrays)


def _lowest_means(values: np.ndarray, n: np.ndarray, ks: Sequence[float]) -> np.ndarray:
    """[N, G]: mean of the m = max(1, floor(k*n)) smallest of each row's first n values."""
    srt = np.sort(np.where(np.isnan(values), np.inf, values), axis=1)  # NaN padding last
    csum = np.cumsum(np.where(np.isinf(srt), 0.0, srt), axis=1)  # [N, T]
    out = np.empty((values.shape[0], len(ks)))
    for g, k in enumerate(ks):
        m = np.array([max(1, math.floor(k * int(x))) for x in n])  # as methods.base.n_lowest
        out[:, g] = csum[np.arange(len(n)), m - 1] / m
    return out


def mink_grid(P: Padded, k: Sequence[float]) -> np.ndarray:
    return _lowest_means(P.L, P.n, k)


def minkpp_grid(P: Padded, k: Sequence[float]) -> np.ndarray:
    z = (P.L + P.H) / np.sqrt(np.maximum(P.M2 - P.H * P.H, 1e-12))
    return _lowest_means(z, P.n, k)


def _percentiles(L: np.ndarray, n: np.ndarray, ks: Sequence[float]) -> np.ndarray:
    """[N, K] numpy.percentile(row[:n], k) with linear interpolation, for every row."""
    srt = np.sort(np.where(np.isnan(L), np.inf, L), axis=1)
    rows = np.arange(L.shape[0])
    out = np.empty((L.shape[0], len(ks)))
    for j, k in enumerate(ks):
        pos = (n - 1) * (k / 100.0)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, n - 1)
        frac = pos - lo
        a, b = srt[rows, lo], srt[rows, hi]
        out[:, j] = np.where(frac > 0, a + (b - a) * frac, a)
    return out


def surp_grid(P: Padded, entropy_threshold: Sequence[float], k: Sequence[float]) -> np.ndarray:
    """[N, E*K] in row-major (threshold, k) order: S = {H < e, L < t_k}, with the SPEC's
    fallbacks ({L < t_k}, then all tokens)."""
    valid = ~np.isnan(P.L)
    L0 = np.where(valid, P.L, 0.0)
    t = _percentiles(P.L, P.n, k)  # [N, K]
    all_mean = L0.sum(1) / P.n
    out = np.empty((P.L.shape[0], len(entropy_threshold) * len(k)))
    for j in range(len(k)):
        low = valid & (P.L < t[:, j:j + 1])  # [N, T]
        low_n = low.sum(1)
        low_mean = np.where(low_n > 0, (L0 * low).sum(1) / np.maximum(low_n, 1), all_mean)
        for e, thr in enumerate(entropy_threshold):
            sel = low & (P.H < thr)
            cnt = sel.sum(1)
            out[:, e * len(k) + j] = np.where(cnt > 0, (L0 * sel).sum(1) / np.maximum(cnt, 1),
                                              low_mean)
    return out


def dcpdd_grid(P: Padded, log_freq: np.ndarray, a: Sequence[float]) -> np.ndarray:
    first = np.zeros_like(P.ids, dtype=bool)  # first occurrence of each id in each row
    for i in range(P.ids.shape[0]):
        _, idx = np.unique(P.ids[i, :P.n[i]], return_index=True)
        first[i, idx] = True
    v = np.where(first, -np.exp(np.where(first, P.L, 0.0)) * log_freq[np.maximum(P.ids, 0)], 0.0)
    cnt = first.sum(1)
    return np.stack([np.where(first, np.minimum(v, x), 0.0).sum(1) / cnt for x in a], axis=1)


def grid_points(method: str) -> list[dict]:
    """The grid's parameter dicts in the column order of the functions above."""
    g = GRIDS[method]
    if method == "surp":
        return [{"entropy_threshold": e, "k": k} for e in g["entropy_threshold"] for k in g["k"]]
    (name, values), = g.items()
    return [{name: v} for v in values]


def grid_scores(method: str, P: Padded, log_freq: np.ndarray | None = None) -> np.ndarray:
    g = GRIDS[method]
    if method == "mink":
        return mink_grid(P, g["k"])
    if method == "minkpp":
        return minkpp_grid(P, g["k"])
    if method == "surp":
        return surp_grid(P, g["entropy_threshold"], g["k"])
    if method == "dcpdd":
        assert log_freq is not None
        return dcpdd_grid(P, log_freq, g["a"])
    raise KeyError(method)
