"""`pac` (Ye et al. 2024, SPEC 3b): the polarised distance and the score (skip_first too) on
hand-made statistics, the word-swap rule (distinct positions, max(1, floor(swap * #words)) swaps,
single-space re-join, seeded per text), bad hyperparameters refused before any model
loads, and on a tiny model: the score recomputed from plain forwards over the text and the
copies written to augmentations.jsonl (each copy checked by its words and parity),
the same copies and scores whatever the batch size and order, a one-word text scored 0
and counted, copies served from the statistics cache on a rerun, and the `openai`
backend (prompt log-probabilities only) scoring what `hf` scores."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tiny_models import save_tiny_gpt2

from pddkit.errors import PddkitError
from pddkit.methods.pac import pac, polarized_distance
from pddkit.reporting.run_files import write_run
from pddkit.resources.augment import AugmentParams, augment, n_swaps
from pddkit.stats import Observation, TokenStats

TEXT = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"  # 10 distinct words

TEXTS = [
    "the quick brown fox jumps over the lazy dog near the river bank",
    "Holmes sat in silence, his fingers pressed together, staring at the fire.",
    "Solitary",  # one word: no swap possible
    "a lady of quality, she said, never forgets  her  manners at dinner.",  # double spaces
    "it is a truth universally acknowledged that a single man in possession of a good "
    "fortune must be in want of a wife, however little known the feelings or views of such "
    "a man may be on his first entering a neighbourhood, this truth is so well fixed",  # cut
    "we walked to the station in the rain and the train was late again",
]


def st(L) -> TokenStats:
    return TokenStats.from_lists(list(range(len(L))), L)


def obs(text: str, L, copies) -> Observation:
    return Observation(text=text, target=st(L), augmented=tuple(st(c) for c in copies))


def parity(perm: list[int]) -> int:
    """0 for an even permutation, 1 for an odd one (by counting cycles)."""
    seen, cycles = set(), 0
    for i in range(len(perm)):
        if i not in seen:
            cycles += 1
            while i not in seen:
                seen.add(i)
                i = perm[i]
    return (len(perm) - cycles) % 2


# --- the formula ------------------------------------------------------------------------

def test_polarized_distance_and_score_follow_spec_on_hand_made_statistics():
    L = [-float(i) for i in range(1, 11)]  # -1 .. -10, shuffled below: PD must sort
    shuffled = [L[i] for i in (3, 9, 0, 6, 1, 8, 2, 5, 7, 4)]
    # high=0.05: max(1, floor(0.5)) = 1 largest (-1); low=0.3: 3 smallest (-10, -9, -8)
    assert polarized_distance(np.array(shuffled), 0.05, 0.3) == pytest.approx(-1 - (-9))
    # high=0.2: the 2 largest (-1, -2); low=0.25: floor(2.5) = 2 smallest (-10, -9)
    assert polarized_distance(np.array(shuffled), 0.2, 0.25) == pytest.approx(-1.5 - (-9.5))
    copies = [[-2.0] * 5 + [-3.0] * 5, [-1.0] * 4, [-7.0, -0.5]]  # PD 1, 0, 6.5
    o = obs(TEXT, shuffled, copies)
    assert pac(o, n_aug=2) == pytest.approx(-(8 - (1 + 0) / 2))  # the first n_aug copies
    assert pac(o, n_aug=3) == pytest.approx(-(8 - (1 + 0 + 6.5) / 3))
    assert pac(o, n_aug=5) == pytest.approx(-(8 - 7.5 / 3))  # fewer held: those there are
    # the pipeline's mapping: per swap rate
    keyed = Observation(text=TEXT, target=st(shuffled), augmented={
        AugmentParams(0.3): (st(copies[0]),), AugmentParams(0.5): (st(copies[2]),)})
    assert pac(keyed, n_aug=1, swap=0.3) == pytest.approx(-(8 - 1))
    assert pac(keyed, n_aug=1, swap=0.5) == pytest.approx(-(8 - 6.5))


def test_skip_first_leaves_each_sequences_first_token_out_of_pd():
    from pddkit.methods.base import METHODS, MethodCall

    # the text: L_1 = -20 is its least likely token; the copy: L_1 = -0.1 its likeliest
    text_L = [-20.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0, -9.0]
    copy_L = [-0.1, -2.0, -2.0, -2.0, -6.0]
    o = obs(TEXT, text_L, [copy_L])
    # every token: PD(text) = -1 - mean(-20, -9, -8) (1 largest; floor(3.0) = 3 smallest)
    # = -1 + 37/3; PD(copy) = -0.1 - (-6) (1 largest; floor(1.5) = 1 smallest) = 5.9
    assert pac(o, n_aug=1) == pytest.approx(-((-1 + 37 / 3) - 5.9))
    # skip_first: PD(text) over 9 tokens = -1 - mean(-9, -8) (floor(2.7) = 2 smallest) = 7.5;
    # PD(copy) over [-2, -2, -2, -6] = -2 - (-6) = 4
    assert pac(o, n_aug=1, skip_first=True) == pytest.approx(-(7.5 - 4.0))
    # a text of one token keeps it (PD 0, nothing else to compare), counted; the copy
    # [-1, -1, -5] without its first token: PD = -1 - (-5) = 4
    one = obs(TEXT, [-3.0], [[-1.0, -1.0, -5.0]])
    assert pac(one, n_aug=1, skip_first=True) == pytest.approx(-(0.0 - 4.0))
    params = {**METHODS.get("pac").defaults, "skip_first": True}
    call = MethodCall(METHODS.get("pac"), params, "pac")
    assert "have one token" in call.fallback(one) and call.fallback(o) is None


def test_a_one_word_text_scores_0_and_is_counted_as_a_fallback():
    from pddkit.methods.base import METHODS, MethodCall

    call = MethodCall(METHODS.get("pac"), dict(METHODS.get("pac").defaults), "pac")
    one = obs("Solitary", [-1.0, -5.0, -0.1], [[-3.0, -3.0, -3.0]])  # copies PD 0, own PD 4.9
    assert call(one) == 0.0
    assert "one word" in call.fallback(one)
    many = obs("two words", [-1.0, -5.0, -0.1], [[-3.0, -3.0, -3.0]])
    assert call(many) == pytest.approx(-4.9) and call.fallback(many) is None


@pytest.mark.parametrize("spec, says", [
    ("pac:n_aug=0", "n_aug must be a whole number of at least 1"),
    ("pac:swap=0", "swap must be in (0, 1]"),
    ("pac:swap=1.5", "swap must be in (0, 1]"),
    ("pac:high=0", "high must be in (0, 1]"),
    ("pac:low=1.2", "low must be in (0, 1]"),
])
def test_bad_hyperparameters_are_one_sentence_before_any_model_loads(spec, says):
    from pddkit.engine.plan import check_params
    from pddkit.methods.base import Need, resolve_methods

    [call] = resolve_methods(spec, {Need.AUGMENTATIONS})
    with pytest.raises(PddkitError) as err:
        check_params(call)
    assert says in str(err.value) and "\n" not in str(err.value)


# --- the augmentation rule --------------------------------------------------------------

def test_swap_count_is_max_1_floor_swap_times_words():
    assert [n_swaps(n, 0.3) for n in (1, 2, 3, 4, 10, 20)] == [1, 1, 1, 1, 3, 6]
    assert n_swaps(10, 0.35) == 3 and n_swaps(10, 1.0) == 10


@pytest.mark.parametrize("swap, m", [(0.1, 1), (0.2, 2), (0.35, 3), (0.4, 4)])
def test_each_copy_is_m_swaps_of_two_distinct_positions(swap, m):
    """Every copy is a permutation of the words made of exactly m transpositions: its
    parity is m's (a swap of a position with itself, or one swap too many or too few,
    would flip it) and it moves at most 2m words."""
    words = TEXT.split(" ")
    for seed in range(20):
        copies = augment(TEXT, 5, swap, seed)
        assert len(copies) == 5
        for c in copies:
            got = c.split(" ")
            assert sorted(got) == sorted(words) and " ".join(got) == c
            perm = [words.index(w) for w in got]
            assert parity(perm) == m % 2
            moved = sum(p != i for i, p in enumerate(perm))
            assert moved <= 2 * m and (moved > 0 or m % 2 == 0)


def test_split_on_single_spaces_and_rejoined_with_single_spaces():
    two = "left\nside right"  # a newline is inside a word: two words, one swap
    assert augment(two, 3, 0.3, 0) == ("right left\nside",) * 3
    spaced = "a  b c"  # "a", "", "b", "c": the empty word moves like any other
    for c in augment(spaced, 5, 0.5, 1):
        assert sorted(c.split(" ")) == ["", "a", "b", "c"] and len(c) == len(spaced)
    assert augment("Solitary", 4, 0.3, 0) == ("Solitary",) * 4


def test_copies_are_reproducible_seeded_per_text_and_share_a_prefix():
    a = augment(TEXT, 8, 0.3, 0)
    assert augment(TEXT, 8, 0.3, 0) == a
    assert augment(TEXT, 3, 0.3, 0) == a[:3]  # n_aug only slices
    assert len(set(a)) > 1
    assert augment(TEXT, 8, 0.3, 1) != a  # the run seed
    assert augment(TEXT, 8, 0.4, 0) != augment(TEXT, 8, 0.3, 0)[:8]  # the swap rate
    other = TEXT.replace("alpha", "omega")  # another text: its own draws
    assert [c.replace("omega", "alpha") for c in augment(other, 8, 0.3, 0)] != list(a)


# --- on a tiny model --------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_gpt2(tmp_path_factory.mktemp("pac") / "tiny")


@pytest.fixture(scope="module")
def backend(tiny):
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.hf_loading import load_model

    return HFBackend(load_model(str(tiny), device="cpu", dtype="float32"), batch_size=4)


def run(tiny, texts, methods="pac", order=None, batch_size=8, cache=None, out=None):
    """A labelled run through the Python API; ids name the texts whatever the order."""
    import pddkit

    order = list(range(len(texts))) if order is None else order
    res = pddkit.evaluate([texts[i] for i in order], [i % 2 for i in order], str(tiny),
                          methods=methods, ids=[f"t{i}" for i in order], device="cpu",
                          dtype="float32", batch_size=batch_size, cache=cache, n_bootstrap=10,
                          blind=False)
    if out is not None:
        write_run(res, out)
    return res


def trail(res) -> dict:
    return {(r["id"], r["method"]): r["texts"] for r in res.trail["augmentations.jsonl"]}


def plain_logprobs(lm, text: str, limit: int = 63) -> tuple[list[int], np.ndarray]:
    """(x's ids, L) from one unbatched forward of [start] + x (start 0, the tiny model's BOS),
    x cut to the `limit` tokens a 64-token context leaves after the start token."""
    import torch

    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"][:limit]
    with torch.no_grad():
        logits = lm.model(torch.tensor([[0, *ids]])).logits[0, :-1]
    logp = torch.log_softmax(logits.double(), -1)
    return ids, logp[torch.arange(len(ids)), torch.tensor(ids)].numpy()


def pd_by_hand(L, high: float = 0.05, low: float = 0.3) -> float:
    """Ye et al.'s polarised distance, written out: the mean of the int(high * n) (at least
    one) largest minus the mean of the int(low * n) (at least one) smallest."""
    s = sorted(float(v) for v in L)
    far, near = max(1, int(high * len(s))), max(1, int(low * len(s)))
    return sum(s[-far:]) / far - sum(s[:near]) / near


def check_copy(copy: str, span: str, m: int) -> None:
    """A copy is the span's single-space words permuted by m swaps of distinct positions:
    the same words re-joined with single spaces, at most 2m of them moved, and (words all
    distinct) the permutation's parity that of m transpositions."""
    words, got = span.split(" "), copy.split(" ")
    assert sorted(got) == sorted(words) and " ".join(got) == copy
    assert sum(a != b for a, b in zip(got, words)) <= 2 * m
    if len(set(words)) == len(words):
        assert parity([words.index(w) for w in got]) == m % 2


