"""The engine against a fake backend (milliseconds, no model): the plan is the union of
the methods' needs, one provider per need, every pass through the backend once,
capability-aware skipping, and scores equal to the methods applied by hand."""

import zlib

import numpy as np
import pytest

from pddkit.backends.base import Capabilities, Encoded
from pddkit.data.samples import Dataset, Sample
from pddkit.engine.config import RunConfig
from pddkit.engine.plan import Resources, make_plan
from pddkit.engine.run import run_dataset
from pddkit.methods.base import Need
from pddkit.stats import TokenStats


class FakeBackend:
    """Words are tokens; L, H, M2 are fixed functions of the token id. Records its calls."""

    kind = "fake"

    def __init__(self, full_distribution=True, max_tokens=None):
        self.name = "fake-model"
        self.capabilities = Capabilities(full_distribution=full_distribution,
                                         hidden_states=False, local_model=False)
        self.vocab: dict[str, int] = {}
        self.words: dict[int, str] = {}
        self.calls: list[tuple[str, int]] = []
        self.max_tokens = max_tokens

    def fingerprint(self):
        return "fake"

    def encode(self, texts, names, what="statistics"):
        ids, cut = [], []
        for t in texts:
            seq = [self.vocab.setdefault(w, len(self.vocab) + 1) for w in t.split()]
            for w, i in zip(t.split(), seq):
                self.words[i] = w
            cut.append(self.max_tokens is not None and len(seq) > self.max_tokens)
            ids.append(seq[:self.max_tokens] if cut[-1] else seq)
        return Encoded(ids, cut)

    def stats_for_ids(self, ids, truncated, desc="statistics"):
        self.calls.append((desc, len(ids)))
        out = []
        for seq, cut in zip(ids, truncated):
            a = np.asarray(seq, dtype=np.int64)
            L = (-(a % 7) / 3.0 - 0.1).astype(np.float32)
            H = (a % 5 / 2.0 + 0.5).astype(np.float32)
            M2 = (H * H + 1.0).astype(np.float32)
            if not self.capabilities.full_distribution:
                H, M2 = np.full_like(L, np.nan), np.full_like(L, np.nan)
            out.append(TokenStats(a, L, H, M2, cut))
        return out

    def decode(self, ids):
        return " ".join(self.words[int(i)] for i in ids)


TEXTS = ["The Cat sat on the mat today", "a dog ran far away from Home",
         "Seven birds flew over the river", "one fish two fish red fish blue fish",
         "Rain fell on the Quiet town", "the old man and the sea", "Stars shine at night",
         "bread and butter for breakfast"]


def dataset(labels=(1, 0) * 4):
    return Dataset("fake", [Sample(f"t{i}", t, label=y, source=f"fake line {i + 1}")
                            for i, (t, y) in enumerate(zip(TEXTS, labels))])


def test_plan_is_the_union_of_needs_in_provider_order():
    plan = make_plan("loss,lowercase,mink:k=0.1,ref", Resources(reference=True))
    assert plan.needs == {Need.LOWERCASE, Need.REFERENCE}
    assert plan.passes() == [Need.LOWERCASE, Need.REFERENCE]
    assert [c.label for c in plan.calls] == ["loss", "lowercase", "mink", "ref"]
    assert make_plan("loss,mink", Resources()).passes() == []


def test_one_pass_per_need_and_scores_equal_the_methods_by_hand():
    fake = FakeBackend()
    cfg = RunConfig(model="fake", methods="loss,zlib,lowercase,mink,minkpp,surp",
                    n_bootstrap=20, blind=False)
    res = run_dataset(dataset(), cfg, model=fake)
    assert fake.calls == [("target pass", 8), ("lowercase pass", 8)]  # one batched call each
    stats = fake.stats_for_ids(fake.encode(TEXTS, TEXTS).ids, [False] * 8)
    low = fake.stats_for_ids(fake.encode([t.lower() for t in TEXTS], TEXTS).ids, [False] * 8)
    s = res.scores()
    # means of a few float32 numbers in float64, then at most a division: the same values up
    # to a summation order, a few roundings of 1e-16 relative (1e-12 said)
    np.testing.assert_allclose(s["loss"], [st.L.astype(np.float64).mean() for st in stats],
                               rtol=1e-12, atol=0)
    mean_l = [st.L.astype(np.float64).mean() for st in stats]
    np.testing.assert_allclose(s["zlib"], [m / len(zlib.compress(t.encode()))
                                           for m, t in zip(mean_l, TEXTS)], rtol=1e-12, atol=0)
    low_l = [st.L.astype(np.float64).mean() for st in low]
    np.testing.assert_allclose(s["lowercase"], [-(a / b) for a, b in zip(mean_l, low_l)],
                               rtol=1e-12, atol=0)
    assert set(res.metrics()) == {"loss", "zlib", "lowercase", "mink", "minkpp", "surp"}
    assert res.counts["tokens"]["target"] == sum(len(t.split()) for t in TEXTS)
    assert {"target_pass", "lowercase_pass", "methods", "metrics"} <= set(res.timings)


def test_truncated_text_is_scored_on_its_span():
    fake = FakeBackend(max_tokens=4)
    res = run_dataset(dataset(), RunConfig(model="fake", methods="zlib", n_bootstrap=20,
                                           blind=False), model=fake)
    span = " ".join(TEXTS[0].split()[:4])
    st = fake.stats_for_ids(fake.encode([span], ["x"]).ids, [True])[0]
    # a float64 mean of four float32 numbers over a count: a few roundings of 1e-16
    assert res.scores()["zlib"][0] == pytest.approx(st.L.astype(np.float64).mean()
                                                    / len(zlib.compress(span.encode())), rel=1e-12)
    assert res.counts["truncated"]["target"] == 8 - 1  # 'Stars shine at night' fits


def test_a_backend_without_the_full_distribution_skips_what_reads_it():
    fake = FakeBackend(full_distribution=False)
    res = run_dataset(dataset(), RunConfig(model="fake", methods="all", n_bootstrap=20,
                                           blind=False), model=fake)
    assert set(res.scores()) == {"loss", "zlib", "lowercase", "mink", "maxk"}
    text = " ".join(res.notices)
    assert "skipping minkpp" in text and "skipping surp" in text
    named = run_dataset(dataset(), RunConfig(model="fake", methods="loss,minkpp", n_bootstrap=20,
                                             blind=False), model=fake)
    assert set(named.scores()) == {"loss"} and any("minkpp" in n for n in named.notices)
    assert all(np.isfinite(v).all() for v in res.scores().values())
