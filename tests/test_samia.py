"""`samia` (Kaneko et al. 2024, SPEC 3b): ROUGE-1 recall and its zlib variant on hand-made
strings, bad hyperparameters and too-short texts refused in one sentence before anything
is sampled, and on a tiny GPT-2: the score recomputed by hand from the written
samples.jsonl, continuations seeded per text (the same for batch 1 and 16, in any order
and across runs; different texts, different streams), the prompt's tokens never in the
candidate, a killed run resumed from the cache without sampling again, and the `openai`
backend on a server that gives no log-probabilities, ignores `n` or refuses `top_k`."""

from __future__ import annotations

import json
import zlib

import pytest
from tiny_models import save_tiny_gpt2

from pddkit.errors import PddkitError
from pddkit.methods.samia import SampleParams, rouge1_recall, samia, split_words
from pddkit.reporting.run_files import write_run
from pddkit.stats import Observation, TokenStats

EMPTY = TokenStats.from_lists([], [])

# short words (single letters): a random tiny model's continuations hit some of them
TEXTS = [
    "a b c d e f g h i j k l m n o p",
    "the quick brown fox jumps over the lazy dog near the river bank",
    "q r s t u v w x y z a e i o u",
    "we walked to the station in the rain and the train was late again",
    "o e a i u t h e r o w n s",
]


def words_score(text, conts, prefix=0.5, use_zlib=False):
    """SPEC 3b written out again, independently of pddkit.methods.samia."""
    words = text.split()
    ref = words[int(prefix * len(words)):]
    values = []
    for c in conts:
        cw = c.split()
        hit = sum(min(cw.count(w), ref.count(w)) for w in set(ref))
        v = hit / len(ref)
        if use_zlib:
            v *= len(zlib.compress(" ".join(cw).encode("utf-8")))
        values.append(v)
    return sum(values) / len(values)


# --- the formula ------------------------------------------------------------------------

def test_rouge1_recall_and_zlib_follow_spec_on_hand_made_strings():
    text = "one two three four five six six seven"  # 8 words: prompt 4, reference 4
    assert split_words(text, 0.5) == (["one", "two", "three", "four"], ["five", "six", "six", "seven"])
    assert split_words(text, 0.3) == (["one", "two"], text.split()[2:])  # floor(2.4) = 2
    # multiset: "six" counts twice at most, "five" once; prompt words ("one") never count
    conts = ("six six six five one", "seven\nfive  eight", "", "one two three four")
    # below: quarters, their means and small integers times them, exact in float64 but for
    # the order of a sum (an ulp, 1e-16): pytest.approx's default 1e-6 is far above it
    assert rouge1_recall(conts[0], ["five", "six", "six", "seven"]) == pytest.approx(3 / 4)
    assert rouge1_recall(conts[1], ["five", "six", "six", "seven"]) == pytest.approx(2 / 4)
    obs = Observation(text=text, target=EMPTY, samples=conts)
    assert samia(obs, samples=4) == pytest.approx((3 / 4 + 2 / 4 + 0 + 0) / 4)
    assert samia(obs, samples=2) == pytest.approx((3 / 4 + 2 / 4) / 2)  # the first ones
    z0 = len(zlib.compress(b"six six six five one"))
    z1 = len(zlib.compress(b"seven five eight"))  # words re-joined with single spaces
    assert samia(obs, samples=2, zlib=True) == pytest.approx((3 / 4 * z0 + 2 / 4 * z1) / 2)
    assert samia(obs, samples=4, zlib=True) == pytest.approx(words_score(text, conts, use_zlib=True))
    keyed = Observation(text=text, target=EMPTY, samples={
        SampleParams(0.5, 50, None): ("five",), SampleParams(0.5, 50, 7): ("six six",)})
    assert samia(keyed, samples=1) == pytest.approx(1 / 4)  # max_new_tokens=0: no cap
    assert samia(keyed, samples=1, max_new_tokens=7) == pytest.approx(2 / 4)


