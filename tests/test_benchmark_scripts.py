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


# benchmarks/gpu.sh --smoke: how far the shared key/value paths may be from the plain passes
# in float32 on the CPU. Both compute the same numbers in another order (the prefix's keys and
# values in one row instead of each text's, a cache instead of the whole sequence, other
# padding and batch shapes, so other matmul blocking). A float32 dot product of K terms summed
# in another order moves by at most K * 2^-24 of the terms' absolute sum: K <= 256 (the
# tiny model's widest reduction, its MLP), terms summing to about 1 in absolute value (unit-
# scale hidden values, weights of std 0.11): 1.5e-5 per reduction; a logit goes through ~4 of
# them on the way (2 layers' attention and MLP, the head): 6e-5, and L = logit - logsumexp
# moves by at most twice a logit's error: 1.2e-4, rounded up to 2e-4. H moves by at most
# max |d logit| * sum_v p_v |log p_v + H| <= the distribution's sd (about 0.9 here) times a
# logit's error: also below 2e-4. (Seen: 2e-6.)
KV_TOL_LH = 2e-4
# recall's score LL(x | P) / LL(x): |LL(x)| >= 6 for these texts (mean log-probabilities near
# -log 1000 = -6.9, only the numerator differs between the paths)
KV_TOL_RECALL = KV_TOL_LH / 6
# infill's score, a mean of the lowest r_i, moves by at most max |d r_i|; r_i sums over up to
# 1 + lookahead = 6 positions z = (L + H) / sd of the variant (the text's own z is the same
# target pass in both): |dz| <= (|dL| + |dH|) / sd + |z| * |d sd| / sd with sd >= 0.8 and
# |z| <= 4 on this model, |d sd| <= 2e-4 as H's: 7.5 * KV_TOL_LH per position, 45 in all
KV_TOL_INFILL = 45 * KV_TOL_LH


