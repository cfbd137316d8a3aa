"""Neighbour texts per parameter set (NeighborSets) and what decides them besides the
masked LM (NeighborParams): what neighbors.py generates and reads back, neighbor_files.py
reads from other formats, and the `neighbor` method and the engine pass on."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

FORMAT = "pddkit-neighbors/2"


class NeighborParams(NamedTuple):
    """What decides a text's neighbours besides the masked LM; n_neighbors only slices."""

    top_k: int
    dropout: float
    seed: int

    @classmethod
    def of(cls, params: Mapping) -> NeighborParams:
        return cls(int(params["top_k"]), float(params["dropout"]), int(params["seed"]))

    def label(self) -> str:
        return f"top_k={self.top_k}, dropout={self.dropout:g}, seed={self.seed}"


@dataclass(frozen=True)
class NeighborSets:
    """Neighbour texts per parameter set: `texts[params][i]` = text i's neighbours, best
    first, generated for `n_generated[params]` (the largest n_neighbors asked for with
    those parameters; a call asking for fewer takes the first ones)."""

    texts: dict[NeighborParams, tuple[tuple[str, ...], ...]]
    n_generated: dict[NeighborParams, int]
    mask_model: str

    def save(self, path: str | Path, ids: Sequence[str]) -> Path:
        """OUTPUT/neighbors.jsonl: one line per (text, parameter set), reusable with
        --neighbors."""
        path = Path(path)
        with path.open("w") as fh:
            for params, per_text in self.texts.items():
                for sid, nbs in zip(ids, per_text):
                    fh.write(json.dumps({
                        "format": FORMAT, "id": sid, "params": params._asdict(),
                        "n_neighbors": self.n_generated[params], "mask_model": self.mask_model,
                        "neighbors": list(nbs)}) + "\n")
        return path
