"""Threshold chosen on validation scores (Shi et al. 2024: maximise accuracy; or a target
FPR), its out-of-sample false-positive rate (folds of texts or of whole books) on scores
whose answers are known by hand, and the Wilson interval against textbook values."""

import numpy as np
import pytest

from pddkit.errors import PddkitError
from pddkit.evaluation.thresholds import Threshold, group_folds, parse_rule, wilson_interval

# members 1, non-members 0; higher = member
SCORES = [0.9, 0.8, 0.7, 0.4, 0.6, 0.3, 0.2, 0.1]
LABELS = [1, 1, 1, 1, 0, 0, 0, 0]


# Thresholds are midpoints of two float64 scores and rates counts over counts: one or two
# roundings of 1.1e-16 from the decimals written here, so rel=1e-12 throughout.


def test_accuracy_rule_picks_the_most_accurate_cut():
    t = Threshold("accuracy").fit(SCORES, LABELS)
    # cut between 0.6 and 0.7 -> 3 TP, 1 FN (0.4), 0 FP: 7/8; cut between 0.3 and 0.4 ->
    # 4 TP, 1 FP (0.6): 7/8 too; the tie goes to the higher threshold (fewer false positives)
    assert t.threshold_ == pytest.approx(0.65, rel=1e-12)
    assert t.val_accuracy_ == pytest.approx(7 / 8, rel=1e-12)
    assert t.val_tpr_ == pytest.approx(3 / 4, rel=1e-12) and t.val_fpr_ == 0.0
    assert t.val_auc_ == pytest.approx(15 / 16, rel=1e-12)  # one inverted pair of 16
    assert (t.n_val_, t.n_val_members_, t.n_val_nonmembers_) == (8, 4, 4)
    assert t.predict([0.66, 0.651, 0.649, t.threshold_, 10]).tolist() == [1, 1, 0, 0, 1]


def test_fpr_rule_is_the_lowest_threshold_within_the_target():
    t = Threshold("fpr=0.25").fit(SCORES, LABELS)
    # FPR <= 1/4 allows the non-member at 0.6 above the cut: the cut is between 0.3 and 0.4
    assert t.threshold_ == pytest.approx(0.35, rel=1e-12)
    assert t.val_fpr_ == pytest.approx(0.25, rel=1e-12) and t.val_tpr_ == 1.0
    t0 = Threshold("fpr=0.01").fit(SCORES, LABELS)  # no false positive allowed
    assert t0.threshold_ == pytest.approx(0.65, rel=1e-12) and t0.val_fpr_ == 0.0
    assert t0.val_tpr_ == pytest.approx(0.75, rel=1e-12)


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
    """A known answer: nine never-seen texts at 0.1 and one at 0.95, above every member.
    In sample, "fpr=0.05" puts the threshold at 0.95 (no false positive). Held out, the
    0.95 text meets a threshold chosen on the others (just above 0.1) and is a false
    positive, whatever the folds; the texts at 0.1 never are: 1 of 10."""
    members = [0.50, 0.54, 0.58, 0.62, 0.66, 0.70, 0.74, 0.78, 0.82, 0.86]
    s = members + [0.1] * 9 + [0.95]
    y = [1] * 10 + [0] * 10
    for seed in range(3):
        t = Threshold("fpr=0.05", cv_folds=5, seed=seed).fit(s, y)
        assert t.threshold_ == 0.95 and t.val_fpr_ == 0.0  # in sample
        assert t.cv_false_positives_ == 1 and t.expected_fpr_ == t.cv_fpr_ == 0.1
        assert t.oof_calls_[10:].tolist() == [0] * 9 + [1]  # the 0.95 text, held out
    summary = t.summary()
    assert summary.expected_fpr_source == "cross-validated (5 folds)"
    # Wilson 1/10, the values written to 4 decimals: within half a unit, 5e-5
    assert summary.expected_fpr_ci == pytest.approx((0.0179, 0.4042), abs=5e-5)
    assert summary.val_fpr == 0.0
    # the in-sample rate of an "fpr=0.05" threshold is at most 5% by construction; held out,
    # the rate is usually higher: the optimism the cross-validation removes
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(30, int), np.zeros(30, int)]
    rates = [Threshold("fpr=0.05", seed=i).fit(rng.normal(size=60) + 0.8 * y, y) for i in range(20)]
    assert all(r.val_fpr_ <= 0.05 for r in rates)
    assert np.mean([r.cv_fpr_ for r in rates]) > np.mean([r.val_fpr_ for r in rates])


