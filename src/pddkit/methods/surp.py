"""SURP (Zhang & Wu, "Adaptive Pre-training Data Detection for Large Language Models via
Surprising Tokens", arXiv 2407.21248, sec. 3): mean log-probability of "surprising" tokens,
those with low entropy and low probability."""

from collections.abc import Sequence

import numpy as np

from pddkit.errors import PddkitError
from pddkit.methods.base import register_method
from pddkit.methods.grid import Grid, Padded, _percentiles
from pddkit.stats import Observation

GRID = {"entropy_threshold": tuple(0.5 * i for i in range(1, 21)),
        "k": tuple(float(10 * i) for i in range(1, 11))}


def surp_grid(P: Padded, log_freq, entropy_threshold: Sequence[float],
              k: Sequence[float]) -> np.ndarray:
    """[N, E*K] in row-major (threshold, k) order: S = {H < e, L < t_k}, with the
    fallbacks of `surprising` ({L < t_k}, then all tokens)."""
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


def surprising(L: np.ndarray, H: np.ndarray, entropy_threshold: float,
               k: float) -> tuple[np.ndarray, int]:
    """(S as a mask over the tokens, fallback level): level 0 is the paper's set
    {H < threshold, L < t_k} (t_k the k-th percentile of L, numpy's linear interpolation);
    level 1, none of the tokens below t_k has low entropy: S = {L < t_k}; level 2, no token
    is below t_k (one token, all L equal, or k = 0): S = every token."""
    if not 0 <= k <= 100:
        raise PddkitError(f"k is a percentile and must be in [0, 100], not {k}")
    low = L < np.percentile(L, k)
    chosen = low & (H < entropy_threshold)
    if chosen.any():
        return chosen, 0
    if low.any():
        return low, 1
    return np.ones_like(low), 2


def _arrays(obs: Observation) -> tuple[np.ndarray, np.ndarray]:
    return (np.asarray(obs.target.L, dtype=np.float64), np.asarray(obs.target.H, dtype=np.float64))


def surp_fallback(obs: Observation, *, entropy_threshold: float = 2.0,
                  k: float = 40.0) -> str | None:
    """Which of surp's fallbacks scored `obs` (None: the paper's token set was not empty)."""
    level = surprising(*_arrays(obs), entropy_threshold, k)[1]
    if level == 1:
        return (f"have no token with entropy below {entropy_threshold:g} among their tokens "
                f"below the {k:g}th percentile of log-probability: scored by the mean "
                "log-probability of those low tokens instead")
    if level == 2:
        return (f"have no token below the {k:g}th percentile of their log-probabilities "
                "(one token, or all equal): scored by the mean log-probability of all tokens")
    return None


@register_method("surp", requires=("full_distribution",), grid=Grid(GRID, surp_grid),
                 paper="Zhang & Wu 2024", fallback=surp_fallback,
                 summary="mean L_i over tokens with H_i < threshold and L_i < k-th percentile")
def surp(obs: Observation, *, entropy_threshold: float = 2.0, k: float = 40.0) -> float:
    L, H = _arrays(obs)
    chosen, _ = surprising(L, H, entropy_threshold, k)
    return float(L[chosen].mean())
