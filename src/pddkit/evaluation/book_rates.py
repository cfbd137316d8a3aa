"""Is a book's rate of snippets above a threshold more than a never-seen book's would be?

The copyrighted-book audit (studies/audit.py) calls each snippet of a book a member or not;
a never-seen book still has some snippets above the threshold (false positives), and how
many differs from one never-seen book to the next (genre, era, style), more than snippets
drawn independently at one pooled rate would. So the reference is the spread of per-book
counts of never-seen validation books, each counted out of fold (the threshold chosen
without that book: evaluation/thresholds.py with groups), as a beta-binomial
(evaluation/beta_binomial.py: mean `mean`, over-dispersion `rho` = the correlation of two
snippets of one book, 0 = the binomial; fitted by maximum likelihood). An audited book with
`x` of `n` snippets above gets the one-sided p-value P(X >= x) for a never-seen book of `n`
snippets, averaged over the posterior of (mean, rho) given the validation books (uniform
prior): mean and rho come from a few dozen books, and the plug-in tail would be too small
where a correction over many books looks. Books are marked when they survive
Benjamini-Hochberg at `fdr` over all audited books.

Without groups in the validation data (or too few never-seen books) the reference is a
binomial at the pooled out-of-sample false-positive rate (p-values from its posterior, a
Beta(above + 1, snippets - above + 1)): the spread between books is then not accounted for,
and the audit says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError
from pddkit.evaluation.beta_binomial import (
    benjamini_hochberg,
    fit,
    posterior_grid,
    predictive_tails,
    tails,
)
from pddkit.evaluation.thresholds import Threshold, ThresholdSummary


@dataclass(frozen=True)
class NeverSeenReference:
    """What a never-seen book's count of snippets above the threshold looks like."""

    model: str  # "beta-binomial" (per-book spread fitted) or "binomial" (pooled rate only)
    mean: float  # a never-seen book's expected share of snippets above the threshold
    rho: float  # over-dispersion: correlation of two snippets' calls within a book (0: none)
    alpha: float | None  # beta-binomial parameters (None when rho is 0)
    beta: float | None
    between_book_sd: float  # sd of never-seen books' true rates, sqrt(rho * mean * (1 - mean))
    books: int  # never-seen validation books fitted (0: pooled, no groups)
    snippets: int  # never-seen validation snippets behind it
    above: int  # of which above the threshold (out of fold)
    spread_accounted: bool  # False: between-book variation is not accounted for
    reason: str  # why the binomial, or "" for the beta-binomial
    book_above: tuple[int, ...] = ()  # per never-seen validation book (beta-binomial only)
    book_snippets: tuple[int, ...] = ()


def reference_from_books(above, snippets) -> NeverSeenReference:
    """The beta-binomial reference fitted to never-seen validation books' out-of-fold
    counts `above` of `snippets` (one entry per book)."""
    x = np.asarray(above, dtype=int)
    n = np.asarray(snippets, dtype=int)
    mean, rho = fit(x, n)
    theta = rho / (1 - rho)
    return NeverSeenReference(
        model="beta-binomial", mean=mean, rho=rho,
        alpha=mean / theta if theta > 0 else None, beta=(1 - mean) / theta if theta > 0 else None,
        between_book_sd=math.sqrt(rho * mean * (1 - mean)), books=int(x.size),
        snippets=int(n.sum()), above=int(x.sum()), spread_accounted=True, reason="",
        book_above=tuple(map(int, x)), book_snippets=tuple(map(int, n)))


def pooled_reference(above: int, snippets: int, reason: str) -> NeverSeenReference:
    """The binomial reference at the pooled rate `above` / `snippets` (no groups)."""
    return NeverSeenReference(model="binomial", mean=above / snippets, rho=0.0, alpha=None,
                              beta=None, between_book_sd=0.0, books=0, snippets=int(snippets),
                              above=int(above), spread_accounted=False, reason=reason)


def never_seen_tails(reference: NeverSeenReference, sizes) -> dict[int, np.ndarray]:
    """For each book size n in `sizes`: P(X >= x), x = 0..n, for a never-seen book of n
    snippets, the parameters' uncertainty included."""
    sizes = sorted({int(v) for v in sizes})
    if reference.model == "beta-binomial":
        grid = posterior_grid(reference.book_above, reference.book_snippets,
                              estimate=(reference.mean, reference.rho))
        return {n: predictive_tails(n, grid) for n in sizes}
    # binomial with a uniform prior on the rate: the predictive is a beta-binomial with
    # alpha = above + 1, beta = snippets - above + 1
    a, b = reference.above + 1, reference.snippets - reference.above + 1
    return {n: tails(n, a / (a + b), 1 / (a + b + 1)) for n in sizes}


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
    table = never_seen_tails(reference, n)
    p = np.array([table[int(ni)][xi] for xi, ni in zip(x, n)], dtype=float)
    q = benjamini_hochberg(p)
    marked = q <= fdr
    m, r = int(p.size), int(marked.sum())
    cutoff = fdr * max(r, 1) / m if m else 0.0
    # a never-seen book with n snippets passes when its p-value is at most the cutoff
    expected = sum(float(table[int(ni)][table[int(ni)] <= cutoff].max(initial=0.0)) for ni in n)
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
        unseen = y == 0  # each never-seen book: its never-seen texts' out-of-fold calls
        _, book = np.unique(np.asarray(groups, dtype=object)[unseen], return_inverse=True)
        reference = reference_from_books(np.bincount(book, weights=fitted.oof_calls_[unseen]),
                                         np.bincount(book))
    else:
        neg = int((y == 0).sum())
        fp = fitted.cv_false_positives_ if fitted.cv_folds_used_ else fitted.n_false_positives_
        reference = pooled_reference(fp, neg, reason or "too few texts per class to "
                                     "cross-validate, so the rate is the in-sample one, "
                                     "which is optimistic")
    calls = tuple(fitted.predict(s) for s in book_scores)
    above = tuple(int(c.sum()) for c in calls)
    snippets = tuple(int(c.size) for c in calls)
    return BookJudgement(threshold=fitted.summary(), reference=reference,
                         test=test_books(above, snippets, reference, fdr), above=above,
                         snippets=snippets, calls=calls)
