"""Is a book's rate of snippets above a threshold more than a never-seen book's would be?

The copyrighted-book audit (studies/audit.py) calls each snippet of a book a member or not;
a never-seen book still has some snippets above the threshold (false positives), and how
many differs from one never-seen book to the next (genre, era, style), more than snippets
drawn independently at one pooled rate would. So the reference is the distribution of
per-book counts of never-seen validation books, each counted out of fold (the threshold
chosen without that book, evaluation/thresholds.py with groups): a beta-binomial fitted by
maximum likelihood (mean `mean`, over-dispersion `rho` = the correlation of two snippets of
one book; `rho` = 0 is the binomial, which the fit may reach). An audited book with `x` of
`n` snippets above gets the one-sided p-value P(X >= x) under that distribution, and books
are marked when they survive Benjamini-Hochberg at `fdr` over all audited books.

Without groups in the validation data (or too few never-seen books) the reference is a
binomial at the pooled out-of-sample false-positive rate: the spread between books is then
not accounted for, and the audit says so.

When no never-seen validation snippet is above the threshold, the mean is taken as half a
snippet over all of them (0.5 / N), so one snippet above cannot by itself give p = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError
from pddkit.evaluation.thresholds import Threshold, ThresholdSummary


@dataclass(frozen=True)
class NeverSeenReference:
    """What a never-seen book's count of snippets above the threshold looks like."""

    model: str  # "beta-binomial" (per-book spread fitted) or "binomial" (pooled rate only)
    mean: float  # a never-seen book's expected share of snippets above the threshold
    rho: float  # over-dispersion: correlation of two snippets' calls within a book (0: none)
    alpha: float | None  # beta-binomial parameters (None for the binomial)
    beta: float | None
    between_book_sd: float  # sd of never-seen books' true rates, sqrt(rho * mean * (1 - mean))
    books: int  # never-seen validation books fitted (0: pooled, no groups)
    snippets: int  # never-seen validation snippets behind it
    above: int  # of which above the threshold (out of fold)
    spread_accounted: bool  # False: between-book variation is not accounted for
    reason: str  # why the binomial, or "" for the beta-binomial


def _term_counts(x: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, ...]:
    """For k = 0..max(n)-1: how many books have x > k, n - x > k and n > k."""
    size = int(n.max()) + 1

    def more(v):
        return np.bincount(v, minlength=size)[::-1].cumsum()[::-1][1:]

    return np.arange(size - 1), more(x), more(n - x), more(n)


def _loglik(counts: tuple[np.ndarray, ...], mean: float, theta: float) -> float:
    """Sum over books of log P(x | n, mean, theta) without the binomial coefficients, with
    theta = rho / (1 - rho) = 1 / (alpha + beta): prod_{k<x} (mean + k theta) prod_{k<n-x}
    (1 - mean + k theta) / prod_{k<n} (1 + k theta); exact at theta = 0 (the binomial)."""
    k, above, below, total = counts
    return float(above @ np.log(mean + k * theta) + below @ np.log(1 - mean + k * theta)
                 - total @ np.log1p(k * theta))


def fit_beta_binomial(above, snippets) -> tuple[float, float]:
    """(mean, rho) maximising the beta-binomial likelihood of per-book counts `above` of
    `snippets`; rho = 0 when the books vary no more than binomial draws would."""
    from scipy.optimize import minimize

    x = np.asarray(above, dtype=int)
    n = np.asarray(snippets, dtype=int)
    pooled = x.sum() / n.sum()
    if x.sum() == 0 or x.sum() == n.sum():
        return float(pooled), 0.0
    eps = 1e-9

    counts = _term_counts(x, n)

    def neg(params):
        return -_loglik(counts, params[0], params[1])

    # start from the method of moments: var(x/n) ~ mean(1-mean)(1/n + rho(1 - 1/n))
    r = x / n
    excess = r.var(ddof=1) - pooled * (1 - pooled) * np.mean(1 / n) if len(x) > 1 else 0.0
    rho0 = float(np.clip(excess / (pooled * (1 - pooled)), 1e-4, 0.5))
    fit = minimize(neg, [pooled, rho0 / (1 - rho0)], method="L-BFGS-B",
                   bounds=[(eps, 1 - eps), (0.0, 1e4)])
    mean, theta = (float(v) for v in fit.x)
    if neg([mean, 0.0]) <= fit.fun + 1e-9:  # the boundary: no spread beyond the binomial
        mean, theta = float(pooled), 0.0
    return mean, theta / (1 + theta)


