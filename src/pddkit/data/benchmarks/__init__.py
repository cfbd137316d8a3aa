"""Benchmark registry: `benchmark="NAME[:k=v,...]"` -> labelled Dataset.

One module per benchmark family below this package; each registers its loaders with
`register_benchmark`, the one place benchmarks are named. A loader is
`load(data_dir, on_invalid, *, params...) -> Dataset`: from `data_dir` (a local folder in
the release's own layout, always offline) or else from the hub (`pip install -e '.[hub]'`).

The registry lives in registry.py, which each benchmark module imports; this __init__
imports them all, so BENCHMARKS is complete once the package is imported.
"""

from pddkit.data.benchmarks import (  # noqa: F401  (each module registers its loaders)
    arxivmia,
    bookmia,
    copyright_traps,
    mimir,
    olmo_detect,
    scaling_mia,
    stackmia,
    tection,
    wikimia,
    wikimia_recent,
)
from pddkit.data.benchmarks.registry import (
    BENCHMARKS,
    BenchmarkSpec,
    load_benchmark,
    register_benchmark,
)

__all__ = ["BENCHMARKS", "BenchmarkSpec", "load_benchmark", "register_benchmark"]
