"""`pddkit run` keeps its scores whatever an optional stage does (engine/stages.py): a
blind baseline that raises after the model pass (exit 0, every score written, the failure
one notice), texts without a word (the baseline skipped before it starts), a run stopped
during an optional stage (the scores already on disk), a report that cannot be written."""

import json

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl
from tiny_models import save_tiny_gpt2

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_gpt2(tmp_path_factory.mktemp("tiny") / "model")


def plain_loss(model_dir, texts):
    """The `loss` score by a plain forward pass: the mean log-probability, in float64 from
    the model's float32 logits, of each text token after the start token (BOS, id 0)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    out = []
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([[0, *ids]])).logits[0, :-1].double()
        logp = torch.log_softmax(logits, -1)[torch.arange(len(ids)), torch.tensor(ids)]
        out.append(float(logp.mean()))
    return np.array(out)


def _sentences(n=24):
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(WORDS, 6)) + f" number {i}" for i in range(n)]


def _run(capsys, tiny, tmp_path, texts, *extra):
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": f"t{i}", "text": t, "label": i % 2}
                                              for i, t in enumerate(texts)])
    out = tmp_path / "out"
    code, stdout, stderr = run_cli(capsys, "run", "--model", tiny, "--data", data, "--methods",
                                   "loss", "--bootstrap", 20, "--output", out, *extra)
    return code, stdout, stderr, out


def _scores(out):
    return [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]


# float32 logits over V = 289 tokens: pddkit's log-softmax sums 289 float32 terms
# (relative error at most 289 x 2^-24 = 1.7e-5 of a log-sum-exp near 6, so ~1e-4 absolute
# at worst, far less in practice); batching reorders the 16-wide matmuls (a few ulp)
LOSS_ATOL = 1e-4


def _inline(monkeypatch):
    """The blind baseline computed in this process (a 2-core machine would start a child
    process, which a monkeypatch here does not reach)."""
    from pddkit.engine import blind_job

    monkeypatch.setattr(blind_job, "where_to_run", lambda config, model_given=False: "inline")


@pytest.mark.slow
def test_a_run_whose_blind_baseline_raises_keeps_exit_0_and_all_its_scores(
        tiny, tmp_path, capsys, monkeypatch):
    from pddkit.blind.baseline import BlindBaseline

    def fails(self, texts, labels, groups=None, splits=None):
        raise ValueError("empty vocabulary; perhaps the documents only contain stop words")

    _inline(monkeypatch)
    monkeypatch.setattr(BlindBaseline, "cross_val_scores", fails)
    texts = _sentences()
    code, stdout, stderr, out = _run(capsys, tiny, tmp_path, texts)
    assert code == 0, stderr
    assert "Traceback" not in stderr + stdout
    rows = _scores(out)
    assert [r["id"] for r in rows] == [f"t{i}" for i in range(len(texts))]
    assert all("blind" not in r for r in rows)
    np.testing.assert_allclose([r["loss"] for r in rows], plain_loss(tiny, texts),
                               atol=LOSS_ATOL)
    res = json.loads((out / "results.json").read_text())
    reason = "ValueError: empty vocabulary; perhaps the documents only contain stop words"
    assert res["stages"]["blind baseline"] == {"status": "failed", "reason": reason}
    assert res["stages"]["report"] == {"status": "done"}  # the stage after it still ran
    line = f"blind baseline failed ({reason}); the scores and every other result are kept"
    assert line in res["notices"] and line in stderr
    assert res["methods"]["loss"]["metrics"]["n_members"] == 12
    assert (out / "report.html").is_file() and f"report: {out / 'report.html'}" in stdout
    assert f"Optional stages not done.** blind baseline failed: {reason}" in (
        out / "report.md").read_text()  # said at the top of the report too


@pytest.mark.slow
def test_texts_without_a_word_skip_the_blind_baseline_and_keep_exit_0(tiny, tmp_path, capsys,
                                                                      monkeypatch):
    """`1 + 2 = 3` (which ended in `ValueError: empty vocabulary` after the model pass):
    the baseline is found unfit before any model loads and never started (no child
    process); the notice comes once, with the scores."""
    from pddkit.engine.blind_job import BlindJob

    def never(*_args, **_kwargs):
        raise AssertionError("the blind baseline was started on texts without a word")

    monkeypatch.setattr(BlindJob, "start", never)
    texts = [f"{a} + {b} = {(a + b) % 10}" for a in range(1, 6) for b in range(1, 5)]
    code, _stdout, stderr, out = _run(capsys, tiny, tmp_path, texts)
    assert code == 0, stderr
    reason = ("none of the 20 texts has a word of two or more letters or digits (e.g. "
              "'1 + 1 = 2'), and the blind baseline's word n-gram models (TF-IDF, bag of "
              "words, neighbour vote) need words")
    res = json.loads((out / "results.json").read_text())
    assert res["stages"]["blind baseline"] == {"status": "skipped", "reason": reason}
    assert f"blind baseline skipped: {reason}" in res["notices"]
    assert stderr.count("blind baseline skipped") == 1
    np.testing.assert_allclose([r["loss"] for r in _scores(out)], plain_loss(tiny, texts),
                               atol=LOSS_ATOL)
    assert res["blind_baseline"] is None and "blind" not in res["methods"]


@pytest.mark.slow
def test_the_scores_are_on_disk_before_any_optional_stage(tiny, tmp_path, capsys, monkeypatch):
    """A run stopped while the blind baseline runs (Ctrl-C, a killed process) leaves its
    scores and a results.json that says which stages had not finished."""
    from pddkit.blind.baseline import BlindBaseline

    def interrupted(self, texts, labels, groups=None, splits=None):
        raise KeyboardInterrupt

    _inline(monkeypatch)
    monkeypatch.setattr(BlindBaseline, "cross_val_scores", interrupted)
    texts = _sentences()
    code, _stdout, stderr, out = _run(capsys, tiny, tmp_path, texts)
    assert code == 130 and "pddkit: aborted" in stderr  # click's Abort, as on Ctrl-C
    np.testing.assert_allclose([r["loss"] for r in _scores(out)], plain_loss(tiny, texts),
                               atol=LOSS_ATOL)
    res = json.loads((out / "results.json").read_text())
    assert res["stages"] == {"blind baseline": {"status": "pending"}}
    assert res["methods"]["loss"]["metrics"]["n_nonmembers"] == 12


@pytest.mark.slow
def test_a_report_that_cannot_be_written_is_a_notice(tiny, tmp_path, capsys, monkeypatch):
    from pddkit.reporting import report

    def broken(out_dir, title=None):
        raise RuntimeError("matplotlib backend unavailable")

    monkeypatch.setattr(report, "write_report", broken)
    code, stdout, stderr, out = _run(capsys, tiny, tmp_path, _sentences(), "--no-blind")
    assert code == 0, stderr
    res = json.loads((out / "results.json").read_text())
    reason = "RuntimeError: matplotlib backend unavailable"
    assert res["stages"] == {"report": {"status": "failed", "reason": reason}}
    assert f"report failed ({reason}); the scores and every other result are kept" in res["notices"]
    assert "report:" not in stdout and not (out / "report.html").exists()
    assert len(_scores(out)) == 24


def test_a_mistake_after_a_known_skip_is_still_one_line(tmp_path, capsys):
    """The blind baseline's skip is said with the scores, not before the model loads: a
    mistake found in between (a model folder that is not there) is the only line printed."""
    texts = [f"{a} + {b} = {(a + b) % 10}" for a in range(1, 6) for b in range(1, 5)]
    code, _stdout, stderr, _out = _run(capsys, str(tmp_path / "no-such-model"), tmp_path, texts)
    assert code == 1
    assert len(stderr.strip().splitlines()) == 1 and stderr.startswith("pddkit: error: ")
