"""Gap-K% (`gapk`, SPEC 3e): the formula against numbers worked out by hand and a plain
Python transcription written here; TokenStats.Lmax from the statistics pass against a
plain transformers forward; batch 1 against 16; the statistics cache keeping Lmax without
turning older entries into misses, except for a method that reads it; the openai backend
skipping gapk with its notice; bad hyperparameters as one sentence."""

from __future__ import annotations

import contextlib
import copy
import math

import numpy as np
import pytest
from rounding import EPS32, ROUNDING_FACTOR, float64_default, forward_bounds

import pddkit
from pddkit.backends.base import Capabilities, Encoded
from pddkit.backends.caching import CachingBackend
from pddkit.cache import StatsStore, text_key
from pddkit.engine.plan import Resources, make_plan
from pddkit.errors import PddkitError
from pddkit.methods import METHODS, register_method
from pddkit.stats import Observation, TokenStats


def gapk(stats: TokenStats, **params) -> float:
    spec = METHODS.get("gapk")
    return spec.fn(Observation("x", stats), **{**spec.defaults, **params})


def by_hand(L, Lmax, var, k: float, window: int) -> float:
    """SPEC 3e in plain Python floats (float64), one step per line of the formula."""
    g = [(a - b) / math.sqrt(max(v, 1e-8)) for a, b, v in zip(L, Lmax, var)]
    s = g  # fewer values than the window: s = g
    if len(g) >= window:
        s = [sum(g[j:j + window]) / window for j in range(len(g) - window + 1)]
    m = max(1, math.floor(k * len(s)))
    return sum(sorted(s)[:m]) / m


# ---------------------------------------------------------------- the formula

# Five positions. H = 10 and M2 = 100 everywhere, so M2 - H^2 = 0: gapk must read the
# variance the pass computes (TokenStats.var), never the cancelling difference.
# g = (L - Lmax) / sqrt(max(var, 1e-8)) = -0.5, -1.25, 0 (x_3 is the argmax), -1/1e-4 = -10000
# (var 1e-10 floored at 1e-8), -1.5.
HAND = TokenStats.from_lists([4, 9, 2, 7, 5], [-1.0, -3.0, -0.5, -2.0, -4.0], [10.0] * 5,
                             [100.0] * 5, var=[1.0, 4.0, 0.25, 1e-10, 4.0],
                             Lmax=[-0.5, -0.5, -0.5, -1.0, -1.0])


@pytest.mark.parametrize("params, want", [
    # window 3: s = (-1.75, -10001.25, -10001.5) / 3
    ({}, -10001.5 / 3),  # k = 0.2: max(1, floor(0.6)) = 1 value, the smallest
    ({"k": 0.7}, (-10001.25 - 10001.5) / 6),  # floor(2.1) = 2 values
    ({"k": 1.0}, (-1.75 - 10001.25 - 10001.5) / 9),  # all three
    ({"window": 1}, -10000.0),  # s = g; floor(0.2 * 5) = 1
    ({"window": 1, "k": 0.4}, (-10000.0 - 1.5) / 2),
    ({"window": 5}, (-0.5 - 1.25 + 0.0 - 10000.0 - 1.5) / 5),  # one window: the mean of g
    ({"window": 6}, -10000.0),  # n < window: s = g
])
def test_the_formula_on_statistics_worked_by_hand(params, want):
    # float64 arithmetic on float32-exact inputs: one square root and one division at the
    # floored position (1e-8 itself rounded to binary; three roundings of 1.1e-16 relative),
    # then sums of at most 5 terms of one sign and a division (at most 6 more): below 1e-15
    # relative; 1e-12 leaves a margin of 1000
    assert gapk(HAND, **params) == pytest.approx(want, rel=1e-12, abs=0)


