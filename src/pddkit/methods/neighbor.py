"""Neighbourhood attack (Mattern et al. 2023, sec. 3): the text's likelihood against that
of texts one word away (resources/neighbors.py makes them with a masked LM).

Cost per text: one masked-LM forward over a batch of one copy per replaceable word, plus
`n_neighbors` extra target-model texts in the batched statistics pass (per distinct
(top_k, dropout, seed); calls that differ only in n_neighbors share them)."""

from collections.abc import Mapping

import numpy as np

from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation


def _neighbours(obs: Observation, n_neighbors: int, top_k: int, dropout: float,
                seed: int) -> tuple:
    """The neighbours' statistics the score averages over: the first n_neighbors."""
    from pddkit.resources.neighbor_sets import NeighborParams

    nbs = obs.neighbors
    if isinstance(nbs, Mapping):
        nbs = nbs[NeighborParams(int(top_k), float(dropout), int(seed))]
    return tuple(nbs[:n_neighbors])


def neighbor_fallback(obs: Observation, *, n_neighbors: int = 25, top_k: int = 10,
                      dropout: float = 0.7, seed: int = 0) -> str | None:
    """A text with fewer neighbours than asked for (too few replaceable words, or a
    neighbours file or data set holding fewer): scored against those it has."""
    if len(_neighbours(obs, n_neighbors, top_k, dropout, seed)) >= n_neighbors:
        return None
    return (f"have fewer than n_neighbors={n_neighbors} neighbours (too few replaceable "
            "words, or fewer given): scored against the neighbours they have")


@register_method("neighbor", needs=(Need.NEIGHBORS,), paper="Mattern et al. 2023",
                 fallback=neighbor_fallback,
                 summary="mean L(text) - mean over neighbours of mean L(neighbour)")
def neighbor(obs: Observation, *, n_neighbors: int = 25, top_k: int = 10, dropout: float = 0.7,
             seed: int = 0) -> float:
    """Neighbours: for each whole word position j of the text, the masked LM (dropout p
    on the input embedding at j only, scaled by 1/(1-p)) gives candidates c != w_j, each a
    whole word (a subword piece without the word-start marker is not a candidate), the
    top_k per position; every (j, c) pair is ranked by p_j(c) / (1 - p_j(w_j)) and the
    n_neighbors best pairs, each a single-word swap, are the neighbours.

    Score = mean L(text) - mean over neighbours of mean L(neighbour).

    `obs.neighbors` maps (top_k, dropout, seed) to the neighbours' statistics, best first
    (the pipeline generates each distinct set once, for its largest n_neighbors); the first
    n_neighbors are used. A plain tuple (hand-made observations) is used for any set. A
    text with fewer neighbours uses those it has (counted: neighbor_fallback)."""
    nbs = _neighbours(obs, n_neighbors, top_k, dropout, seed)
    assert nbs
    own = float(np.mean(obs.target.L, dtype=np.float64))
    return own - float(np.mean([np.mean(nb.L, dtype=np.float64) for nb in nbs]))
