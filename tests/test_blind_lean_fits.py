"""blind/lean_fits.py against scikit-learn itself: the same floats, to the last bit."""

import contextlib
import warnings

import numpy as np
import pytest
from scipy import sparse

from pddkit.blind.lean_fits import lean_sklearn, naive_bayes_log_odds, roc_auc


def test_roc_auc_is_sklearns_to_the_last_bit_with_and_without_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    unequal = 0
    for trial in range(400):
        n = int(rng.integers(4, 200))
        y = rng.integers(0, 2, n)
        y[:2] = (0, 1)  # both classes
        levels = int(rng.integers(2, 2 * n))  # few levels: many ties; many: few
        s = rng.integers(0, levels, n) / 7.0 if trial % 2 else rng.normal(size=n)
        got, want = roc_auc(y, s), roc_auc_score(y, s)
        assert got == want, (trial, got, want)  # ==, not approx
        # the exact rational (pairs, ties one half) differs from both in the last bits at times:
        # the equality above is the point, not this
        pairs = ((s[y == 1][:, None] > s[y == 0][None]).sum()
                 + 0.5 * (s[y == 1][:, None] == s[y == 0][None]).sum()) / ((y == 1).sum() * (y == 0).sum())
        assert got == pytest.approx(pairs, abs=1e-12)
        unequal += got != pairs
    assert unequal > 0  # the float of the trapezoid is not the exact rational: transcribed, not re-derived


def test_roc_auc_of_one_class_is_nan_as_recent_sklearns():
    from sklearn.metrics import roc_auc_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.suppress(ValueError):  # scikit-learn before 1.6 raises instead
            assert np.isnan(roc_auc_score([1, 1, 1], [0.1, 0.2, 0.3]))
    assert np.isnan(roc_auc([1, 1, 1], [0.1, 0.2, 0.3]))
    assert np.isnan(roc_auc(np.array([0, 0]), np.array([0.5, 0.5])))


@pytest.mark.parametrize("kind", ["csr int", "csr float", "csr unsorted", "dense"])
def test_naive_bayes_log_odds_are_multinomial_nbs_to_the_last_bit(kind):
    from sklearn.naive_bayes import MultinomialNB

    rng = np.random.default_rng(1)
    for trial in range(30):
        n, m, v = int(rng.integers(10, 80)), int(rng.integers(3, 40)), int(rng.integers(5, 300))
        X = sparse.random(n + m, v, density=0.1, format="csr", random_state=trial,
                          data_rvs=lambda k: rng.integers(1, 6, k)).astype(
            np.int64 if kind == "csr int" else np.float64)
        if kind == "csr unsorted":
            X.indices = X.indices.copy()
            for r in range(X.shape[0]):  # each row's columns reversed: the same matrix
                a, b = X.indptr[r], X.indptr[r + 1]
                X.indices[a:b], X.data[a:b] = X.indices[a:b][::-1].copy(), X.data[a:b][::-1].copy()
            X.has_sorted_indices = False
        if kind == "dense":
            X = X.toarray()
        y = rng.integers(0, 2, n)
        y[:2] = (0, 1)
        alpha = (0.1, 1.0, 0.37)[trial % 3]
        lp = MultinomialNB(alpha=alpha).fit(X[:n], y).predict_joint_log_proba(X[n:])
        got = naive_bayes_log_odds(X[:n], y, X[n:], alpha)
        np.testing.assert_array_equal(got, lp[:, 1] - lp[:, 0])


def test_lean_sklearn_skips_the_checks_and_restores_them():
    from sklearn import get_config

    before = get_config()
    with lean_sklearn():
        inside = get_config()
        assert inside["assume_finite"] and inside["skip_parameter_validation"]
    assert get_config() == before