def test_equals_a_plain_transcription_on_random_statistics():
    """Lengths below, at and above the window; ties with the argmax; variances below the floor."""
    rng = np.random.default_rng(3)
    for n in [*range(1, 9), 17, 60, 300]:
        L = -rng.exponential(2.0, n)
        Lmax = np.maximum(L, -rng.exponential(0.3, n))
        tie = rng.random(n) < 0.3
        Lmax[tie] = L[tie]  # some tokens are the argmax
        var = rng.exponential(1.0, n) * (rng.random(n) < 0.9) + 1e-12  # ~10% below the floor
        st = TokenStats.from_lists(np.arange(n), L, var=var, Lmax=Lmax)
        for window in (1, 3, 6):
            for k in (0.05, 0.2, 0.5, 1.0):
                want = by_hand(st.L.tolist(), st.Lmax.tolist(), st.var.tolist(), k, window)
                # one sign (g <= 0), no cancellation: numpy's convolution (sum of g/w)
                # against the sum over w (at most 7 roundings of 1.1e-16 relative), a
                # partition's mean against a sorted prefix's (at most 300 more): < 4e-14
                # relative; 1e-12
                assert gapk(st, k=k, window=window) == pytest.approx(want, rel=1e-12, abs=0), \
                    (n, window, k)


def test_no_token_scores_zero_and_the_argmax_everywhere_scores_zero():
    assert gapk(TokenStats.from_lists([], [], var=[], Lmax=[])) == 0.0
    top = TokenStats.from_lists([1, 2, 3, 4], [-0.1, -2.0, -0.3, -1.0], var=[0.5] * 4,
                                Lmax=[-0.1, -2.0, -0.3, -1.0])
    assert gapk(top) == 0.0  # every token is the argmax: g = 0 exactly


def test_the_grid_equals_the_method_at_every_k_and_the_calls_window():
    rng = np.random.default_rng(5)
    obs = []
    for n in rng.integers(1, 40, 30):
        L = -rng.exponential(2.0, n)
        obs.append(Observation("x", TokenStats.from_lists(
            np.arange(n), L, var=rng.exponential(1.0, n), Lmax=np.maximum(L, -0.2))))
    spec = METHODS.get("gapk")
    for window in (3, 6):
        got = spec.grid.scores(None, None, obs, {"k": 0.2, "window": window})  # [N, K]
        for g, point in enumerate(spec.grid.points()):
            want = [spec.fn(o, k=point["k"], window=window) for o in obs]
            # a cumulative sum of the sorted values against a partition's mean, at most 40
            # terms of one sign: < 5e-15 relative; 1e-12
            np.testing.assert_allclose(got[:, g], want, rtol=1e-12, atol=0)


def test_bad_input_is_one_sentence():
    with pytest.raises(PddkitError, match=r"^method gapk: window must be a whole number of at "
                                          r"least 1, not 0$"):
        make_plan("gapk:window=0", Resources())
    with pytest.raises(PddkitError, match=r"^method gapk: k must be in \(0, 1\], not 0.0$"):
        make_plan("gapk:k=0", Resources())
    no_lmax = TokenStats.from_lists([1, 2], [-1.0, -2.0], [1.0, 1.0], [2.0, 2.0])
    with pytest.raises(PddkitError, match="Lmax") as e:
        gapk(no_lmax)
    assert "\n" not in str(e.value) and ". " not in str(e.value)
    with pytest.raises(ValueError, match="reads unknown statistics"):
        register_method("not-a-method", reads=("Lmin",), paper="x", summary="x")


def test_what_gapk_declares():
    spec = METHODS.get("gapk")
    assert spec.defaults == {"k": 0.2, "window": 3}  # SPEC 3e
    assert spec.requires == {"full_distribution"} and spec.reads == {"Lmax"}
    assert not spec.named_only and not spec.needs  # in `all`: the single pass only
    assert "Lmax" in spec.cost  # what `pddkit list` shows beside its needs
    from pddkit.methods.base import unmet

    assert unmet(spec, Capabilities(full_distribution=False)) == (
        "skipping gapk: the backend gives only token log-probabilities, not the full "
        "next-token distribution it reads (H, M2, Lmax)")


# ---------------------------------------------------------------- the cache, on a fake backend


