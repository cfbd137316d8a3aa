"""The table model and its renderers, the page builder, and the sandbox summary rebuilt
from a folder that was moved."""

import json
import re
import shutil

import numpy as np
import pytest

from pddkit.cli import main
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.results import MethodResult, RunResult
from pddkit.reporting.page import (
    CHECK,
    Config,
    Image,
    Links,
    Notice,
    Page,
    Summary,
    to_page_html,
    to_page_markdown,
    write_page,
)
from pddkit.reporting.run_files import write_run
from pddkit.reporting.table import Num, Table, best_cells, fmt, to_html, to_markdown, to_text

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


def _table(**kw):
    rows = (("loss", Num(0.81234, (0.7, 0.9)), Num(0.25)),
            ("mink", Num(0.9, (0.85, 0.95)), Num(float("nan"))),
            ("blind", Num(0.95, (0.9, 0.99)), Num(0.5)))
    base = dict(header=("method", "AUC [95% CI]", "TPR"), rows=rows, baseline=frozenset({2}),
                best=best_cells(rows, (1, 2), exclude={2}))
    return Table(**{**base, **kw})


def test_fmt_and_best_cells_skip_undefined_values_and_the_baseline():
    assert fmt(0.81234) == "0.812" and fmt(1.25, digits=1) == "1.2"
    assert fmt(None) == fmt(float("nan")) == "–" and fmt(None, missing="-") == "-"
    t = _table()
    assert t.best == {(1, 1), (0, 2)}  # blind is larger in both columns, NaN never wins
    rows = (("a", Num(None)), ("b", Num(float("nan"))))
    assert best_cells(rows, (1,)) == frozenset()
    assert best_cells((("a", Num(0.5)), ("b", Num(0.5))), (1,)) == {(0, 1)}  # first of equals
    with pytest.raises(ValueError, match="every row needs 3 cells"):
        Table(header=("a", "b", "c"), rows=(("x", "y"),))


def test_text_columns_are_aligned_and_unmarked_numbers_keep_the_mark_width():
    lines = to_text(_table(title="AUC", notes=("a note",)))
    assert lines[0] == "AUC" and lines[-1] == "a note"
    header, rule, *rows = lines[1:-1]
    starts = [m.start() for m in re.finditer(r"-+", rule)]
    assert [header[i:].split("  ")[0] for i in starts] == ["method", "AUC [95% CI]", "TPR"]
    assert rows[0] == "loss    0.812  [0.700, 0.900]  0.250*"
    assert rows[1] == "mink    0.900* [0.850, 0.950]    -"  # NaN shown as '-', trailing cut
    assert rows[2].startswith("blind   0.950  [") and "*" not in rows[2]
    for r in rows:
        assert r.index("[") == rows[0].index("[")  # the intervals line up
    assert all(line == line.rstrip() for line in lines)


def test_markdown_escapes_pipes_and_marks_best_cells():
    t = Table(header=("method", "a|b"), rows=(("x|y", Num(0.5)), ("z", Num(0.25))),
              best=frozenset({(0, 1)}), mark=" ▲", title="T", notes=("n1", "n2"))
    md = to_markdown(t)
    assert md[:2] == ["## T", ""]
    assert md[2] == "| method | a\\|b |" and md[3] == "|---|---|"
    assert md[4] == "| x\\|y | 0.500 ▲ |" and md[5] == "| z | 0.250 |"  # no padding in md
    assert md[-1] == "n1 n2"


def test_html_escapes_and_marks_best_cells_and_baseline_rows():
    t = _table(title="<AUC & co>", id="metrics", mark=" ▲",
               rows=(("<script>", Num(0.8, (0.7, 0.9)), Num(0.2)),
                     ("mink", Num(0.9, (0.85, 0.95)), Num(None)),
                     ("blind", Num(0.95, (0.9, 0.99)), Num(0.5))))
    out = to_html(t)
    assert "<h2>&lt;AUC &amp; co&gt;</h2>" in out and "<script>" not in out
    assert "<table id='metrics'>" in out and "<td>&lt;script&gt;</td>" in out
    assert "<td class='best'>0.900 ▲ [0.850, 0.950]</td>" in out
    assert "<td class='best'>0.200 ▲</td>" in out and "<td>–</td>" in out
    assert out.count("class='best'") == 2 and out.count("<tr class='baseline'><td>blind") == 1
    assert "class='metrics'" in to_html(_table(css_class="metrics"))


