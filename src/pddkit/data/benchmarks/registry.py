"""The benchmarks' registry: `register_benchmark` (each benchmark module imports it) and
`load_benchmark`; the package's __init__ imports every benchmark module."""


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
