"""Benchmark registry: `--benchmark NAME[:k=v,...]` -> labelled Dataset."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pddkit.data.jsonl import load_jsonl
from pddkit.data.records import rows_to_dataset
from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError
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


WIKIMIA_LENGTHS = (32, 64, 128, 256)


@register_benchmark("wikimia", "WikiMIA (Shi et al. 2024): Wikipedia events before 2017 vs after 2023")
def wikimia(data_dir: str | Path | None, on_invalid: str, *, length: int = 32) -> Dataset:
    if length not in WIKIMIA_LENGTHS:
        raise PddkitError(f"wikimia length must be one of {WIKIMIA_LENGTHS}, not {length}")
    fname = f"WikiMIA_length{length}"
    if data_dir is not None:
        path = Path(data_dir) / f"{fname}.jsonl"
        if not path.is_file():
            raise PddkitError(f"`data_dir` {data_dir} has no {fname}.jsonl")
        return load_jsonl(path, on_invalid=on_invalid, name=f"wikimia:length={length}")
    rows = _hub_rows("swj0419/WikiMIA", split=fname)
    return rows_to_dataset(((i, dict(r)) for i, r in enumerate(rows, start=1)),
                           f"wikimia:length={length}", f"swj0419/WikiMIA {fname}",
                           on_invalid=on_invalid)


def _hub_rows(repo: str, split: str):
    try:
        import datasets
    except ImportError:
        raise PddkitError(
            f"loading {repo} from the hub needs `pip install pddkit[hub]`; or download it and "
            "pass `data_dir`"
        ) from None
    try:
        return datasets.load_dataset(repo, split=split)
    except Exception as e:  # network, missing split, ...
        raise PddkitError(
            f"could not load {repo} split {split} from the hub ({type(e).__name__}); "
            "offline users pass `data_dir` with the JSONL files"
        ) from None
