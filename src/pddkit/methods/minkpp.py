"""Min-K%++ (Zhang et al. 2025, ICLR): token log-prob standardised by the model's
own distribution, z_i = (L_i - mu_i) / sigma_i with mu_i = -H_i, sigma_i^2 = M2_i - H_i^2,
read as TokenStats.var (the same number, computed by the backend without cancellation)."""

from collections.abc import Sequence

import numpy as np

from pddkit.methods.base import n_lowest, register_method
from pddkit.methods.grid import Grid, Padded, _lowest_means
from pddkit.methods.mink import K_GRID, mean_of_lowest
from pddkit.stats import Observation

VAR_FLOOR = 1e-12


def zscores(L: np.ndarray, H: np.ndarray, var: np.ndarray) -> np.ndarray:
    L, H, var = (np.asarray(a, dtype=np.float64) for a in (L, H, var))
    return (L + H) / np.sqrt(np.maximum(var, VAR_FLOOR))


def minkpp_grid(P: Padded, log_freq, k: Sequence[float]) -> np.ndarray:
    """[N, K]: minkpp at every k of the grid, from padded statistics (NaN padding stays NaN)."""
    return _lowest_means(zscores(P.L, P.H, P.var), P.n, k)


def minkpp_fallback(obs: Observation, *, k: float = 0.2) -> str | None:
    """A text whose lowest-k z-scores include a token with a (near) one-point predicted
    distribution: its variance is floored at VAR_FLOOR, so its z-score is not the paper's."""
    t = obs.target
    var = np.asarray(t.var, dtype=np.float64)
    floored = var < VAR_FLOOR
    if not floored.any():
        return None
    z = zscores(t.L, t.H, var)
    m = n_lowest(k, z.shape[0])
    if not floored[np.argpartition(z, m - 1)[:m]].any():
        return None
    return (f"have a token among their lowest k={k:g} z-scores whose predicted distribution has "
            f"variance below {VAR_FLOOR:g}: its variance is floored at {VAR_FLOOR:g}")


@register_method("minkpp", requires=("full_distribution",), grid=Grid({"k": K_GRID}, minkpp_grid),
                 paper="Zhang et al. 2025", fallback=minkpp_fallback,
                 summary="Min-K% over z_i = (L_i + H_i) / sqrt(M2_i - H_i^2)")
def minkpp(obs: Observation, *, k: float = 0.2) -> float:
    t = obs.target
    return mean_of_lowest(zscores(t.L, t.H, t.var), k)
