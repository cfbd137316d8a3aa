"""The run's blind baseline (engine/blind_job.py): on a thread beside the model passes
where they leave a core idle, in a child process while a small CPU machine loads the
model, inline otherwise; the same scores, notices and errors in all three."""

import numpy as np
import pytest

from pddkit.data.samples import Sample, make_dataset
from pddkit.engine.blind_job import MANY_CORES, BlindJob, beside_the_passes, where_to_run
from pddkit.engine.config import RunConfig


def test_where_the_baseline_runs(monkeypatch):
    import os

    assert not beside_the_passes(RunConfig(model="m", device="cpu"))
    assert beside_the_passes(RunConfig(model="m", device="cuda:1"))
    assert beside_the_passes(RunConfig(model="m", backend="openai", api_base="http://x/v1", device="cpu"))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert not beside_the_passes(RunConfig(model="m"))  # auto on 2 cores: after the passes
    monkeypatch.setattr(os, "cpu_count", lambda: MANY_CORES)
    assert beside_the_passes(RunConfig(model="m"))
    assert where_to_run(RunConfig(model="m", device="cuda")) == "thread"
    assert where_to_run(RunConfig(model="m", device="cpu")) == "process"  # while the model loads
    assert where_to_run(RunConfig(model="m", device="cpu"), model_given=True) == "inline"


def _data(n=40):
    words = ["old", "ancient", "river", "castle", "new", "phone", "online", "startup", "app"]
    rng = np.random.default_rng(0)
    samples = [Sample(id=str(i), text=" ".join(rng.choice(words[:4] if i % 2 else words[4:], 12)),
                      label=i % 2) for i in range(n)]
    return make_dataset("d", samples, [])


@pytest.mark.slow
def test_thread_process_and_inline_give_the_same_scores():
    data, cfg = _data(), RunConfig(model="m", n_bootstrap=20)
    results = {}
    for where in ("thread", "process", "inline"):
        notices: list[str] = []
        job = BlindJob.start(data, cfg, None, where=where)
        assert (job._thread.ident is not None) == (where == "thread")  # started now, or when asked
        assert (job._child is not None) == (where == "process")
        results[where] = job.result(notices)
        assert job.seconds > 0
    for where in ("thread", "process"):
        np.testing.assert_array_equal(results[where].scores, results["inline"].scores)
        assert results[where].metrics == results["inline"].metrics
    assert results["inline"].metrics.auc > 0.9


@pytest.mark.slow
def test_the_childs_notices_log_lines_and_errors_reach_the_run(caplog, monkeypatch):
    import sys

    from pddkit.engine.stages import StageSkippedError

    # 1 member and 3 non-members: too few to cross-validate, the same sentence both ways
    few = make_dataset("d", [Sample(id=str(i), text=f"text {i}", label=int(i == 0)) for i in range(4)], [])
    said = []
    for where in ("process", "inline"):
        with pytest.raises(StageSkippedError) as e:
            BlindJob.start(few, RunConfig(model="m"), None, where=where).result([])
        said.append(str(e.value))
    assert said[0] == said[1] == ("the blind baseline needs at least 2 members and 2 "
                                  "non-members (2 documents of each with groups)")

    # subset b (1 member, 3 non-members) cannot be fitted on its own: the child's warning
    # is logged here, and its notice reaches the caller's list
    data = _data()
    data = make_dataset("d", [Sample(id=s.id, text=s.text, label=s.label if i < 36 else int(i == 36),
                                     subset="a" if i < 36 else "b")
                              for i, s in enumerate(data.samples)], [])
    notices: list[str] = []
    with caplog.at_level("WARNING", logger="pddkit"):
        found = BlindJob.start(data, RunConfig(model="m", n_bootstrap=20), None,
                               where="process").result(notices)
    assert found.subsets["b"] is None and found.subsets["a"] is not None
    assert notices == ["no blind baseline for subset b: the blind baseline needs at least 2 "
                       "members and 2 non-members (2 documents of each with groups)"]
    assert any(r.getMessage() == notices[0] for r in caplog.records)  # logged here, from the child

    monkeypatch.setattr(sys, "executable", "false")  # a child that dies without an answer
    cfg = RunConfig(model="m", n_bootstrap=20)
    job = BlindJob.start(_data(), cfg, None, where="process")
    with caplog.at_level("WARNING", logger="pddkit"):
        found = job.result([])  # computed here instead, said in one line
    assert "ended with code 1 and no result" in caplog.text and "computing it here" in caplog.text
    here = BlindJob.start(_data(), cfg, None, "inline").result([])
    np.testing.assert_array_equal(found.scores, here.scores)


