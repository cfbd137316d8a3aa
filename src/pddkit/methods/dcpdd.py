"""DC-PDD (Zhang et al., "Pretraining Data Detection for Large Language Models: A Divergence-based
Calibration Method", EMNLP 2024, arXiv 2409.14781, eqs. 4-6): token probability calibrated by
the token's frequency in a reference corpus."""

from collections.abc import Sequence

import numpy as np

from pddkit.methods.base import Need, register_method
from pddkit.methods.grid import Grid, Padded
from pddkit.stats import Observation

A_GRID = (0.001, 0.01, 0.1, 1.0, 10.0)


def first_occurrences(ids: np.ndarray) -> np.ndarray:
    """Sorted positions of the first occurrence of each distinct id."""
    _, first = np.unique(ids, return_index=True)
    return np.sort(first)


def dcpdd_grid(P: Padded, log_freq: np.ndarray, a: Sequence[float]) -> np.ndarray:
    """[N, A]: dcpdd at every cap a of the grid, from padded statistics."""
    assert log_freq is not None, "dcpdd's grid needs the frequency table"
    first = np.zeros_like(P.ids, dtype=bool)  # first occurrence of each id in each row
    for i in range(P.ids.shape[0]):
        _, idx = np.unique(P.ids[i, :P.n[i]], return_index=True)
        first[i, idx] = True
    v = np.where(first, -np.exp(np.where(first, P.L, 0.0)) * log_freq[np.maximum(P.ids, 0)], 0.0)
    cnt = first.sum(1)
    return np.stack([np.where(first, np.minimum(v, x), 0.0).sum(1) / cnt for x in a], axis=1)


@register_method("dcpdd", needs=(Need.FREQUENCY,), grid=Grid({"a": A_GRID}, dcpdd_grid),
                 paper="Zhang et al. 2024",
                 summary="mean over distinct tokens of min(-p(x_i) log f(x_i), a)")
def dcpdd(obs: Observation, *, a: float = 0.01) -> float:
    assert obs.log_freq is not None
    t = obs.target
    keep = first_occurrences(t.ids)
    p = np.exp(np.asarray(t.L, dtype=np.float64)[keep])
    alpha = np.minimum(-p * obs.log_freq[t.ids[keep]], a)
    return float(alpha.mean())
