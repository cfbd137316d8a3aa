"""roc_points: the ROC curve the report draws, equal to sklearn's without importing it."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from pddkit.evaluation.metrics import roc_points


@pytest.mark.parametrize("tied", [False, True])
def test_roc_points_equal_sklearn_and_their_area_is_the_auc(tied):
    rng = np.random.default_rng(0)
    for _ in range(100):
        n = int(rng.integers(2, 60))
        y = rng.integers(0, 2, n)
        y[:2] = [0, 1]
        s = rng.integers(0, 6, n).astype(float) if tied else rng.normal(size=n)
        fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
        a, b = roc_points(s, y)
        # counts over counts (n < 60), one float64 division each: 2 roundings of 1.1e-16
        np.testing.assert_allclose(a, fpr, rtol=1e-15, atol=0)
        np.testing.assert_allclose(b, tpr, rtol=1e-15, atol=0)
        # a trapezoid sum of fewer than 60 products of such ratios: 1e-12 absolute is ample
        assert np.trapezoid(b, a) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_roc_points_of_a_perfect_and_an_inverted_ranking():
    y = np.array([0, 0, 1, 1])
    a, b = roc_points(np.array([0.1, 0.2, 0.8, 0.9]), y)
    assert np.trapezoid(b, a) == 1.0
    a, b = roc_points(np.array([0.9, 0.8, 0.2, 0.1]), y)
    assert np.trapezoid(b, a) == 0.0