@pytest.mark.parametrize("spec, says", [
    ("samia:prefix=1", "prefix must be in (0, 1)"), ("samia:samples=0", "samples must be at least 1"),
    ("samia:top_k=0", "top_k must be at least 1"),
    ("samia:max_new_tokens=lots", "max_new_tokens='lots' is not a int"),
    ("samia:max_new_tokens=-1", "max_new_tokens must be 0 .no cap beyond the 1024-token rule. or more")])
def test_bad_hyperparameters_are_one_sentence_before_any_model_loads(spec, says):
    from pddkit.engine.plan import Resources, make_plan

    with pytest.raises(PddkitError, match=f"method samia.*{says.replace('(', '.').replace(')', '.')}"):
        make_plan(spec, Resources())


def test_samia_is_named_only_needs_sampling_and_reads_no_target_statistics():
    from pddkit.methods.base import METHODS, Need, resolve_methods, unmet

    spec = METHODS.get("samia")
    assert spec.needs == {Need.SAMPLES} and spec.requires == {"sampling"} and not spec.reads_target
    assert spec.defaults == {"samples": 10, "prefix": 0.5, "top_k": 50, "zlib": False,
                             "max_new_tokens": 0}
    assert "samia" not in {c.spec.name for c in resolve_methods("all", {Need.SAMPLES})}

    class NoSampling:
        sampling = False

    assert "sampled continuations" in unmet(spec, NoSampling())


# --- on a tiny model --------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_gpt2(tmp_path_factory.mktemp("samia") / "tiny")


def run(tiny, texts, methods="samia:max_new_tokens=24", order=None, batch_size=8, cache=None,
        out=None, seed=0):
    import pddkit

    order = list(range(len(texts))) if order is None else order
    res = pddkit.evaluate([texts[i] for i in order], [i % 2 for i in order], str(tiny),
                          methods=methods, ids=[f"t{i}" for i in order], device="cpu",
                          dtype="float32", batch_size=batch_size, cache=cache, n_bootstrap=10,
                          blind=False, seed=seed)
    if out is not None:
        write_run(res, out)
    return res


def trail(res) -> dict:
    return {(r["id"], r["method"]): r["continuations"] for r in res.trail["samples.jsonl"]}


@pytest.mark.slow
def test_score_recomputed_by_hand_from_the_written_samples(tiny, tmp_path, monkeypatch):
    from pddkit.backends import sampling

    drawn = []  # (prompt tokens, continuations, max_new) of every text the sampler samples
    real = sampling.sample_many

    def counting(model, prompts, n, **kw):
        rows = real(model, prompts, n, **kw)
        drawn.extend((len(p), len(r), cap) for p, r, cap in zip(prompts, rows, kw["max_new"]))
        return rows

    monkeypatch.setattr(sampling, "sample_many", counting)
    methods = "samia:max_new_tokens=24,samia:samples=4,zlib=true,max_new_tokens=24,samia:samples=3,prefix=0.3"
    res = run(tiny, TEXTS, methods=methods, out=tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text("utf-8").split("\n") if x]
    scores = {s["id"]: s for s in map(json.loads, (tmp_path / "scores.jsonl").read_text().splitlines())}
    labels = {"samia:samples=10,prefix=0.5,top_k=50,zlib=False,max_new_tokens=24": (10, 0.5, False),
              "samia:samples=4,prefix=0.5,top_k=50,zlib=True,max_new_tokens=24": (4, 0.5, True),
              "samia:samples=3,prefix=0.3,top_k=50,zlib=False,max_new_tokens=0": (3, 0.3, False)}
    assert {r["method"] for r in rows} == set(labels) and len(rows) == 3 * len(TEXTS)
    by = {(r["id"], r["method"]): r for r in rows}
    hits = 0
    for r in rows:
        n, prefix, use_zlib = labels[r["method"]]
        text = TEXTS[int(r["id"][1:])]
        words = text.split()
        assert r["prompt"] == " ".join(words[:int(prefix * len(words))])
        assert len(r["continuations"]) == n
        want = words_score(text, r["continuations"], prefix, use_zlib)
        # recalls (counts over counts), times zlib sizes, averaged: float64 in another order of
        # operations than pddkit's, a few ulp (1e-15 relative) apart; 1e-9 is far above it
        assert scores[r["id"]][r["method"]] == pytest.approx(want, rel=1e-9, abs=1e-12)
        hits += want > 0
    assert hits >= 1  # the check is not all zeros (seeded: the same rows each run)
    # zlib and a smaller `samples` share the continuations: the first four of the ten
    plain, z = list(labels)[:2]
    assert all(by[(f"t{i}", z)]["continuations"] == by[(f"t{i}", plain)]["continuations"][:4]
               for i in range(len(TEXTS)))
    # what the model sampled: once per text for each of the two parameter sets (prefix
    # 0.5, max_new_tokens=24: 10 rows, shared by the zlib call's 4; prefix 0.3, no cap: 3),
    # never one for the zlib call, and the count results.json reports is that number
    assert sorted(rows for _, rows, _ in drawn) == [3] * len(TEXTS) + [10] * len(TEXTS)
    # the budget: the 64-token context (below the 1024 tokens of the rule) less [start] + the
    # prompt's tokens, and max_new_tokens where given
    assert all(cap == min(24, 64 - p) for p, rows, cap in drawn if rows == 10)
    assert all(cap == 64 - p for p, rows, cap in drawn if rows == 3)
    assert res.counts["sampled_continuations"] == sum(rows for _, rows, _ in drawn) == 65
    assert res.counts["tokens"]["target"] == 0  # samia alone: no target pass


