"""Vectorised grids equal the per-text SPEC functions at every grid point, and are fast."""

import numpy as np
import pytest

from pddkit.methods import METHODS
from pddkit.methods.grid import GRIDS, Padded, grid_points, grid_scores
from pddkit.stats import Observation, TokenStats

V = 40
LOG_F = np.log(np.random.default_rng(9).dirichlet(np.ones(V)))


def random_stats(rng, n_texts):
    out = []
    for _ in range(n_texts):
        n = int(rng.integers(1, 50))
        H = rng.random(n) * 8
        L = -rng.exponential(3, n)
        if rng.random() < 0.2:
            L = np.round(L)  # ties
        M2 = H * H + rng.random(n) * 3
        out.append(TokenStats(rng.integers(0, V, n), L.astype(np.float32),
                              H.astype(np.float32), M2.astype(np.float32)))
    return out


@pytest.mark.parametrize("method", sorted(GRIDS))
def test_grid_equals_per_text_function(method):
    rng = np.random.default_rng(0)
    stats = random_stats(rng, 60)
    got = grid_scores(method, Padded.of(stats), LOG_F)
    points = grid_points(method)
    assert got.shape == (60, len(points))
    spec = METHODS.get(method)
    for g, params in enumerate(points):
        want = [spec.fn(Observation("x", s, log_freq=LOG_F), **params) for s in stats]
        np.testing.assert_allclose(got[:, g], want, rtol=1e-9, atol=1e-12, err_msg=str(params))

