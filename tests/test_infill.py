"""`infill` (Raoof et al. 2025, SPEC 3b): the formula on hand-made statistics for both
variants, bad hyperparameters refused before any model loads, the argmax (TokenStats.top)
kept by the statistics store, and on a tiny model: each r_i of the default variant
recomputed from plain forwards over x and every full-length x' (the variance by its
definition), the reference variant against a transcription of the authors'
`calculateInfillPerplexity` on [BOS] + x, each within an error bound propagated from float32
rounding, the same scores for batch 1 and 16, a rerun with the cache computing nothing, and
the `openai` backend skipping infill with a notice."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_models import small_tokenizer

from pddkit.errors import PddkitError
from pddkit.methods.infill import infill, infill_ratios
from pddkit.stats import Observation, TokenStats

TEXTS = [
    "the quick quick brown brown fox jumps over the lazy lazy dog",
    "lazy dog dog jumps over the the quick fox",
    "the fox fox fox jumps jumps over over the dog",
    "quick brown dog jumps over the lazy fox and the quick brown dog",
]
ARGMAX_AT = [2, 5, 6, 9, 12]  # the known argmax positions of the made sequence (`made`)


def st(L, H, M2, ids=(1, 2, 3, 4)) -> TokenStats:
    return TokenStats.from_lists(list(ids), L, H, M2)


# x: var = M2 - H^2 = 4, 1, 4, 4 -> z = (L + H) / sd = 0, -1, 0.75, -1
X = st([-1.0, -2.0, -0.5, -3.0], [1.0, 1.0, 2.0, 1.0], [5.0, 2.0, 8.0, 5.0])
# x_1 infilled: positions 1.. z = 0.5, 0, 0 (var 1, 1, 1)
V1 = st([-1.0, -0.5, -1.0, -2.0], [1.0, 1.0, 1.0, 2.0], [5.0, 2.0, 2.0, 5.0], (1, 9, 3, 4))
# x_3 infilled, with an entropy unlike x's at 3 (hand-made) so that the reference code's
# variance, M2_3(x') - H_3(x)^2 = 7, differs from x''s own, 8 - 4 = 4
V3 = st([-1.0, -2.0, -0.5, -1.0], [1.0, 1.0, 2.0, 2.0], [5.0, 2.0, 8.0, 8.0], (1, 2, 3, 9))
HAND = Observation(text="w x y z", target=X, infill=((1, V1), (3, V3)))


def test_the_formula_on_hand_made_statistics_both_variants():
    r, floored = infill_ratios(X, HAND.infill, 5, "corrected")
    # r_1 = (-1 - 0.5) + (0.75 - 0) + (-1 - 0); r_3 = -1 - (-1 + 2) / 2; argmax positions 0
    # every value is a short sum of dyadic fractions or a quotient by sqrt(4) = 2: exact in
    # float64 up to the last bit, so 1e-15 (a few ulp) is the tolerance throughout
    np.testing.assert_allclose(r, [0.0, -1.75, 0.0, -1.5], rtol=1e-15)
    assert not floored.any()
    assert infill(HAND) == pytest.approx(-1.75, rel=1e-15)  # k=0.2: m = max(1, floor(0.8)) = 1
    assert infill(HAND, k=0.5) == pytest.approx((-1.75 - 1.5) / 2, rel=1e-15)
    assert infill(HAND, k=1.0) == pytest.approx(-3.25 / 4, rel=1e-15)
    assert infill(HAND, k=0.5, lookahead=1) == pytest.approx((-0.75 - 1.5) / 2, rel=1e-15)  # j = 2 only
    assert infill(HAND, k=0.5, lookahead=0) == pytest.approx((-1.5 - 1.5) / 2, rel=1e-15)  # i only
    # reference: every term over position i's sd (x: 1; x': sqrt(M2_i(x') - H_i(x)^2)), and
    # the later positions stop before the last token (3): r_1 = (L_j(x) - L_j(x')) over
    # j = 1, 2 = -1.5 + 0.5; r_3 (the last token: its own term only) = -1 - (-1 + 2) / sqrt(7)
    r, _ = infill_ratios(X, HAND.infill, 5, "reference")
    np.testing.assert_allclose(r, [0.0, -1.0, 0.0, -1.0 - 1.0 / np.sqrt(7.0)], rtol=1e-15)
    assert infill(HAND, k=0.5, variant="reference") == pytest.approx((-2.0 - 1.0 / np.sqrt(7.0)) / 2,
                                                                     rel=1e-15)


def test_a_floored_variance_among_the_lowest_ratios_is_a_counted_fallback():
    from pddkit.methods.base import METHODS, MethodCall

    call = MethodCall(METHODS.get("infill"), dict(METHODS.get("infill").defaults), "infill")
    assert call.fallback(HAND) is None
    flat = st([-1.0, -0.5, -1.0, 0.0], [1.0, 1.0, 1.0, 0.0], [5.0, 2.0, 2.0, 0.0], (1, 9, 3, 4))
    o = Observation(text="w x y z", target=X, infill=((1, flat),))  # a one-point P_3 in x'
    assert call(o) == pytest.approx(-1.75, rel=1e-15) and "floored at 1e-12" in call.fallback(o)
    # floored in r_3 = -1, but the lowest (k=0.2: one) is r_1 = -1.75 of V1: no fallback
    assert call.fallback(Observation(text="w x y z", target=X, infill=((1, V1), (3, flat)))) is None


def test_a_variant_shorter_than_the_lookahead_needs_is_one_sentence():
    with pytest.raises(PddkitError, match="holds 2 tokens"):
        infill(Observation(text="w", target=X, infill=((1, st([-1, -1], [1, 1], [2, 2], (1, 9))),)))


@pytest.mark.parametrize("spec, says", [
    ("infill:k=0", "k must be in (0, 1]"),
    ("infill:k=1.5", "k must be in (0, 1]"),
    ("infill:lookahead=-1", "lookahead must be a whole number >= 0"),
    ("infill:variant=paper", "variant must be one of corrected, reference"),
])
def test_bad_hyperparameters_are_one_sentence_before_any_model_loads(spec, says):
    from pddkit.engine.plan import check_params
    from pddkit.methods.base import Need, resolve_methods

    [call] = resolve_methods(spec, {Need.INFILL})
    with pytest.raises(PddkitError) as err:
        check_params(call)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_store_keeps_the_argmax_ids_and_reads_entries_without_them_as_none(tmp_path):
    from pddkit.cache.store import StatsStore

    with StatsStore.open(tmp_path / "c") as store:
        with_top = TokenStats(X.ids, X.L, X.H, X.M2, top=np.array([1, 7, 3, 300_000]))
        store.put_many([("a" * 64, with_top), ("b" * 64, X)])
    got = StatsStore.open(tmp_path / "c").get(["a" * 64, "b" * 64])
    np.testing.assert_array_equal(got["a" * 64].top, [1, 7, 3, 300_000])
    assert got["a" * 64].top.dtype == np.int64 and got["b" * 64].top is None


def test_the_variants_replace_each_non_argmax_token_and_stop_after_the_lookahead():
    from pddkit.engine.infill_pass import variants

    ids, top = np.array([5, 6, 7, 8, 9]), np.array([5, 1, 7, 2, 3])
    assert variants(ids, top, 2) == [(1, [5, 1, 7, 8]), (3, [5, 6, 7, 2, 9]), (4, [5, 6, 7, 8, 3])]
    assert variants(ids, top, 0) == [(1, [5, 1]), (3, [5, 6, 7, 2]), (4, [5, 6, 7, 8, 3])]


# --- on a tiny model --------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random one-layer GPT-2 whose weights (initializer_range 0.5) give peaked
    distributions: the default 0.02 gives near-uniform ones, whose variance of log P
    (M2 - H^2, ~0.005 against H^2 ~ 32) float32 rounding leaves at 3 digits."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    directory = tmp_path_factory.mktemp("infill") / "tiny"
    tok = small_tokenizer()
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(tok),
                               n_positions=64, bos_token_id=0, eos_token_id=0,
                               initializer_range=0.5)).save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def lm(tiny):
    from pddkit.backends.hf_loading import load_model

    return load_model(str(tiny), device="cpu", dtype="float32")


_PLAIN: dict = {}


def plain(model, ids: list[int]):
    """From one unbatched forward of [start] + ids (start = 0, the tiny model's BOS), float32
    logits taken to float64: log P_i over the vocabulary, mu_i = E[log P] and the variance
    of log P by its definition, E[(log P - mu_i)^2]; remembered."""
    import torch

    key = (id(model), tuple(ids))
    if key not in _PLAIN:
        with torch.no_grad():
            logits = model(torch.tensor([[0, *ids]])).logits[0, :-1]
        logp = torch.log_softmax(logits.double(), -1)
        p = logp.exp()
        mu = (p * logp).sum(-1)
        var = (p * (logp - mu[:, None]) ** 2).sum(-1)
        _PLAIN[key] = (logp.numpy(), mu.numpy(), var.numpy())
    return _PLAIN[key]


# what the pass's float32 statistics may be off by: L, H and M2 are below 32 in size here
# (asserted), where float32 values are 2^-19 = 1.9e-6 apart; rounding of the stored value,
# of the softmax and of logits from another batch shape: 4 of those steps, 7.6e-6
DELTA = 4 * 2.0 ** -19


def term_bound(a: float, H: float, var: float) -> float:
    """How far a / sqrt(var), with a = L + H (or a difference of two L) and var = M2 - H^2,
    can move when L, H and M2 each move by DELTA: |da| <= 2 DELTA, |dvar| <= DELTA (M2)
    + 2 H DELTA (H^2), and d(a / sd) = da / sd - (a / sd) dvar / (2 var)."""
    sd = np.sqrt(var)
    return 2 * DELTA / sd + abs(a) / sd * (DELTA + 2 * abs(H) * DELTA) / (2 * var)


def by_hand(model, ids: list[int], lookahead: int) -> tuple[np.ndarray, np.ndarray]:
    """(r_i of SPEC 3b's formula, each one's error bound) from plain forwards over x and
    each full-length x': every position j standardised with its own mean and variance in
    its own sequence, z_j(t | s) = (log p_s(t) - mu_j(s)) / sd_j(s)."""
    n = len(ids)
    lp, mu, var = plain(model, ids)
    r, bound = np.zeros(n), np.zeros(n)
    for i in range(n):
        v = int(lp[i].argmax())
        if v == ids[i]:
            continue  # r_i = 0
        lq, mq, vq = plain(model, [*ids[:i], v, *ids[i + 1:]])
        terms = [(lp, mu, var, i, ids[i], 1), (lq, mq, vq, i, v, -1)]
        for j in range(i + 1, min(i + lookahead, n - 1) + 1):
            terms += [(lp, mu, var, j, ids[j], 1), (lq, mq, vq, j, ids[j], -1)]
        for logp, m, s, j, t, sign in terms:
            a = logp[j, t] - m[j]
            r[i] += sign * a / np.sqrt(s[j])
            bound[i] += term_bound(a, -m[j], s[j])
    return r, bound


def authors_ratios(model, input_ids: list[int], token_len: int) -> tuple[np.ndarray, np.ndarray]:
    """The ratios of neginraoof/mink-plus-plus run.py `calculateInfillPerplexity`
    (run.py:20-73), written out here for one `token_len`, in float64 from the model's float32
    logits: `input_ids` is what `tokenizer.encode` gives with a tokenizer that puts a BOS
    before a text (here the start token 0, then x). For each position i predicting token
    i + 1 that is not the argmax: x' with the argmax there, run in full; mu and sigma (a
    variance) of x and x' (sigma' centred on x's mu, run.py:54); the ratio at i over
    position i's mu and sigma (run.py:61), then for j in range(i, min(i + token_len, T - 3))
    the same for token j + 2 (run.py:64-67); 0 at argmax positions. With each its bound."""
    import torch

    def stats(seq):
        with torch.no_grad():
            logits = model(torch.tensor([seq])).logits[0]
        lp = torch.log_softmax(logits.double(), -1)
        return lp.numpy(), (lp.exp() * lp).sum(-1).numpy(), (lp.exp() * lp ** 2).sum(-1).numpy()

    lp, mu, m2 = stats(input_ids)
    sigma = m2 - mu ** 2
    T = len(input_ids)
    out, bounds = [], []
    for i in range(T - 1):
        token, opt = input_ids[i + 1], int(lp[i].argmax())
        if token == opt:
            out.append(0.0)
            bounds.append(0.0)
            continue
        alt = list(input_ids)
        alt[i + 1] = opt
        lq, mu_o, m2_o = stats(alt)
        sigma_o = m2_o - mu ** 2  # x's mu, as the code squares it
        ratio = (lp[i, token] - mu[i]) / np.sqrt(sigma[i]) - (lq[i, opt] - mu_o[i]) / np.sqrt(sigma_o[i])
        bound = term_bound(lp[i, token] - lq[i, opt], -mu[i], sigma[i])
        for j in range(i, min(i + token_len, T - 3)):
            nxt = input_ids[j + 2]
            ratio += ((lp[j + 1, nxt] - mu[i]) / np.sqrt(sigma[i])
                      - (lq[j + 1, nxt] - mu_o[i]) / np.sqrt(sigma_o[i]))
            bound += term_bound(lp[j + 1, nxt] - lq[j + 1, nxt], -mu[i], sigma[i])
        out.append(float(ratio))
        bounds.append(float(bound))
    return np.array(out), np.array(bounds)


@pytest.fixture(scope="module")
def made(lm) -> str:
    """A text whose tokens at ARGMAX_AT are set, left to right, to the argmax of a plain
    forward over what precedes them, and are the only argmax positions."""
    ids = lm.tokenizer("the quick brown fox jumps over the lazy dog and the quick brown fox",
                       add_special_tokens=False)["input_ids"]
    for i in ARGMAX_AT:
        ids[i] = int(plain(lm.model, ids[:i + 1])[0][i].argmax())
    text = lm.tokenizer.decode(ids)
    assert lm.tokenizer(text, add_special_tokens=False)["input_ids"] == ids  # round trip
    top = plain(lm.model, ids)[0].argmax(-1)
    assert [i for i in range(len(ids)) if top[i] == ids[i]] == ARGMAX_AT
    return text


def provide(lm, texts: list[str], methods: str):
    """The target pass and the infill provider on the hf backend, as a run makes them."""
    from pddkit.backends.hf import HFBackend
    from pddkit.engine.config import RunConfig
    from pddkit.engine.executors import LocalExecutor
    from pddkit.engine.infill_pass import infill_provider
    from pddkit.engine.pass_context import PassContext
    from pddkit.engine.passes import target_pass
    from pddkit.methods.base import Need, resolve_methods

    names = [f"text {i + 1}" for i in range(len(texts))]
    ctx = PassContext(texts=texts, names=names, ids=names, config=RunConfig(model=lm.name),
                      calls=tuple(resolve_methods(methods, {Need.INFILL})),
                      target=HFBackend(lm, batch_size=3), executor=LocalExecutor(),
                      load_backend=None)
    target_pass(ctx)
    infill_provider(ctx)
    return ctx


def test_each_ratio_recomputed_from_plain_forwards_over_x_and_every_variant(lm, made):
    ctx = provide(lm, [made, *TEXTS], "infill,infill:lookahead=2,variant=reference")
    target, variants = ctx.fields["target"], ctx.fields["infill"]
    assert [i for i, _ in variants[0]] == [i for i in range(len(target[0])) if i not in ARGMAX_AT]
    for x, infilled in zip(target, variants):
        ids = x.ids.tolist()
        lp, _, _ = plain(lm.model, ids)
        top = lp.argmax(-1)
        np.testing.assert_array_equal(x.top, top)  # the pass's argmax, a plain forward's
        assert [i for i, _ in infilled] == [i for i in range(len(ids)) if top[i] != ids[i]]
        for i, v in infilled:  # x_i replaced by the argmax, cut after i + the largest lookahead
            assert v.ids.tolist() == [*ids[:i], int(top[i]), *ids[i + 1:i + 6]]
            assert np.abs(np.r_[v.L, v.H, v.M2]).max() < 32  # DELTA's premise
        got, _ = infill_ratios(x, infilled, 5, "corrected")
        want, bound = by_hand(lm.model, ids, 5)
        assert (got[top == x.ids] == 0).all() and (want != 0).sum() == len(infilled)
        assert (np.abs(got - want) <= bound).all(), np.abs(got - want) / np.maximum(bound, 1e-300)
        for lookahead in (2, 5):  # the authors' code, transcribed, on [BOS] + x
            got, _ = infill_ratios(x, infilled, lookahead, "reference")
            want, bound = authors_ratios(lm.model, [0, *ids], lookahead)
            assert (np.abs(got - want) <= bound).all(), (lookahead, got - want, bound)
        # the two variants are different numbers (well beyond the bounds) wherever a later
        # position enters r_i
        ref, _ = infill_ratios(x, infilled, 5, "reference")
        cor, _ = infill_ratios(x, infilled, 5, "corrected")
        assert np.abs(ref - cor).max() > 100 * bound.max()
    counts = ctx.counts["infill"]
    assert counts["variants"] == sum(len(v) for v in variants) and counts["lookahead"] == 5
    assert counts["tokens"] == sum(len(v) for per in variants for _, v in per)  # all distinct here
    # each text's key/value cache shared by its variants: only the windows run
    assert counts["shared_kv_cache"] and counts["tokens_run"] < counts["tokens"]


def run(tiny, texts, methods="infill", order=None, batch_size=8, cache=None):
    """A labelled run through the Python API; ids name the texts whatever the order."""
    import pddkit

    order = list(range(len(texts))) if order is None else order
    return pddkit.evaluate([texts[i] for i in order], [i % 2 for i in order], str(tiny),
                           methods=methods, ids=[f"t{i}" for i in order], device="cpu",
                           dtype="float32", batch_size=batch_size, cache=cache, n_bootstrap=10,
                           blind=False)


METHODS = "infill,infill:k=1.0,variant=reference"


def test_same_scores_for_batch_1_and_16_in_any_order(tiny, made):
    texts = [made, *TEXTS]
    a = run(tiny, texts, METHODS, batch_size=1)
    b = run(tiny, texts, METHODS, batch_size=16, order=list(reversed(range(len(texts)))))
    for label in ("infill:k=0.2,lookahead=5,variant=corrected",
                  "infill:k=1.0,lookahead=5,variant=reference"):
        sa, sb = dict(zip(a.ids, a.scores()[label])), dict(zip(b.ids, b.scores()[label]))
        # another batch shape moves each float32 statistic by at most DELTA, so each r_i by
        # at most its bound from term_bound (below 5e-4 on these texts: the first tiny-model
        # test), and a mean of r_i as much: 5e-4
        for k in sa:
            assert sa[k] == pytest.approx(sb[k], abs=5e-4), (label, k)
    assert a.counts["infill"]["variants"] == b.counts["infill"]["variants"] > 0


def test_a_rerun_with_the_cache_computes_nothing_and_scores_the_same(tiny, made, tmp_path):
    first = run(tiny, [made, *TEXTS], cache=tmp_path / "cache")
    assert first.counts["cache"]["infilling pass"]["misses"] == first.counts["infill"]["variants"]
    again = run(tiny, [made, *TEXTS], cache=tmp_path / "cache")  # the argmax ids come from the cache
    assert again.counts["cache"]["target pass"]["misses"] == 0
    assert again.counts["cache"]["infilling pass"] == {
        "hits": first.counts["infill"]["variants"], "misses": 0}
    np.testing.assert_array_equal(again.scores()["infill"], first.scores()["infill"])


def test_the_openai_backend_skips_infill_with_a_notice(tiny, lm):
    from openai_server import FakeOpenAIServer

    import pddkit

    with FakeOpenAIServer(lm.model, name="tiny", tokenizer=lm.tokenizer, max_model_len=64) as server:
        res = pddkit.evaluate(TEXTS, [1, 0, 1, 0], "tiny", methods="loss,infill", backend="openai",
                              api_base=server.api_base, api_key_env=None, tokenizer=str(tiny),
                              n_bootstrap=10, blind=False)
        sent = len(server.behaviour.requests)
    assert list(res.scores()) == ["loss"] and "infill" not in res.counts
    assert any(n.startswith("skipping infill: the backend gives only token log-probabilities")
               for n in res.notices), res.notices
    # the capability probe's 3 requests (openai_probe.py: a greedy token, its echo, the
    # options) and the target pass: no variant sent
    assert sent <= 3 + len(TEXTS)


@pytest.mark.slow
def test_the_ray_engine_scores_infill_as_the_local_engine(tiny, made, tmp_path, local_ray):
    """The variants (token ids) through RayExecutor.id_stats behind the cache, and the
    argmax ids carried back from the actor. The actors run every variant in full, the local
    engine shares each text's key/value cache (backends/infill_windows.py): the same
    numbers up to float32 rounding, not bit for bit."""
    import torch

    import pddkit

    texts = [made, *TEXTS]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the actor runs: one thread or two sum some products apart
    try:
        local = run(tiny, texts, METHODS, cache=tmp_path / "local")  # the same batches
    finally:
        torch.set_num_threads(threads)
    far = pddkit.evaluate(texts, [i % 2 for i in range(len(texts))], str(tiny), methods=METHODS,
                          ids=[f"t{i}" for i in range(len(texts))], device="cpu",
                          dtype="float32", cache=tmp_path / "cache", n_bootstrap=10,
                          blind=False, engine="ray", actors=1)
    assert far.counts["cache"]["infilling pass"]["misses"] == far.counts["infill"]["variants"] > 0
    assert local.counts["infill"]["shared_kv_cache"] and not far.counts["infill"]["shared_kv_cache"]
    # every variant in full against each text's shared cache: float32 statistics each off
    # by at most DELTA, a score (a mean of r_i) by at most 5e-4, as in the batch test
    for label, want in local.scores().items():
        np.testing.assert_allclose(far.scores()[label], want, rtol=0, atol=5e-4)


def test_variants_near_the_end_of_a_full_context_stay_inside_it(lm):
    """A text filling the 64-token context: a batch mixing a variant at its last position
    (one new token) with earlier ones pads the short row, whose positions must stay below 64."""
    from pddkit.backends.hf import HFBackend
    from pddkit.engine.infill_pass import variants

    backend = HFBackend(lm, batch_size=8)
    enc = backend.encode(["the quick brown fox jumps over the lazy dog " * 12], ["long"])
    (base,) = backend.stats_for_ids(enc.ids, enc.truncated)
    assert len(base) == 63  # cut to the context, start token included
    rows = [(i, seq) for i, seq in variants(base.ids, base.top, 5) if i >= 55]
    rows.append((62, [*base.ids[:62].tolist(), int(base.top[62])]))  # the last position itself
    (got,) = backend.infill_stats([base], [rows])
    want = backend.runner.run_ids([list(seq) for _, seq in rows])
    # two float32 computations of log-probabilities below 32 in size, each within DELTA
    # (7.6e-6) of the exact value: 2e-5 bounds their difference (2 DELTA = 1.5e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.L, w.L, atol=2e-5)
