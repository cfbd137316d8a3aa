"""batch_size="auto" (`--batch-size auto`): the largest power of two the device holds for
a batch of the longest text, found once per run by halving on out-of-memory errors."""

from __future__ import annotations

import numpy as np
import pytest

from pddkit.engine.config import RunConfig
from pddkit.errors import PddkitError

TEXTS = [f"the quick brown fox number {i} jumps over the lazy dog " * (1 + i % 3) for i in range(10)]


def backend(toy_world, size):
    from pddkit.backends.hf import HFBackend

    return HFBackend.load(str(toy_world.target_dir), device="cpu", dtype="float32", batch_size=size)


def stats(b, texts=TEXTS):
    enc = b.encode(texts, [f"t{i}" for i in range(len(texts))])
    return b.stats_for_ids(enc.ids, enc.truncated)


def test_auto_on_cpu_is_the_largest_power_of_two_up_to_the_texts_and_equals_a_fixed_size(toy_world):
    auto = backend(toy_world, "auto")
    got = stats(auto)
    assert auto.batch_size == 8 and auto.runner.batch_size == 8  # 10 texts: 8
    want = stats(backend(toy_world, 8))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.L, b.L)
        np.testing.assert_array_equal(a.H, b.H)


def test_out_of_memory_halves_until_the_longest_batch_fits(toy_world, monkeypatch):
    import torch

    from pddkit.backends.stats_pass import StatsRunner

    real = StatsRunner._batch
    tried = []

    def small_device(self, seqs, tempered=False):
        tried.append(len(seqs))
        if len(seqs) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, seqs, tempered=tempered)

    monkeypatch.setattr(StatsRunner, "_batch", small_device)
    auto = backend(toy_world, "auto")
    stats(auto)
    assert tried[:3] == [8, 4, 2] and auto.batch_size == 2
    assert max(tried[3:]) == 2  # the pass itself ran in batches of 2


def test_other_errors_are_not_taken_for_a_full_device(toy_world, monkeypatch):
    from pddkit.backends.stats_pass import StatsRunner

    def broken(self, seqs, tempered=False):
        raise RuntimeError("expected scalar type Float but found Half")

    monkeypatch.setattr(StatsRunner, "_batch", broken)
    with pytest.raises(RuntimeError, match="scalar type"):
        stats(backend(toy_world, "auto"))


@pytest.mark.parametrize("value, engine, message", [
    ("big", "local", "`batch_size` must be a whole number of at least 1 or 'auto', not 'big'"),
    (0, "local", "`batch_size` must be a whole number of at least 1 or 'auto', not 0"),
    ("auto", "ray", "the Ray engine needs a fixed `batch_size`"),
])
def test_bad_values_are_refused_before_anything_loads(value, engine, message):
    with pytest.raises(PddkitError, match=message):
        RunConfig(model="nowhere", batch_size=value, engine=engine).check()


def test_a_run_with_auto_records_what_it_used(toy_world, tmp_path):
    from pddkit.data.samples import Dataset, Sample
    from pddkit.engine.run import run_dataset

    ds = Dataset("auto", tuple(Sample(f"t{i}", t, i % 2) for i, t in enumerate(TEXTS)))
    res = run_dataset(ds, RunConfig(model=str(toy_world.target_dir), methods="loss,mink",
                                    device="cpu", batch_size="auto", n_bootstrap=20, blind=False))
    assert res.config["batch_size"] == "auto"
    assert len(res.methods[0].scores) == 10 and not np.isnan(res.methods[0].scores).any()


def test_the_cli_refuses_other_words(capsys, toy_world, tmp_path):
    from cli_helpers import run_cli

    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data",
                           toy_world.data_path, "--output", tmp_path / "out", "--batch-size", "lots")
    assert code == 1 and "neither a whole number nor auto" in err  # one line, exit 1
    assert not (tmp_path / "out").exists()