class LmaxBackend:
    """Deterministic statistics from ids (Lmax included); records every stats_for_ids call."""

    name = kind = "fake"
    capabilities = Capabilities()
    batch_size = 1

    def __init__(self) -> None:
        self.calls: list[list[list[int]]] = []

    def fingerprint(self) -> str:
        return "e" * 64

    def encode(self, texts, names, what="statistics") -> Encoded:
        return Encoded(ids=[[ord(c) for c in t] for t in texts], truncated=[False] * len(texts))

    def stats_for_ids(self, ids, truncated, desc="statistics") -> list[TokenStats]:
        self.calls.append([list(s) for s in ids])
        out = []
        for s, t in zip(ids, truncated):
            a = np.asarray(s, dtype=np.float64)  # [n]
            L = -np.log1p(a) / 3
            out.append(TokenStats(np.asarray(s, dtype=np.int64), L.astype(np.float32),
                                  np.sqrt(a).astype(np.float32), (a / 7).astype(np.float32), t,
                                  var=np.full(len(s), 0.5, np.float32),
                                  Lmax=np.maximum(L, -1.0).astype(np.float32)))
        return out

    def decode(self, ids) -> str:
        return "".join(map(chr, ids))


def strip_lmax(folder) -> int:
    """Rewrite every shard of a cache folder as pddkit wrote it before Lmax existed (the same
    layout less `Lmax` and `has_Lmax`); returns how many entries held Lmax."""
    held = 0
    for shard in sorted(folder.glob("shard-*.npz")):
        with np.load(shard) as z:
            held += int(z["has_Lmax"].sum())
            arrays = {k: z[k] for k in z.files if k not in ("Lmax", "has_Lmax")}
        with open(shard, "wb") as f:
            np.savez(f, **arrays)
    return held


TEXTS = ["alpha", "bravo!", "charlie", "dx", "echo", "foxtrot golf"]


def test_an_old_entry_is_a_hit_without_lmax_and_computed_again_with_it(tmp_path):
    first = LmaxBackend()
    with CachingBackend(first, StatsStore.open(tmp_path)) as cached:
        enc = cached.encode(TEXTS, TEXTS)
        want = cached.stats_for_ids(enc.ids, [False] * 6, fields={"Lmax"})
    assert strip_lmax(tmp_path) == 6  # stored with Lmax; now as an older pddkit left them

    fake = LmaxBackend()
    cached = CachingBackend(fake, StatsStore.open(tmp_path))
    old = cached.stats_for_ids(enc.ids, [False] * 6, desc="loss")  # no method reads Lmax
    assert fake.calls == [] and cached.counts() == {"loss": (6, 0)}
    assert all(st.Lmax is None for st in old)
    for a, b in zip(old, want):
        assert a.L.tobytes() == b.L.tobytes() and a.var.tobytes() == b.var.tobytes()
    key = text_key(cached.fingerprint(), enc.ids[0])
    assert cached.store.holds(key) and not cached.store.holds(key, {"Lmax"})

    new = cached.stats_for_ids(enc.ids, [False] * 6, desc="gapk", fields={"Lmax"})
    assert len(fake.calls) == 1 and sorted(map(tuple, fake.calls[0])) == sorted(map(tuple, enc.ids))
    assert cached.counts()["gapk"] == (0, 6)
    assert all(a.Lmax.tobytes() == b.Lmax.tobytes() for a, b in zip(new, want))
    assert cached.store.holds(key, {"Lmax"})  # the new entry replaced the old one (buffered)
    cached.close()
    assert len(list(tmp_path.glob("shard-*.npz"))) == 2  # the old shard and the new one

    again = LmaxBackend()
    reopened = CachingBackend(again, StatsStore.open(tmp_path))
    served = reopened.stats_for_ids(enc.ids, [False] * 6, desc="gapk", fields={"Lmax"})
    assert again.calls == [] and reopened.counts() == {"gapk": (6, 0)}
    assert all(a.Lmax.tobytes() == b.Lmax.tobytes() for a, b in zip(served, want))
    reopened.stats_for_ids(enc.ids, [False] * 6, desc="loss")
    assert again.calls == [] and reopened.counts()["loss"] == (6, 0)


