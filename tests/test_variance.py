"""The variance of the log-probability, var = sum_v p (log p + H)^2 (TokenStats.var), against
a float64 computation, on distributions where M2 - H^2 cancels in float32.

A near-uniform distribution over V tokens has H ~ ln V and a variance far below H^2: with
V = 32,768 and logits spread by sigma, var ~ sigma^2 while M2 = var + H^2 ~ 108, whose float32
neighbours lie 7.6e-6 apart. At sigma = 1e-3 no float32 M2 can hold the variance (1e-6) at all.
"""

import math

import numpy as np
import pytest
import torch

from pddkit.backends.stats_pass import chunk_stats
from pddkit.methods.minkpp import minkpp
from pddkit.stats import Observation, TokenStats

EPS32 = float(np.finfo(np.float32).eps)  # 2^-23, the float32 spacing at 1


def float64_stats(logits: torch.Tensor):
    """Independent: H, M2 and var of softmax(logits) in float64, from the float32 logits."""
    logp = torch.log_softmax(logits.double(), -1)
    p = logp.exp()
    H = -(p * logp).sum(-1)
    M2 = (p * logp * logp).sum(-1)
    var = (p * (logp + H[:, None]) ** 2).sum(-1)
    return H.numpy(), M2.numpy(), var.numpy()


def variance_bound(logits: torch.Tensor, H: np.ndarray, var: np.ndarray) -> np.ndarray:
    """|float32 var - float64 var| allowed, per row, first order in EPS32 (derivation):

    - log p_v in float32 is x_v - m - log(sum exp(x - m)), m = max x. The rounding of the
      log-sum is the same for every v (a common shift c of log p); the rest is at most
      E = 4 EPS32 (max |x - m| + ln V) per token (two subtractions, each rounded relative
      to a result no larger than |x - m| + ln V, with a factor 2 to spare).
    - A common shift c scales p by e^c and moves H by c H - c: sum p (log p + H)^2 moves by
      c var to first order; |c| <= EPS32 (log2 V + ln V) (a cascade sum's rounding, then
      the log's).
    - Per-token errors r_v of log p: the first-order change of sum p d^2 (d = log p + H) is
      2 sum p d (r_v + dH) + sum p d^2 r_v; sum p d = 0 removes dH, and
      |2 sum p d r_v| <= 2 E sum p |d| <= 2 E sd.
    - H's own error enters at second order: dH^2, with |dH| <= (E + EPS32 log2 V)(1 + ln V
      + max |x - m|) (the same per-token errors, and the cascade sum, times |log p|).
    - The exp, square and product round each term by at most 3 EPS32, the sum of V
      non-negative terms by EPS32 log2 V (cascade): (log2 V + 3) EPS32 var.
    """
    x = logits.double()
    V = x.shape[-1]
    spread = (x.max(-1).values - x.min(-1).values).numpy()  # max |x - m|
    E = 4 * EPS32 * (spread + math.log(V))
    c = EPS32 * (math.log2(V) + math.log(V))
    dH = (E + EPS32 * math.log2(V)) * (1 + math.log(V) + spread)
    sd = np.sqrt(var)
    return 2 * E * sd + dH ** 2 + (c + (math.log2(V) + 3 + E) * EPS32) * var


def near_uniform(sigma: float, V: int = 32_768, rows: int = 2) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(rows, V, generator=g) * sigma


@pytest.mark.parametrize("sigma", [1e-3, 1e-2, 1.0])
def test_the_variance_matches_float64_where_m2_minus_h2_cancels(sigma):
    logits = near_uniform(sigma)
    H64, M264, var64 = float64_stats(logits)
    _, H, M2, var, _, _ = chunk_stats(logits, torch.zeros(len(logits), dtype=torch.long))
    H, M2, var = H.numpy(), M2.numpy(), var.numpy()
    bound = variance_bound(logits, H64, var64)
    assert np.all(np.abs(var.astype(np.float64) - var64) <= bound), (var, var64, bound)
    # the bound is tight enough to mean something: below 2% of the variance
    assert np.all(bound < 2e-2 * var64)
    # M2 = var + H^2, two non-negative float32 numbers added: within a few float32 spacings
    np.testing.assert_allclose(M2, M264, rtol=4 * EPS32 * math.log2(32_768), atol=0)
    if sigma <= 1e-2:
        # here M2 - H^2 cannot work in float32: the spacing of float32 numbers near M2 is
        # at least 7% of the variance, and the difference of the float32 M2 and H^2
        # misses the float64 variance by more than the bound above
        assert np.all(np.spacing(M2) > 0.07 * var64)
        cancelled = M2.astype(np.float64) - H.astype(np.float64) ** 2
        assert np.all(np.abs(cancelled - var64) > bound)


