"""Threshold chosen on validation scores (Shi et al. 2024: maximise accuracy; or a target
FPR), checked against hand-made scores, and the Wilson interval against its formula."""

import math

import numpy as np
import pytest

from pddkit.errors import PddkitError
from pddkit.evaluation.thresholds import Threshold, parse_rule, wilson_interval

# members 1, non-members 0; higher = member
SCORES = [0.9, 0.8, 0.7, 0.4, 0.6, 0.3, 0.2, 0.1]
LABELS = [1, 1, 1, 1, 0, 0, 0, 0]


def test_accuracy_rule_picks_the_most_accurate_cut():
    t = Threshold("accuracy").fit(SCORES, LABELS)
    # cut between 0.6 and 0.7 -> 3 TP, 1 FN (0.4), 0 FP: 7/8; cut between 0.3 and 0.4 ->
    # 4 TP, 1 FP (0.6): 7/8 too; the tie goes to the higher threshold (fewer false positives)
    assert t.threshold_ == pytest.approx(0.65)
    assert t.val_accuracy_ == pytest.approx(7 / 8)
    assert t.val_tpr_ == pytest.approx(3 / 4) and t.val_fpr_ == 0.0
    assert t.val_auc_ == pytest.approx(15 / 16)  # one inverted pair of 16
    assert (t.n_val_, t.n_val_members_, t.n_val_nonmembers_) == (8, 4, 4)
    assert t.predict([0.66, 0.651, 0.649, t.threshold_, 10]).tolist() == [1, 1, 0, 0, 1]


def test_fpr_rule_is_the_lowest_threshold_within_the_target():
    t = Threshold("fpr=0.25").fit(SCORES, LABELS)
    # FPR <= 1/4 allows the non-member at 0.6 above the cut: the cut is between 0.3 and 0.4
    assert t.threshold_ == pytest.approx(0.35)
    assert t.val_fpr_ == pytest.approx(0.25) and t.val_tpr_ == 1.0
    t0 = Threshold("fpr=0.01").fit(SCORES, LABELS)  # no false positive allowed
    assert t0.threshold_ == pytest.approx(0.65) and t0.val_fpr_ == 0.0
    assert t0.val_tpr_ == pytest.approx(0.75)


def test_ends_and_ties():
    # every member below every non-member: the best accuracy is to call nobody a member
    t = Threshold("accuracy").fit([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0])
    assert t.threshold_ == 0.9 and t.predict([0.9, 0.95]).tolist() == [0, 1]
    assert t.val_auc_ == 0.0 and t.val_tpr_ == 0.0 and t.val_fpr_ == 0.0
    # three members, one non-member all at one score: calling all members gives 3/4
    t = Threshold("accuracy").fit([0.5, 0.5, 0.5, 0.5], [1, 1, 1, 0])
    assert t.threshold_ < 0.5 and t.predict([0.5]).tolist() == [1]
    assert t.val_accuracy_ == 0.75 and t.val_fpr_ == 1.0


def test_summary_states_the_expected_fpr_with_its_interval():
    s = Threshold("fpr=0.25", cv_folds=0).fit(SCORES, LABELS).summary()  # no cross-validation
    assert s.expected_fpr == s.val_fpr == 0.25 and s.expected_fpr_ci == wilson_interval(1, 4)
    assert s.rule == "fpr=0.25" and s.n_val == 8 and s.expected_fpr_source == "in-sample"


def test_the_expected_fpr_is_measured_out_of_sample():
    """Each fold's threshold is chosen on the other folds and counted on the held-out
    non-members; pooled, that is the expected rate (the in-sample one is kept beside it)."""
    from sklearn.model_selection import StratifiedKFold

    rng = np.random.default_rng(0)
    y = np.r_[np.ones(30, int), np.zeros(30, int)]
    s = rng.normal(size=60) + 0.8 * y
    t = Threshold("accuracy", cv_folds=5, seed=3).fit(s, y)
    fp = 0
    for train, test in StratifiedKFold(5, shuffle=True, random_state=3).split(s, y):
        cut = Threshold("accuracy", cv_folds=0).fit(s[train], y[train]).threshold_
        fp += int(((s[test] > cut) & (y[test] == 0)).sum())
    assert t.cv_false_positives_ == fp and t.expected_fpr_ == t.cv_fpr_ == fp / 30
    summary = t.summary()
    assert summary.expected_fpr_source == "cross-validated (5 folds)"
    assert summary.expected_fpr_ci == wilson_interval(fp, 30)
    assert summary.val_fpr == t.val_fpr_ == float(((s > t.threshold_) & (y == 0)).mean() * 2)
    # the in-sample rate of an "fpr=0.05" threshold is at most 5% by construction; held out,
    # the rate is usually higher: the optimism the cross-validation removes
    rates = [Threshold("fpr=0.05", seed=i).fit(rng.normal(size=60) + 0.8 * y, y) for i in range(20)]
    assert all(r.val_fpr_ <= 0.05 for r in rates)
    assert np.mean([r.cv_fpr_ for r in rates]) > np.mean([r.val_fpr_ for r in rates])


def test_too_few_texts_per_class_fall_back_to_in_sample():
    t = Threshold("accuracy").fit([0.9, 0.1, 0.8], [1, 0, 1])  # one non-member
    assert t.cv_fpr_ is None and t.expected_fpr_ == t.val_fpr_
    assert t.summary().expected_fpr_source == "in-sample"


def test_wilson_interval_formula():
    lo, hi = wilson_interval(8, 10)
    z = 1.959963984540054
    p, n = 0.8, 10
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert (lo, hi) == pytest.approx((centre - half, centre + half))
    assert (lo, hi) == pytest.approx((0.4902, 0.9433), abs=1e-4)  # the textbook values
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize("labels, message", [
    ([1, 1, 1], r"has only members \(3 texts\): choosing a threshold needs both"),
    ([0, 0], r"has only non-members \(2 texts\)"),
])
def test_one_class_is_one_sentence(labels, message):
    with pytest.raises(PddkitError, match=message):
        Threshold().fit(np.arange(len(labels), dtype=float), labels)


def test_bad_rules_and_unfitted_use():
    assert parse_rule("accuracy") == ("accuracy", None)
    assert parse_rule("FPR=0.05") == ("fpr", 0.05)
    for bad in ("fpr=0", "fpr=1.5", "fpr=x", "youden"):
        with pytest.raises(PddkitError, match="`threshold` must be 'accuracy' or 'fpr=X'"):
            Threshold(bad)
    with pytest.raises(PddkitError, match="not fitted"):
        Threshold().predict([1.0])
    with pytest.raises(PddkitError, match="finite"):
        Threshold().fit([0.1, float("nan")], [1, 0])


def test_cv_folds_of_one_is_one_sentence():
    with pytest.raises(PddkitError, match=r"`cv_folds` must be 0 .* or at least 2, not 1"):
        Threshold("accuracy", cv_folds=1)
