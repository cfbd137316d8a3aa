"""ACMIA (Zade et al. 2025, "Automatic Calibration for Membership Inference Attack on
Large Language Models", arXiv 2505.03392): each token's log-probability re-normalised at
other temperatures, q^b = softmax(b log P_i) (temperature 1/b), and compared with the
log-probability itself. With F the first occurrence of each distinct id in x_1..x_n and
L_i^b = b L_i - logsumexp_v(b log P_i(v)) (SPEC 3e):

    ac       mean_F(L_i - L_i^b) if b <= 1, mean_F(L_i^b - L_i) if b > 1
    derivac  mean_F(L_i^{b_j} - L_i^{b_{j-1}})                           (j >= 1)
    normac   mean_F((L_i^b - mu_i^b) / (sigma_i^b + 1e-10)), NaN -> 0,   (b > 0)
             clipped to the float32 range; mu, sigma: mean and sd of log q^b under q^b

on the grid b_0 = 0, b_j = 2^(0.1 (j - 26)), j = 1..51 (stats.ACMIA_BETAS). The statistics
pass accumulates, per text, the means over F of L_i^b and of the normac term at all 52
values (TokenStats.tempered, asked for by this method's `reads`), so a score is a lookup.

Direction: higher = member, as the authors use the three scores (their AUCs are computed
with label 1 = training data and the scores as they are, Main_file.py:288,359), which is
SPEC section 1's convention; nothing is negated.

`beta` (a value of the grid, e.g. 0.5 = 2^-1) fixes b; without it b is chosen on the
calibration data: the grid value with the highest calibration AUC, ties to the smaller b
(the authors choose it by the AUC on the test labels, Main_file.py:382-389). For
derivac, `beta` names b_j of the pair (b_{j-1}, b_j)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pddkit.errors import PddkitError
from pddkit.methods.base import Calibrated, Calibration, register_method
from pddkit.methods.ranking import auc
from pddkit.stats import ACMIA_BETAS, Observation, TokenStats

VARIANTS = ("ac", "derivac", "normac")
ONE = ACMIA_BETAS.index(1.0)  # j = 26: b = 1, where ac changes sign
BETA_TOLERANCE = 1e-3  # a `beta` within this relative distance of a grid value is that value


def mean_first_loglik(t: TokenStats) -> float:
    """mean_F L_i over the first occurrence of each distinct id (float64)."""
    first = np.unique(t.ids, return_index=True)[1]
    return float(np.mean(np.asarray(t.L, dtype=np.float64)[first]))


def tempered_of(t: TokenStats) -> np.ndarray:
    if t.tempered is None:
        raise PddkitError("acmia reads the tempered log-probabilities of each text, which "
                          "these statistics do not hold: compute them with a backend that "
                          "gives the full next-token distribution (hf) on the local engine")
    return np.asarray(t.tempered, dtype=np.float64)


def all_betas(t: TokenStats, variant: str) -> np.ndarray:
    """[52] the variant's score at every b of the grid; NaN where it is not defined
    (derivac and normac at b_0)."""
    if len(t) == 0:
        return np.zeros(len(ACMIA_BETAS))
    T = tempered_of(t)  # [2, 52]
    if variant == "ac":
        diff = mean_first_loglik(t) - T[0]  # [52] mean_F(L - L^b)
        return np.where(np.arange(len(ACMIA_BETAS)) <= ONE, diff, -diff)
    if variant == "derivac":
        return np.concatenate([[np.nan], np.diff(T[0])])
    return np.concatenate([[np.nan], T[1, 1:]])


def grid_index(beta: float, variant: str) -> int:
    """The column of `beta` in ACMIA_BETAS; one sentence for a value off the grid or one
    the variant does not define."""
    grid = np.asarray(ACMIA_BETAS)
    j = int(np.argmin(np.abs(grid - beta)))
    if abs(grid[j] - beta) > BETA_TOLERANCE * max(abs(beta), grid[1]):
        near = ", ".join(f"{grid[k]:.6g}" for k in sorted(np.argsort(np.abs(grid - beta))[:2]))
        raise PddkitError(f"beta={beta} is not on ACMIA's grid of 52 values (0 and 2^(0.1 k), "
                          f"k = -25..25); the nearest are {near}")
    if j == 0 and variant != "ac":
        raise PddkitError(f"variant {variant} is not defined at beta=0 (it needs b > 0)")
    return j


def _check(variant: str) -> None:
    if variant not in VARIANTS:
        raise PddkitError(f"variant must be one of {', '.join(VARIANTS)}, not {variant!r}")


def as_beta(beta) -> float:
    """`beta` as given (a number, or the text of one from `acmia:beta=0.5`) -> float."""
    try:
        value = float(beta)
    except (TypeError, ValueError):
        raise PddkitError(f"beta={beta!r} is not a number") from None
    if not np.isfinite(value) or value < 0:
        raise PddkitError(f"beta must be a finite number of at least 0, not {beta!r}")
    return value


def fit(observations: Sequence[Observation], labels: np.ndarray, *, variant: str = "ac",
        beta: float | None = None) -> Calibrated:
    """The grid value with the highest AUC on the calibration texts (ties: the smaller b)."""
    _check(variant)
    if beta is not None:
        b = ACMIA_BETAS[grid_index(as_beta(beta), variant)]
        return Calibrated({"variant": variant, "beta": b}, {"beta": b, "chosen": False})
    scores = np.stack([all_betas(o.target, variant) for o in observations])  # [N, 52]
    y = np.asarray(labels)
    aucs = np.array([np.nan if np.isnan(col).any() else auc(col, y) for col in scores.T])  # [52]
    j = int(np.nanargmax(aucs))  # the first maximum: the smallest b
    return Calibrated({"variant": variant, "beta": float(ACMIA_BETAS[j])},
                      {"beta": float(ACMIA_BETAS[j]), "chosen": True,
                       "calibration_auc": float(aucs[j]), "texts": len(observations)})


@register_method("acmia", requires=("full_distribution",), reads=("tempered",), named_only=True,
                 calibration=Calibration(fit, needed=lambda params: params["beta"] is None,
                                         instead="give beta (acmia:beta=0.5)"),
                 paper="Zade et al. 2025",
                 cost="no extra pass: 52 temperatures summed over the vocabulary per distinct "
                      "token, in the target pass",
                 summary="log-probability minus its value re-normalised at temperature 1/beta "
                         "(ac, derivac, normac); beta chosen on calibration data")
def acmia(obs: Observation, *, variant: str = "ac", beta: float | None = None) -> float:
    _check(variant)
    if beta is None:
        raise PddkitError("acmia without beta chooses it on labelled calibration data, which "
                          "one text cannot give: give beta (acmia:beta=0.5), or score the "
                          "texts in a run with calibration data")
    j = grid_index(as_beta(beta), variant)
    if len(obs.target) == 0:
        return 0.0
    return float(all_betas(obs.target, variant)[j])