@pytest.mark.slow
def test_continuations_are_seeded_per_text_whatever_the_batch_order_or_run(tiny):
    a = run(tiny, TEXTS, batch_size=1)
    b = run(tiny, TEXTS, batch_size=16, order=list(reversed(range(len(TEXTS)))))
    c = run(tiny, TEXTS[:2], batch_size=4)  # fewer texts around: the same streams
    assert trail(a) == trail(b)
    assert {k: v for k, v in trail(a).items() if k[0] in ("t0", "t1")} == trail(c)
    streams = [tuple(v) for v in trail(a).values()]
    assert len(set(streams)) == len(streams)  # different texts, different continuations
    assert all(len(set(v)) > 1 for v in streams)  # the rows of one text differ too
    other = run(tiny, TEXTS[:2], seed=1)  # another run seed: other continuations
    assert trail(other)[("t0", "samia")] != trail(a)[("t0", "samia")]


@pytest.mark.slow
def test_texts_decoded_together_score_what_one_at_a_time_scores_and_share_its_cache(tiny, tmp_path):
    """batch_size 64 at 10 samples decodes the 5 texts of different lengths together (left-padded);
    batch_size 1 decodes one at a time: the same continuations, the same scores, and a
    rerun at 16 on the cache the run at 1 wrote samples nothing."""
    quick = "samia:max_new_tokens=24,samia:zlib=true,max_new_tokens=24"  # 10 samples
    one = run(tiny, TEXTS, methods=quick, batch_size=1, cache=tmp_path / "c")
    together = run(tiny, TEXTS, methods=quick, batch_size=64)
    assert trail(together) == trail(one)
    assert len({len(t.split()) for t in TEXTS}) > 1  # prompts of several lengths
    for name, values in one.scores().items():
        assert together.scores()[name].tolist() == values.tolist()
    assert len(one.scores()) == 2 and any(v > 0 for values in one.scores().values()
                                          for v in values.tolist())  # not all zeros
    again = run(tiny, TEXTS, methods=quick, batch_size=64, cache=tmp_path / "c")
    assert again.counts["cache"]["sampling"] == {"hits": len(TEXTS), "misses": 0}
    assert trail(again) == trail(one)