@pytest.mark.parametrize("old_first", [True, False])
def test_the_entry_with_lmax_is_served_whichever_shard_sorts_first(tmp_path, old_first):
    """Shards are indexed in name order; the entry holding more fields wins either way."""
    ids = [[ord(c) for c in t] for t in TEXTS]
    with CachingBackend(LmaxBackend(), StatsStore.open(tmp_path)) as cached:
        cached.stats_for_ids(ids[:4], [False] * 4)
        fp = cached.fingerprint()
    strip_lmax(tmp_path)
    (old,) = tmp_path.glob("shard-*.npz")
    old.rename(tmp_path / ("shard-0.npz" if old_first else "shard-zzzz.npz"))
    with CachingBackend(LmaxBackend(), StatsStore.open(tmp_path)) as cached:
        cached.stats_for_ids(ids, [False] * 6, fields={"Lmax"})  # 4 old entries, 2 new
        assert cached.counts()["statistics"] == (0, 6)
    store = StatsStore.open(tmp_path)
    keys = [text_key(fp, s) for s in ids]
    assert all(store.holds(k, {"Lmax"}) for k in keys)
    got = store.get(keys, {"Lmax"})
    assert len(got) == 6 and all(st.Lmax is not None for st in got.values())
    assert len(store) == 6  # distinct texts, not entries


# ---------------------------------------------------------------- a real model


def plain_lmax(model, start_id: int, seqs, *, float64: bool = False) -> list[np.ndarray]:
    """Independent: the model's own forward on [start] + ids, one text at a time, and the
    largest log-softmax value at each position (float32, or weights and softmax in float64)."""
    import torch

    m = copy.deepcopy(model).double().eval() if float64 else model
    out = []
    with torch.no_grad(), (float64_default() if float64 else contextlib.nullcontext()):
        for ids in seqs:
            x = torch.tensor([[start_id, *[int(t) for t in ids]]])
            logits = m(input_ids=x).logits[0, :-1]
            logp = torch.log_softmax(logits.double() if float64 else logits.float(), -1)
            out.append(logp.max(-1).values.double().numpy())
    return out


def lmax_bound(model, start_id: int, seqs) -> tuple[list[np.ndarray], float]:
    """(float32 plain Lmax per text, the bound two float32 computations of Lmax are held to):
    tests/rounding.py's rule, ROUNDING_FACTOR x the float32-vs-float64 distance measured on
    these texts, at least 4 float32 spacings of the largest |Lmax|."""
    p32 = plain_lmax(model, start_id, seqs)
    p64 = plain_lmax(model, start_id, seqs, float64=True)
    worst = max(float(np.abs(a - b).max()) for a, b in zip(p32, p64))
    spacing = EPS32 * max(float(np.abs(b).max()) for b in p64)
    return p32, ROUNDING_FACTOR * max(worst, spacing)


@pytest.mark.slow
def test_lmax_of_the_pass_is_the_plain_forwards_largest_log_probability(toy_lm, toy_world):
    from pddkit.backends.stats_pass import StatsRunner

    texts = toy_world.members[:6] + toy_world.nonmembers[:6] + ["a"]
    stats = StatsRunner(toy_lm, batch_size=4).run(texts)
    start = toy_lm.tokenizer.eos_token_id  # GPT-2 shape: no BOS, EOS is the start token
    plain, bound = lmax_bound(toy_lm.model, start, [st.ids.tolist() for st in stats])
    for st, want in zip(stats, plain):
        assert st.Lmax is not None and st.Lmax.dtype == np.float32 and st.Lmax.shape == st.L.shape
        assert np.all(np.abs(st.Lmax - want) <= bound)
        # L and Lmax come from one float32 log-softmax: exactly ordered, equal at the argmax
        assert np.all(st.L <= st.Lmax) and np.all(st.Lmax <= 0)
        at_top = st.ids == st.top
        assert np.array_equal(st.L[at_top], st.Lmax[at_top])
        assert at_top.any() or len(st) < 5  # the trained toy model predicts some tokens


def gapk_bound(exact, lmax: np.ndarray, b, lmax_b: float) -> float:
    """How far one text's gapk may move when L, var and Lmax move within their bounds, first
    order (tests/rounding.py; `exact` and `lmax` the float64 statistics): g = (L - Lmax) / sd
    moves by at most (dL + dLmax) / sd + |g| dvar / (2 var); a window mean and a mean of the
    lowest by at most the largest."""
    sd = np.sqrt(np.maximum(exact.var, 1e-8))
    g = (exact.L - lmax) / sd
    return float(((b.L + lmax_b) / sd + np.abs(g) * b.var_rel / 2).max())


