"""Reference-model calibration (Carlini et al. 2021, sec. 6.2; Watson et al. 2022)."""

import numpy as np

from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation


@register_method("ref", needs=(Need.REFERENCE,), paper="Carlini et al. 2021",
                 summary="mean L_target - mean L_ref, each model with its own tokenizer")
def ref(obs: Observation) -> float:
    assert obs.reference is not None
    return float(np.mean(obs.target.L, dtype=np.float64)
                 - np.mean(obs.reference.L, dtype=np.float64))