@pytest.mark.slow
def test_the_prompt_tokens_are_never_in_the_candidate(tiny):
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.hf_loading import load_model

    lm = load_model(str(tiny), device="cpu", dtype="float32")
    backend = HFBackend(lm)
    prompts = ["the quick brown fox jumps over the lazy dog", "a b c d e f g h"]
    longest = max(len(lm.tokenizer.decode([t])) for t in range(len(lm.tokenizer)))
    one = backend.sample(prompts, 6, 50, 1.0, 1.0, 1, [7, 8])
    for conts in one.texts:  # one new token each: the decoded prompt cannot be there
        assert len(conts) == 6 and all(len(c) <= longest for c in conts)
    more = backend.sample(prompts, 6, 50, 1.0, 1.0, 12, [7, 8])
    for p, conts in zip(prompts, more.texts):
        assert len(conts) == 6 and not any(p in c or p.split()[0] + " " in c[:8] for c in conts)


@pytest.mark.slow
def test_texts_too_short_for_a_prompt_and_a_reference_are_refused_before_sampling(tiny):
    with pytest.raises(PddkitError) as e:
        run(tiny, [*TEXTS, "Solitary", "two words", "x", "y z"], methods="samia:prefix=0.3")
    said = str(e.value)
    # "two words" at prefix 0.3: floor(0.6) = 0, no prompt word
    assert ("in every text; text 5 (id t5), text 6 (id t6), text 7 (id t7) (and 1 more) have "
            "too few words (at least 4 needed)") in said, said
    assert "\n" not in said


@pytest.mark.slow
def test_a_killed_run_resumes_from_the_cache_without_sampling_again(tiny, tmp_path):
    from pddkit.backends.caching import CachingBackend
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.hf_loading import load_model
    from pddkit.cache import StatsStore

    backend = HFBackend(load_model(str(tiny), device="cpu", dtype="float32"), batch_size=1)
    args = (3, 50, 1.0, 1.0, 4, [11, 12, 13, 14, 15])
    calls, kill_at = [], [3]

    class KilledError(Exception):
        pass

    def killed(prompts, *rest):
        calls.append(list(prompts))
        if len(calls) == kill_at[0]:
            raise KilledError  # the third chunk: the first two are stored
        return backend.sample(prompts, *rest)

    cached = CachingBackend(backend, StatsStore.open(tmp_path / "c"), chunk=1)
    with pytest.raises(KilledError):
        cached.sample(TEXTS, *args, compute=killed)
    again = CachingBackend(backend, StatsStore.open(tmp_path / "c"), chunk=1)
    calls.clear()
    kill_at[0] = 0
    resumed = again.sample(TEXTS, *args, compute=killed)
    assert calls == [[t] for t in TEXTS[2:]]  # only what the killed run had not finished
    assert again.counts()["sampling"] == (2, 3)
    assert resumed.texts == backend.sample(TEXTS, *args).texts  # equal to an uninterrupted run
    # a whole rerun through the API samples nothing
    quick = "samia:samples=2,max_new_tokens=4"
    first = run(tiny, TEXTS, methods=quick, cache=tmp_path / "api")
    rerun = run(tiny, TEXTS, methods=quick, cache=tmp_path / "api")
    assert first.counts["cache"]["sampling"] == {"hits": 0, "misses": len(TEXTS)}
    assert rerun.counts["cache"]["sampling"] == {"hits": len(TEXTS), "misses": 0}
    assert trail(rerun) == trail(first)
    from pddkit.cache.directory import clear_directory, directory_info

    assert directory_info(tmp_path / "api").memo_files >= 1  # samples.jsonl counted
    clear_directory(tmp_path / "api")  # `pddkit cache clear` removes the continuations too
    assert not (tmp_path / "api" / "samples.jsonl").exists()


# --- a served model ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def served(tiny):
    from openai_server import FakeOpenAIServer

    from pddkit.backends.hf_loading import load_model

    lm = load_model(str(tiny), device="cpu", dtype="float32")
    with FakeOpenAIServer(lm.model, name="tiny", tokenizer=lm.tokenizer, max_model_len=64) as server:
        yield server