@pytest.mark.slow
def test_batch_1_and_16_give_the_same_lmax_and_scores(toy_lm, toy_world):
    from pddkit.backends.stats_pass import StatsRunner

    texts = toy_world.members[:10] + toy_world.nonmembers[:10]
    one = StatsRunner(toy_lm, batch_size=1).run(texts)
    many = StatsRunner(toy_lm, batch_size=16).run(texts)
    seqs = [st.ids.tolist() for st in one]
    start = toy_lm.tokenizer.eos_token_id
    plain64 = plain_lmax(toy_lm.model, start, seqs, float64=True)
    _, lmax_b = lmax_bound(toy_lm.model, start, seqs)
    for a, b in zip(one, many):
        assert np.all(np.abs(a.Lmax - b.Lmax) <= lmax_b)  # two float32 computations
    exact, bounds = forward_bounds(toy_lm.model, start, seqs)
    s1 = pddkit.score(texts, toy_lm, methods="gapk,gapk:window=6", batch_size=1)
    s16 = pddkit.score(texts, toy_lm, methods="gapk,gapk:window=6", batch_size=16)
    for i, (e, lm) in enumerate(zip(exact, plain64)):
        allowed = gapk_bound(e, lm, bounds, lmax_b)
        for label in s1:
            assert abs(s1[label][i] - s16[label][i]) <= allowed, (label, i)


@pytest.mark.slow
def test_a_cache_written_without_lmax_serves_loss_and_recomputes_for_gapk(toy_lm, toy_world,
                                                                          tmp_path):
    texts = toy_world.members[:8] + toy_world.nonmembers[:8]
    labels = [1] * 8 + [0] * 8
    cache = tmp_path / "cache"

    def run(methods):
        return pddkit.evaluate(texts, labels, toy_lm, methods, cache=str(cache), blind=False,
                               n_bootstrap=20)

    first = run("loss,gapk")
    assert first.counts["cache"]["target pass"] == {"hits": 0, "misses": 16}
    assert strip_lmax(cache) == 16  # now as a pddkit before Lmax left it
    loss = run("loss")  # reads no Lmax: every old entry is a hit
    assert loss.counts["cache"]["target pass"] == {"hits": 16, "misses": 0}
    np.testing.assert_array_equal(loss.scores()["loss"], first.scores()["loss"])
    again = run("loss,gapk")  # gapk reads Lmax: every old entry is computed again
    assert again.counts["cache"]["target pass"] == {"hits": 0, "misses": 16}
    # the same texts in the same batches as the first run: the same numbers, bit for bit
    np.testing.assert_array_equal(again.scores()["gapk"], first.scores()["gapk"])
    np.testing.assert_array_equal(again.scores()["loss"], first.scores()["loss"])
    for methods in ("gapk", "loss"):  # stored with Lmax in the old entries' place
        rerun = run(methods)
        assert rerun.counts["cache"]["target pass"] == {"hits": 16, "misses": 0}, methods
        np.testing.assert_array_equal(rerun.scores()[methods], first.scores()[methods])


@pytest.mark.slow
def test_the_openai_backend_gives_no_lmax_and_skips_gapk_with_the_notice(toy_lm, toy_world):
    from openai_server import FakeOpenAIServer

    from pddkit.backends.openai_api import OpenAIBackend

    texts = toy_world.members[:3] + toy_world.nonmembers[:3]
    with FakeOpenAIServer(toy_lm.model, name="tiny", tokenizer=toy_lm.tokenizer) as server:
        backend = OpenAIBackend("tiny", server.api_base, toy_lm.tokenizer, api_key_env=None)
        enc = backend.encode(texts[:1], ["t"])
        assert backend.stats_for_ids(enc.ids, enc.truncated)[0].Lmax is None
        res = pddkit.evaluate(texts, [1, 1, 1, 0, 0, 0], "tiny", "loss,gapk", backend="openai",
                              api_base=server.api_base, api_key_env=None,
                              tokenizer=str(toy_world.target_dir), blind=False, n_bootstrap=20)
    assert set(res.scores()) == {"loss"}
    assert ("skipping gapk: the backend gives only token log-probabilities, not the full "
            "next-token distribution it reads (H, M2, Lmax)") in res.notices
