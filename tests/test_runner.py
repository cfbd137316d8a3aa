"""The statistics pass on a real (tiny, trained) model: exactness and invariances."""

import numpy as np
import pytest
from rounding import EPS32, forward_bounds

from pddkit.backends.hf_loading import load_model
from pddkit.backends.stats_pass import StatsRunner
from pddkit.errors import PddkitError


def _ids(lm, text):
    return lm.tokenizer(text, add_special_tokens=False)["input_ids"]


def test_matches_full_softmax_and_chunking_does_not_matter(toy_lm, toy_world):
    """Against the model's own forward with weights and softmax in float64, one text at a
    time: within the float32 rounding measured on these texts (tests/rounding.py)."""
    texts = toy_world.members[:3] + toy_world.nonmembers[:3]
    small = StatsRunner(toy_lm, batch_size=4, chunk_bytes=1).run(texts)  # one position a chunk
    big = StatsRunner(toy_lm, batch_size=4).run(texts)
    exact, bound = forward_bounds(toy_lm.model, toy_lm.tokenizer.eos_token_id,
                                  [_ids(toy_lm, t) for t in texts])
    for text, a, b, e in zip(texts, small, big, exact):
        assert a.ids.tolist() == _ids(toy_lm, text)
        assert np.all(np.abs(a.L - e.L) <= bound.L)
        assert np.all(np.abs(a.H - e.H) <= bound.H)
        assert np.all(np.abs(a.var - e.var) <= bound.var_rel * e.var)
        # M2 = var + H^2: its float32 rounding is relative, a few spacings (4 EPS32), on top
        # of what var and H carry
        m2 = e.var + e.H ** 2
        assert np.all(np.abs(a.M2 - m2) <= bound.var_rel * e.var + 2 * e.H * bound.H
                      + 4 * EPS32 * m2)
        # one position a chunk or all in one: the same float32 arithmetic but BLAS's blocking
        # for another shape, two float32 computations of one function
        assert np.all(np.abs(a.L - b.L) <= bound.L)
        assert np.all(np.abs(a.var - b.var) <= bound.var_rel * e.var)


def test_batch_size_and_padding_side_do_not_change_statistics(toy_lm, toy_world):
    texts = toy_world.members[:20] + toy_world.nonmembers[:20]
    base = StatsRunner(toy_lm, batch_size=1).run(texts)
    # two float32 computations of one function (another batch shape, padding, mask): within
    # the float32 rounding measured on these texts (tests/rounding.py)
    exact, bound = forward_bounds(toy_lm.model, toy_lm.tokenizer.eos_token_id,
                                  [st.ids.tolist() for st in base])
    for bs in (32, 7):
        for side in ("right", "left"):
            other = StatsRunner(toy_lm, batch_size=bs, padding_side=side).run(texts)
            for a, b, e in zip(base, other, exact):
                assert np.array_equal(a.ids, b.ids)
                assert np.all(np.abs(b.L - a.L) <= bound.L)
                assert np.all(np.abs(b.H - a.H) <= bound.H)
                assert np.all(np.abs(b.var - a.var) <= bound.var_rel * e.var)


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
