"""Every SPEC section 3 formula against values computed by hand."""

import math
import zlib

import numpy as np
import pytest

from pddkit.methods import METHODS
from pddkit.stats import Observation, TokenStats


def run(name, obs, **params):
    spec = METHODS.get(name)
    return spec.fn(obs, **{**spec.defaults, **params})


# Tolerances in this file: pytest.approx's default, 1e-6 relative. The statistics are short
# decimals stored as float32 (TokenStats), exact or within 6e-8 relative (-0.1, -4.5 ...),
# then a few float64 operations (1e-16 each): 1e-6 is the float32 rounding with a margin
# of 16, and far below any wrong formula's difference.
def obs_of(L, H=None, M2=None, ids=None, text="abc", **extra):
    ids = list(range(len(L))) if ids is None else ids
    return Observation(text=text, target=TokenStats.from_lists(ids, L, H, M2), **extra)


def test_loss_is_mean_log_prob():
    assert run("loss", obs_of([-1.0, -2.0, -4.5])) == pytest.approx(-7.5 / 3)


def test_zlib_divides_by_compressed_bytes():
    text = "hello hello hello hello"
    z = len(zlib.compress(text.encode("utf-8")))
    assert run("zlib", obs_of([-2.0, -4.0], text=text)) == pytest.approx(-3.0 / z)


def test_zlib_counts_utf8_bytes_not_characters():
    text = "ünïcödé " * 3
    z = len(zlib.compress(text.encode("utf-8")))
    assert run("zlib", obs_of([-1.0], text=text)) == pytest.approx(-1.0 / z)


def test_lowercase_is_minus_ratio_of_mean_losses():
    lower = TokenStats.from_lists([0, 1, 2, 3], [-4.0, -4.0, -2.0, -2.0])
    o = obs_of([-1.0, -2.0], lower=lower)  # mean -1.5 over mean -3.0
    assert run("lowercase", o) == pytest.approx(-0.5)


def test_ref_is_difference_of_means_with_own_lengths():
    ref = TokenStats.from_lists([5, 6, 7], [-3.0, -3.0, -6.0])  # other tokenizer, 3 tokens
    assert run("ref", obs_of([-1.0, -2.0], reference=ref)) == pytest.approx(-1.5 - (-4.0))


def test_ref_ratio_is_the_ratio_of_log_perplexities():
    """form=ratio: Carlini et al.'s log PPL_ref / log PPL_target (LM_Memorization
    extraction.py:178), i.e. mean L_ref / mean L_target; a target certain of every token
    floors the denominator at -1e-12 (a counted fallback)."""
    ref = TokenStats.from_lists([5, 6, 7], [-3.0, -3.0, -6.0])  # log PPL_ref = 4
    o = obs_of([-1.0, -2.0], reference=ref)  # log PPL_target = 1.5
    assert run("ref", o, form="ratio") == pytest.approx(4.0 / 1.5)
    assert run("ref", o, form="difference") == pytest.approx(-1.5 + 4.0)
    # lower target loss (member-like) ranks higher under both forms
    member = obs_of([-0.5, -0.5], reference=ref)
    assert run("ref", member, form="ratio") == pytest.approx(4.0 / 0.5)
    certain = obs_of([0.0, 0.0], reference=ref)
    assert run("ref", certain, form="ratio") == pytest.approx(4.0 / 1e-12)
    call = METHODS.get("ref")
    assert call.fallback(certain, form="ratio").startswith("have a target mean log-probability of 0")
    assert call.fallback(o, form="ratio") is None and call.fallback(certain) is None


def test_ref_refuses_an_unknown_form_before_any_model_loads():
    from pddkit.engine.plan import check_params
    from pddkit.errors import PddkitError
    from pddkit.methods.base import MethodCall

    with pytest.raises(PddkitError, match="method ref: form must be one of difference, ratio, "
                                          "not 'ratios'"):
        check_params(MethodCall(METHODS.get("ref"), {"form": "ratios"}, "ref"))


