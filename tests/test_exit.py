"""The `pddkit` executable ends with cli.app.exit_now: threads joined, atexit functions run,
streams flushed, then os._exit (no module teardown). Nothing a command leaves for the end
may be lost: the statistics cache writes its last rows from an atexit finalizer."""

import json
import os
import subprocess
import sys
import textwrap

import pytest


def test_exit_now_joins_threads_runs_atexit_and_flushes(tmp_path):
    script = textwrap.dedent(f"""
        import atexit, sys, threading, time
        from pathlib import Path
        from pddkit.cli.app import exit_now

        out = Path({str(tmp_path)!r})
        def late():
            time.sleep(0.3)
            (out / "thread").write_text("joined")
        threading.Thread(target=late).start()  # not a daemon: joined before the end
        atexit.register(lambda: (out / "atexit").write_text("ran"))
        sys.stdout.write("no newline, still buffered")
        exit_now(3)
        """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert r.returncode == 3, r.stderr
    assert r.stdout == "no newline, still buffered"
    assert (tmp_path / "thread").read_text() == "joined"
    assert (tmp_path / "atexit").read_text() == "ran"


@pytest.mark.slow
def test_the_executable_leaves_complete_files_and_a_complete_cache(toy_world, tmp_path):
    n = len(toy_world.data_path.read_text("utf-8").splitlines())
    assert n < 256  # fewer rows than the cache writes at once: they are written at exit
    cmd = [sys.executable, "-m", "pddkit", "run", "--model", str(toy_world.target_dir),
           "--data", str(toy_world.data_path), "--methods", "loss,zlib", "--device", "cpu",
           "--cache", str(tmp_path / "cache"), "--bootstrap", "50"]
    first = subprocess.run([*cmd, "--output", str(tmp_path / "a")], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "report: " in first.stdout
    results = json.loads((tmp_path / "a" / "results.json").read_text("utf-8"))
    assert results["counts"]["cache"]["target pass"] == {"hits": 0, "misses": n}
    lines = (tmp_path / "a" / "scores.jsonl").read_text("utf-8").splitlines()
    assert len(lines) == n and all(json.loads(x)["loss"] is not None for x in lines)
    assert (tmp_path / "a" / "report.html").read_text("utf-8").rstrip().endswith("</html>")
    again = subprocess.run([*cmd, "--output", str(tmp_path / "b")], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    results = json.loads((tmp_path / "b" / "results.json").read_text("utf-8"))
    assert results["counts"]["cache"]["target pass"] == {"hits": n, "misses": 0}


def test_the_executable_keeps_freed_memory_unless_told_not_to():
    code = ("import sys; from pddkit.cli.heap import keep_freed_memory; "
            "print(keep_freed_memory())")
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert on.stdout.strip() == ("True" if sys.platform.startswith("linux") else "False")
    env = {**os.environ, "PDDKIT_MALLOC": "default"}
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env)
    assert off.stdout.strip() == "False"


def test_a_profiler_still_writes_its_findings(tmp_path):
    """`python -m cProfile -o FILE -m pddkit ...` writes FILE after pddkit returns: the
    executable exits the ordinary way under a profiler."""
    prof = tmp_path / "list.prof"
    r = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "pddkit", "list"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "  loss " in r.stdout and prof.stat().st_size > 0
