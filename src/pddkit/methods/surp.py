"""SURP (Zhang & Wu 2024, sec. 3, ../shared/papers/surp-surprising-tokens.txt): mean
log-probability of "surprising" tokens, those with low entropy and low probability."""

import numpy as np

from pddkit.errors import PddkitError
from pddkit.methods.base import register_method
from pddkit.stats import Observation


@register_method("surp", requires=("full_distribution",), paper="Zhang & Wu 2024",
                 summary="mean L_i over tokens with H_i < threshold and L_i < k-th percentile")
def surp(obs: Observation, *, entropy_threshold: float = 2.0, k: float = 40.0) -> float:
    if not 0 <= k <= 100:
        raise PddkitError(f"k is a percentile and must be in [0, 100], not {k}")
    L = np.asarray(obs.target.L, dtype=np.float64)
    H = np.asarray(obs.target.H, dtype=np.float64)
    t = np.percentile(L, k)  # linear interpolation, numpy's default
    low = L < t
    chosen = low & (H < entropy_threshold)
    if not chosen.any():
        chosen = low
    if not chosen.any():
        return float(L.mean())
    return float(L[chosen].mean())
