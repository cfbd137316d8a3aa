"""Detection methods: pure functions of per-token statistics, one file each.

The registry, `register_method` and the types a method is declared with live in
methods/base.py, which every method module imports; this package's __init__ is the catalogue:
it imports every built-in method module (each registers itself), so `METHODS` is complete
once `pddkit.methods` (or any module below it) is imported, and nothing in this package
imports it back. `grids()` reads every registered method's validation grid (methods/grid.py
holds the machinery).

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache, backends, corpus, data.builders and resources.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from pddkit.methods import (  # noqa: F401  (each module registers its method)
    acmia,
    camia,
    dcpdd,
    decop,
    emmia,
    fsd,
    gapk,
    infill,
    loss,
    lowercase,
    maxk,
    mink,
    minkpp,
    neighbor,
    ngram,
    pac,
    probe,
    recall,
    reference,
    samia,
    surp,
    zlib_ratio,
)
from pddkit.methods.base import (
    METHODS,
    MethodCall,
    MethodSpec,
    Need,
    register_method,
    resolve_methods,
)
from pddkit.methods.grid import Grid, Padded


def grids() -> dict[str, Grid]:
    """Every registered method's grid, by method name."""
    return {m.name: m.grid for m in METHODS if m.grid is not None}


# Compatibility names (the engine before grids lived beside their methods): thin readers
# of the registry, no copy of the values. New code reads MethodSpec.grid.

class _GridValues(Mapping):
    """GRIDS[method] -> {parameter: [values]}, read from the registry on each access."""

    def __getitem__(self, method: str) -> dict[str, list[float]]:
        return {k: list(v) for k, v in grids()[method].values.items()}

    def __iter__(self) -> Iterator[str]:
        return iter(grids())

    def __len__(self) -> int:
        return len(grids())


GRIDS: Mapping[str, dict[str, list[float]]] = _GridValues()


def grid_points(method: str) -> list[dict]:
    """Compatibility: `METHODS.get(method).grid.points()`."""
    return grids()[method].points()


def grid_scores(method: str, P: Padded, log_freq: np.ndarray | None = None) -> np.ndarray:
    """Compatibility: `METHODS.get(method).grid.scores(P, log_freq)`."""
    return grids()[method].scores(P, log_freq)


__all__ = ["GRIDS", "METHODS", "MethodCall", "MethodSpec", "Need", "grid_points", "grid_scores",
           "grids", "register_method", "resolve_methods"]