def test_a_cancelled_child_is_gone_with_its_files():
    job = BlindJob.start(_data(400), RunConfig(model="m"), None, where="process")
    child, folder = job._child, job._dir
    job.cancel()
    assert child.poll() is not None and not folder.exists()


def test_a_job_dropped_unanswered_stops_its_child():
    import gc

    # 4,000 texts: more than a pipe holds, so the thread feeding the child is still writing
    job = BlindJob.start(_data(4000), RunConfig(model="m"), None, where="process")
    child, folder = job._child, job._dir
    del job
    gc.collect()  # e.g. a sandbox whose training failed, its jobs unasked
    assert child.poll() is not None and not folder.exists()


def test_a_job_started_before_the_run_is_taken_over_when_it_serves_it():
    """The sandbox starts each window's baseline before training (run.start_blind_early);
    the run takes it over only when it is this run's baseline: the same texts, labels
    and blind settings; otherwise it is cancelled and the run starts its own."""
    from pddkit.engine.pipeline import Given
    from pddkit.engine.prepare import HeldOut
    from pddkit.engine.run import blind_started, start_blind_early

    data, cfg = _data(), RunConfig(model="m", n_bootstrap=20)
    job = start_blind_early(data, cfg)
    assert job.where == "process" and job._child is not None
    held = HeldOut(data, ())
    assert blind_started(job)(Given(data, RunConfig(model="other", n_bootstrap=20)), held).job is job
    np.testing.assert_array_equal(job.result([]).scores,
                                  BlindJob.start(data, cfg, None, "inline").result([]).scores)
    relabelled = make_dataset("d", [Sample(s.id, s.text, 1 - s.label) for s in data.samples], [])
    for other_data, other_cfg in ((relabelled, cfg), (data, RunConfig(model="m", seed=1)),
                                  (data, RunConfig(model="m", blind_max_texts=20))):
        job = start_blind_early(data, cfg)
        child = job._child
        started = blind_started(job)(Given(other_data, other_cfg), HeldOut(other_data, ())).job
        assert started is not job and child.poll() is not None  # cancelled, a new one
        started.cancel()
    job = start_blind_early(data, cfg)
    child = job._child
    assert blind_started(job)(Given(data, RunConfig(model="m", blind=False)), held).job is None
    assert child.poll() is not None
    fresh = blind_started(None)(Given(data, cfg), held).job  # as without one
    assert fresh is not None
    fresh.cancel()
    unlabelled = make_dataset("d", [Sample(s.id, s.text) for s in data.samples], [])
    assert start_blind_early(unlabelled, cfg) is None
    assert start_blind_early(data, RunConfig(model="m", blind=False)) is None


@pytest.mark.slow
def test_no_usable_interpreter_or_answer_means_computing_here(monkeypatch, tmp_path, caplog):
    import sys

    cfg = RunConfig(model="m", n_bootstrap=20)
    here = BlindJob.start(_data(), cfg, None, "inline").result([])
    monkeypatch.setattr(sys, "executable", "")  # an embedded interpreter: Popen fails
    job = BlindJob.start(_data(), cfg, None, where="process")
    assert job.where == "inline" and job._child is None
    np.testing.assert_array_equal(job.result([]).scores, here.scores)
    echo = tmp_path / "not-python"  # exits 0 and writes no answer file
    echo.write_text("#!/bin/sh\necho hello\n")
    echo.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(echo))
    with caplog.at_level("WARNING", logger="pddkit"):
        found = BlindJob.start(_data(), cfg, None, where="process").result([])
    assert "ended with code 0 and no result" in caplog.text
    np.testing.assert_array_equal(found.scores, here.scores)


@pytest.mark.slow
def test_a_memo_hit_runs_inline(tmp_path):
    from pddkit.engine.blind_job import blind_baseline

    data = _data()
    cfg = RunConfig(model="m", n_bootstrap=20, cache=str(tmp_path / "cache"), device="cpu")
    before = BlindJob.start(data, cfg, None)
    assert before.where == "process"
    before.cancel()
    first = blind_baseline(data, cfg, None, [])  # fills the memo
    job = BlindJob.start(data, cfg, None)
    assert job.where == "inline"
    np.testing.assert_array_equal(job.result([]).scores, first.scores)