def tails(n: int, mean: float, rho: float) -> np.ndarray:
    """P(X >= x) for x = 0..n, X beta-binomial(n, mean, rho) (binomial when rho = 0)."""
    if mean <= 0:
        return np.r_[1.0, np.zeros(n)]
    theta = rho / (1 - rho)
    k = np.arange(n)
    a = np.r_[0.0, np.cumsum(np.log(mean + k * theta))]  # a[j] = sum_{k<j} log(mean + k theta)
    with np.errstate(divide="ignore"):
        b = np.r_[0.0, np.cumsum(np.log(1 - mean + k * theta))]
    j = np.arange(n + 1)
    log_choose = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                           for i in j])
    logp = log_choose + a[j] + b[n - j] - np.log1p(k * theta).sum()
    pmf = np.exp(logp - logp.max())
    tail = np.cumsum(pmf[::-1])[::-1] / pmf.sum()  # small tails summed from the top: exact
    return np.minimum(tail, 1.0)


def tail_p(x: int, n: int, mean: float, rho: float) -> float:
    """P(X >= x) for X beta-binomial(n, mean, rho)."""
    return float(tails(n, mean, rho)[min(max(x, 0), n)]) if x <= n else 0.0


def benjamini_hochberg(p_values) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values): a book is marked at level `fdr`
    when its q-value is at most `fdr`."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p)
    scaled = p[order] * m / np.arange(1, m + 1)
    q = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(q, 1.0)
    return out


def reference_from_books(above, snippets) -> NeverSeenReference:
    """The beta-binomial reference fitted to never-seen validation books' out-of-fold
    counts `above` of `snippets` (one entry per book)."""
    x = np.asarray(above, dtype=int)
    n = np.asarray(snippets, dtype=int)
    mean, rho = fit_beta_binomial(x, n)
    mean = max(mean, 0.5 / n.sum())
    theta = rho / (1 - rho)
    return NeverSeenReference(
        model="beta-binomial", mean=mean, rho=rho,
        alpha=mean / theta if theta > 0 else None, beta=(1 - mean) / theta if theta > 0 else None,
        between_book_sd=math.sqrt(rho * mean * (1 - mean)), books=int(x.size),
        snippets=int(n.sum()), above=int(x.sum()), spread_accounted=True, reason="")


def pooled_reference(above: int, snippets: int, reason: str) -> NeverSeenReference:
    """The binomial reference at the pooled rate `above` / `snippets` (no groups)."""
    mean = max(above / snippets, 0.5 / snippets)
    return NeverSeenReference(model="binomial", mean=mean, rho=0.0, alpha=None, beta=None,
                              between_book_sd=0.0, books=0, snippets=int(snippets),
                              above=int(above), spread_accounted=False, reason=reason)


@dataclass(frozen=True)
class BookTest:
    """Each audited book's p-value and q-value under a reference, and whether it is marked."""

    p_values: tuple[float, ...]
    q_values: tuple[float, ...]
    marked: tuple[bool, ...]
    fdr: float
    cutoff: float  # Benjamini-Hochberg's p-value threshold in effect: fdr x max(marked, 1) / books
    false_marks_bound: float  # never-seen books expected among the marked: at most fdr x marked
    expected_if_none_seen: float  # books expected to pass the cutoff were all of them never seen


def test_books(above, snippets, reference: NeverSeenReference, fdr: float = 0.05) -> BookTest:
    """One-sided p-values of audited books' counts `above` of `snippets` under `reference`,
    Benjamini-Hochberg at `fdr` over them."""
    x = np.asarray(above, dtype=int)
    n = np.asarray(snippets, dtype=int)
    table = {int(v): tails(int(v), reference.mean, reference.rho) for v in np.unique(n)}
    p = np.array([table[int(ni)][xi] for xi, ni in zip(x, n)], dtype=float)
    q = benjamini_hochberg(p)
    marked = q <= fdr
    m, r = int(p.size), int(marked.sum())
    cutoff = fdr * max(r, 1) / m if m else 0.0
    # a never-seen book with n snippets passes when its p-value is at most the cutoff
    expected = sum(float(t[t <= cutoff].max(initial=0.0)) for t in (table[int(ni)] for ni in n))
    return BookTest(p_values=tuple(map(float, p)), q_values=tuple(map(float, q)),
                    marked=tuple(map(bool, marked)), fdr=fdr, cutoff=cutoff,
                    false_marks_bound=fdr * r, expected_if_none_seen=expected)