@pytest.mark.slow
def test_the_gpu_script_runs_its_code_paths_on_the_cpu(tmp_path):
    """benchmarks/gpu.sh --smoke: the statistics pass against a bare forward and both shared
    key/value paths against their plain passes, on a tiny Llama-3-shaped model on the CPU:
    every figure present and finite, the token counts those of the sizes given, the shared
    paths' scores within the float32 tolerances above of the plain passes' (and of the
    float32 reference, which in float32 is the plain pass again on other batches)."""
    import json
    import math
    import os
    import subprocess
    import sys

    script = Path(__file__).parent.parent / "benchmarks" / "gpu.sh"
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", str(script), "--smoke"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    r = json.loads((tmp_path / "gpu.json").read_text())

    def finite(x, where):
        if isinstance(x, dict):
            for k, v in x.items():
                finite(v, f"{where}.{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                finite(v, f"{where}[{i}]")
        elif isinstance(x, float):
            assert math.isfinite(x), where

    finite(r, "gpu.json")
    meta = r["meta"]
    assert meta["smoke"] is True and meta["failed_steps"] == [] and meta["torch"] and meta["transformers"]
    assert [s["name"] for s in meta["steps"]] == ["stats-tiny-llama", "prefix-tiny-llama",
                                                  "infill-tiny-llama"]
    assert all(s["rc"] == 0 and s["seconds"] >= 0 for s in meta["steps"])

    s = r["stats_pass"]["tiny-llama"]
    bare, stats = s["runs"]["bare"], s["runs"]["stats"]
    for run in (bare, stats):
        # 32 texts of 24..40 random tokens; vocabulary 1,000
        assert run["texts"] == 32 and 32 * 24 <= run["tokens"] <= 32 * 40 and run["vocab"] == 1000
        assert run["seconds"] > 0 and run["peak_rss_mb"] > 0
    assert bare["tokens"] == stats["tokens"]
    assert s["stats_over_bare"] == pytest.approx(stats["seconds"] / bare["seconds"], rel=1e-12)

    p = r["prefix_kv"]["tiny-llama"]
    plain, shared = p["runs"]["plain"], p["runs"]["shared"]
    n = plain["text_tokens"]
    assert plain["texts"] == shared["texts"] == 16 and 16 * 24 <= n <= 16 * 40
    assert shared["text_tokens"] == n
    assert plain["tokens_run"] == n + 16 * (64 + 1)  # [start] + P + x for each text
    assert shared["tokens_run"] == n + 64  # P once ([start] + P[:-1], then P[-1] with each text)
    assert p["max_abs_diff_L"] <= KV_TOL_LH and p["max_abs_diff_H"] <= KV_TOL_LH
    assert p["max_abs_diff_score"] <= KV_TOL_RECALL
    assert p["max_abs_diff_LL_given_prefix"] <= KV_TOL_LH
    assert p["reference_texts"] == 2
    assert p["shared_vs_float32_max_abs_diff_score"] <= KV_TOL_RECALL
    assert p["plain_vs_float32_max_abs_diff_score"] <= KV_TOL_RECALL
    assert p["within_check_atol"] is True and p["score_sd_across_texts"] > 0
    assert p["pddkit_check_keeps_shared"] is True  # its atol 1e-3 is 5x KV_TOL_LH

    f = r["infill_kv"]["tiny-llama"]
    plain, shared = f["runs"]["plain"], f["runs"]["shared"]
    n = plain["text_tokens"]
    assert plain["texts"] == 4 and 4 * 16 <= n <= 4 * 24
    # random weights: the argmax is a given token with probability ~1/1000, so nearly every
    # position has a variant (more than 8 of ~80 positions without one: below 1e-13)
    assert n - 8 <= plain["variants"] == shared["variants"] <= n
    assert shared["tokens_run"] < plain["tokens_run"]
    assert f["max_abs_diff_L"] <= KV_TOL_LH and f["max_abs_diff_H"] <= KV_TOL_LH
    assert f["max_abs_diff_score"] <= KV_TOL_INFILL
    assert f["shared_vs_float32_max_abs_diff_score"] <= KV_TOL_INFILL
    assert f["plain_vs_float32_max_abs_diff_score"] <= KV_TOL_INFILL
    assert f["score_sd_across_texts"] > 0 and f["pddkit_check_keeps_shared"] is True

    # what comes back from a device machine: at most 8 files; the three the script writes
    assert sorted(x.name for x in tmp_path.iterdir()) == ["gpu-logs.txt", "gpu.json", "gpu.md"]
    assert "===== infill-tiny-llama" in (tmp_path / "gpu-logs.txt").read_text()
    md = (tmp_path / "gpu.md").read_text()
    assert "cpu (smoke" in md and meta["torch"] in md and "tiny-llama" in md
    assert "| infill-tiny-llama | 0 |" in md


def test_the_suite_cpu_plugin_counts_outer_calls_per_test(tmp_path):
    """benchmarks/suite_cpu.py inside a pytest run of two tests: one calls `burn` twice (each
    call recursing once: two outer calls), the other never; `burn` spins for 0.2 s of
    process CPU, so the first test's seconds lie between 0.4 s and what its calls could
    take at most. `spin` is counted too, though a module imported it by name before the
    plugin wrapped it (`early`, which the folder's conftest.py imports: conftests load
    before pytest_configure): the plugin rebinds such names."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "burnmod.py").write_text(
        "import time\n"
        "def burn(inner=True):\n"
        "    if inner:\n"
        "        return burn(False)\n"
        "    t = time.process_time()\n"
        "    while time.process_time() - t < 0.2:\n"
        "        pass\n"
        "def spin():\n"
        "    burn(False)\n")
    (tmp_path / "early.py").write_text("from burnmod import spin\n")
    (tmp_path / "conftest.py").write_text("import early  # noqa\n")
    (tmp_path / "test_two.py").write_text(
        "import burnmod\n"
        "from burnmod import burn\n"
        "def test_burns():\n    burn(); burnmod.burn()\n"
        "def test_idle():\n    assert True\n"
        "def test_early():\n    import early\n    early.spin()\n")
    bench = Path(__file__).parent.parent / "benchmarks"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(bench), str(tmp_path)]),
           "SUITE_CPU_FUNCTIONS": "burnmod:burn,burnmod:spin", "SUITE_CPU_DIR": str(tmp_path)}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu", "-p",
                           "no:randomly", "-p", "no:cacheprovider", "test_two.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((tmp_path / "suite-cpu-main.json").read_text())
    assert data["calls"] == {"test_two.py::test_burns": {"burnmod:burn": 2},
                             "test_two.py::test_early": {"burnmod:spin": 1, "burnmod:burn": 1}}
    seconds = data["seconds"]["test_two.py::test_burns"]["burnmod:burn"]
    assert 0.4 <= seconds < 0.4 + 0.2 and data["cpu_s"] > seconds
    text = subprocess.run([sys.executable, str(bench / "suite_cpu.py"),
                           str(tmp_path / "suite-cpu-main.json")],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    assert "3 calls  burnmod:burn" in text and "1 calls  burnmod:spin" in text
    assert "test_two.py::test_burns" in text
