"""The benchmark scripts import only what pddkit has: they import inside main() (so that
`--help` is fast), which no test runs, and a module moved by a refactor must not leave a
script that fails on its first line."""

import ast
import importlib
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).parent.parent / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_pddkit_import_resolves(script: Path):
    missing = []
    for node in ast.walk(ast.parse(script.read_text(), str(script))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pddkit"):
            try:
                module = importlib.import_module(node.module)
            except ImportError as e:
                missing.append(f"line {node.lineno}: {node.module} ({e})")
                continue
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        missing.append(f"line {node.lineno}: {node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pddkit"):
                    try:
                        importlib.import_module(alias.name)
                    except ImportError as e:
                        missing.append(f"line {node.lineno}: {alias.name} ({e})")
    assert not missing, f"{script.name}: " + "; ".join(missing)


def test_there_are_scripts_to_check():
    assert len(SCRIPTS) >= 5


def test_the_blind_scale_script_runs_at_1000_texts(tmp_path):
    """benchmarks/blind_scale.py in the fast lane: one size, its own process, one JSON line
    with the wall and CPU seconds, the peak memory and an AUC of the mild shift."""
    import json
    import subprocess
    import sys

    from conftest import shared_path

    shared = shared_path("corpora", "gutenberg").parents[1]
    out = tmp_path / "scale.jsonl"
    script = Path(__file__).parent.parent / "benchmarks" / "blind_scale.py"
    done = subprocess.run([sys.executable, str(script), "--sizes", "1000", "--shared", str(shared),
                           "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    row = json.loads(out.read_text())
    assert row["n"] == row["scored"] == 1000 and row["neighbour_search"] == "exact"
    assert row["seconds"] > 0 and row["cpu_seconds"] > 0 and row["peak_mb"] > row["rss_before_fit_mb"] > 0
    assert 0.5 < row["auc"] < 0.9 and 300 < row["members"] < 700
    assert "1000" in done.stdout


@pytest.mark.slow
def test_the_infer_null_script_writes_one_line_per_cell(tmp_path):
    """benchmarks/infer_null.py on synthetic features, 12 draws at 40 texts per set: one JSON
    line per cell (2 feature kinds x 2 classifiers x 2 clippings x test and check), each
    share the count over the draws, inside its exact binomial interval, which is
    Clopper-Pearson's: the 2.5% and 97.5% points of Beta(k, n - k + 1) and Beta(k + 1, n - k)."""
    import json
    import subprocess
    import sys

    from scipy.stats import beta

    out = tmp_path / "cells.jsonl"
    script = Path(__file__).parent.parent / "benchmarks" / "infer_null.py"
    done = subprocess.run([sys.executable, str(script), "--draws", "12", "--sizes", "40",
                           "--features", "gaussian,lognormal", "--jsonl", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    cells = {(r["features"], r["classifier"], r["clip"], r["test"]) for r in rows}
    assert len(rows) == len(cells) == 16
    assert {r["clip"] for r in rows} == {"pooled", "per-set"}
    for r in rows:
        k, n = r["below_0.05"], r["draws"]
        assert n == 12 and r["n_per_set"] == 40 and r["share"] == k / n
        low = beta.ppf(0.025, k, n - k + 1) if k else 0.0
        high = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
        # 1e-9: two implementations of the same Beta quantile, each to about 1e-12
        assert r["ci95"] == pytest.approx([low, high], abs=1e-9)
    assert "lognormal (sigma 1.5)" in done.stdout
