"""Min-K% Prob (Shi et al. 2024, ICLR, sec. 3, ../shared/papers/min-k-prob-wikimia.txt)."""

import numpy as np

from pddkit.methods.base import n_lowest, register_method
from pddkit.stats import Observation


def mean_of_lowest(values: np.ndarray, k: float) -> float:
    """Mean of the m = max(1, floor(k*n)) smallest values."""
    v = np.asarray(values, dtype=np.float64)
    m = n_lowest(k, v.shape[0])
    return float(np.mean(np.partition(v, m - 1)[:m]))


@register_method("mink", paper="Shi et al. 2024",
                 summary="mean of the k fraction of lowest token log-probabilities")
def mink(obs: Observation, *, k: float = 0.2) -> float:
    return mean_of_lowest(obs.target.L, k)
