"""SPEC section 4 metrics against scikit-learn, and the bootstrap's behaviour."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from pddkit.errors import PddkitError
from pddkit.evaluation.metrics import FPR_TARGETS, compute_metrics, weighted_roc


def sk_tpr_at(labels, scores, t):
    fpr, tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    return tpr[fpr <= t].max()


@pytest.mark.parametrize("seed", range(6))
def test_point_estimates_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    labels = rng.integers(0, 2, n)
    labels[:2] = [0, 1]
    scores = rng.standard_normal(n) + labels * rng.random()
    if seed % 2:  # heavy ties
        scores = np.round(scores, 1)
    m = compute_metrics(scores, labels, n_bootstrap=50)
    # both are ratios of pair counts (ties a half), computed in float64 through
    # ranks or trapezoids (n < 400): a few hundred roundings of 1.1e-16 at most, 1e-12 absolute said
    assert m.auc == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    for t in FPR_TARGETS:
        assert m.tpr[t] == pytest.approx(sk_tpr_at(labels, scores, t), abs=1e-12)


def test_weighted_roc_equals_sklearn_on_resampled_data():
    rng = np.random.default_rng(7)
    scores, labels = np.round(rng.standard_normal(60), 1), rng.integers(0, 2, 60)
    idx = rng.integers(0, 60, 60)
    w = np.bincount(idx, minlength=60)[None]
    auc, tpr = weighted_roc(scores, labels, w)
    # weighted pair counts below 60^2 in float64 (as above): 1e-12 absolute
    assert auc[0] == pytest.approx(roc_auc_score(labels[idx], scores[idx]), abs=1e-12)
    assert tpr[0, 1] == pytest.approx(sk_tpr_at(labels[idx], scores[idx], 0.05), abs=1e-12)


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    rng = np.random.default_rng(1)
    labels = np.r_[np.ones(200), np.zeros(200)].astype(int)
    scores = rng.standard_normal(400) + labels
    a = compute_metrics(scores, labels, seed=3)
    b = compute_metrics(scores, labels, seed=3)
    c = compute_metrics(scores, labels, seed=4)
    assert a == b and a.auc_ci != c.auc_ci
    assert a.auc_ci.low < a.auc < a.auc_ci.high
    assert 0.05 < a.auc_ci.high - a.auc_ci.low < 0.2  # ~ +/- 1.96 * 0.02 for n = 400


def test_perfect_and_inverted_separation():
    labels = np.array([1, 1, 1, 0, 0, 0])
    assert compute_metrics([3, 2, 1, 0, -1, -2], labels, n_bootstrap=10).auc == 1.0
    m = compute_metrics([-3, -2, -1, 0, 1, 2], labels, n_bootstrap=10)
    assert m.auc == 0.0 and m.tpr[0.01] == 0.0


def test_one_class_is_an_error():
    with pytest.raises(PddkitError, match="both members"):
        compute_metrics([0.1, 0.2], [1, 1])


def test_bootstrap_is_stratified_and_loses_no_resample():
    """2 members among 52 texts: a plain bootstrap draws no member in ~13% of resamples
    (AUC undefined); the stratified one keeps both classes, in their numbers, every time."""
    from pddkit.evaluation.metrics import _stratified_counts

    labels = np.r_[np.ones(2), np.zeros(50)].astype(int)
    scores = np.r_[[0.9, 0.1], np.linspace(0, 1, 50)]
    m = compute_metrics(scores, labels, n_bootstrap=1000, seed=0)
    assert m.n_bootstrap == 1000 and np.isfinite([m.auc_ci.low, m.auc_ci.high]).all()
    assert m.to_dict()["bootstrap"] == "stratified"
    counts = _stratified_counts(np.random.default_rng(0), labels, 500)  # [500, 52]
    assert (counts[:, labels == 1].sum(1) == 2).all() and (counts[:, labels == 0].sum(1) == 50).all()
    # the members' draws vary between resamples (it is a bootstrap, not a copy)
    assert len({tuple(r) for r in counts[:, :2]}) == 3  # (2,0), (1,1), (0,2)