def test_two_near_tied_tokens():
    """A very peaked distribution on two tokens of almost equal logits (a model choosing
    between two spellings): H ~ ln 2, var ~ delta^2 / 4 ~ 2.5e-7, M2 ~ 0.48."""
    V, delta = 32_768, 1e-3
    logits = torch.zeros(2, V)
    logits[:, :2] = 40.0
    logits[:, 1] += delta
    logits[1, 2] = 25.0  # and a third token far behind, in the second row
    H64, _, var64 = float64_stats(logits)
    _, _, _, var, _, _ = chunk_stats(logits, torch.tensor([0, 1]))
    bound = variance_bound(logits, H64, var64)
    assert np.all(np.abs(var.numpy().astype(np.float64) - var64) <= bound), (var, var64, bound)


def test_minkpp_reads_the_variance_not_m2_minus_h2():
    """minkpp standardises by sqrt(var): a text whose statistics carry a variance that
    M2 - H^2 (float32) does not reproduce scores with the variance given."""
    H = np.float32(10.8)
    M2 = np.float32(H) * np.float32(H)  # float32: M2 - H^2 rounds to a meaningless number
    st = TokenStats(np.array([3]), L=np.array([-10.7], np.float32), H=np.array([H]),
                    M2=np.array([M2]), var=np.array([1e-4], np.float32))
    want = (-10.7 + 10.8) / math.sqrt(1e-4)  # by hand: (L + H) / sd = 10
    # float32 inputs: L + H carries two float32 roundings of values near 10.8 (1e-6 each),
    # var one relative 6e-8; divided by sd = 1e-2: 2e-4 absolute
    assert minkpp(Observation(text="x", target=st), k=1.0) == pytest.approx(want, abs=2e-4)


def test_hand_made_statistics_derive_the_variance_in_float64():
    """TokenStats without var (tests, examples): M2 - H^2 in float64 from the given
    numbers, exact for numbers a person writes (3 and 13 are exact in float32)."""
    st = TokenStats.from_lists([1, 2], [-1.0, -2.0], H=[2.0, 3.0], M2=[5.0, 13.0])
    assert st.var.tolist() == [1.0, 4.0]


def test_the_callers_logits_are_left_as_they_were():
    logits = near_uniform(1.0)
    before = logits.clone()
    chunk_stats(logits, torch.zeros(len(logits), dtype=torch.long))
    assert torch.equal(logits, before)


def test_a_masked_vocabulary_entry_gives_the_unmasked_statistics_not_nan():
    """A -inf logit (an entry a model masks) has p = 0: H, var and M2 are those of the other
    entries (float64 over them), not NaN; a masked target has L = -inf."""
    logits = near_uniform(1.0, V=1024)
    logits[:, :8] = float("-inf")
    H64, M264, var64 = float64_stats(logits[:, 8:])
    L, H, M2, var, top, _ = chunk_stats(logits, torch.tensor([3, 100]))
    # float32 against float64 on 1,016 entries of spread ~7: relative 1e-5 is ~80 float32
    # spacings, above a cascade sum's log2(1016) ~ 10 of them
    np.testing.assert_allclose(H.numpy(), H64, rtol=1e-5)
    np.testing.assert_allclose(var.numpy(), var64, rtol=1e-5)
    np.testing.assert_allclose(M2.numpy(), M264, rtol=1e-5)
    assert L[0].item() == float("-inf") and np.isfinite(L[1].item())
    assert int(top.min()) >= 8
