"""DC-PDD (Zhang et al. 2024, EMNLP, eqs. 4-6, ../shared/papers/dc-pdd-divergence-calibration.txt):
token probability calibrated by the token's frequency in a reference corpus."""

import numpy as np

from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation


def first_occurrences(ids: np.ndarray) -> np.ndarray:
    """Sorted positions of the first occurrence of each distinct id."""
    _, first = np.unique(ids, return_index=True)
    return np.sort(first)


@register_method("dcpdd", needs=(Need.FREQUENCY,), paper="Zhang et al. 2024",
                 summary="mean over distinct tokens of min(-p(x_i) log f(x_i), a)")
def dcpdd(obs: Observation, *, a: float = 0.01) -> float:
    assert obs.log_freq is not None
    t = obs.target
    keep = first_occurrences(t.ids)
    p = np.exp(np.asarray(t.L, dtype=np.float64)[keep])
    alpha = np.minimum(-p * obs.log_freq[t.ids[keep]], a)
    return float(alpha.mean())
