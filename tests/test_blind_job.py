"""The run's blind baseline (engine/blind_job.py): beside the model passes on a thread
where they leave a core idle, after them otherwise; the same scores either way."""

import numpy as np
import pytest

from pddkit.data.samples import Sample, make_dataset
from pddkit.engine.blind_job import MANY_CORES, BlindJob, beside_the_passes
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


@pytest.mark.slow
def test_thread_and_inline_give_the_same_scores():
    words = ["old", "ancient", "river", "castle", "new", "phone", "online", "startup", "app"]
    rng = np.random.default_rng(0)
    samples = [Sample(id=str(i), text=" ".join(rng.choice(words[:4] if i % 2 else words[4:], 12)),
                      label=i % 2) for i in range(40)]
    data = make_dataset("d", samples, [])
    cfg = RunConfig(model="m", n_bootstrap=20)
    results = []
    for background in (True, False):
        notices: list[str] = []
        job = BlindJob.start(data, cfg, None, background=background)
        assert (job._thread.ident is not None) == background  # started now, or when asked
        results.append(job.result(notices))
    a, b = results
    np.testing.assert_array_equal(a.scores, b.scores)
    assert a.metrics.auc == b.metrics.auc > 0.9
