"""Vectorised hyperparameter grids: every text x every grid value from statistics already
computed (no forward pass), for choosing hyperparameters on validation data.

A method with a grid passes `grid=Grid(values, fn)` to register_method; `fn` lives beside
the method's per-text function and returns [N, G] scores equal to calling it with each
grid point (tests/test_grid.py pins that for every registered grid). This module holds
the shared machinery: padded statistics and the sorted-prefix helpers.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pddkit.stats import TokenStats


@dataclass(frozen=True)
class Padded:
    """[N, T] statistics padded with NaN past each text's n tokens."""

    L: np.ndarray
    H: np.ndarray
    M2: np.ndarray
    ids: np.ndarray  # [N, T] int64, -1 past the end
    n: np.ndarray  # [N]
    var: np.ndarray  # TokenStats.var

    @classmethod
    def of(cls, stats: Sequence[TokenStats]) -> Padded:
        N, T = len(stats), max(len(s) for s in stats)
        arrays = {k: np.full((N, T), np.nan) for k in ("L", "H", "M2", "var")}
        ids = np.full((N, T), -1, dtype=np.int64)
        for i, s in enumerate(stats):
            for k in arrays:
                arrays[k][i, :len(s)] = getattr(s, k)
            ids[i, :len(s)] = s.ids
        return cls(ids=ids, n=np.array([len(s) for s in stats]), **arrays)


@dataclass(frozen=True)
class Grid:
    """A method's hyperparameter grid. `values`: parameter -> values; columns run over
    their product, row-major in the order the parameters are listed (the last varies
    fastest). `fn(P, log_freq, **values) -> [N, G]` is the method's vectorised function."""

    values: dict[str, tuple[float, ...]]
    fn: Callable[..., np.ndarray]
    # True: `fn(observations, params, **values)` reads each text's whole Observation
    # (conrecall's conditioned statistics) instead of the padded target statistics;
    # `params` are the call's own hyperparameters (those the grid does not vary)
    per_text: bool = False

    def __post_init__(self) -> None:
        if not self.values or not all(len(v) for v in self.values.values()):
            raise ValueError("a grid needs at least one value of at least one parameter")
        object.__setattr__(self, "values", {k: tuple(v) for k, v in self.values.items()})

    def points(self) -> list[dict]:
        """The grid's parameter dicts, in the column order of `scores`."""
        names = list(self.values)
        return [dict(zip(names, combo)) for combo in itertools.product(*self.values.values())]

    def scores(self, P: Padded | None, log_freq: np.ndarray | None = None,
               observations: Sequence | None = None, params: Mapping | None = None) -> np.ndarray:
        """[N, G] scores of every text at every grid point (no forward pass)."""
        if self.per_text:
            return self.fn(observations, dict(params or {}), **self.values)
        return self.fn(P, log_freq, **self.values)


def _lowest_means(values: np.ndarray, n: np.ndarray, ks: Sequence[float]) -> np.ndarray:
    """[N, G]: mean of the m = max(1, floor(k*n)) smallest of each row's first n values."""
    srt = np.sort(np.where(np.isnan(values), np.inf, values), axis=1)  # NaN padding last
    csum = np.cumsum(np.where(np.isinf(srt), 0.0, srt), axis=1)  # [N, T]
    out = np.empty((values.shape[0], len(ks)))
    for g, k in enumerate(ks):
        m = np.array([max(1, math.floor(k * int(x))) for x in n])  # as methods.base.n_lowest
        out[:, g] = csum[np.arange(len(n)), m - 1] / m
    return out


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
