"""Benchmark registry: `benchmark="NAME[:k=v,...]"` -> labelled Dataset.

One module per benchmark family below this package; each registers its loaders with
`register_benchmark`, the one place benchmarks are named. A loader is
`load(data_dir, on_invalid, *, params...) -> Dataset`: from `data_dir` (a local folder in
the release's own layout, always offline) or else from the hub (`pip install -e '.[hub]'`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pddkit.data.samples import Dataset
from pddkit.params import bind_params, parse_spec
from pddkit.registry import Registry


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    load: Callable[..., Dataset]  # load(data_dir, on_invalid, **params)
    defaults: dict
    description: str


BENCHMARKS: Registry[BenchmarkSpec] = Registry("benchmark")


def register_benchmark(name: str, description: str):
    def deco(fn: Callable[..., Dataset]) -> Callable[..., Dataset]:
        sig = inspect.signature(fn)
        defaults = {
            k: p.default for k, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY
        }
        BENCHMARKS.add(name, BenchmarkSpec(name, fn, defaults, description))
        return fn

    return deco


def load_benchmark(spec: str, data_dir: str | Path | None = None, on_invalid: str = "error"):
    """`"wikimia:length=64"` -> Dataset (from `data_dir` when given, else the hub)."""
    name, raw = parse_spec(spec)
    bench = BENCHMARKS.get(name)
    params = bind_params(f"benchmark {name}", bench.defaults, raw)
    return bench.load(data_dir, on_invalid, **params)


def _load_all() -> None:
    """Import every benchmark module (each registers itself)."""
    from pddkit.data.benchmarks import (  # noqa: F401
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


_load_all()