def test_score_recomputed_by_hand_from_the_written_augmentations(tiny, tmp_path):
    from pddkit.backends.hf_loading import load_model

    lm = load_model(str(tiny), device="cpu", dtype="float32")
    res = run(tiny, TEXTS, methods="pac,pac:n_aug=2,swap=0.5,pac:skip_first=true", out=tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "augmentations.jsonl").read_text().splitlines()]
    scores = [json.loads(x) for x in (tmp_path / "scores.jsonl").read_text().splitlines()]
    # method label -> (n_aug, swap, skip_first)
    labels = {"pac:n_aug=5,swap=0.3,high=0.05,low=0.3,skip_first=False": (5, 0.3, False),
              "pac:n_aug=2,swap=0.5,high=0.05,low=0.3,skip_first=False": (2, 0.5, False),
              "pac:n_aug=5,swap=0.3,high=0.05,low=0.3,skip_first=True": (5, 0.3, True)}
    assert {r["method"] for r in rows} == set(labels) and len(rows) == 3 * len(TEXTS)
    by = {(r["id"], r["method"]): r["texts"] for r in rows}
    for r in rows:
        n_aug, swap, skip = labels[r["method"]]
        text = TEXTS[int(r["id"][1:])]
        ids, L = plain_logprobs(lm, text)
        # the text the copies permute: the scored span, the decoded 63 tokens of a cut text
        span = lm.tokenizer.decode(ids) if len(ids) < len(lm.tokenizer(text)["input_ids"]) else text
        assert r["id"] != "t4" or span != text  # the long text is cut (t1 too, in characters)
        assert len(r["texts"]) == n_aug
        m = max(1, int(swap * len(span.split(" "))))  # swaps per copy, by the SPEC's rule
        if r["id"] == "t2":  # one word: the copies are the text, the score 0
            assert r["texts"] == ["Solitary"] * n_aug
            want = 0.0
        else:
            assert all(t != span for t in r["texts"])  # these texts repeat no word pair
            for c in r["texts"]:
                check_copy(c, span, m)
            cut = (lambda v: v[1:]) if skip else (lambda v: v)
            copies = [pd_by_hand(cut(plain_logprobs(lm, t)[1])) for t in r["texts"]]
            want = -(pd_by_hand(cut(L)) - sum(copies) / len(copies))
        got = next(s[r["method"]] for s in scores if s["id"] == r["id"])
        # each L: the pass's float32 batched forward against one unbatched float32 forward
        # here, ~1e-6 apart on log-probabilities of about -6; a PD is the difference of two
        # means of them (<= 2e-6), the score a PD minus a mean of PDs (<= 4e-6): 1e-5 bounds
        # it (measured: 4e-7)
        assert got == pytest.approx(want, abs=1e-5), r
    # calls differing only in skip_first share the copies (same swap rate, the first 5)
    plain, _, skipped = list(labels)
    assert all(by[(f"t{i}", plain)] == by[(f"t{i}", skipped)] for i in range(len(TEXTS)))
    counts = res.counts
    assert counts["augmented_texts"] == len({t for r in rows for t in r["texts"]})
    assert counts["fallbacks"] == {lab: {"are one word (no swap possible): their copies equal "
                                         "the text, scored 0": 1} for lab in labels}
    assert sum("1 of 6 texts" in n and "one word" in n for n in res.notices) == 3
    assert "augmentations" in counts["truncated"]