@dataclass(frozen=True)
class BookJudgement:
    """A threshold chosen on validation texts, the never-seen reference and each audited
    book's count of snippets above the threshold, tested against it."""

    threshold: ThresholdSummary
    reference: NeverSeenReference
    test: BookTest
    above: tuple[int, ...]  # per audited book, its snippets above the threshold
    snippets: tuple[int, ...]
    calls: tuple[np.ndarray, ...]  # per audited book, each snippet's call (1 = above)


def _usable_groups(groups, labels, min_books: int) -> tuple[list[str] | None, str]:
    """The validation groups when folds can be whole groups, else None; and why the
    reference cannot be the per-book spread ("" when it can)."""
    if groups is None or all(g is None for g in groups):
        return None, "the validation data names no book (group) for its texts"
    missing = sum(g is None for g in groups)
    if missing:
        return None, f"{missing} of {len(groups)} validation texts name no book (group)"
    names = [str(g) for g in groups]
    by_group: dict[str, list[int]] = {}
    for name, y in zip(names, labels):
        by_group.setdefault(name, []).append(int(y))
    unseen = [v for v in by_group.values() if 2 * sum(v) < len(v)]
    seen = len(by_group) - len(unseen)
    if len(unseen) < 2 or seen < 2:
        return None, (f"the validation data has {seen} known-member and {len(unseen)} "
                      "never-seen books (groups); folds of whole books need 2 of each")
    fit = sum(v.count(0) >= 2 for v in unseen)
    if fit < min_books:
        return names, (f"the validation data has {fit} never-seen books of 2 or more texts, "
                       f"too few (under {min_books}) to measure how much they vary")
    return names, ""


def judge_books(val_scores, val_labels, book_scores, *, val_groups=None,
                rule: str = "accuracy", fdr: float = 0.05, seed: int = 0, cv_folds: int = 5,
                min_books: int = 5) -> BookJudgement:
    """Choose the threshold on validation scores with `rule` (folds of whole books when
    `val_groups` names each text's book), fit the never-seen reference (beta-binomial over
    never-seen validation books' out-of-fold counts; a binomial at the pooled rate without
    groups, saying why) and test each audited book's scores (`book_scores`: one array per
    book) against it, Benjamini-Hochberg at `fdr`."""
    if not 0 < fdr < 1:
        raise PddkitError(f"`fdr` must be between 0 and 1 (e.g. 0.05), not {fdr!r}")
    y = np.asarray(val_labels).astype(int)
    groups, reason = _usable_groups(val_groups, y, min_books)
    fitted = Threshold(rule, cv_folds=cv_folds, seed=seed).fit(val_scores, y, groups=groups)
    if groups is not None and not reason and fitted.cv_folds_used_:
        x, n = [], []
        unseen = y == 0
        for name in dict.fromkeys(g for g, u in zip(groups, unseen) if u):
            rows = unseen & (np.asarray(groups, dtype=object) == name)
            x.append(int(fitted.oof_calls_[rows].sum()))
            n.append(int(rows.sum()))
        reference = reference_from_books(x, n)
    else:
        neg = int((y == 0).sum())
        fp = fitted.cv_false_positives_ if fitted.cv_folds_used_ else fitted.n_false_positives_
        reference = pooled_reference(fp, neg, reason or "too few texts per class to "
                                     "cross-validate")
    calls = tuple(fitted.predict(s) for s in book_scores)
    above = tuple(int(c.sum()) for c in calls)
    snippets = tuple(int(c.size) for c in calls)
    return BookJudgement(threshold=fitted.summary(), reference=reference,
                         test=test_books(above, snippets, reference, fdr), above=above,
                         snippets=snippets, calls=calls)
