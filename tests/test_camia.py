"""CAMIA (`camia`, SPEC 3e): the 75 features against hand computations and against a
transcription, written here, of the authors' feature functions (util_features.py:43-264,
390-472; run_ours_train_lr.py:195-320); the combination against scipy on hand p-values;
orientation and populations from the calibration texts only. The runs (the repeated-text
pass, the cache, the openai backend, the CLI) are in test_camia_run.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import combine_pvalues

from pddkit.engine.plan import Resources, make_plan
from pddkit.errors import PddkitError
from pddkit.methods import METHODS
from pddkit.methods.camia import CamiaFit
from pddkit.methods.camia_features import (
    FEATURE_NAMES,
    approximate_entropy,
    features,
    lempel_ziv,
    occurrences,
    slope,
)
from pddkit.stats import Observation, TokenStats

# ---------------------------------------------------------------- the authors' functions,
# transcribed here from context_aware_mia@3963cb2 (their arithmetic, our spelling)


def authors_lz(x, bins):  # util_features.py:43-83
    x = np.asarray(x)
    x = np.digitize(x, bins=np.linspace(min(x), 0, 100), right=True)
    edges = np.linspace(np.min(x), np.max(x), bins + 1)[1:]
    sequence = np.searchsorted(edges, x, side="left")
    subs, n, ind, inc = set(), len(sequence), 0, 1
    while ind + inc <= n:
        s = tuple(sequence[ind:ind + inc])
        if s in subs:
            inc += 1
        else:
            subs.add(s)
            ind += inc
            inc = 1
    return len(subs) / n


def authors_apen(x, m, r):  # util_features.py:86-132
    x = np.asarray(x)
    N = x.size
    r *= np.std(x)
    if N <= m + 1:
        return 0

    def phi(m):
        runs = np.array([x[i:i + m] for i in range(N - m + 1)])
        C = np.sum(np.max(np.abs(runs[:, None] - runs[None, :]), axis=2) <= r, axis=0) / (N - m + 1)
        return np.sum(np.log(C)) / (N - m + 1.0)

    return np.abs(phi(m) - phi(m + 1))


def authors_sublist(a, b):  # util_features.py:454-472, for texts with two or more copies
    a, b = np.array(a), np.array(b)
    return [i for i in range(len(a) - len(b) + 1) if np.mean(a[i:i + len(b)] == b) == 1]


def authors_family(x, labels):  # util_features.py:209-264,390-451, one text, find_t left out
    ends = [-1, 200, 300]
    loss = [np.mean(x[:e]) for e in ends]
    ppl = [np.exp(-np.mean(x[:e])) for e in ends]
    above = [np.mean(np.array(x[:200]) >= t) for t in [-1, -2, -3]]
    lz = [authors_lz(x[:200], b) for b in [3, 4, 5]]
    div = [len(set(labels[:e])) / len(labels[:e]) for e in ends]
    count_mean = [np.where(x[:e] > np.mean(x[:e]))[0].size for e in ends]
    return {"loss": loss, "ppl": ppl, "count_above": above, "lz_complexity": lz,
            "token_diversity": div, "count_mean": count_mean,
            "calibrated_loss": [a / d for a, d in zip(loss, div)],
            "calibrated_ppl": [a / d for a, d in zip(ppl, div)]}


def authors_features(x, labels, x_rep, labels_rep) -> dict[str, float]:
    """run_ours_train_lr.py:191-320 for one text: name (as pddkit lists them) -> value."""
    target = list(labels[2:])
    starts = authors_sublist(labels_rep, target)[:-2]  # util_features.py:347-361
    copies = [authors_family(np.asarray(x_rep[s:s + len(target)]), labels) for s in starts]
    single = authors_family(np.asarray(x), labels)
    names = {"loss": "loss", "ppl": "ppl", "count_above": "count_above",
             "lz_complexity": "lz", "token_diversity": "div", "count_mean": "count_mean",
             "calibrated_loss": "loss_div", "calibrated_ppl": "ppl_div"}
    suffix = {"count_above": ["-1", "-2", "-3"], "lz_complexity": ["3", "4", "5"]}
    out = {}
    for key, short in names.items():
        tails = suffix.get(key, ["[:-1]", "[:200]", "[:300]"])
        for j, tail in enumerate(tails):
            out[short + tail] = single[key][j]
            if key != "token_diversity":
                out[f"{short}{tail} 1-2"] = copies[0][key][j] - copies[1][key][j]
                out[f"{short}{tail} 1-3"] = copies[0][key][j] - copies[2][key][j]
    for e in (600, 800, 1000):  # train_lr.py:209-232
        out[f"slope[:{e}]"] = np.polyfit(range(len(x_rep[:e])), x_rep[:e], 1)[0]
        out[f"apen[:{e}]"] = authors_apen(np.asarray(x_rep[:e]), 8, 0.8)
    for cut, tail in ((1000000000, "[:]"), (200, "[:200]"), (300, "[:300]")):  # 297-320
        stop = min(cut, len(x))
        pre = [np.mean(x[:t]) for t in range(1, stop)]
        cur = [x[t] for t in range(1, stop)]
        out[f"above_running_mean{tail}"] = np.mean(np.array(cur) > np.array(pre))
    return out


def repeated(ids, L, rng, copies=6):
    """A repeated text's statistics: ids repeated `copies` times with a separator id 0
    before each later copy (" " + x), and random L."""
    rep = list(ids) + [t for _ in range(copies - 1) for t in [0, *ids]]
    return np.array(rep), -rng.exponential(1.0, len(rep)).astype(np.float32)


def text(rng, n, vocab=40):
    return rng.integers(1, vocab, n), -rng.exponential(2.0, n).astype(np.float32)


# ---------------------------------------------------------------- the features


def test_seventy_five_features_each_named_once():
    assert len(FEATURE_NAMES) == 75 and len(set(FEATURE_NAMES)) == 75
    assert sum(" 1-" in n for n in FEATURE_NAMES) == 42  # 7 families x 3 x (1-2, 1-3)
    ids, L = text(np.random.default_rng(0), 30)
    assert features(ids, L, *repeated(ids, L, np.random.default_rng(1))).shape == (75,)


def test_lempel_ziv_by_hand_and_against_the_authors():
    # digitised on 100 edges from -3 to 0: -3 -> 0, 0 -> 99; two bins split at 49.5:
    # 0 1 0 1 1 1, parsed 0 | 1 | 01 | 11: four phrases over six values
    assert lempel_ziv(np.array([-3.0, 0.0, -3.0, 0.0, 0.0, 0.0]), 2) == 4 / 6
    rng = np.random.default_rng(2)
    for n in (1, 2, 7, 50, 200):
        x = -rng.exponential(2.0, n)
        for bins in (3, 4, 5):
            assert lempel_ziv(x, bins) == authors_lz(x, bins)
    assert lempel_ziv(np.zeros(0), 3) == 0.0


def test_approximate_entropy_by_hand_and_against_the_authors():
    # x = 0 1 0 1, std 0.5, r = 0.5 -> tolerance 0.25, m = 1: every run of length 1 matches
    # half the runs (Phi_1 = log 1/2); runs of length 2: 01 10 01 match 2/3, 1/3, 2/3
    want = abs(math.log(0.5) - (2 * math.log(2 / 3) + math.log(1 / 3)) / 3)
    # float64 sums of a few logs: a few spacings of 1
    assert approximate_entropy(np.array([0.0, 1.0, 0.0, 1.0]), m=1, r=0.5) == pytest.approx(
        want, abs=1e-15)
    assert approximate_entropy(np.full(30, -1.5)) == 0.0  # every run matches every run
    assert approximate_entropy(-np.arange(9.0)) == 0.0  # N <= m + 1 (util_features.py:121)
    rng = np.random.default_rng(3)
    for n in (10, 40, 300):
        x = -rng.exponential(1.0, n)
        # the same float64 comparisons and logs, summed in another order: 1e-12 is a few
        # hundred spacings of the sums (<= 300 logs of magnitude <= log 300)
        assert approximate_entropy(x) == pytest.approx(authors_apen(x, 8, 0.8), abs=1e-12)


def test_slope_is_the_least_squares_slope():
    assert slope(np.array([1.0, 3.0, 5.0])) == pytest.approx(2.0, abs=1e-15)
    x = -np.random.default_rng(4).exponential(1.0, 500)
    # two float64 least-squares solutions of 500 points: 1e-12 relative to |x| <= 10
    assert slope(x) == pytest.approx(np.polyfit(range(500), x, 1)[0], abs=1e-12)
    assert slope(np.array([2.0])) == 0.0 and slope(np.zeros(0)) == 0.0


def test_occurrences_of_the_text_past_its_first_two_tokens():
    ids = np.array([7, 8, 9, 10])
    rep = np.array([7, 8, 9, 10, 3, 8, 9, 10, 3, 8, 9, 10])  # x, " x" tokenised as 3 8 9 10
    assert occurrences(ids, rep) == [2, 6, 10]  # 9 10 found three times, by hand
    assert occurrences(ids, rep[:9]) == [2, 6]  # a cut repeated text: the copies that fit
    assert occurrences(np.array([5, 6]), rep) == []  # nothing past the first two tokens
    # overlapping occurrences count, as the authors' search finds them
    assert occurrences(np.array([1, 1, 4, 4, 4]), np.array([4, 4, 4, 4])) == [0, 1]


@pytest.mark.slow
def test_all_features_equal_the_authors_on_a_long_text():
    rng = np.random.default_rng(5)
    ids, L = text(rng, 350)  # past 300 tokens: every prefix differs
    rep_ids, rep_L = repeated(ids, L, rng)
    got = dict(zip(FEATURE_NAMES, features(ids, L, rep_ids, rep_L)))
    want = authors_features(L.astype(np.float64), ids, rep_L.astype(np.float64), rep_ids)
    assert set(got) == set(want)
    for name in FEATURE_NAMES:
        # the same float64 arithmetic in another order (means of <= 2100 values of
        # magnitude <= 20, the apen logs above): 1e-10 relative is far above its rounding
        assert got[name] == pytest.approx(want[name], rel=1e-10, abs=1e-12), name


def test_copy_features_by_hand_on_a_short_text():
    ids = np.array([4, 5, 6, 6])
    L = np.array([-1.0, -2.0, -3.0, -4.0])
    rep_ids = np.array([4, 5, 6, 6, 2, 5, 6, 6, 2, 5, 6, 6])
    rep_L = np.array([-1.0, -2.0, -3.0, -4.0, -9.0, -9.0, -1.0, -1.0, -9.0, -9.0, -0.5, -0.5])
    f = dict(zip(FEATURE_NAMES, features(ids, L, rep_ids, rep_L)))
    assert f["loss[:-1]"] == -2.0 and f["loss[:200]"] == -2.5
    assert f["ppl[:-1]"] == pytest.approx(math.exp(2.0), rel=1e-15)
    assert f["count_above-2"] == 0.5 and f["count_above-3"] == 0.75
    assert f["div[:-1]"] == 1.0 and f["div[:200]"] == 3 / 4
    assert f["count_mean[:200]"] == 2.0  # -1 and -2 above the mean -2.5
    assert f["loss_div[:200]"] == -2.5 / 0.75
    # L^(1) = (-3, -4), L^(2) = (-1, -1), L^(3) = (-0.5, -0.5); [:-1] keeps the first value
    assert f["loss[:-1] 1-2"] == -2.0 and f["loss[:-1] 1-3"] == -2.5
    assert f["loss[:200] 1-2"] == -2.5 and f["loss[:200] 1-3"] == -3.0
    assert f["count_above-1 1-2"] == -1.0  # 0 of L^(1), both of L^(2) at or above -1
    assert f["loss_div[:200] 1-3"] == -3.0 / 0.75
    # running mean: L_1 = -2 < -1, L_2 = -3 < -1.5, L_3 = -4 < -2: none above
    assert f["above_running_mean[:]"] == 0.0
    # slope of rep_L by least squares, computed by hand from its sums
    t = np.arange(12.0)
    assert f["slope[:600]"] == pytest.approx(
        ((t - t.mean()) * (rep_L - rep_L.mean())).sum() / ((t - t.mean()) ** 2).sum(), abs=1e-14)


def test_short_texts_have_the_documented_values():
    for n in (0, 1, 2):
        ids, L = np.arange(1, n + 1), -np.ones(n, np.float32)
        rep_ids = np.concatenate([ids] * 6) if n else np.zeros(0, np.int64)
        f = dict(zip(FEATURE_NAMES, features(ids, L, rep_ids, -np.ones(len(rep_ids)))))
        assert all(np.isfinite(v) for v in f.values())
        if n <= 1:  # [:-1] is empty: the mean of nothing is 0, div of no ids 1
            assert f["loss[:-1]"] == 0.0 and f["ppl[:-1]"] == 1.0 and f["div[:-1]"] == 1.0
        assert all(f[k] == 0.0 for k in FEATURE_NAMES if " 1-" in k)  # no x_3..x_n
        assert f["above_running_mean[:]"] == 0.0 and f["apen[:600]"] == 0.0
    # a cut repeated text holding two copies: 1-3 differences are 0, 1-2 are computed
    ids, L = np.array([3, 4, 5, 6]), np.array([-1.0, -1.0, -2.0, -2.0])
    rep_ids, rep_L = np.array([3, 4, 5, 6, 2, 4, 5, 6]), np.array([-1.0] * 6 + [-0.5] * 2)
    f = dict(zip(FEATURE_NAMES, features(ids, L, rep_ids, rep_L)))
    assert f["loss[:200] 1-2"] == -1.0 + 0.5 and f["loss[:200] 1-3"] == 0.0


# ---------------------------------------------------------------- calibration and scores


def obs_of(ids, L, rep_ids, rep_L) -> Observation:
    return Observation("t", TokenStats.from_lists(list(ids), list(L)),
                       repeated=TokenStats.from_lists(list(rep_ids), list(rep_L)))


def test_the_scores_equal_percentiles_and_scipy_combinations_on_hand_values():
    # two features, population of three non-members each (oriented values given by hand)
    fit = CamiaFit(sign=np.array([1.0, -1.0]), population=np.array([[1.0, -3.0],
                                                                  [2.0, -2.0],
                                                                  [3.0, -1.0]]),
                   members=2, nonmembers=3)
    f = np.array([2.0, 2.5])  # oriented: 2.0 and -2.5
    # percentileofscore(kind="rank"): 2.0 ties the middle value -> (1 + 2 + 1) * 50 / 3 %;
    # -2.5 is above one value -> (1 + 1) * 50 / 3 %
    p = np.array([4 * 50 / 3, 2 * 50 / 3]) / 100
    np.testing.assert_allclose(fit.p_values(f), p, rtol=1e-15)
    assert fit.score(f, "mean") == pytest.approx(-p.mean(), rel=1e-15)
    for method in ("pearson", "fisher", "mudholkar_george"):
        assert fit.score(f, method) == pytest.approx(
            -combine_pvalues(p, method=method).pvalue, rel=1e-12), method
    # a p of 0 or 1 is clipped to 1e-10 / 1 - 1e-10 (run_ours_different_agg.py replaces them)
    low = np.array([0.5, -10.0])  # oriented 0.5 and 10: below and above every value
    want = combine_pvalues(np.array([1e-10, 1 - 1e-10]), method="fisher").pvalue
    assert fit.score(low, "fisher") == pytest.approx(-want, rel=1e-12)


def calibration_world(rng, n_mem=12, n_non=12):
    """Observations whose members have higher L (less negative) and whose later copies are
    better predicted, and their labels."""
    out, labels = [], []
    for label, count in ((1, n_mem), (0, n_non)):
        for _ in range(count):
            ids, L = text(rng, 60)
            L = L * (0.5 if label else 1.0)
            rep_ids, rep_L = repeated(ids, L, rng)
            out.append(obs_of(ids, L, rep_ids, rep_L))
            labels.append(label)
    return out, np.array(labels)


@pytest.mark.slow
def test_orientation_and_population_come_from_the_calibration_texts():
    spec = METHODS.get("camia")
    obs, labels = calibration_world(np.random.default_rng(6))
    done = spec.calibration.fit(obs, labels, combine="mean", fitted=None)
    fit = done.params["fitted"]
    X = np.stack([features(o.target.ids, o.target.L, o.repeated.ids, o.repeated.L) for o in obs])
    loss = FEATURE_NAMES.index("loss[:-1]")
    assert fit.sign[loss] == -1  # members' loss is higher: oriented down
    assert fit.sign[FEATURE_NAMES.index("ppl[:-1]")] == 1  # their ppl lower
    np.testing.assert_array_equal(fit.population, X[labels == 0] * fit.sign)
    assert done.record["texts"] == 24 and done.record["members"] == 12
    assert done.record["nonmembers"] == 12 and done.record["features"] == 75
    # the score of a text is a function of the calibration texts only
    test = calibration_world(np.random.default_rng(7), 3, 3)[0]
    a = [spec.fn(o, **done.params) for o in test]
    b = [spec.fn(o, **spec.calibration.fit(obs, labels, combine="mean").params) for o in test]
    assert a == b
    # a member-like text scores above a non-member-like one
    assert np.mean(a[:3]) > np.mean(a[3:])


@pytest.mark.slow
def test_lr_equals_a_standardised_logistic_regression_of_the_authors_features():
    from sklearn.linear_model import LogisticRegression

    spec = METHODS.get("camia")
    obs, labels = calibration_world(np.random.default_rng(8))
    done = spec.calibration.fit(obs, labels, combine="lr", fitted=None)
    assert done.record["lr"] == {"penalty": "l2", "C": 1.0, "standardised": True,
                                 "solver": "lbfgs"}

    def authors(o):
        d = authors_features(o.target.L.astype(np.float64), o.target.ids,
                             o.repeated.L.astype(np.float64), o.repeated.ids)
        return np.array([d[n] for n in FEATURE_NAMES])

    X = np.stack([authors(o) for o in obs])
    sd = X.std(axis=0)
    sd[sd == 0] = 1.0
    model = LogisticRegression(C=1.0, max_iter=5000).fit((X - X.mean(axis=0)) / sd, labels)
    test = calibration_world(np.random.default_rng(9), 2, 2)[0]
    for o in test:
        want = model.decision_function(((authors(o) - X.mean(axis=0)) / sd)[None])[0]
        # the same lbfgs fit on features equal to 1e-10 relative: far below lbfgs' own
        # tolerance (1e-4 on the gradient), whose effect on the log-odds is below 1e-3
        assert spec.fn(o, **done.params) == pytest.approx(want, abs=1e-3)


def test_bad_input_is_one_sentence():
    with pytest.raises(PddkitError, match=r"^method camia: combine must be one of mean, "
                                          r"pearson, fisher, mudholkar_george, lr, not 'x'$"):
        make_plan("camia:combine=x", Resources(calibration=True))
    with pytest.raises(PddkitError) as e:
        make_plan("camia", Resources())
    assert str(e.value) == ("method camia needs labelled calibration data: pass `calibration` "
                            "(a labelled table; or labelled data to hold 30% out of)")
    with pytest.raises(PddkitError, match="cannot be given"):
        make_plan("camia:fitted=3", Resources(calibration=True))
    no_rep = Observation("x", TokenStats.from_lists([1, 2], [-1.0, -2.0]))
    fit = CamiaFit(sign=np.ones(75), population=np.zeros((1, 75)), members=1, nonmembers=1)
    with pytest.raises(PddkitError, match="statistics of the repeated text"):
        METHODS.get("camia").fn(no_rep, fitted=fit)
    with pytest.raises(PddkitError, match="one text cannot give"):
        METHODS.get("camia").fn(no_rep)


# ---------------------------------------------------------------- the repeated-text pass


class _Ctx:
    """What engine/repeat_pass.py reads of a PassContext; `stats` records the texts it is
    given and cuts those longer than `context` characters (a stand-in for the backend)."""

    def __init__(self, spans, context, calls=(), calibration=None):
        self.spans, self.names = spans, [f"d.jsonl line {i + 1}" for i in range(len(spans))]
        self.calls, self.calibration, self.target = calls, calibration, object()
        self.counts, self.fields, self.notices, self.context = {"truncated": {}}, {}, [], context
        self.asked = None

    def stats(self, backend, texts, names, desc):
        self.asked = (list(texts), list(names), desc)
        return [TokenStats.from_lists(list(range(min(len(t), self.context))),
                                      [-1.0] * min(len(t), self.context),
                                      truncated=len(t) > self.context) for t in texts]


def test_the_pass_scores_six_copies_of_each_scored_span_and_counts_the_cut_ones():
    from pddkit.engine.repeat_pass import repeat_provider
    from pddkit.methods.base import MethodCall

    ctx = _Ctx(["ab", "a longer text"], context=20, calibration=object())
    repeat_provider(ctx)
    texts, names, desc = ctx.asked
    assert texts == ["ab ab ab ab ab ab", "a longer text" + " a longer text" * 5]  # by hand
    assert names[1] == "the repeated text (six copies) of d.jsonl line 2"
    assert desc == "repeated-text pass"
    assert ctx.counts["truncated"]["repeated"] == 1
    assert ctx.counts["tokens"]["repeated"] == 17 + 20
    assert [len(s) for s in ctx.fields["repeated"]] == [17, 20]
    assert ctx.notices == ["camia: the repeated text (six copies) of 1 of 2 texts (50%) is "
                           "longer than the model's context and was cut to it; the copies "
                           "past the cut are not scored"]
    # the calibration pass runs it again without calibration data of its own
    camia = MethodCall(METHODS.get("camia"), dict(METHODS.get("camia").defaults), "camia")
    ctx = _Ctx(["a longer text"], context=20, calls=(camia,))
    repeat_provider(ctx)
    assert "of 1 of 1 calibration texts (100%)" in ctx.notices[0]