def test_same_copies_and_scores_for_batch_1_and_16_in_any_order(tiny):
    a = run(tiny, TEXTS, batch_size=1)
    b = run(tiny, TEXTS, batch_size=16, order=list(reversed(range(len(TEXTS)))))
    assert trail(a) == trail(b)
    sa = dict(zip(a.ids, a.scores()["pac"]))
    sb = dict(zip(b.ids, b.scores()["pac"]))
    # float32 rounding of another batch shape: ~1e-6 on each log-probability, <= 4e-6 on a
    # score (a PD minus a mean of PDs, each the difference of two means): 1e-5 bounds it
    for k in sa:
        assert sa[k] == pytest.approx(sb[k], abs=1e-5), k


def test_a_rerun_with_the_cache_scores_no_copy_again(tiny, tmp_path):
    cache = tmp_path / "cache"
    first = run(tiny, TEXTS, methods="pac:n_aug=2", cache=cache)
    done = first.counts["cache"]["augmentation pass"]
    assert done["misses"] > 0
    # more copies: the first two are the ones stored (n_aug slices), only the others computed
    more = run(tiny, TEXTS, methods="pac:n_aug=4", cache=cache)
    grown = more.counts["cache"]["augmentation pass"]
    assert grown["hits"] == done["hits"] + done["misses"] and grown["misses"] > 0
    again = run(tiny, TEXTS, methods="pac:n_aug=4", cache=cache)
    assert again.counts["cache"]["augmentation pass"] == {"hits": grown["hits"] + grown["misses"],
                                                          "misses": 0}
    assert trail(again) == trail(more)
    np.testing.assert_array_equal(again.scores()["pac"], more.scores()["pac"])


@pytest.mark.slow
def test_the_openai_backend_scores_pac_as_the_hf_backend(tiny):
    from openai_server import FakeOpenAIServer

    import pddkit
    from pddkit.backends.hf_loading import load_model

    lm = load_model(str(tiny), device="cpu", dtype="float32")
    # texts within the context (a cut text keeps one token fewer on the served model, room
    # for the token it generates, so its span and copies would differ from the hf ones)
    texts = [t for t in TEXTS if len(lm.tokenizer(t)["input_ids"]) < 60]
    assert len(texts) == 4
    with FakeOpenAIServer(lm.model, name="tiny", tokenizer=lm.tokenizer, max_model_len=64) as server:
        got = pddkit.score(texts, "tiny", methods="pac", backend="openai",
                           api_base=server.api_base, api_key_env=None, tokenizer=str(tiny))
        sent = len(server.behaviour.requests)
    want = pddkit.score(texts, lm, methods="pac")
    # the server's unbatched float32 forward against the local batched one: <= 4e-6 on a
    # score, as in the batch test above; 1e-5 bounds it
    np.testing.assert_allclose(got["pac"], want["pac"], rtol=0, atol=1e-5)
    assert sent >= len(texts) + 5 * (len(texts) - 1)  # the copies went to the server too