def test_page_builds_a_self_contained_html_and_a_markdown_with_pngs(tmp_path):
    page = Page("Run <1>", (
        Summary((("model", "gpt2 & co"), ("data", "toy"))),
        Notice(("12 texts cut", "3 more"), kind="warn", id="truncation", lead="Truncated."),
        Notice(("all fine",), kind="ok", id="blind-verdict"),
        Notice(("close call",), kind="warn"),
        Notice(("one run",), kind="verified", lead="Verified."),
        _table(title="Metrics", id="metrics"),
        Image("ROC curves", "roc.png", PNG),
        Links("Full reports", (("run, 32 words", "run/window-32/report.html"),)),
        Config({"a": "<b>"}, notices=(Notice(("cache: 3 of 4",), id="cache"),)),
    ))
    html_path, md_path = write_page(page, tmp_path)
    html, md = html_path.read_text(), md_path.read_text()
    assert html == to_page_html(page) and md == to_page_markdown(page)
    assert (tmp_path / "roc.png").read_bytes() == PNG
    assert html.startswith("<!doctype html>") and "<title>Run &lt;1&gt;</title>" in html
    assert "<link" not in html and "<script src" not in html and "http" not in html
    assert html.endswith(CHECK + "</body></html>") and html.count("<script>") == 1
    assert "<ul id='run-summary'>" in html and "<li><b>model</b>: gpt2 &amp; co</li>" in html
    assert ("<p class='warn' id='truncation'><b>Truncated.</b> 12 texts cut<br>3 more</p>"
            in html)
    assert "<p class='ok' id='blind-verdict'>all fine</p>" in html
    assert "<p class='verified'><b>Verified.</b> one run</p>" in html
    assert "src='data:image/png;base64," in html and "<img alt='ROC curves'" in html
    assert "<a href='run/window-32/report.html'>run, 32 words</a>" in html
    conf = html.split("<h2>Configuration</h2>")[1]
    assert conf.index("<p id='cache'>") < conf.index("<pre>") and "&lt;b&gt;" in conf
    assert md.startswith("# Run <1>\n") and "- **model**: gpt2 & co" in md
    assert "> **Truncated.** 12 texts cut; 3 more" in md and "> all fine" in md
    assert "> **close call**" in md and "**Verified.** one run" in md
    assert "![ROC curves](roc.png)" in md and "- [run, 32 words](run/window-32/report.html)" in md
    assert md.index("## Configuration") < md.index("cache: 3 of 4") < md.index("```json")
    with pytest.raises(TypeError, match="not a page block"):
        to_page_html(Page("x", ("a string",)))


def _window(path, shift, seed):
    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(20), np.zeros(20)].astype(int)
    methods = tuple(MethodResult(k, k, {}, s, compute_metrics(s, labels, 20))
                    for k, sh in (("loss", shift), ("blind", 0.1))
                    for s in [rng.standard_normal(40) + sh * labels])
    r = RunResult(ids=tuple(map(str, range(40))), labels=tuple(labels.tolist()),
                  methods=methods, config={"dataset": "windows"},
                  counts={"samples": 40}, timings={}, models={})
    write_run(r, path)
    ms = r.metrics()
    return {"dir": None, "texts": 40, "auc": {k: m.auc for k, m in ms.items()},
            "auc_ci": {k: [m.auc_ci.low, m.auc_ci.high] for k, m in ms.items()},
            "tpr@0.05": {k: m.tpr[0.05] for k, m in ms.items()},
            "blind_warn": r.blind.warn}


@pytest.mark.slow
@pytest.mark.parametrize("absolute", [False, True])
def test_sandbox_summary_rebuilds_from_a_moved_folder(tmp_path, absolute, capsys):
    """summary.json names window folders relative to the sandbox folder (an older one:
    absolute); links are relative and `pddkit report` works after the folder moved."""
    from pddkit.reporting.sandbox_summary import summary_text, write_summary

    out = tmp_path / "sb"
    runs = []
    for i, name in enumerate(("repeats=1", "repeats=3")):
        windows = {}
        for w in ("32", "64"):
            wdir = out / name / f"window-{w}"
            windows[w] = _window(wdir, 1 + i, seed=10 * i + int(w))
            windows[w]["dir"] = str(wdir) if absolute else f"{name}/window-{w}"
        runs.append({"name": name, "dir": name, "windows": windows})
    summary = {"ground_truth": {"line": "ground truth verified (toy)"},
               "config": {"windows": [32, 64]},
               "corpus": {"name": "toy", "documents": 8, "near_duplicates": {}},
               "sweep": {"knob": "repeats", "values": [1, 3]}, "runs": runs}
    (out / "summary.json").write_text(json.dumps(summary))
    write_summary(out, summary)
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(out, moved)
    shutil.rmtree(out)  # the old paths are gone
    assert main(["report", str(moved)]) == 0, capsys.readouterr().err
    html = (moved / "report.html").read_text()
    hrefs = re.findall(r"<a href='([^']+)'>", html)
    assert hrefs == [f"{r}/window-{w}/report.html" for r in ("repeats=1", "repeats=3")
                     for w in ("32", "64")]
    assert all((moved / h).is_file() for h in hrefs)
    assert "](repeats=3/window-64/report.html)" in (moved / "report.md").read_text()
    assert (moved / "sweep_32.png").is_file() and (moved / "sweep_64.png").is_file()
    assert "<p class='verified'><b>Ground truth verified (toy).</b></p>" in html
    assert html.count("<table class='metrics'>") == 2 and "<tr class='baseline'>" in html
    assert "AUC by repeats, 64-word windows" in html and "class='best'" in html
    text = summary_text(summary)
    assert text.startswith("ground truth verified (toy)\n\nAUC by repeats, 32-word windows")
    blind_row = next(line for line in text.splitlines() if line.startswith("blind"))
    assert "*" not in blind_row and "loss" in text
