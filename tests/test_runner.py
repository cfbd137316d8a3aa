"""The statistics pass on a real (tiny, trained) model: exactness and invariances."""

import numpy as np
import pytest
import torch

from pddkit.backends.hf_loading import load_model
from pddkit.backends.stats_pass import StatsRunner
from pddkit.errors import PddkitError


def naive_stats(lm, text):
    """Independent: full float64 softmax of the model's own logits, one text at a time."""
    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    x = torch.tensor([[lm.tokenizer.eos_token_id, *ids]])
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(x).logits[0, :-1].double(), -1)
    p = logp.exp()
    L = logp[torch.arange(len(ids)), torch.tensor(ids)]
    return ids, L.numpy(), (-(p * logp).sum(-1)).numpy(), (p * logp * logp).sum(-1).numpy()


def test_matches_full_softmax_and_chunking_does_not_matter(toy_lm, toy_world):
    texts = toy_world.members[:3] + toy_world.nonmembers[:3]
    small = StatsRunner(toy_lm, batch_size=4, chunk_bytes=1).run(texts)  # one position a chunk
    big = StatsRunner(toy_lm, batch_size=4).run(texts)
    for text, a, b in zip(texts, small, big):
        ids, L, H, M2 = naive_stats(toy_lm, text)
        assert a.ids.tolist() == ids
        np.testing.assert_allclose(a.L, L, atol=2e-5)
        np.testing.assert_allclose(a.H, H, atol=2e-5)
        np.testing.assert_allclose(a.M2, M2, rtol=2e-5)
        np.testing.assert_allclose(a.L, b.L, atol=1e-5)  # BLAS blocking differs by shape


def test_batch_size_and_padding_side_do_not_change_statistics(toy_lm, toy_world):
    texts = toy_world.members[:20] + toy_world.nonmembers[:20]
    base = StatsRunner(toy_lm, batch_size=1).run(texts)
    for bs in (32, 7):
        for side in ("right", "left"):
            other = StatsRunner(toy_lm, batch_size=bs, padding_side=side).run(texts)
            for a, b in zip(base, other):
                assert np.array_equal(a.ids, b.ids)
                np.testing.assert_allclose(b.L, a.L, rtol=0, atol=1e-5)
                np.testing.assert_allclose(b.H, a.H, rtol=0, atol=1e-5)
                # M2 ~ 40 in float32: ulp 4e-6, so compare relatively
                np.testing.assert_allclose(b.M2, a.M2, rtol=1e-5, atol=1e-5)


def test_truncates_to_context_and_counts(toy_lm, toy_world):
    long_text = " ".join(toy_world.members[:12])  # far beyond 512 tokens
    st = StatsRunner(toy_lm, batch_size=2).run([long_text, toy_world.members[0]])
    assert st[0].truncated and len(st[0]) == 511 and not st[1].truncated
    st = StatsRunner(toy_lm, max_length=11).run([toy_world.members[0]])
    assert len(st[0]) == 10 and st[0].truncated


def test_one_token_text(toy_lm):
    st = StatsRunner(toy_lm).run(["a"])[0]
    assert len(st) == 1 and np.isfinite(st.L).all() and st.L[0] < 0


def test_text_with_no_tokens_names_the_sample(toy_lm):
    with pytest.raises(PddkitError, match=r"data\.jsonl line 4 encodes to no tokens"):
        StatsRunner(toy_lm).run([""], names=["data.jsonl line 4"])


def test_missing_model_path_is_one_sentence(tmp_path):
    with pytest.raises(PddkitError, match=r"model path .*nowhere does not exist"):
        load_model(str(tmp_path / "nowhere"))


def test_unreachable_hub_id_is_one_sentence(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PddkitError, match=r"could not load model no-such-org/no-such-model from the hub"):
        load_model("no-such-org/no-such-model", local_files_only=True)
