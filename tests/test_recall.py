"""recall and conrecall (SPEC 3b): scores recomputed from plain forwards over [start] + P + x
with the shots each text keeps counted by hand, variant=reference against a transcription of
the authors' likelihoods (a tokenizer with a BOS) and plain forwards (one without), the
shared prefix cache, the shot protocol and its leak guards, bad input, the openai backend,
the statistics cache and the CLI."""

import json

import numpy as np
import pytest
from tiny_models import save_word_gpt2, small_tokenizer

from pddkit.errors import PddkitError

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "runs", "far", "away"]


def _texts(n: int, seed: int = 0) -> list[str]:
    """Distinct texts of 6-14 words (numbered, so no two share a 13-word run)."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(5, 13)))) + f" n{i}"
            for i in range(n)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random one-layer GPT-2 with a 128-token context and a BPE that knows the words."""
    return save_word_gpt2(tmp_path_factory.mktemp("recall") / "tiny", WORDS)


@pytest.fixture(scope="module")
def lm(tiny):
    from pddkit.backends.hf_loading import load_model

    return load_model(str(tiny), device="cpu", dtype="float32")


def _write(path, texts, labels):
    path.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in zip(texts, labels)))
    return path


def _evaluate(tiny, texts, labels, methods, **kw):
    import pddkit

    kw.setdefault("n_bootstrap", 10)
    return pddkit.evaluate(texts, labels, str(tiny), methods=methods, device="cpu",
                           dtype="float32", blind=False, **kw)


def _plain_ll(lm, prefix_ids: list[int], ids: list[int]) -> float:
    """Mean log p(x_i | start, P, x_<i) over x's tokens, one unbatched forward."""
    import torch

    seq = [0, *prefix_ids, *ids]  # the tiny model's start token is 0 (its BOS)
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(torch.tensor([seq])).logits[0].double(), -1)
    at = range(len(prefix_ids), len(seq) - 1)  # position t predicts seq[t + 1]
    return float(np.mean([logp[t, seq[t + 1]].item() for t in at]))


# single tokens of the tiny BPE when a space precedes them ("Ġfox"), so a text or shot of
# these words has a token count known by hand (each test asserts it before relying on it)
ONE_TOKEN = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"]


def _words(n: int, seed: int) -> str:
    """n words of ONE_TOKEN, each after a space: n tokens."""
    rng = np.random.default_rng(seed)
    return "".join(" " + w for w in rng.choice(ONE_TOKEN, size=n))


