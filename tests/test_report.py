"""Reports from a results folder, and what a headless browser shows of report.html."""

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from pddkit.cli import main
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.report import write_report
from pddkit.evaluation.results import MethodResult, RunResult


@pytest.fixture
def results_dir(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.r_[np.ones(60), np.zeros(60)].astype(int)
    methods = []
    for name, shift in (("loss", 1.5), ("mink", 2.0), ("blind", 0.8)):
        s = rng.standard_normal(120) + shift * labels
        methods.append(MethodResult(name, name, {}, s, compute_metrics(s, labels, 100)))
    r = RunResult(ids=tuple(str(i) for i in range(120)), labels=tuple(labels.tolist()),
                  methods=tuple(methods), config={"dataset": "toy", "model": "m"},
                  counts={"samples": 120}, timings={}, models={})
    return r.write(tmp_path / "res")


def test_report_files_and_content(results_dir):
    html_path, md_path = write_report(results_dir)
    html = html_path.read_text()
    assert html.count("<img") == 3 and html.count("data:image/png;base64,") == 3
    assert "<script src" not in html and "<link" not in html and "http" not in html.split(
        "<pre>")[0]  # self-contained: nothing fetched
    assert "id='metrics'" in html and "mink" in html and "▲" in html
    assert "id='blind-verdict'" in html and "prove little" in html  # blind AUC ~0.7 here
    md = md_path.read_text()
    assert "| mink | " in md and "| blind | " in md and "▲" in md
    for png in ("roc.png", "roc_loglog.png", "histograms.png"):
        assert (results_dir / png).read_bytes()[:4] == b"\x89PNG"
        assert f"]({png})" in md


def test_report_command(results_dir, tmp_path, capsys):
    assert main(["report", str(results_dir)]) == 0
    assert "report.html" in capsys.readouterr().out
    assert main(["report", str(tmp_path)]) == 1
    assert "is not a results folder: results.json is missing" in capsys.readouterr().err


def chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: `make test` installs it (Debian package chromium)")
        pytest.skip("chromium is not installed (make test installs it)")
    return exe


def test_browser_shows_images_and_table(results_dir, tmp_path):
    html_path, _ = write_report(results_dir)
    exe = chromium()
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
           "--dump-dom", html_path.resolve().as_uri()]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    m = re.search(r'data-images-decoded="(\d+)/(\d+)"', dom)
    assert m, dom[:500]
    assert m.group(1) == m.group(2) == "3"  # every image decoded with a real size
    assert dom.count("<tr") == 4 and "AUC [95% CI]" in dom
    shot = tmp_path / "shot.png"
    subprocess.run([*cmd[:-2], f"--screenshot={shot}", "--window-size=1200,2400",
                    html_path.resolve().as_uri()], capture_output=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 20000
