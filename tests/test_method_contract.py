"""One contract over every registered method: a finite float, deterministic, pure, and
higher for member-like statistics than for non-member-like ones."""

import itertools

import numpy as np
import pytest

from pddkit.methods import METHODS
from pddkit.stats import Observation, TokenStats

VOCAB = 50
LOG_FREQ = np.log(np.full(VOCAB, 0.995))  # -p log f stays below every default cap


def make_obs(rng, member: bool, n: int) -> Observation:
    ids = rng.integers(0, VOCAB, n)
    L = (-1.0 if member else -5.0) + 0.3 * rng.standard_normal(n)
    H = 1.0 + 0.2 * rng.random(n)
    M2 = H * H + 1.0
    lower = TokenStats(rng.integers(0, VOCAB, n + 2), np.full(n + 2, -6.0, np.float32),
                       H.astype(np.float32), M2.astype(np.float32))
    ref = TokenStats(rng.integers(0, VOCAB, n - 1 if n > 1 else 1),
                     np.full(max(n - 1, 1), -3.0, np.float32), np.ones(max(n - 1, 1), np.float32),
                     np.full(max(n - 1, 1), 2.0, np.float32))
    # gapk: the top-1 log-probability is -0.2 H (a possible value: at least -H, the mean of
    # log P) or the text's own token where that is higher (the token is the argmax there)
    Lmax = np.maximum(L, -0.2 * H)
    # acmia: the tempered log-probabilities' mean over first occurrences one nat below the
    # text's own mean log-probability for a member, one above for a non-member (ac at b <= 1:
    # +1 and -1), and the normalised term +1 / -1
    first = np.unique(ids, return_index=True)[1]
    mean_first = float(np.mean(L.astype(np.float32).astype(np.float64)[first]))
    sign = 1.0 if member else -1.0
    tempered = np.stack([np.full(52, mean_first - sign), np.full(52, sign)])
    tgt = TokenStats(ids, L.astype(np.float32), H.astype(np.float32), M2.astype(np.float32),
                     Lmax=Lmax.astype(np.float32), tempered=tempered)
    nbs = tuple(TokenStats(ids, np.full(n, -6.0, np.float32), H.astype(np.float32),
                           M2.astype(np.float32)) for _ in range(3))
    # the probe's input is not made up here: a LinearProbe fitted on separable activations
    # (members shifted along one direction) scores this text's own activation
    act = rng.standard_normal((1, WIDTH)) + (SHIFT if member else -SHIFT)
    log_odds = float(PROBE.decision_function(act)[0])
    # pac: a member's word-swapped copies are far more polarised than the text (PD 8 vs 0)
    aug = tuple(TokenStats.from_lists([1, 2], [-1.0, -9.0] if member else [-5.0, -5.0])
                for _ in range(5))
    # samia: a member's continuations recall the text's second half, a non-member's do not
    half = " ".join(TEXT.split()[len(TEXT.split()) // 2:])
    samples = tuple(half if member else f"nothing of it {k}" for k in range(10))
    # infill: every position's argmax has log-probability -0.5 (the same later tokens), far
    # above a non-member's own tokens (-5), close to a member's (-1)
    infill = tuple((i, TokenStats(ids, np.where(np.arange(n) == i, -0.5, L).astype(np.float32),
                                  tgt.H, tgt.M2)) for i in range(n))
    # recall / conrecall: non-member shots halve a member's log-likelihood (x2), barely move a
    # non-member's (x1.1); member shots move neither
    scaled = lambda f: TokenStats(ids, (L * f).astype(np.float32), tgt.H, tgt.M2)  # noqa: E731
    given = {("nonmember", 7): scaled(2.0 if member else 1.1), ("member", 7): scaled(1.0)}
    # fsd: tuning on non-members raises a non-member's log-probabilities by 2 nats, a
    # member's by 0.1
    tuned = TokenStats(ids, (L + (0.1 if member else 2.0)).astype(np.float32), tgt.H, tgt.M2)
    # camia: the text then five copies (separator id 0), a member's copies predicted better
    # (-0.1) than a non-member's (its own L again)
    rep_L = np.concatenate([L] + [[-0.1] + [-0.1] * n if member else [-6.0, *L]] * 5)
    rep_ids = np.concatenate([ids] + [[0, *ids]] * 5)
    repeated = TokenStats.from_lists(list(rep_ids), list(rep_L))
    # emmia: its score is computed for all texts at once (engine/emmia_pass.py; its loop is
    # tested in test_emmia.py); the text reads its own entry, minus a prefix AUC
    em = {("minkpp", 10, "auc"): -0.25 if member else -0.75}
    # decop: a member is answered with the verbatim letter on all 24 orders, a non-member
    # with A whatever the order (6 of 24 right)
    quiz = {("auto", o): ("ABCD"[o.index(0)] if member else "A", (0.25,) * 4)
            for o in itertools.permutations(range(4))}
    return Observation(TEXT, tgt, lower=lower, reference=ref, log_freq=LOG_FREQ, neighbors=nbs,
                       probe=log_odds, augmented=aug, samples=samples, infill=infill,
                       conditioned=given, finetuned=tuned, repeated=repeated, emmia=em,
                       quiz=quiz)


def _fitted_probe():
    from pddkit.resources.probe import LinearProbe

    rng = np.random.default_rng(42)
    y = np.r_[np.ones(60), np.zeros(60)].astype(int)
    X = rng.standard_normal((120, WIDTH)) + np.where(y[:, None] == 1, SHIFT, -SHIFT)
    return LinearProbe().fit(X, y, layer=1)


WIDTH = 16
SHIFT = np.r_[3.0, np.zeros(WIDTH - 1)]  # membership is a direction of the activation
PROBE = _fitted_probe()


ALL = METHODS.names()
# five sentences, so that ngram has a prompt (sentences 1-3) and a reference (the last), which
# a member's continuations (samia's second half) cover and a non-member's do not
TEXT = ("The same text for every observation. Only the model statistics differ. A third "
        "sentence follows here. A fourth one comes next. The last sentence ends the text.")


def test_registry_holds_the_eight_spec_methods():
    assert set(ALL) >= {"loss", "zlib", "lowercase", "ref", "mink", "minkpp", "surp", "dcpdd"}


def fitted(spec, observations, labels) -> dict:
    """The defaults, or for a method fitting on calibration texts (acmia without beta) the
    hyperparameters its fit on `observations` leaves (a run fits them on calibration data)."""
    params = dict(spec.defaults)
    if spec.calibration is not None and spec.calibration.needed(params):
        params = spec.calibration.fit(observations, np.asarray(labels), **params).params
    return params


@pytest.mark.parametrize("name", ALL)
def test_contract(name):
    spec = METHODS.get(name)
    rng = np.random.default_rng(0)
    members = [make_obs(rng, True, n) for n in rng.integers(1, 60, 40)]
    nonmembers = [make_obs(rng, False, n) for n in rng.integers(1, 60, 40)]
    params = fitted(spec, members + nonmembers, [1] * 40 + [0] * 40)
    for o in members + nonmembers:
        s = spec.fn(o, **params)
        assert isinstance(s, float) and np.isfinite(s)
        assert spec.fn(o, **params) == s  # deterministic
    before = members[0].target.L.copy()
    spec.fn(members[0], **params)
    assert np.array_equal(before, members[0].target.L)  # pure: inputs untouched
    sm = [spec.fn(o, **params) for o in members]
    sn = [spec.fn(o, **params) for o in nonmembers]
    assert min(sm) > max(sn), f"{name}: members must score higher"


@pytest.mark.parametrize("name", ALL)
def test_edge_statistics_stay_finite(name):
    """One token, ties, probability one, zero variance, near-zero probability."""
    spec = METHODS.get(name)
    cases = [  # ids, L, H, M2 and Lmax (gapk: the top-1 log-probability, at least L)
        ([0], [0.0], [0.0], [0.0], [0.0]),
        ([1, 1, 1], [-2.0] * 3, [1.0] * 3, [1.0] * 3, [-1.0] * 3),
        ([2, 3], [-80.0, -1e-7], [0.0, 10.0], [0.0, 100.0], [0.0, -1e-7]),
    ]
    for ids, L, H, M2, Lmax in cases:
        st = TokenStats.from_lists(ids, L, H, M2, Lmax=Lmax,
                                   tempered=[[L[0] - 1.0] * 52, [0.0] * 26 + [3.4e38] * 26])
        one_point = TokenStats.from_lists(ids, [0.0] * len(ids))  # infill: x' certain everywhere
        o = Observation("x", st, lower=st, reference=st, log_freq=LOG_FREQ, neighbors=(st,),
                        probe=0.5, infill=tuple((i, one_point) for i in range(len(ids))),
                        conditioned={("member", 7): st, ("nonmember", 7): one_point},
                        finetuned=one_point, repeated=st,
                        emmia={("minkpp", 10, "auc"): 0.0},
                        quiz={("auto", o): (None, None) for o in itertools.permutations(range(4))})
        assert np.isfinite(spec.fn(o, **fitted(spec, [o, o], [1, 0])))


def test_every_method_declares_paper_and_summary():
    for spec in METHODS:
        assert spec.paper and spec.summary
        for v in spec.defaults.values():
            # a str: a choice (infill's variant); None: chosen on calibration data (acmia's beta)
            assert isinstance(v, (int, float, str)) or (v is None and spec.calibration)