def test_scores_recomputed_from_plain_forwards_with_prefixes_cut_to_the_context(tiny, lm, tmp_path):
    tok = lm.tokenizer
    # four shots of each class, 10 tokens each (a leading space, no trailing one, so joined
    # shots tokenise as the sum of their parts: asserted below)
    shots = [_words(10, seed) for seed in range(8)]
    pool = {"member": shots[0::2], "nonmember": shots[1::2]}
    for role in pool:
        for first in range(4):
            assert len(tok("".join(pool[role][first:]), add_special_tokens=False)["input_ids"]) \
                == 10 * (4 - first)
    # texts of n tokens ("the" + n - 1 words) under max_length=72: [start] + P + x fits when
    # 1 + 10 * kept + n <= 72, so the shots kept, by hand: n=20: 4 (61), n=35: 3 (66; 4
    # would be 76), n=45: 2 (66; 3: 76), n=55: 1 (66; 2: 76), n=65: none (1 + 10 + 65 = 76)
    sizes = [20, 35, 45, 55, 65, 20, 35, 45]
    kept_by_hand = {20: 4, 35: 3, 45: 2, 55: 1, 65: 0}
    texts = ["the" + _words(n - 1, 100 + i) for i, n in enumerate(sizes)]
    labels = [i % 2 for i in range(len(texts))]
    for text, n in zip(texts, sizes):
        assert len(tok(text, add_special_tokens=False)["input_ids"]) == n
    prefix = _write(tmp_path / "shots.jsonl", shots, [1, 0] * 4)
    res = _evaluate(tiny, texts, labels, "recall:shots=4,conrecall:shots=4,gamma=0.3",
                    prefix_data=str(prefix), max_length=72)
    assert len(res.ids) == len(texts)  # shots from prefix_data: no text left out
    for i, (text, n) in enumerate(zip(texts, sizes)):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        kept = kept_by_hand[n]
        given = {role: tok("".join(pool[role][4 - kept:]), add_special_tokens=False)["input_ids"]
                 if kept else [] for role in pool}
        own = _plain_ll(lm, [], ids)
        nm, m = _plain_ll(lm, given["nonmember"], ids), _plain_ll(lm, given["member"], ids)
        # the pass runs float32 logits batched behind a shared key/value cache, the test one
        # unbatched float32 forward with a float64 log-softmax: ~1e-6 apart on log-probabilities
        # of about -6 (float32 rounding of 16-wide dot products and of the stored L), so ~3e-7
        # relative on each mean and on their ratio; 1e-5 leaves a factor of 30
        assert res.scores()["recall"][i] == pytest.approx(nm / own, rel=1e-5)
        assert res.scores()["conrecall"][i] == pytest.approx((nm - 0.3 * m) / own, rel=1e-5)
    assert res.scores()["recall"][4] == 1.0  # n=65: no room, an empty prefix (a fallback)
    by_kept = res.counts["shots"]["prefixes"]["nonmember, shots=4"]["texts_by_shots_kept"]
    assert by_kept == {"4": 2, "3": 2, "2": 2, "1": 1, "0": 1}
    rows = [r for r in res.trail["shots.jsonl"] if r["method"] == "recall"]
    # the longest prefix holds all four shots in drawn order; shot j is in the prefixes of
    # the texts keeping at least 4 - j shots: 2, 4 (2 + 2), 6, 7 of the 8 texts
    assert [r["text"] for r in rows] == pool["nonmember"] and [r["order"] for r in rows] == [0, 1, 2, 3]
    assert [r["texts"] for r in rows] == [2, 4, 6, 7]
    assert any("for 6 of 8 texts whole shots were dropped from the front" in n for n in res.notices)


@pytest.fixture(scope="module")
def bos_tiny(tmp_path_factory):
    """The tiny model with a tokenizer that puts a BOS, <s>, before every text it encodes
    with its special tokens (as Llama's does); pddkit's start token is that BOS."""
    import torch
    from tokenizers.processors import TemplateProcessing
    from transformers import GPT2Config, GPT2LMHeadModel

    directory = tmp_path_factory.mktemp("recall-bos") / "tiny"
    tok = small_tokenizer(" ".join(WORDS * 3) + " " + " ".join(f"n{i} w{i} v{i}" for i in range(40)))
    tok.add_special_tokens({"bos_token": "<s>"})
    bos = tok.convert_tokens_to_ids("<s>")
    tok._tokenizer.post_processor = TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(tok),
                               n_positions=128, bos_token_id=bos, eos_token_id=0)).save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


def _authors_recall(model, tok, prefix: str, text: str) -> tuple[float, float]:
    """ReCaLL's score as ruoyuxie/recall src/run.py computes it (get_ll, run.py:67-73;
    get_conditional_ll, 75-84; the ratio, 107-108), written out here: each text encoded with
    the tokenizer's own special tokens, the prefix's positions labelled -100, transformers'
    own shifted cross-entropy as the mean log-likelihood. (recall, conrecall's LL(x | P) / LL(x) parts.)"""
    import torch

    with torch.no_grad():
        ids = torch.tensor([tok.encode(text)])
        ll = -model(ids, labels=ids).loss.item()
        p = tok(prefix, return_tensors="pt").input_ids
        x = tok(text, return_tensors="pt").input_ids
        both = torch.cat([p, x], dim=1)
        labels = both.clone()
        labels[:, :p.size(1)] = -100
        given = -model(both, labels=labels).loss.item()
    return given, ll


