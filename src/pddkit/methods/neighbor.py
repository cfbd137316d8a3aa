"""Neighbourhood attack (Mattern et al. 2023, sec. 3): the text's likelihood against that
of texts one word away (runner/neighbors.py makes them with a masked LM).

Cost per text: one masked-LM forward over a batch of one copy per replaceable word, plus
`n_neighbors` extra target-model texts in the batched statistics pass."""

import numpy as np

from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation


@register_method("neighbor", needs=(Need.NEIGHBORS,), paper="Mattern et al. 2023",
                 summary="mean L(text) - mean over neighbours of mean L(neighbour)")
def neighbor(obs: Observation, *, n_neighbors: int = 25, top_k: int = 10, dropout: float = 0.7,
             seed: int = 0) -> float:
    """Generation parameters (n_neighbors, top_k, dropout, seed) are read by the pipeline."""
    assert obs.neighbors
    own = float(np.mean(obs.target.L, dtype=np.float64))
    return own - float(np.mean([np.mean(nb.L, dtype=np.float64) for nb in obs.neighbors]))
