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
            Lmax = np.full_like(L, -0.1)  # the top-1 log-probability (gapk): L's largest value
            if not self.capabilities.full_distribution:
                H, M2, Lmax = np.full_like(L, np.nan), np.full_like(L, np.nan), None
            out.append(TokenStats(a, L, H, M2, cut, Lmax=Lmax))
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


ARITHMETIC = ["1 + 2 = 3", "4 - 1 = 3", "2 * 3 = 6", "8 / 4 = 2", "5 + 1 = 6", "9 - 7 = 2",
              "3 * 3 = 9", "6 / 2 = 3"]


def _mean_l(fake, texts):
    """The loss score by hand: the fake backend's mean token log-probability per text."""
    stats = fake.stats_for_ids(fake.encode(texts, texts).ids, [False] * len(texts))
    return [st.L.astype(np.float64).mean() for st in stats]


def test_a_blind_baseline_that_raises_is_a_notice_and_the_scores_are_kept(monkeypatch):
    """The blind baseline fails after the model pass (as `empty vocabulary` did): the run
    returns, its scores and metrics are the methods' by hand, and the failure is one
    notice naming the stage and the reason; the caller got the scores before it ran."""
    from pddkit.blind.baseline import BlindBaseline

    events = []

    def fails(self, texts, labels, groups=None, splits=None):
        events.append("blind")
        raise ValueError("empty vocabulary; perhaps the documents only contain stop words")

    monkeypatch.setattr(BlindBaseline, "cross_val_scores", fails)
    fake = FakeBackend()
    seen = []
    res = run_dataset(dataset(), RunConfig(model="fake", methods="loss,zlib", n_bootstrap=20),
                      model=fake, on_scored=lambda r: (events.append("scored"), seen.append(r)))
    assert events == ["scored", "blind"]  # the scores went out first
    np.testing.assert_allclose(seen[0].scores()["loss"], _mean_l(FakeBackend(), TEXTS))
    assert seen[0].stages == {"blind baseline": {"status": "pending"}}
    np.testing.assert_allclose(res.scores()["loss"], _mean_l(FakeBackend(), TEXTS))
    assert set(res.scores()) == {"loss", "zlib"} and set(res.metrics()) == {"loss", "zlib"}
    reason = "ValueError: empty vocabulary; perhaps the documents only contain stop words"
    assert res.stages == {"blind baseline": {"status": "failed", "reason": reason}}
    assert res.notices == (f"blind baseline failed ({reason}); the scores and every other "
                           "result are kept",)
    saved = res.to_dict()
    assert saved["stages"]["blind baseline"]["status"] == "failed"
    assert saved["notices"] == list(res.notices) and saved["blind_baseline"] is None


def test_texts_without_a_word_skip_the_blind_baseline_before_it_starts(monkeypatch, caplog):
    """`1 + 2 = 3`: no word of two or more letters or digits for the baseline's word
    n-grams; it is never started, and the run says so once, before the model pass."""
    from pddkit.engine import blind_job

    def never(*args, **kwargs):
        raise AssertionError("the blind baseline was started")

    monkeypatch.setattr(blind_job.BlindJob, "start", classmethod(never))
    data = Dataset("arith", [Sample(f"t{i}", t, label=i % 2) for i, t in enumerate(ARITHMETIC)])
    fake = FakeBackend()
    with caplog.at_level("WARNING", logger="pddkit"):
        res = run_dataset(data, RunConfig(model="fake", methods="loss", n_bootstrap=20), model=fake)
    reason = ("none of the 8 texts has a word of two or more letters or digits (e.g. "
              "'1 + 2 = 3'), and the blind baseline's word n-gram models (TF-IDF, bag of "
              "words, neighbour vote) need words")
    assert res.stages == {"blind baseline": {"status": "skipped", "reason": reason}}
    assert res.notices == (f"blind baseline skipped: {reason}",)
    assert [r.getMessage() for r in caplog.records] == [res.notices[0]]  # said once
    np.testing.assert_allclose(res.scores()["loss"], _mean_l(FakeBackend(), ARITHMETIC))
    assert res.metrics()["loss"].n_members == 4
    # one member: no folds to cross-validate with, also known before it starts
    one = run_dataset(dataset(labels=(1,) + (0,) * 7),
                      RunConfig(model="fake", methods="loss", n_bootstrap=20), model=FakeBackend())
    assert one.stages == {"blind baseline": {"status": "skipped", "reason": (
        "the blind baseline needs at least 2 members and 2 non-members (2 documents of each "
        "with groups)")}}


def test_each_optional_stage_is_guarded_the_same_way():
    """A stage that fails, one that does not apply, one found inapplicable before: each a
    notice naming it; the stages after them still run and what they add is kept."""
    from dataclasses import replace

    from pddkit.engine.stages import Stage, StageSkippedError, run_stages
    from pddkit.evaluation.results import RunResult

    base = RunResult(ids=("a",), labels=None, methods=(), config={}, counts={}, timings={},
                     models={})

    def boom(r):
        raise KeyError("documents")

    def not_here(r):
        raise StageSkippedError("no document ids")

    def adds(r):
        return replace(r, timings={**r.timings, "added": 1.0})

    started = []
    out = run_stages(base, [Stage("first", boom), Stage("second", not_here),
                            Stage("third", adds, skip="known before"), Stage("fourth", adds)],
                     on_start=started.append)
    assert [s.stages for s in started] == [{"first": {"status": "pending"},
                                            "second": {"status": "pending"},
                                            "third": {"status": "skipped", "reason": "known before"},
                                            "fourth": {"status": "pending"}}]
    assert out.stages == {"first": {"status": "failed", "reason": "KeyError: 'documents'"},
                          "second": {"status": "skipped", "reason": "no document ids"},
                          "third": {"status": "skipped", "reason": "known before"},
                          "fourth": {"status": "done"}}
    # the one known before is said first, with the scores (on_start)
    assert out.notices == ("third skipped: known before", "first failed (KeyError: "
                           "'documents'); the scores and every other result are kept",
                           "second skipped: no document ids")
    assert out.timings == {"added": 1.0}  # the fourth ran; the third, skipped, did not
