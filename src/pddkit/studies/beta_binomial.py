"""The beta-binomial: counts of `x` successes in `n` trials whose success rate itself varies
from unit to unit (here: snippets of a book above a threshold, the rate varying from book
to book). Parametrised by the mean rate `mean` and the over-dispersion `rho` (the
correlation of two trials of one unit; alpha = mean (1 - rho) / rho, beta = (1 - mean)
(1 - rho) / rho); `rho` = 0 is the binomial.

- `fit`: maximum likelihood over units' counts (`rho` may be 0);
- `tails`: P(X >= x) for x = 0..n at given parameters, exact (summed from the top);
- `predictive_tails`: P(X >= x) for a new unit, averaged over the posterior of (mean, rho)
  given the units' counts (uniform prior on both, a grid): the plug-in tail ignores that
  mean and rho are estimated from a few dozen units, and is too small far out in the tail
  (where a correction over a hundred books looks);
- `benjamini_hochberg`: adjusted p-values (q-values).
"""

from __future__ import annotations

import math

import numpy as np


def _term_counts(x: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, ...]:
    """k = 0..max(n)-1 and how many units have x > k, n - x > k and n > k."""
    size = int(n.max()) + 1

    def more(v):
        return np.bincount(v, minlength=size)[::-1].cumsum()[::-1][1:]

    return np.arange(size - 1), more(x), more(n - x), more(n)


def _loglik(counts: tuple[np.ndarray, ...], mean, theta) -> np.ndarray:
    """log P(counts | mean, theta) without the binomial coefficients, broadcast over arrays
    of `mean` and `theta` = rho / (1 - rho): the sum over units of log prod_{k<x}
    (mean + k theta) prod_{k<n-x} (1 - mean + k theta) / prod_{k<n} (1 + k theta), exact at
    theta = 0 (the binomial)."""
    k, above, below, total = counts
    m, t = np.asarray(mean, dtype=float)[..., None], np.asarray(theta, dtype=float)[..., None]
    return (np.log(m + k * t) @ above + np.log(1 - m + k * t) @ below
            - np.log1p(k * t) @ total)


def fit(above, trials) -> tuple[float, float]:
    """(mean, rho) maximising the likelihood of units' counts `above` of `trials`; rho = 0
    when the units vary no more than binomial draws would."""
    from scipy.optimize import minimize

    x = np.asarray(above, dtype=int)
    n = np.asarray(trials, dtype=int)
    pooled = float(x.sum() / n.sum())
    if x.sum() == 0 or x.sum() == n.sum() or x.size < 2:
        return pooled, 0.0
    counts = _term_counts(x, n)

    def neg(params):
        return -float(_loglik(counts, params[0], params[1]))

    # start from the method of moments: var(x/n) ~ mean(1-mean)(1/n + rho(1 - 1/n))
    excess = (x / n).var(ddof=1) - pooled * (1 - pooled) * np.mean(1 / n)
    rho0 = float(np.clip(excess / (pooled * (1 - pooled)), 1e-4, 0.5))
    best = minimize(neg, [pooled, rho0 / (1 - rho0)], method="L-BFGS-B",
                    bounds=[(1e-9, 1 - 1e-9), (0.0, 1e4)])
    mean, theta = (float(v) for v in best.x)
    if neg([pooled, 0.0]) <= best.fun + 1e-9:  # the boundary: no spread beyond the binomial
        return pooled, 0.0
    return mean, theta / (1 + theta)


def tails_many(n: int, means, rhos) -> np.ndarray:
    """[len(means), n + 1]: P(X >= x) for x = 0..n at each (mean, rho)."""
    m = np.asarray(means, dtype=float)[:, None]
    theta = (np.asarray(rhos, dtype=float) / (1 - np.asarray(rhos, dtype=float)))[:, None]
    k = np.arange(n)
    zero = np.zeros((m.shape[0], 1))
    with np.errstate(divide="ignore"):  # mean 0 or 1: log 0 = -inf, probability 0
        a = np.concatenate([zero, np.cumsum(np.log(m + k * theta), 1)], 1)
        b = np.concatenate([zero, np.cumsum(np.log(1 - m + k * theta), 1)], 1)
    j = np.arange(n + 1)
    log_choose = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                           for i in j])
    logp = log_choose + a[:, j] + b[:, n - j]
    pmf = np.exp(logp - logp.max(1, keepdims=True))
    pmf /= pmf.sum(1, keepdims=True)
    return np.minimum(np.cumsum(pmf[:, ::-1], 1)[:, ::-1], 1.0)  # small tails summed first


def tails(n: int, mean: float, rho: float) -> np.ndarray:
    """P(X >= x) for x = 0..n, X beta-binomial(n, mean, rho)."""
    return tails_many(n, [mean], [rho])[0]


def posterior_grid(above, trials, size: int = 41,
                   estimate: tuple[float, float] | None = None) -> tuple[np.ndarray, ...]:
    """(means, rhos, weights): grid points of (mean, rho) and their posterior probabilities
    given units' counts `above` of `trials`, uniform prior on mean and rho in [0, 1); the
    grid spans +-8 standard errors around the maximum-likelihood estimate (`estimate`, or
    fitted here), widened until its edges hold almost no probability."""
    x = np.asarray(above, dtype=int)
    n = np.asarray(trials, dtype=int)
    mean, rho = estimate if estimate is not None else fit(x, n)
    units, total = x.size, int(n.sum())
    v = max(mean * (1 - mean), 1 / total)  # no zero width when no unit has a success
    per_unit = v * (1 / n.mean() + rho)  # the variance of a unit's observed rate
    se_mean = math.sqrt(per_unit / units)
    se_rho = math.sqrt(2 / max(units - 1, 1)) * per_unit / v
    half, top = 8 * se_mean, rho + 8 * se_rho
    counts = _term_counts(x, n)
    for _ in range(6):
        means = np.linspace(max(mean - half, 1e-9), min(mean + half, 1 - 1e-9), size)
        rhos = np.linspace(0.0, min(top, 0.99), size)
        ll = _loglik(counts, means[:, None], (rhos / (1 - rhos))[None, :])
        w = np.exp(ll - ll.max())
        w /= w.sum()
        edge_mean = ((w[0].sum() if means[0] > 1e-9 else 0)
                     + (w[-1].sum() if means[-1] < 1 - 1e-9 else 0))
        edge_rho = w[:, -1].sum() if rhos[-1] < 0.99 else 0
        if edge_mean < 1e-6 and edge_rho < 1e-6:
            break
        half, top = half * (2 if edge_mean >= 1e-6 else 1), top * (2 if edge_rho >= 1e-6 else 1)
    grid_m, grid_r = np.meshgrid(means, rhos, indexing="ij")
    return grid_m.ravel(), grid_r.ravel(), w.ravel()


def predictive_tails(n: int, grid: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """P(X >= x) for x = 0..n of a new unit of `n` trials, averaged over `grid`'s posterior."""
    means, rhos, w = grid
    keep = w > 1e-12 * w.max()
    return np.minimum(w[keep] @ tails_many(n, means[keep], rhos[keep]) / w[keep].sum(), 1.0)


def benjamini_hochberg(p_values) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values): a unit is a discovery at level q
    when its q-value is at most q."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    out = np.empty(m)
    out[order] = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    return out
