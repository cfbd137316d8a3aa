"""Min-K% Prob (Shi et al., "Detecting Pretraining Data from Large Language Models", ICLR 2024,
arXiv 2310.16789, sec. 3): the mean of the max(1, floor(k*n)) lowest token log-probabilities."""

from collections.abc import Sequence

import numpy as np

from pddkit.methods.base import n_lowest, register_method
from pddkit.methods.grid import Grid, Padded, _lowest_means
from pddkit.stats import Observation

K_GRID = tuple(round(0.05 * i, 2) for i in range(1, 21))  # 0.05 ... 1.0


def mean_of_lowest(values: np.ndarray, k: float) -> float:
    """Mean of the m = max(1, floor(k*n)) smallest values."""
    v = np.asarray(values, dtype=np.float64)
    m = n_lowest(k, v.shape[0])
    return float(np.mean(np.partition(v, m - 1)[:m]))


def mink_grid(P: Padded, log_freq, k: Sequence[float]) -> np.ndarray:
    """[N, K]: mink at every k of the grid, from padded statistics."""
    return _lowest_means(P.L, P.n, k)


@register_method("mink", grid=Grid({"k": K_GRID}, mink_grid), paper="Shi et al. 2024",
                 summary="mean of the k fraction of lowest token log-probabilities")
def mink(obs: Observation, *, k: float = 0.2) -> float:
    return mean_of_lowest(obs.target.L, k)