def test_folds_of_whole_books_when_texts_name_their_book():
    """Known answer: four member books at 1.0 and four never-seen books, A at 0.9, B, C, D
    at 0.1-0.3, five texts each. With A's texts on both sides of a split (text folds), a
    threshold above 0.9 is always learnt and no held-out never-seen text passes it; with
    whole books held out, A is judged by a threshold learnt without it (between 0.3 and
    1.0), so all five of A's texts are false positives: 5 of 20."""
    books = {"m0": 1.0, "m1": 1.01, "m2": 1.02, "m3": 1.03, "A": 0.9, "B": 0.1, "C": 0.2,
             "D": 0.3}
    groups = [b for b in books for _ in range(5)]
    s = [books[b] for b in groups]
    y = [int(b.startswith("m")) for b in groups]
    for seed in range(3):
        t = Threshold("accuracy", seed=seed).fit(s, y, groups=groups)
        assert t.threshold_ == pytest.approx(0.95, rel=1e-12) and t.val_fpr_ == 0.0
        assert t.cv_folds_used_ == 4 and t.cv_false_positives_ == 5
        assert [int(c) for c, g in zip(t.oof_calls_, groups) if g in "ABCD"] == [1] * 5 + [0] * 15
        assert t.summary().expected_fpr_source == "cross-validated (4 folds of whole groups)"
    plain = Threshold("accuracy", seed=0).fit(s, y)  # text folds: A is on both sides
    assert plain.cv_false_positives_ == 0 and plain.summary().expected_fpr_source == (
        "cross-validated (5 folds)")


def test_group_folds_never_split_a_book_and_balance_the_folds():
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 40, size=60)
    groups = np.repeat([f"book{i}" for i in range(60)], sizes)
    y = np.repeat((np.arange(60) % 3 == 0).astype(int), sizes)  # 20 member books, 40 not
    fold = group_folds(y, groups, 5, seed=7)
    for g in np.unique(groups):
        assert len(set(fold[groups == g])) == 1, g  # a book sits in one fold only
    for f in range(5):  # both classes in every fold, texts per class within one book's size
        assert {0, 1} <= set(y[fold == f])
    for cls in (0, 1):
        per_fold = np.bincount(fold[y == cls], minlength=5)
        assert per_fold.max() - per_fold.min() <= sizes.max()
    assert (group_folds(y, groups, 5, seed=7) == fold).all()
    assert not (group_folds(y, groups, 5, seed=8) == fold).all()  # the seed matters
    with pytest.raises(PddkitError, match="10 validation texts but 3 group names"):
        Threshold().fit(np.arange(10.0), [0, 1] * 5, groups=["a", "b", "c"])


def test_too_few_texts_per_class_fall_back_to_in_sample():
    t = Threshold("accuracy").fit([0.9, 0.1, 0.8], [1, 0, 1])  # one non-member
    assert t.cv_fpr_ is None and t.expected_fpr_ == t.val_fpr_
    assert t.summary().expected_fpr_source == "in-sample"


def test_wilson_interval_textbook_values():
    # textbook values written to 4 decimals: within half a unit, 5e-5
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=5e-5)
    # 0 of n: the upper end is z^2 / (n + z^2) = 3.8415 / 13.8415
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=5e-5)
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_auc_counts_ties_as_half():
    t = Threshold("accuracy", cv_folds=0).fit([0.5, 0.5, 0.9, 0.1], [1, 0, 1, 0])
    # pairs (member, non-member): (0.5, 0.5) tie = 1/2, (0.5, 0.1) 1, (0.9, 0.5) 1, (0.9, 0.1) 1
    assert t.val_auc_ == pytest.approx(3.5 / 4, rel=1e-12)


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
