"""Reports from a results folder, and what a headless browser shows of report.html."""

import json
import subprocess

import numpy as np
import pytest
from browser import browser_command, rendered

from pddkit.cli import main
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.results import MethodResult, RunResult
from pddkit.reporting.report import write_report
from pddkit.reporting.run_files import write_run


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
    return write_run(r, tmp_path / "res")


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


@pytest.mark.slow
def test_browser_shows_images_and_table(results_dir, tmp_path):
    html_path, _ = write_report(results_dir)
    dom = rendered(html_path, tmp_path / "profile", images=3)  # every image decoded, real size
    cmd = browser_command(html_path, tmp_path / "profile")
    assert dom.count("<tr") == 4 and "AUC [95% CI]" in dom
    shot = tmp_path / "shot.png"
    subprocess.run([*cmd[:-2], f"--screenshot={shot}", "--window-size=1200,2400",
                    html_path.resolve().as_uri()], capture_output=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 20000


def _run(tmp_path, counts=None, models=None, n_methods=2, **config):
    """A hand-made labelled run written to a results folder (milliseconds)."""
    rng = np.random.default_rng(1)
    labels = np.r_[np.ones(20), np.zeros(20)].astype(int)
    methods = [MethodResult(f"m{i}", "loss", {}, s, compute_metrics(s, labels, 20))
               for i in range(n_methods)
               for s in [rng.standard_normal(40) + (1 + i / 4) * labels]]
    counts = counts or {"samples": 40, "members": 20, "nonmembers": 20, "skipped": 0,
                        "truncated": {"target": 0}}
    models = {"target": {"name": "EleutherAI/pythia-1.4b", "backend": "hf"}} \
        if models is None else models
    r = RunResult(ids=tuple(f"t{i}" for i in range(40)), labels=tuple(labels.tolist()),
                  methods=tuple(methods), config={"dataset": "WikiMIA-32", **config},
                  counts=counts, timings={}, models=models)
    return write_run(r, tmp_path / "res")


def _head(html: str) -> str:
    return html.split("id='metrics'")[0]  # everything above the metrics table


def test_report_header_names_models_data_and_counts(tmp_path):
    counts = {"samples": 40, "members": 20, "nonmembers": 20, "skipped": 3, "limited_from": 776,
              "truncated": {"target": 0, "reference": 0},
              "cache": {"target pass": {"hits": 30, "misses": 10}}}
    models = {"reference": {"name": "EleutherAI/pythia-70m", "backend": "hf"},
              "target": {"name": "EleutherAI/pythia-1.4b", "backend": "openai"},
              "frequency_table": {"path": "freq.npz", "tokenizer": "gpt2",
                                  "total_tokens": 1234567}}
    html_path, md_path = write_report(_run(tmp_path, counts, models))
    head, md = _head(html_path.read_text()), md_path.read_text().split("| method")[0]
    for text in (head, md):
        assert "target EleutherAI/pythia-1.4b (backend openai)" in text
        assert text.index("target EleutherAI") < text.index("reference EleutherAI/pythia-70m")
        assert "frequency table freq.npz (tokenizer gpt2, 1,234,567 tokens)" in text
        assert "WikiMIA-32" in text
        assert "40 texts (20 members, 20 non-members), 3 skipped" in text
        assert "of 776 texts (limit)" in text
        assert "Truncated" not in text  # all zero: no notice
    html = html_path.read_text()
    conf = html.split("<h2>Configuration</h2>")[1]
    assert "statistics cache: target pass: 30 of 40 texts from the cache" in conf
    assert "from the cache" in md_path.read_text().split("## Configuration")[1]


def test_report_truncation_notice_near_the_top(tmp_path):
    counts = {"samples": 40, "members": 20, "nonmembers": 20, "skipped": 0,
              "truncated": {"target": 12, "lowercase": 0, "neighbors": 5},
              "neighbor_texts": 400}
    html_path, md_path = write_report(_run(tmp_path, counts))
    head = _head(html_path.read_text())
    assert "id='truncation'" in head and "class='warn' id='truncation'" in head
    assert ("12 of 40 texts were longer than the context and were scored on their first "
            "tokens (target pass)") in head
    assert "5 of 400 neighbour texts" in head and "lowercase pass" not in head
    md_head = md_path.read_text().split("| method")[0]
    assert "**Truncated texts.**" in md_head and "12 of 40 texts" in md_head
    assert "cache" not in html_path.read_text().split("<h2>Configuration</h2>")[1].split(
        "<pre>")[0]  # no cache used: no cache line


def test_report_plots_only_the_test_part_when_validating(tmp_path, monkeypatch):
    from pddkit.reporting import plots

    out = _run(tmp_path)
    rows = [json.loads(r) for r in (out / "scores.jsonl").read_text().splitlines()]
    for i, r in enumerate(rows):
        r["split"] = "val" if i % 4 == 0 else "test"
    (out / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen = []
    real = plots.roc_png
    monkeypatch.setattr(plots, "roc_png", lambda y, s, loglog: seen.append(len(y)) or real(
        y, s, loglog))
    write_report(out)
    assert seen == [30, 30]


def _scores(n_methods, n=40, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(n // 2), np.zeros(n // 2)].astype(int)
    names = ["blind" if i == n_methods - 1 else f"method{i}" for i in range(n_methods)]
    return labels, {k: rng.standard_normal(n) + (i % 4) * 0.4 * labels
                    for i, k in enumerate(names)}


@pytest.mark.parametrize("loglog", [False, True])
def test_roc_legend_has_auc_and_sits_outside_the_axes(loglog):
    from sklearn.metrics import roc_auc_score

    from pddkit.evaluation.metrics import weighted_roc
    from pddkit.reporting import plots

    labels, scores = _scores(12)
    fig = plots.roc_figure(labels, scores, loglog=loglog)
    try:
        ax = fig.axes[0]
        legend = ax.get_legend()
        texts = [t.get_text() for t in legend.get_texts()]
        table = {k: float(weighted_roc(s, labels, np.ones((1, len(s))))[0][0]) for k, s in scores.items()}
        assert texts == [f"{k} (AUC {table[k]:.3f})" for k in scores]  # as in the metrics table
        for k, s in scores.items():
            # ratios of pair counts in float64 (weights of 1): a few hundred roundings of
            # 1.1e-16 at most, 1e-12 absolute said
            assert table[k] == pytest.approx(roc_auc_score(labels, s), abs=1e-12)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        box, area = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert box.x0 >= area.x1 or box.y1 <= area.y0  # right of the axes or below them
        assert not box.overlaps(area)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_palette_distinct_for_twelve_methods_and_colour_blind_safe():
    from matplotlib.colors import to_hex

    from pddkit.reporting import plots

    names = [f"method{i}" for i in range(12)] + ["blind"]
    styles = plots.method_styles(names)
    pairs = [(to_hex(v["color"]), str(v["linestyle"])) for v in styles.values()]
    assert len(set(pairs)) == len(pairs) == 13
    colours = {to_hex(v["color"]) for k, v in styles.items() if k != "blind"}
    assert colours <= {to_hex(c) for c in plots.OKABE_ITO}
    greyish = {"#808080", "#a52a2a", "#800080", "#7f7f7f", "#8c564b", "#9467bd"}
    assert not colours & greyish  # grey, brown and purple (hard to tell apart) are gone
    # the same method keeps its style whether or not the blind baseline is plotted
    assert plots.method_styles(names[:12]) == {k: styles[k] for k in names[:12]}


def _unlabelled(scores: dict, blind=None):
    methods = [MethodResult(k, k, {}, np.asarray(s, dtype=float)) for k, s in scores.items()]
    if blind is not None:
        methods.append(MethodResult("blind", "blind", {}, np.asarray(blind, dtype=float)))
    n = len(next(iter(scores.values())))
    return RunResult(ids=tuple(f"doc-{i}" for i in range(n)), labels=None,
                     methods=tuple(methods), config={"dataset": "mine"},
                     counts={"samples": n, "skipped": 0, "truncated": {"target": 1}},
                     timings={}, models={})


def test_unlabelled_summary_top_ids_by_mean_rank():
    from pddkit.evaluation.ranking import member_ranking
    from pddkit.reporting.terminal import scored_line, unlabelled_summary

    #            doc-0 doc-1 doc-2 doc-3 doc-4
    a = [0.1, 0.9, 0.5, 0.7, np.nan]  # ranks 4 1 3 2 5
    b = [10., 30., 40., 20., 0.]      # ranks 4 2 1 3 5
    r = _unlabelled({"loss": a, "mink": b}, blind=[9, 9, 9, 9, 9])  # blind: not ranked
    order, mean = member_ranking(r)
    assert order.tolist() == [1, 2, 3, 0, 4]  # mean ranks 1.5, 2, 2.5, 4, 5
    assert mean.tolist() == [1.5, 2.0, 2.5, 4.0, 5.0]
    texts = ["short", "  member\n text " + "x" * 100, "c", "d", "e"]
    out = unlabelled_summary(r, top=3, texts=texts)
    lines = out.splitlines()
    assert "mean rank over 2 methods" in out and "top 3 of 5" in out
    top = [line.split()[1] for line in lines if line[:1].isdigit()]
    assert top == ["doc-1", "doc-2", "doc-3"]
    assert "member text xxx" in out and "x" * 60 not in out and "…" in out
    stats = {line.split()[0]: line.split()[1:] for line in lines
             if line.startswith(("loss", "mink"))}
    assert stats["loss"] == ["0.550", "0.600", "0.100", "0.900"]  # NaN left out
    assert stats["mink"] == ["20.000", "20.000", "0.000", "40.000"]
    assert "blind" not in out
    assert scored_line(r) == ("scored 5 texts with 2 methods (1 truncated, 0 skipped, "
                              "plus the blind baseline)")
    ids_only = unlabelled_summary(_unlabelled({"loss": a}), top=10)
    assert "by the loss score" in ids_only and "top 5 of 5" in ids_only
    assert [line.split()[1] for line in ids_only.splitlines() if line[:1].isdigit()] == [
        "doc-1", "doc-3", "doc-2", "doc-0", "doc-4"]
    assert "text" not in ids_only.splitlines()[-6]  # no text column without texts


def test_metrics_table_does_not_count_blind_as_a_method():
    from pddkit.reporting.terminal import metrics_table

    rng = np.random.default_rng(0)
    labels = np.r_[np.ones(30), np.zeros(30)].astype(int)
    blind = rng.standard_normal(60) + 5 * labels  # best in every column: must not be starred
    loss = rng.standard_normal(60) + labels
    methods = tuple(MethodResult(k, k, {}, s, compute_metrics(s, labels, 20))
                    for k, s in (("loss", loss), ("blind", blind)))
    r = RunResult(ids=tuple(map(str, range(60))), labels=tuple(labels.tolist()), methods=methods,
                  config={}, counts={"samples": 60}, timings={}, models={})
    table = metrics_table(r)
    blind_row = next(line for line in table.splitlines() if line.startswith("blind"))
    assert "*" not in blind_row and "blind baseline excluded" in table