# the capability probe's requests before any text (openai_probe.py): a greedy one-token
# completion, its echo, and one asking n, seed and top log-probabilities
PROBE = 3


def run_served(tiny, server, mode, methods="samia:samples=3,max_new_tokens=6", cache=None):
    import pddkit

    server.reset(mode)
    return pddkit.evaluate(TEXTS[:3], [1, 0, 1], "tiny", methods=methods, backend="openai",
                           api_base=server.api_base, api_key_env=None, tokenizer=str(tiny),
                           n_bootstrap=10, blind=False, ids=["t0", "t1", "t2"], cache=cache)


@pytest.mark.slow
def test_samia_alone_runs_on_a_server_without_log_probabilities(tiny, served, tmp_path):
    res = run_served(tiny, served, "no_logprobs")
    sent = [r["body"] for r in served.behaviour.requests][PROBE:]
    assert not any(b.get("echo") for b in sent)  # no statistics asked for, the probe's aside
    assert len(sent) == 3 and all(b["n"] == 3 and b["top_k"] == 50 and b["temperature"] == 1
                                  and b["top_p"] == 1 and b["max_tokens"] == 6 for b in sent)
    assert len({b["seed"] for b in sent}) == 3
    for r in res.trail["samples.jsonl"]:
        assert len(r["continuations"]) == 3
        want = words_score(TEXTS[int(r["id"][1:])], r["continuations"])
        # the same arithmetic in another order: a few ulp; approx's default 1e-6 is above it
        assert res.scores()["samia"][int(r["id"][1:])] == pytest.approx(want)
    assert not res.notices
    both = run_served(tiny, served, "no_logprobs", methods="samia,loss")
    assert list(both.scores()) == ["samia"]  # loss skipped before any text was sent
    assert [n for n in both.notices if n.startswith("skipping loss: the server returns no "
                                                    "log-probabilities")]
    # with the cache: the fingerprint needs no log-probabilities either
    cached = run_served(tiny, served, "no_logprobs", cache=tmp_path / "c")
    assert trail(cached) == trail(res)


@pytest.mark.slow
def test_a_server_ignoring_n_or_refusing_top_k_is_one_notice_and_nothing_is_lost(tiny, served):
    res = run_served(tiny, served, "ignore_n")
    assert all(len(set(r["continuations"])) == 3 for r in res.trail["samples.jsonl"])
    assert len(served.behaviour.requests) == PROBE + 3 * 3
    [line] = res.notices
    assert "returned fewer continuations than the n=3 asked for (it ignores n)" in line
    assert "asked 6 more times" in line
    res = run_served(tiny, served, "reject_top_k")
    [line] = res.notices
    assert "refused top_k (Unrecognized request argument supplied: top_k)" in line
    assert "without top-k" in line
    assert all(len(r["continuations"]) == 3 for r in res.trail["samples.jsonl"])
    answered = [r["body"] for r in served.behaviour.requests[PROBE:] if "top_k" not in r["body"]]
    assert len(answered) == 3  # each text sampled once without top_k


@pytest.mark.slow
def test_the_ray_engine_samples_on_its_actors_what_the_local_engine_samples(tiny, tmp_path,
                                                                           local_ray):
    import pddkit

    kw = dict(methods="samia:samples=3,max_new_tokens=6", ids=[f"t{i}" for i in range(5)],
              device="cpu", dtype="float32", n_bootstrap=10, blind=False)
    local = pddkit.evaluate(TEXTS, [1, 0, 1, 0, 1], str(tiny), **kw)
    first = pddkit.evaluate(TEXTS, [1, 0, 1, 0, 1], str(tiny), engine="ray", actors=2,
                            cache=tmp_path / "c", **kw)
    assert trail(first) == trail(local)
    assert first.counts["cache"]["sampling"] == {"hits": 0, "misses": 5}  # stored by the driver
    assert len((tmp_path / "c" / "samples.jsonl").read_text("utf-8").split("\n")) >= 5