@pytest.mark.parametrize("k,n,expected_m", [(0.2, 10, 2), (0.2, 4, 1), (0.5, 5, 2), (1.0, 3, 3),
                                             (0.2, 1, 1), (0.1, 30, 3)])
def test_mink_averages_floor_k_n_smallest(k, n, expected_m):
    L = np.linspace(-10, -1, n)
    rng = np.random.default_rng(n)
    shuffled = rng.permutation(L)
    want = float(np.mean(np.sort(L)[:expected_m]))
    assert run("mink", obs_of(shuffled), k=k) == pytest.approx(want)


def test_minkpp_standardises_by_entropy_and_variance():
    L = [-1.0, -3.0, -0.5, -2.0, -6.0]
    H = [2.0, 1.0, 0.5, 1.5, 3.0]
    var = [1.0, 4.0, 0.25, 0.0, 9.0]  # position 3 has zero variance -> floor 1e-12
    M2 = [v + h * h for v, h in zip(var, H)]
    z = [(1.0) / 1.0, (-2.0) / 2.0, 0.0 / 0.5, (-0.5) / 1e-6, (-3.0) / 3.0]
    m = max(1, math.floor(0.4 * 5))  # 2 smallest
    assert run("minkpp", obs_of(L, H, M2), k=0.4) == pytest.approx(np.mean(sorted(z)[:m]))


def test_surp_selects_low_entropy_low_probability_tokens():
    L = [-1.0, -2.0, -3.0, -4.0, -5.0]
    H = [0.5, 0.5, 3.0, 1.0, 1.5]
    # 40th percentile (linear) of L: sorted -5,-4,-3,-2,-1 -> index 1.6 -> -4 + 0.6 = -3.4
    # L < -3.4: positions 3 (-4) and 4 (-5); with H < 2.0 both stay -> mean -4.5
    assert run("surp", obs_of(L, H), entropy_threshold=2.0, k=40) == pytest.approx(-4.5)
    # threshold 1.2 keeps only position 3
    assert run("surp", obs_of(L, H), entropy_threshold=1.2, k=40) == pytest.approx(-4.0)


def test_surp_falls_back_to_low_probability_then_all_tokens():
    L = [-1.0, -2.0, -3.0, -4.0, -5.0]
    H = [5.0] * 5  # no low-entropy token: S = {L < t} = {-4, -5}
    assert run("surp", obs_of(L, H), entropy_threshold=2.0, k=40) == pytest.approx(-4.5)
    same = [-2.0, -2.0, -2.0]  # no token strictly below the percentile: all tokens
    assert run("surp", obs_of(same, [0.1] * 3)) == pytest.approx(-2.0)


def test_dcpdd_uses_first_occurrences_and_caps_at_a():
    counts = np.array([10, 0, 5, 85], dtype=np.float64)  # N = 100, |V| = 4
    f = (counts + 1) / (100 + 4)
    log_f = np.log(f)
    ids = [2, 1, 2, 3, 1]  # first occurrences at positions 0, 1, 3
    L = [-0.5, -2.0, -0.1, -1.0, -9.0]
    a = 0.5
    alpha = [min(-math.exp(L[i]) * log_f[ids[i]], a) for i in (0, 1, 3)]
    got = run("dcpdd", obs_of(L, ids=ids, log_freq=log_f), a=a)
    assert got == pytest.approx(np.mean(alpha))
    assert min(-math.exp(-0.5) * log_f[2], a) == a  # the cap is exercised


def test_neighbor_is_own_mean_minus_mean_of_neighbour_means():
    nbs = (TokenStats.from_lists([0, 1], [-2.0, -4.0]), TokenStats.from_lists([0, 1, 2], [-6.0] * 3))
    o = obs_of([-1.0, -2.0], neighbors=nbs)  # own -1.5; neighbours -3 and -6 -> -4.5
    assert run("neighbor", o) == pytest.approx(-1.5 - (-4.5))