def test_variant_reference_is_the_authors_computation_with_a_bos_tokenizer(bos_tiny, tmp_path):
    """Their code feeds [BOS] + P + [BOS] + x and averages log p(BOS | BOS, P) with x's
    tokens; its unconditional pass is [BOS] + x, as pddkit's."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    texts, labels = _texts(8), [i % 2 for i in range(8)]
    shots = _texts(4, seed=21)
    prefix = _write(tmp_path / "p.jsonl", shots, [1, 0, 1, 0])
    res = _evaluate(bos_tiny, texts, labels, "recall:shots=2,recall:shots=2,variant=reference,"
                    "conrecall:shots=2,gamma=0.4,variant=reference", prefix_data=str(prefix))
    model = GPT2LMHeadModel.from_pretrained(bos_tiny).eval()
    tok = AutoTokenizer.from_pretrained(bos_tiny)
    assert tok.encode("the fox")[0] == tok.bos_token_id  # the tokenizer adds its BOS
    got = res.scores()
    for i, text in enumerate(texts):
        nm, ll = _authors_recall(model, tok, "".join(shots[1::2]), text)
        m, _ = _authors_recall(model, tok, "".join(shots[0::2]), text)
        # transformers' float32 cross-entropy against pddkit's float64 mean of float32
        # log-probabilities from a cached, batched pass: ~1e-6 apart on means of about -6,
        # ~3e-7 relative on the ratio (see the test above); 1e-5 leaves a factor of 30
        assert got["recall:shots=2,variant=reference"][i] == pytest.approx(nm / ll, rel=1e-5)
        assert got["conrecall"][i] == pytest.approx((nm - 0.4 * m) / ll, rel=1e-5)
    # the default variant scores x's tokens only: every text's score differs by more than
    # ten times the tolerance above, so the comparison tells the variants apart
    gap = got["recall:shots=2,variant=pddkit"] - got["recall:shots=2,variant=reference"]
    assert (np.abs(gap) > 1e-4).all()
    assert set(res.counts["shots"]["prefixes"]) == {
        "nonmember, shots=2", "nonmember, shots=2, variant=reference", "member, shots=2, variant=reference"}


def test_variant_reference_without_bos_leaves_x1_out_of_ll_x(tiny, lm, tmp_path):
    """A tokenizer that puts nothing before a text (GPT-2's): their unconditional pass has
    no token to predict x_1 from, so LL(x) = mean L_2..L_n; LL(x | P) is the default's."""
    texts, labels = _texts(8), [i % 2 for i in range(8)]
    shots = _texts(4, seed=22)
    prefix = _write(tmp_path / "p.jsonl", shots, [1, 0, 1, 0])
    res = _evaluate(tiny, texts, labels, "recall:shots=2,recall:shots=2,variant=reference",
                    prefix_data=str(prefix), cache=str(tmp_path / "cache"))
    tok = lm.tokenizer
    assert tok.encode("the fox") == tok("the fox", add_special_tokens=False)["input_ids"]
    p = tok("".join(shots[1::2]), add_special_tokens=False)["input_ids"]
    for i, text in enumerate(texts):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        given = _plain_ll(lm, p, ids)
        own = _plain_ll(lm, [], ids)
        rest = (own * len(ids) - _plain_ll(lm, [], ids[:1])) / (len(ids) - 1)  # L_2..L_n
        # as in the first test: ~3e-7 relative; the difference of two means in `rest` adds
        # ~1e-6 absolute on ~6, so 1e-5 relative still leaves a factor of 10
        assert res.scores()["recall:shots=2,variant=reference"][i] == pytest.approx(given / rest, rel=1e-5)
        assert res.scores()["recall:shots=2,variant=pddkit"][i] == pytest.approx(given / own, rel=1e-5)
    # nothing is inserted, so the default's conditioned statistics serve both: one pass
    assert set(res.counts["shots"]["prefixes"]) == {"nonmember, shots=2"}
    assert res.counts["cache"]["conditioned pass (nonmember shots)"]["misses"] == len(texts)
    assert not any("BOS after them" in d for d in res.counts["cache"])


def test_a_text_with_no_room_for_a_shot_is_counted_and_scored_with_an_empty_prefix(tiny, tmp_path):
    texts, labels = _texts(8), [i % 2 for i in range(8)]
    texts[2] = " ".join(WORDS * 4)  # ~100 tokens: cut to the 63 max_length allows
    prefix = _write(tmp_path / "p.jsonl", [s + " " for s in _texts(4, seed=8)], [1, 0] * 2)
    res = _evaluate(tiny, texts, labels, "recall:shots=2,conrecall:shots=2", prefix_data=str(prefix),
                    max_length=64)
    assert res.scores()["recall"][2] == 1.0
    assert res.scores()["conrecall"][2] == 0.5  # (LL - 0.5 LL) / LL: each step exact in floats
    assert np.isfinite(res.scores()["recall"]).all() and (res.scores()["recall"] != 1.0).sum() == 7
    assert res.counts["fallbacks"]["recall"] == {
        "leave no room in the context for a single shot: scored with an empty prefix "
        "(LL(x | P) = LL(x)); a smaller `max_length` leaves room": 1}
    assert any(n.startswith("recall: 1 of 8 texts (12%) leave no room") for n in res.notices)


def test_the_shared_prefix_cache_equals_the_plain_pass_and_any_batch(lm):
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.prefix_pass import plain_prefix_stats

    texts = _texts(20)
    prefix = lm.tokenizer("".join(_texts(2, seed=2)), add_special_tokens=False)["input_ids"]
    results = []
    for size in (1, 16):
        backend = HFBackend(lm, batch_size=size)
        enc = backend.encode(texts, [str(i) for i in range(20)])
        results.append(backend.stats_given_prefix(prefix, enc.ids, enc.truncated))
        assert backend._shared_prefix is True
    want = plain_prefix_stats(HFBackend(lm).runner, prefix, enc.ids, enc.truncated)
    # float32 throughout: the cached keys and values come from another batch shape than the
    # plain pass's, so L and H (about 6 = log 300 in size) differ by float32 rounding, ~7e-7
    # per operation, and the 300-term softmax sums accumulate at most ~sqrt(300) of those,
    # ~1.2e-5: 2e-5 bounds it. Batch 1 against 16: the same cache, only the padding
    # differs, half that: 1e-5.
    for a, b, w in zip(*results, want):
        np.testing.assert_array_equal(a.ids, w.ids)
        for got in (a, b):
            np.testing.assert_allclose(got.L, w.L, atol=2e-5)
            np.testing.assert_allclose(got.H, w.H, atol=2e-5)
        np.testing.assert_allclose(a.L, b.L, atol=1e-5)  # batch 1 and 16


def test_same_scores_for_batch_1_and_16(tiny):
    texts, labels = _texts(24), [i % 2 for i in range(24)]
    a = _evaluate(tiny, texts, labels, "recall:shots=3,conrecall:shots=3", batch_size=1)
    b = _evaluate(tiny, texts, labels, "recall:shots=3,conrecall:shots=3", batch_size=16)
    assert a.ids == b.ids
    # batch 1 against 16: float32 rounding of the padded batch, ~1e-6 on mean log-probabilities
    # of about -6, ~3e-7 relative on scores of about 1: 1e-5 leaves a factor of 30
    for label in ("recall", "conrecall"):
        np.testing.assert_allclose(a.scores()[label], b.scores()[label], rtol=1e-5)


def test_drawn_shots_and_as_many_of_the_other_class_are_never_scored(tiny):
    texts, labels = _texts(30), [i % 2 for i in range(30)]
    ids = [f"t{i}" for i in range(30)]
    res = _evaluate(tiny, texts, labels, "loss,recall:shots=4", ids=ids)
    shots = [r["text"] for r in res.trail["shots.jsonl"]]
    # four distinct non-member texts of the data (the 128-token context holds all four shots
    # before every one of these texts of at most 14 words, so the trail lists all four)
    assert len(shots) == len(set(shots)) == 4
    assert all(labels[texts.index(s)] == 0 for s in shots)
    out = set(ids) - set(res.ids)  # left out of the evaluation
    assert {f"t{texts.index(s)}" for s in shots} <= out  # the shots: never scored
    # and four members, so both classes lose four: 15 - 4 of each remain
    assert sorted(labels[int(i[1:])] for i in out) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert sorted(res.labels) == [0] * 11 + [1] * 11
    assert res.counts["shots"]["left_out"] == {"shots": 4, "other_class": 4,
                                              "sharing_a_run_with_a_shot": 0,
                                              "same_document_as_a_shot": 0}
    assert res.counts["samples"] == 22 and res.counts["shots"]["source"] == "drawn"
    again = _evaluate(tiny, texts, labels, "loss,recall:shots=4", ids=ids)
    assert again.ids == res.ids and again.trail["shots.jsonl"] == res.trail["shots.jsonl"]  # seeded
    other = _evaluate(tiny, texts, labels, "loss,recall:shots=4", ids=ids, seed=1)
    assert [r["text"] for r in other.trail["shots.jsonl"]] != shots  # the run seed draws them


def test_a_text_sharing_a_13_word_run_with_a_drawn_shot_leaves_too():
    from pddkit.data.ngrams import shares_run
    from pddkit.data.samples import Sample, make_dataset
    from pddkit.data.shots import draw

    runs = [" ".join(f"r{i}x{k}" for k in range(13)) for i in range(10)]
    samples = [Sample(id=f"n{i}", text=f"non member {i} " + runs[i], label=0, source=f"n{i}")
               for i in range(10)]  # each member below holds a non-member's 13-word run
    samples += [Sample(id=f"m{i}", text=f"member {i} " + runs[i] + " end", label=1, source=f"m{i}")
                for i in range(10)]
    kept, pool = draw(make_dataset("twins", samples, []), {"nonmember": 2}, seed=3)
    shots = pool.shots["nonmember"]
    assert len(shots) == 2 and not {s.text for s in kept.samples} & set(shots)
    assert not any(shares_run(s.text, shot) for s in kept.samples for shot in shots)
    left = pool.left_out
    assert left["shots"] == 2 and left["other_class"] == 2
    out_other = {s.id for s in samples if s.label == 1} - {s.id for s in kept.samples}
    twins = {f"m{i}" for i in range(10) if any(runs[i] in shot for shot in shots)}
    assert len(twins) == 2 and twins <= out_other  # the shots' twins never stay
    # out of the members: the 2 drawn to balance the classes, then the twins not among them
    assert left["sharing_a_run_with_a_shot"] == len(out_other) - 2 > 0  # seed 3: twins stayed
    assert len(kept.samples) == 20 - 4 - left["sharing_a_run_with_a_shot"]


def test_the_other_texts_of_a_drawn_shots_document_leave_too():
    from pddkit.data.samples import Sample, make_dataset
    from pddkit.data.shots import draw

    samples = [Sample(id=f"d{d}w{w}", text=" ".join(f"d{d}w{w}x{k}" for k in range(8)),
                      label=d % 2, source=f"d{d}w{w}", group=f"d{d}")
               for d in range(8) for w in range(3)]
    kept, pool = draw(make_dataset("windows", samples, []), {"nonmember": 2}, seed=0)
    shot_docs = {s.group for s in samples if s.text in pool.shots["nonmember"]}
    assert len(shot_docs) <= 2 and not any(s.group in shot_docs for s in kept.samples)
    assert pool.left_out["same_document_as_a_shot"] == sum(
        s.group in shot_docs for s in samples) - 2 - sum(
        s.group in shot_docs and s.label == 1 for s in samples)


@pytest.mark.parametrize("how", ["equal", "13-word run"])
def test_prefix_data_overlapping_a_text_under_test_is_refused(tiny, tmp_path, how):
    texts, labels = _texts(10), [i % 2 for i in range(10)]
    leak = texts[3]
    if how != "equal":
        texts[3] = texts[3] + " " + " ".join(f"v{k}" for k in range(13))
        leak = "shot start " + " ".join(f"v{k}" for k in range(13))
    prefix = _write(tmp_path / "p.jsonl", [leak, *_texts(4, seed=5)], [0, 1, 0, 1, 0])
    with pytest.raises(PddkitError, match=r"p\.jsonl: the shot at .* (is|shares a 13-word run "
                                          r"with) text 3 .*under test.*leak"):
        _evaluate(tiny, texts, labels, "recall:shots=2", prefix_data=str(prefix))


def test_a_shot_in_the_validation_data_is_refused(tiny, tmp_path):
    texts, labels = _texts(10), [i % 2 for i in range(10)]
    shots = _texts(4, seed=7)
    prefix = _write(tmp_path / "p.jsonl", shots, [1, 0, 1, 0])
    val = _write(tmp_path / "v.jsonl", [shots[1], *_texts(5, seed=11)], [0, 1, 0, 1, 0, 1])
    with pytest.raises(PddkitError, match=r"nonmember shot 1 \(from .*p\.jsonl\) is .* of "
                                          r"`val_data` .*leak into the choice of hyperparameters"):
        _evaluate(tiny, texts, labels, "conrecall:shots=2", prefix_data=str(prefix),
                  val_data=str(val))


def test_unlabelled_data_needs_prefix_data_and_prefix_data_needs_labels(tiny, tmp_path):
    import pddkit

    with pytest.raises(PddkitError, match=r"method recall needs labelled shots: pass "
                                          r"`prefix_data` \(or labelled data to draw them from\)"):
        pddkit.score(_texts(6), str(tiny), methods="recall", device="cpu")
    unlabelled = tmp_path / "u.jsonl"
    unlabelled.write_text("".join(json.dumps({"text": t}) + "\n" for t in _texts(4, seed=9)))
    with pytest.raises(PddkitError, match="has no labels: they say which shots are members"):
        pddkit.score(_texts(6), str(tiny), methods="recall", device="cpu",
                     prefix_data=str(unlabelled))
    # with labelled prefix data, unlabelled texts are scored, none left out
    prefix = _write(tmp_path / "l.jsonl", _texts(4, seed=9), [1, 0, 1, 0])
    scores = pddkit.score(_texts(6), str(tiny), methods="recall:shots=2", device="cpu",
                          prefix_data=str(prefix))
    assert scores["recall"].shape == (6,) and np.isfinite(scores["recall"]).all()


def test_bad_input_is_one_sentence(tiny, tmp_path):
    texts, labels = _texts(10), [i % 2 for i in range(10)]
    with pytest.raises(PddkitError, match="method recall: shots must be a whole number of at "
                                          "least 1, not 0"):
        _evaluate(tiny, texts, labels, "recall:shots=0")
    with pytest.raises(PddkitError, match=r"holds 5 member texts: drawing 5 shots .* would leave "
                                          "none to evaluate"):
        _evaluate(tiny, texts, labels, "conrecall:shots=5")
    prefix = _write(tmp_path / "p.jsonl", _texts(4, seed=3), [1, 0, 1, 0])
    with pytest.raises(PddkitError, match="holds 2 nonmember shots; shots=3 needs 3"):
        _evaluate(tiny, texts, labels, "recall:shots=3", prefix_data=str(prefix))
    with pytest.raises(PddkitError, match=r"no shot fits the context of 12 tokens: the shortest "
                                          r"text under test has \d+ tokens and the shortest prefix "
                                          r"\(the last shot alone\) \d+"):
        _evaluate(tiny, texts, labels, "recall:shots=2", prefix_data=str(prefix), max_length=12)


@pytest.mark.slow
def test_the_openai_backend_scores_recall_as_the_hf_backend(tiny, lm, tmp_path):
    from openai_server import FakeOpenAIServer

    import pddkit

    texts, labels = _texts(8), [i % 2 for i in range(8)]
    prefix = _write(tmp_path / "p.jsonl", _texts(6, seed=4), [1, 0] * 3)
    local = _evaluate(tiny, texts, labels, "recall:shots=3,conrecall:shots=3",
                      prefix_data=str(prefix))
    with FakeOpenAIServer(lm.model, name="tiny", tokenizer=lm.tokenizer, max_model_len=128) as server:
        far = pddkit.evaluate(texts, labels, "tiny", methods="recall:shots=3,conrecall:shots=3",
                              backend="openai", api_base=server.api_base, api_key_env=None,
                              tokenizer=str(tiny), prefix_data=str(prefix), n_bootstrap=10,
                              blind=False)
    # the server runs one unbatched float32 forward per request over [start] + P + x, the
    # local pass a batched one behind the shared cache: ~1e-6 on the mean log-probabilities,
    # ~3e-7 relative on the scores (as in the first test); 1e-5 leaves a factor of 30
    for label in ("recall", "conrecall"):
        np.testing.assert_allclose(far.scores()[label], local.scores()[label], rtol=1e-5)
    assert far.trail["shots.jsonl"] == local.trail["shots.jsonl"]


def test_a_rerun_with_the_cache_computes_no_conditioned_statistics(tiny, tmp_path):
    texts, labels = _texts(16), [i % 2 for i in range(16)]
    first = _evaluate(tiny, texts, labels, "conrecall:shots=2", cache=str(tmp_path / "c"))
    assert first.counts["cache"]["conditioned pass (member shots)"]["misses"] == len(first.ids)
    again = _evaluate(tiny, texts, labels, "conrecall:shots=2", cache=str(tmp_path / "c"))
    for role in ("member", "nonmember"):
        assert again.counts["cache"][f"conditioned pass ({role} shots)"] == {
            "hits": len(first.ids), "misses": 0}
    np.testing.assert_array_equal(again.scores()["conrecall"], first.scores()["conrecall"])
    other = _evaluate(tiny, texts, labels, "conrecall:shots=1", cache=str(tmp_path / "c"))
    assert other.counts["cache"]["conditioned pass (member shots)"]["misses"] > 0  # another prefix


@pytest.mark.slow
def test_conrecall_gamma_is_chosen_on_validation_data(tiny):
    texts, labels = _texts(40), [i % 2 for i in range(40)]
    res = _evaluate(tiny, texts, labels, "conrecall:shots=2", val_fraction=0.5)
    v = res.validation["conrecall"]
    assert v.chosen in v.grid and len(v.grid) == 11 and {"gamma": 0.5} in v.grid
    # the grid's gamma=0.5 column is conrecall itself (the call's own shots), on the val part
    from pddkit.evaluation.validation import column_aucs

    val = np.array([s == "val" for s in res.splits])
    own = column_aucs(res.scores()["conrecall"][val][:, None], np.array(res.labels)[val])[0]
    # the grid's column and the per-text scores are the same float64 arithmetic (vectorised
    # or not), so the same ranks: the AUCs agree to rounding (1e-15); approx's 1e-6 is above
    assert v.val_auc[v.grid.index({"gamma": 0.5})] == pytest.approx(own)


def test_the_cli_writes_shots_jsonl(tiny, tmp_path):
    from click.testing import CliRunner

    from pddkit.cli import cli

    data = _write(tmp_path / "d.jsonl", _texts(20), [i % 2 for i in range(20)])
    out = tmp_path / "out"
    done = CliRunner().invoke(cli, ["run", "--model", str(tiny), "--data", str(data), "--methods",
                                    "recall:shots=2,conrecall:shots=2", "--output", str(out),
                                    "--no-report", "--no-blind", "--device", "cpu",
                                    "--bootstrap", "10"])
    assert done.exit_code == 0, done.output
    rows = [json.loads(x) for x in (out / "shots.jsonl").read_text().splitlines()]
    assert {r["method"] for r in rows} == {"recall", "conrecall"}
    assert all(set(r) == {"method", "role", "order", "text", "texts"} for r in rows)
    assert {(r["method"], r["role"]) for r in rows} == {
        ("recall", "nonmember"), ("conrecall", "member"), ("conrecall", "nonmember")}
    saved = json.loads((out / "results.json").read_text())
    assert saved["counts"]["shots"]["left_out"]["shots"] == 4
    assert len((out / "scores.jsonl").read_text().splitlines()) == 16


@pytest.mark.slow
def test_the_ray_engine_runs_the_conditioned_pass_as_the_local_engine(tiny, tmp_path, local_ray):
    texts, labels = _texts(12), [i % 2 for i in range(12)]
    prefix = _write(tmp_path / "p.jsonl", _texts(4, seed=6), [1, 0] * 2)
    local = _evaluate(tiny, texts, labels, "conrecall:shots=2", prefix_data=str(prefix))
    far = _evaluate(tiny, texts, labels, "conrecall:shots=2", prefix_data=str(prefix),
                    engine="ray", actors=1, cache=str(tmp_path / "cache"))
    assert far.counts["cache"]["conditioned pass (member shots)"]["misses"] == len(texts)
    # the actor's pass against the local one: float32 rounding, ~3e-7 relative on the scores
    # (see test_same_scores_for_batch_1_and_16); 1e-5 leaves a factor of 30
    np.testing.assert_allclose(far.scores()["conrecall"], local.scores()["conrecall"], rtol=1e-5)
