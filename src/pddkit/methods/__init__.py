"""Detection methods: pure functions of per-token statistics, one file each."""

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

__all__ = ["METHODS", "MethodCall", "MethodSpec", "Need", "register_method", "resolve_methods"]
