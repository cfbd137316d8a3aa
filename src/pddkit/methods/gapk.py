"""Gap-K% (Kwak & Kim, "Gap-K%: Measuring Top-1 Prediction Gap for Detecting Pretraining
Data", ACL 2026, arXiv 2601.19936): how far each token falls below the model's top-1
prediction, in standard deviations of the log-probability at that position, smoothed over
a window of neighbouring tokens; the score is the mean of the lowest k fraction.

    g_i = (L_i - Lmax_i) / sqrt(max(var_i, 1e-8))     Lmax_i = max_v log P_i(v)
    s_j = mean(g_j .. g_{j+window-1}),  j = 1 .. n - window + 1   (s = g if n < window)
    gapk(x) = mean of the max(1, floor(k * |s|)) smallest s_j     (0.0 if n = 0)

var_i = M2_i - H_i^2 is read as TokenStats.var (the same number, computed without
cancellation). g_i <= 0, and g_i = 0 where x_i is the argmax. The floor 1e-8 is the
authors' own clamp (their wikimia.py:122), part of the formula, not a fallback.
"""

from collections.abc import Mapping, Sequence

import numpy as np

from pddkit.errors import PddkitError
from pddkit.methods.base import n_lowest, register_method
from pddkit.methods.grid import Grid
from pddkit.methods.mink import K_GRID
from pddkit.stats import Observation, TokenStats

VAR_FLOOR = 1e-8
WINDOW = 3  # the authors' default; their wikimia.sh takes 6 for LLaMA models


def gaps(t: TokenStats) -> np.ndarray:
    """[n] float64 g_i = (L_i - Lmax_i) / sqrt(max(var_i, 1e-8))."""
    if t.Lmax is None:
        raise PddkitError("gapk reads the largest log-probability at each position (Lmax), "
                          "which these statistics do not hold: compute them with a backend "
                          "that gives the full next-token distribution (hf)")
    L, Lmax, var = (np.asarray(a, dtype=np.float64) for a in (t.L, t.Lmax, t.var))
    return (L - Lmax) / np.sqrt(np.maximum(var, VAR_FLOOR))


def smoothed(g: np.ndarray, window: int) -> np.ndarray:
    """The means of every `window` consecutive values of g (numpy.convolve "valid"); g
    itself when it is shorter than the window."""
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise PddkitError(f"window must be a whole number of at least 1, not {window!r}")
    if g.shape[0] < window:
        return g
    return np.convolve(g, np.full(window, 1.0 / window), mode="valid")


def gapk_grid(observations: Sequence[Observation], params: Mapping,
              k: Sequence[float]) -> np.ndarray:
    """[N, K]: gapk at every k of the grid, at the call's own window (per text: the
    smoothed values sorted once, then a cumulative sum read at each k)."""
    window = params.get("window", WINDOW)
    out = np.zeros((len(observations), len(k)))
    for i, obs in enumerate(observations):
        if len(obs.target) == 0:
            continue
        csum = np.cumsum(np.sort(smoothed(gaps(obs.target), window)))  # [|s|]
        m = np.array([n_lowest(kk, csum.shape[0]) for kk in k])  # [K]
        out[i] = csum[m - 1] / m
    return out


@register_method("gapk", requires=("full_distribution",), reads=("Lmax",),
                 grid=Grid({"k": K_GRID}, gapk_grid, per_text=True), paper="Kwak & Kim 2026",
                 cost="no extra pass: one more float per token (Lmax) from the target pass",
                 summary="Min-K% over window means of g_i = (L_i - Lmax_i) / sqrt(M2_i - H_i^2), "
                         "the gap to the top-1 token")
def gapk(obs: Observation, *, k: float = 0.2, window: int = WINDOW) -> float:
    t = obs.target
    if len(t) == 0:
        return 0.0
    s = smoothed(gaps(t), window)
    m = n_lowest(k, s.shape[0])
    return float(np.mean(np.partition(s, m - 1)[:m]))
