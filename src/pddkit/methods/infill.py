"""Infilling Score (Raoof et al. 2025, ICLR, "Infilling Score: A Pretraining Data Detection
Algorithm for Large Language Models", arXiv 2410.07582; the authors' code
neginraoof/mink-plus-plus `run.py`, `calculateInfillPerplexity`). At each position whose
token is not the model's argmax, the text is compared with its variant holding the argmax
there: how much more likely the original token and the tokens after it are, in Min-K%++'s
standardised units.

Cost per text: one extra forward pass per position i whose token is not the argmax, over
the variant cut after i + lookahead (engine/infill_pass.py: all variants of all texts in
one batched pass, through the executor and the statistics cache). Reads the full
next-token distribution (H, M2, the argmax), so a served model (`openai`) skips it."""

from __future__ import annotations

import numpy as np

from pddkit.errors import PddkitError
from pddkit.methods.base import Need, n_lowest, register_method
from pddkit.methods.mink import mean_of_lowest
from pddkit.methods.minkpp import VAR_FLOOR
from pddkit.stats import Observation, TokenStats

VARIANTS = ("corrected", "reference")


def check(k: float, lookahead: int, variant: str) -> None:
    """One sentence for a hyperparameter infill refuses."""
    n_lowest(k, 1)  # k in (0, 1]
    if isinstance(lookahead, bool) or not isinstance(lookahead, (int, np.integer)) or lookahead < 0:
        raise PddkitError(f"lookahead must be a whole number >= 0, not {lookahead!r}")
    if variant not in VARIANTS:
        raise PddkitError(f"variant must be one of {', '.join(VARIANTS)}, not {variant!r}")


def _var(var) -> np.ndarray:
    return np.asarray(var, np.float64)


def _sd(var) -> np.ndarray:
    return np.sqrt(np.maximum(var, VAR_FLOOR))


def infill_ratios(x: TokenStats, infill, lookahead: int = 5,
                  variant: str = "corrected") -> tuple[np.ndarray, np.ndarray]:
    """([n] r_i as in `infill`, [n] whether a variance in r_i was floored), 0-based positions:
    r_i = 0 where x_i is the argmax (no variant in `infill`), else the standardised
    log-probability of x_i against the argmax v_i at i, plus, over the next `lookahead`
    positions j, that of x_j after x_i against after v_i. `infill`: (i, statistics of x
    with x_i replaced by v_i, at least min(i + 1 + lookahead, n) tokens long)."""
    n = len(x)
    L, H = np.asarray(x.L, np.float64), np.asarray(x.H, np.float64)
    r = np.zeros(n, dtype=np.float64)
    floored = np.zeros(n, dtype=bool)
    for i, v in infill:
        i = int(i)
        end = min(i + 1 + lookahead, n)  # positions i .. end-1
        if variant == "reference":  # the authors' lookahead never reaches the last token
            end = max(i + 1, min(end, n - 1))
        if not 0 <= i < n or len(v) < end:
            raise PddkitError(f"infill: the variant at position {i} holds {len(v)} tokens, "
                              f"and a text of {n} tokens with lookahead={lookahead} needs {end}")
        vL, vH = np.asarray(v.L[i:end], np.float64), np.asarray(v.H[i:end], np.float64)
        if variant == "corrected":  # each position j with its own sequence's statistics
            var_x, var_v = _var(x.var[i:end]), _var(v.var[i:end])
            z_x = (L[i:end] + H[i:end]) / _sd(var_x)
            z_v = (vL + vH) / _sd(var_v)
        else:  # the authors' code: every position with position i's statistics
            # M2_i(x') - H_i(x)^2 = var_i(x') + (H_i(x') - H_i(x)) (H_i(x') + H_i(x)),
            # without the cancellation of M2 - H^2 (pddkit/stats.py)
            var_x = _var(x.var[i])
            var_v = _var(v.var[i]) + (vH[0] - H[i]) * (vH[0] + H[i])
            z_x = (L[i:end] + H[i]) / _sd(var_x)
            z_v = (vL + vH[0]) / _sd(var_v)
        r[i] = float(np.sum(z_x - z_v))
        floored[i] = bool(np.any(var_x < VAR_FLOOR) or np.any(var_v < VAR_FLOOR))
    return r, floored


def infill_fallback(obs: Observation, *, k: float = 0.2, lookahead: int = 5,
                    variant: str = "corrected") -> str | None:
    """A text whose lowest-k r_i include one standardised by a (near) one-point
    distribution: that variance is floored at VAR_FLOOR (as minkpp), not the paper's."""
    if obs.infill is None:
        return None
    r, floored = infill_ratios(obs.target, obs.infill, lookahead, variant)
    m = n_lowest(k, r.shape[0])
    if not floored[np.argpartition(r, m - 1)[:m]].any():
        return None
    return (f"have among their lowest k={k:g} infilling ratios one standardised by a predicted "
            f"distribution of variance below {VAR_FLOOR:g}: its variance is floored at "
            f"{VAR_FLOOR:g}")


@register_method("infill", needs=(Need.INFILL,), requires=("full_distribution",),
                 paper="Raoof et al. 2025", named_only=True, fallback=infill_fallback,
                 cost="+1 pass per position whose token is not the argmax",
                 summary="Min-K% over r_i: Min-K%++ z of x_i and the next lookahead tokens, "
                         "x against x with x_i set to the argmax")
def infill(obs: Observation, *, k: float = 0.2, lookahead: int = 5,
           variant: str = "corrected") -> float:
    """Score = mean of the m = max(1, floor(k*n)) smallest r_i over the n scored
    positions, with r_i = 0 where x_i = v_i = argmax P_i, else

        r_i = z_i(x_i | x) - z_i(v_i | x') + sum_{j=i+1}^{min(i+lookahead, n)}
              (z_j(x_j | x) - z_j(x_j | x')),

    x' = x with x_i replaced by v_i, z_j(t | s) = (log p_s(t) + H_j(s)) / sqrt(M2_j(s) -
    H_j(s)^2) (variance floored at 1e-12, as minkpp). `variant="corrected"` (default) is
    this formula: each position j standardised with its own mean and variance in its own
    sequence. `obs.infill` holds (i, statistics of x') for each non-argmax position.

    `variant="reference"` is what the authors' `calculateInfillPerplexity` computes
    (neginraoof/mink-plus-plus run.py:20-73): every term of r_i, the later positions j
    included, is standardised with position i's mean and standard deviation, mu_i = -H_i and
    sigma_i = sqrt(M2_i - H_i^2) for x, and for x' mu'_i = -H_i(x') with sigma'_i =
    sqrt(M2_i(x') - H_i(x)^2) (the code squares x's mean in x''s variance, run.py:54).
    Position i's distribution conditions on x_<i only, the same in x and x', so both
    normalisers are x's own at i and r_i = [(L_i(x) - log P_i(v_i)) + sum_j (L_j(x) -
    L_j(x'))] / sigma_i; and the sum over j stops at min(i + lookahead, n - 1), never
    reaching the last token (their `range(i, min(i + token_len, token_count - 3))`,
    run.py:64). With a tokenizer that puts a BOS before a text it is their r_i exactly;
    without one their code has no r for x_1 and predicts x_2 from x_1 alone (no start
    token), which pddkit does not reproduce. Every difference from the authors' code,
    marked by whether it changes scores: docs/methods/infill.md."""
    check(k, lookahead, variant)
    if obs.infill is None:
        raise PddkitError("infill needs the statistics of the infilled variants")
    return mean_of_lowest(infill_ratios(obs.target, obs.infill, lookahead, variant)[0], k)
