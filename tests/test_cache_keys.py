"""Cache keys that cannot collide: a model handed over in memory is named by its tensors,
library and statistics-code versions are in every key, entries written without them are
never served."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from test_cache import FakeBackend

from pddkit.backends.caching import CachingBackend
from pddkit.cache import StatsStore, text_key, weights_digest
from pddkit.cache import fingerprint as fpmod
from pddkit.cache import tensor_digest as tdmod

TEXTS = ["the quick brown fox jumps over the lazy dog", "a stitch in time saves nine",
         "the old tailor said nothing at all to the fox"]


@pytest.fixture(scope="module")
def saved_dir(tmp_path_factory):
    """A tiny GPT-2 saved to a folder: a model loaded from it names it in name_or_path."""
    from pddkit.sandbox.training import build_gpt2, train_bpe_tokenizer

    tok = train_bpe_tokenizer([" ".join(TEXTS) * 3], 300)
    d = tmp_path_factory.mktemp("saved")
    build_gpt2(tok, n_layer=1, n_embd=16, n_positions=64).save_pretrained(d)
    tok.save_pretrained(d)
    return d


def loaded(d):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(d), AutoTokenizer.from_pretrained(d)


@pytest.mark.slow
def test_a_model_changed_in_memory_after_a_cached_run_gets_new_statistics(saved_dir, tmp_path):
    import torch

    import pddkit

    model, tok = loaded(saved_dir)
    assert str(saved_dir) in model.name_or_path  # its files are findable: they must not name it

    def loss(cache):
        return pddkit.score(TEXTS, (model, tok), methods="loss", device="cpu", dtype="float32",
                            cache=None if cache is None else str(cache))["loss"]

    first = loss(tmp_path / "c")
    torch.manual_seed(1)
    with torch.no_grad():  # noise added in place: the version counters move
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    noisy = loss(tmp_path / "c")
    # noise of sd 0.5 on every weight moves losses by order 1, far outside allclose's
    # default (1e-5 relative + 1e-8): a served stale entry would be equal, not close
    assert not np.allclose(noisy, first)
    np.testing.assert_array_equal(noisy, loss(None))
    for p in model.parameters():  # a write through .data, as PEFT's merge does: no version bump
        p.data.mul_(0.5)
    halved = loss(tmp_path / "c")
    assert not np.allclose(halved, noisy)  # halved weights: order-1 changes again, as above
    np.testing.assert_array_equal(halved, loss(None))
    np.testing.assert_array_equal(loss(tmp_path / "c"), halved)  # and now a hit, the same


def test_library_and_statistics_code_versions_are_in_the_key(tmp_path, monkeypatch):
    def run(fake):
        CachingBackend(fake, StatsStore.open(tmp_path)).stats_for_ids([[1, 2, 3]], [False])
        gc.collect()
        return len(fake.calls)

    assert run(FakeBackend()) == 1 and run(FakeBackend()) == 0  # stored, then a hit
    monkeypatch.setattr(fpmod, "STATS_CODE_VERSION", fpmod.STATS_CODE_VERSION + 1)
    assert run(FakeBackend()) == 1  # the statistics code changed: a miss
    real = fpmod.library_versions()
    assert set(real) == {"torch", "transformers"} and real["torch"]
    for lib in real:
        monkeypatch.setattr(fpmod, "library_versions", lambda lib=lib: {**real, lib: "0.0.1"})
        assert run(FakeBackend()) == 1, lib  # another torch / transformers: a miss


def test_entries_written_without_versions_are_not_served(tmp_path):
    fake = FakeBackend()
    old = fake.stats_for_ids([[4, 5]], [False])[0]
    with StatsStore.open(tmp_path) as store:  # as pddkit wrote them before: the bare fingerprint
        store.put(text_key(fake.fp, [4, 5]), old, fingerprint=fake.fp)
    fresh = FakeBackend()
    out = CachingBackend(fresh, StatsStore.open(tmp_path)).stats_for_ids([[4, 5]], [False])
    assert len(fresh.calls) == 1 and out[0].ids.tolist() == [4, 5]


def module_with_buffers():
    import torch

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(64, 64)
            self.register_buffer("scale", torch.ones(64), persistent=False)  # not in state_dict
            self.lin_again = self.lin  # shared: hashed once, named twice

    torch.manual_seed(0)
    return Scaled()


def test_every_tensor_is_hashed_non_persistent_buffers_included():
    import torch

    m = module_with_buffers()
    digest = weights_digest(m)
    assert digest.startswith("tensors:") and weights_digest(m) == digest
    with torch.no_grad():
        m.scale[3] = 2.0  # not in the state_dict, but it changes what the model computes
    assert weights_digest(m) != digest
    names = [n for n, _ in tdmod.named_tensors(m)]
    assert "buffer:scale" in names and "parameter:lin_again.weight" in names


def test_the_digest_is_remembered_while_the_tensors_are_unchanged(monkeypatch):
    import torch

    hashed = []
    real = tdmod._digest
    monkeypatch.setattr(tdmod, "_digest", lambda t: hashed.append(1) or real(t))
    m = module_with_buffers()
    d0 = tdmod.tensor_digest(m)
    assert tdmod.tensor_digest(m) == d0 and len(hashed) == 1  # remembered
    with torch.no_grad():
        m.lin.weight[0, 0] += 1.0  # in place: the version counter moves
    d1 = tdmod.tensor_digest(m)
    assert d1 != d0 and len(hashed) == 2
    m.lin.weight.data.add_(0.25)  # through .data: no version bump, the byte sample changes
    d2 = tdmod.tensor_digest(m)
    assert d2 not in (d0, d1) and len(hashed) == 3
    m.lin.bias = torch.nn.Parameter(m.lin.bias.detach().clone())  # another tensor, same values
    assert tdmod.tensor_digest(m) == d2 and len(hashed) == 4
    tdmod.forget(m)
    assert tdmod.tensor_digest(m) == d2 and len(hashed) == 5
    assert tdmod.tensor_digest(m.to(torch.bfloat16)) != d2  # bf16 bytes are read too


def test_a_model_made_in_inference_mode_is_hashed_on_every_call(monkeypatch):
    import torch

    hashed = []
    real = tdmod._digest
    monkeypatch.setattr(tdmod, "_digest", lambda t: hashed.append(1) or real(t))
    with torch.inference_mode():  # its tensors keep no version counter
        m = torch.nn.Linear(8, 8)
    assert tdmod.tensor_digest(m) == tdmod.tensor_digest(m) and len(hashed) == 2


@pytest.mark.slow
def test_a_backend_reused_after_its_model_changed_names_the_new_weights(saved_dir):
    """A backend built once around a handed-over model and passed to several runs: its
    fingerprint follows the tensors, not the first value it gave."""
    import torch

    from pddkit.backends.hf import HFBackend
    from pddkit.backends.hf_loading import LoadedModel

    model, tok = loaded(saved_dir)
    backend = HFBackend(LoadedModel(model.eval(), tok, str(saved_dir), "cpu", "float32"))
    before = backend.fingerprint()
    assert backend.fingerprint() == before  # unchanged tensors: the same name
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    assert backend.fingerprint() != before
