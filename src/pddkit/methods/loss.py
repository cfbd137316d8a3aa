"""LOSS attack (Yeom et al. 2018; Carlini et al. 2021): mean token log-likelihood."""

import numpy as np

from pddkit.methods.base import register_method
from pddkit.stats import Observation


@register_method("loss", paper="Yeom et al. 2018", summary="mean(L_i): minus the average loss")
def loss(obs: Observation) -> float:
    return float(np.mean(obs.target.L, dtype=np.float64))
