"""zlib calibration (Carlini et al. 2021, "Extracting training data from LLMs", sec. 6.2)."""

import zlib

import numpy as np

from pddkit.methods.base import register_method
from pddkit.stats import Observation


def zlib_size(text: str) -> int:
    """Z = len(zlib.compress(text.encode("utf-8"))) at zlib's default level."""
    return len(zlib.compress(text.encode("utf-8")))


@register_method("zlib", paper="Carlini et al. 2021",
                 summary="mean(L_i) / zlib-compressed size of the text in bytes")
def zlib_ratio(obs: Observation) -> float:
    return float(np.mean(obs.target.L, dtype=np.float64) / zlib_size(obs.text))
