"""The run is the list of its stages (engine/run.py STAGES, engine/pipeline.py): a stage
replaced or added through pipeline.replaced / inserted is what run_dataset runs, in its
place, and what it gives is what the stages after it read; a list out of order is refused
before anything runs; a stage that raises undoes what the stages before it started (the
blind baseline's job). Against the fake backend of test_engine.py (milliseconds, no model)."""

from dataclasses import replace

import numpy as np
import pytest
from test_engine import TEXTS, FakeBackend, dataset

from pddkit.engine.config import RunConfig
from pddkit.engine.pipeline import RunStage, inserted, replaced
from pddkit.engine.run import STAGES, run_dataset


def config(blind=False):
    return RunConfig(model="fake", methods="loss,zlib", n_bootstrap=0, blind=blind)


# labels for which loss and zlib have AUCs away from 1/2 on the fake statistics
LABELS = (1, 1, 0, 0, 1, 0, 1, 0)


def test_a_replaced_scores_stage_is_what_the_metrics_and_the_caller_read():
    """Scores negated by a stand-in for the scores stage: the metrics stage measures the
    negated scores (AUC 1 - AUC), and on_scored receives them."""
    from pddkit.engine.run import Scored

    base = run_dataset(dataset(LABELS), config(), model=FakeBackend())
    original = next(s.run for s in STAGES if s.name == "scores")

    def negated(passed):
        got = original(passed)
        table = replace(got.table, scores={k: -v for k, v in got.table.scores.items()})
        return Scored(table, got.notices)

    written = []
    res = run_dataset(dataset(LABELS), config(), model=FakeBackend(), on_scored=written.append,
                      stages=replaced(STAGES, "scores", negated))
    for label, scores in base.scores().items():
        np.testing.assert_array_equal(res.scores()[label], -scores)
        np.testing.assert_array_equal(written[0].scores()[label], -scores)
        # AUC(-s) = 1 - AUC(s) exactly (ties count one half either way); two roundings
        # of a number in [0, 1] in float64 apart: 1e-12 leaves room
        assert base.metrics()[label].auc != pytest.approx(0.5, abs=0.05)  # a change is seen
        assert res.metrics()[label].auc == pytest.approx(1 - base.metrics()[label].auc,
                                                         abs=1e-12)


def test_an_inserted_stage_runs_in_its_place_and_changes_nothing_else():
    """A stage after the passes sees the target pass done and no scores handed over yet;
    the caller's on_scored comes after it; the result is that of the plain list."""
    fake = FakeBackend()
    events = []

    def look(passed):
        events.append(("look", list(fake.calls), len(passed.context.fields["target"])))
        return "looked"

    stages = inserted(STAGES, RunStage("look", look, ("passed",), "seen"), after="passes")
    res = run_dataset(dataset(LABELS), config(), model=fake, stages=stages,
                      on_scored=lambda r: events.append(("scored", len(r.ids))))
    assert events == [("look", [("target pass", 8)], 8), ("scored", 8)]
    plain = run_dataset(dataset(LABELS), config(), model=FakeBackend())
    for label, scores in plain.scores().items():
        np.testing.assert_array_equal(res.scores()[label], scores)
    assert res.notices == plain.notices and res.stages == plain.stages


def test_a_stage_list_out_of_order_is_refused_before_anything_runs():
    fake = FakeBackend()
    names = [s.name for s in STAGES]
    i, j = names.index("hold out"), names.index("passes")
    swapped = list(STAGES)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    with pytest.raises(ValueError, match="stage 'passes' reads held, which no stage before "
                                         "it gives"):
        run_dataset(dataset(LABELS), config(), model=fake, stages=swapped)
    assert fake.calls == []
    with pytest.raises(ValueError, match="no stage is named 'score'"):
        replaced(STAGES, "score", lambda passed: None)
    with pytest.raises(ValueError, match="two stages are named 'passes'"):
        run_dataset(dataset(LABELS), config(), model=fake,
                    stages=inserted(STAGES, STAGES[names.index("passes")], after="passes"))


def test_a_stage_that_raises_cancels_the_blind_baseline_it_started(monkeypatch):
    """The blind baseline starts before the passes; a later stage that raises cancels it
    (its result is never asked for) and the error reaches the caller as it was."""
    from pddkit.engine import blind_job

    monkeypatch.setattr(blind_job, "where_to_run", lambda config, model_given=False: "inline")
    seen = []
    monkeypatch.setattr(blind_job.BlindJob, "cancel", lambda self: seen.append("cancel"))
    monkeypatch.setattr(blind_job.BlindJob, "result",
                        lambda self, notices: pytest.fail("the blind baseline was asked for"))

    def fails(*_values):
        raise KeyError("broken")

    fake = FakeBackend()
    labelled = dataset(LABELS)
    assert len(TEXTS) == len(labelled.samples) == 8  # 4 members, 4 non-members: it can start
    with pytest.raises(KeyError, match="broken"):
        run_dataset(labelled, config(blind=True), model=fake,
                    stages=replaced(STAGES, "metrics", fails))
    assert seen == ["cancel"] and fake.calls == [("target pass", 8)]
