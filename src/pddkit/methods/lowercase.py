"""Lowercase calibration (Carlini et al. 2021, sec. 6.2): minus the ratio of log-perplexities."""

import numpy as np

from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation

_TINY = 1e-12  # keeps the ratio finite if every lowercased token had probability 1


def lowercase_fallback(obs: Observation) -> str | None:
    """A lower-cased span with mean log-probability 0 (every token certain): the
    denominator is floored at -_TINY."""
    assert obs.lower is not None
    if float(np.mean(obs.lower.L, dtype=np.float64)) < -_TINY:
        return None
    return (f"have a lower-cased text whose mean log-probability is 0: the ratio's denominator "
            f"is floored at -{_TINY:g}")


@register_method("lowercase", needs=(Need.LOWERCASE,), text_requires=("letter_case",),
                 paper="Carlini et al. 2021", fallback=lowercase_fallback,
                 summary="-(mean L(text) / mean L(text.lower()))")
def lowercase(obs: Observation) -> float:
    assert obs.lower is not None
    mean_text = float(np.mean(obs.target.L, dtype=np.float64))
    mean_lower = min(float(np.mean(obs.lower.L, dtype=np.float64)), -_TINY)
    return -(mean_text / mean_lower)
