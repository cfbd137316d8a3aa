"""Max-K% Prob (Maini et al. 2024, "LLM Dataset Inference", one of its membership features):
the mean of the k fraction of highest token log-probabilities, Min-K%'s mirror."""

from collections.abc import Sequence

import numpy as np

from pddkit.methods.base import n_lowest, register_method
from pddkit.methods.grid import Grid, Padded, _lowest_means
from pddkit.methods.mink import K_GRID
from pddkit.stats import Observation


def mean_of_highest(values: np.ndarray, k: float) -> float:
    """Mean of the m = max(1, floor(k*n)) largest values (m as for Min-K%)."""
    v = -np.asarray(values, dtype=np.float64)
    m = n_lowest(k, v.shape[0])
    return float(-np.mean(np.partition(v, m - 1)[:m]))


def maxk_grid(P: Padded, log_freq, k: Sequence[float]) -> np.ndarray:
    """[N, K]: maxk at every k of the grid, from padded statistics."""
    return -_lowest_means(-P.L, P.n, k)


@register_method("maxk", grid=Grid({"k": K_GRID}, maxk_grid), paper="Maini et al. 2024",
                 summary="mean of the k fraction of highest token log-probabilities")
def maxk(obs: Observation, *, k: float = 0.2) -> float:
    return mean_of_highest(obs.target.L, k)
