"""Where the test suite's CPU goes: a pytest plugin that times the calls of chosen
functions (outermost calls only, process CPU time) in each pytest process, per test.

    PYTHONPATH=benchmarks .venv/bin/python -m pytest -q -n 2 --dist loadfile \
        --no-loadscope-reorder -p suite_cpu                # writes suite-cpu-<worker>.json
    .venv/bin/python benchmarks/suite_cpu.py suite-cpu-gw0.json suite-cpu-gw1.json

Each pytest process writes SUITE_CPU_DIR/suite-cpu-<worker>.json (default: the current
folder): its total CPU seconds and, per test, the seconds and calls of each function in
SUITE_CPU_FUNCTIONS ("module:function" or "module:Class.method", comma-separated; default
FUNCTIONS). The seconds are the process's CPU while the function runs (torch's and BLAS's
threads included), so a function running beside another on a thread (the blind baseline
beside a served model's passes) counts in both. Work done in child processes (a `pddkit
run` in a subprocess, the blind baseline's child, Ray actors) is not counted: only the
pytest processes' own CPU.
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import json
import os
import sys
import threading
import time
from pathlib import Path

FUNCTIONS = ("pddkit.sandbox.training:train_causal_lm",
             "pddkit.blind.baseline:BlindBaseline.cross_val_scores",
             "pddkit.engine.passes:run_passes",
             "pddkit.reporting.plots:_png")

_test: list[str | None] = [None]
_seconds: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
_calls: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
_local = threading.local()  # each thread's depth per function: only outermost calls count


def _timed(key: str, fn):
    """`fn` that adds its outermost calls' CPU seconds to the current test's `key`."""
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        depth = _local.__dict__.setdefault("depth", collections.Counter())
        depth[key] += 1
        t0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            depth[key] -= 1
            if depth[key] == 0:  # a recursive or nested call is inside its outer one
                _seconds[_test[0] or "(outside tests)"][key] += time.process_time() - t0
                _calls[_test[0] or "(outside tests)"][key] += 1
    return timed


def pytest_configure(config) -> None:
    """Wrap the functions before any test imports them by name (`from m import f`)."""
    wanted = os.environ.get("SUITE_CPU_FUNCTIONS")
    for spec in (wanted.split(",") if wanted else FUNCTIONS):
        module, _, name = spec.strip().partition(":")
        owner = importlib.import_module(module)
        *path, attr = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, attr)
        timed = _timed(spec.strip(), original)
        setattr(owner, attr, timed)
        if not path:  # modules that already imported it by name get the wrapper too
            for module_ in list(sys.modules.values()):
                names = getattr(module_, "__dict__", {})
                for k, v in list(names.items()):
                    if v is original:
                        setattr(module_, k, timed)


def pytest_runtest_setup(item) -> None:
    """The test the next calls count for."""
    _test[0] = item.nodeid


def pytest_unconfigure(config) -> None:
    """This process's figures to SUITE_CPU_DIR."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    out = Path(os.environ.get("SUITE_CPU_DIR", ".")) / f"suite-cpu-{worker}.json"
    out.write_text(json.dumps({"cpu_s": time.process_time(), "seconds": _seconds,
                               "calls": _calls}, indent=1))


def summary(paths: list[Path]) -> str:
    """Per function: CPU seconds and calls over the files, and the share of the processes'
    CPU; then the tests that spent most in each."""
    total, by_fn, calls = 0.0, collections.Counter(), collections.Counter()
    per_test: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for p in paths:
        d = json.loads(p.read_text())
        total += d["cpu_s"]
        for test, fns in d["seconds"].items():
            for fn, s in fns.items():
                by_fn[fn] += s
                per_test[fn][test] += s
                calls[fn] += d["calls"][test][fn]
    lines = [f"pytest processes' CPU: {total:.0f} s"]
    for fn, s in by_fn.most_common():
        lines.append(f"{s:8.1f} s {s / total:6.1%} {calls[fn]:5d} calls  {fn}")
        for test, t in per_test[fn].most_common(3):
            lines.append(f"{'':12}{t:7.1f} s  {test}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path, help="suite-cpu-*.json files")
    print(summary(ap.parse_args().files))


if __name__ == "__main__":
    main()
