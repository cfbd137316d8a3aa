"""Vectorised grids equal the per-text SPEC functions at every grid point, and are fast."""

import numpy as np
import pytest

from pddkit.methods import GRIDS, METHODS, grid_points, grid_scores, grids
from pddkit.methods.grid import Grid, Padded
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
        Lmax = np.maximum(L, -rng.random(n))  # gapk: a top-1 log-probability, at least L
        out.append(TokenStats(rng.integers(0, V, n), L.astype(np.float32),
                              H.astype(np.float32), M2.astype(np.float32),
                              Lmax=Lmax.astype(np.float32)))
    return out


@pytest.mark.parametrize("method", sorted(grids()))
def test_grid_equals_per_text_function(method):
    """Every registered grid (a new method's too), column by column."""
    rng = np.random.default_rng(0)
    stats = random_stats(rng, 60)
    grid, spec = grids()[method], METHODS.get(method)
    # every text's conditioned statistics (recall's shots): two more random sets per text
    given = [{(role, 7): c for role, c in zip(("member", "nonmember"), random_stats(rng, 2))}
             for _ in stats]
    obs = [Observation("x", s, log_freq=LOG_F, conditioned=c) for s, c in zip(stats, given)]
    got = grid.scores(Padded.of(stats), LOG_F, obs, {"shots": 7})
    points = grid.points()
    assert got.shape == (60, len(points))
    for g, params in enumerate(points):
        fixed = {k: v for k, v in spec.defaults.items() if k == "shots"}  # not varied by grids
        want = [spec.fn(o, **fixed, **params) for o in obs]
        # float64 arithmetic on the same float32 statistics in two orders (cumulative sums
        # of sorted rows against a mean of a partition, vectorised percentiles against
        # numpy's): sums of fewer than 50 terms, each order within 50 x 1.1e-16 of the sum
        # of |terms| (|L| mostly below 30 here); 1e-9 relative, 1e-12 absolute for a score
        # near 0, is that with a margin of about 1e4
        np.testing.assert_allclose(got[:, g], want, rtol=1e-9, atol=1e-12, err_msg=str(params))



def test_the_built_in_grids_are_registered_beside_their_methods():
    assert {"mink", "minkpp", "surp", "dcpdd"} <= set(grids())
    for name, grid in grids().items():
        assert METHODS.get(name).grid is grid
        assert set(grid.values) <= set(METHODS.get(name).defaults)


def test_points_run_row_major_over_the_parameters_as_listed():
    g = Grid({"e": (1.0, 2.0), "k": (10.0, 20.0, 30.0)}, lambda P, log_freq, e, k: None)
    assert g.points() == [{"e": e, "k": k} for e in (1.0, 2.0) for k in (10.0, 20.0, 30.0)]
    with pytest.raises(ValueError):
        Grid({"k": ()}, lambda P, log_freq, k: None)


def test_compatibility_names_read_the_registry():
    """GRIDS / grid_points / grid_scores (the engine's old calls) equal MethodSpec.grid."""
    stats = random_stats(np.random.default_rng(1), 12)
    P = Padded.of(stats)
    assert set(GRIDS) == set(grids())
    for name, grid in grids().items():
        assert GRIDS[name] == {k: list(v) for k, v in grid.values.items()}
        assert grid_points(name) == grid.points()
        if not grid.per_text:  # the old calls knew padded statistics only
            np.testing.assert_array_equal(grid_scores(name, P, LOG_F), grid.scores(P, LOG_F))
    with pytest.raises(KeyError):
        grid_points("loss")  # a method without a grid
