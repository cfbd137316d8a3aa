"""Is a book's rate of snippets above a threshold more than a never-seen book's would be?

The copyrighted-book audit (studies/audit.py) calls each snippet of a book a member or not;
a never-seen book still has some snippets above the threshold (false positives), and how
many differs from one never-seen book to the next (genre, era, style), more than snippets
drawn independently at one pooled rate would.

The never-seen rate is always estimated out of fold, never on the texts that chose the
threshold: the validation texts are cut into folds (`cv_folds`, whole books when the texts
name them), the rule is fitted on all folds but one and the held-out fold's never-seen texts
are called with that threshold, each fold in turn (cross-fitted thresholds,
evaluation/thresholds.py). The audited books are called with the threshold chosen on all
validation texts, so the rate is that of the rule at (cv_folds - 1) / cv_folds of the data.

With folds of whole books and at least `min_books` never-seen validation books, the
reference is the spread of those books' out-of-fold counts, a beta-binomial
(studies/beta_binomial.py: mean `mean`, over-dispersion `rho` = the correlation of two
snippets of one book, 0 = the binomial; fitted by maximum likelihood). An audited book with
`x` of `n` snippets above gets the one-sided p-value P(X >= x) for a never-seen book of `n`
snippets, averaged over the posterior of (mean, rho) given the validation books (uniform
prior): mean and rho come from a few dozen books, and the plug-in tail would be too small
where a correction over many books looks. Books are marked when they survive
Benjamini-Hochberg at `fdr` over all audited books.

Without groups in the validation data (or too few never-seen books) nothing measures the
spread between books, and one pooled rate marks never-seen books whose rate differs from the
validation books' by book-to-book variation alone. Then no book is marked and the judgement
says why (`BookTest.given` False), unless the caller states the assumption that never-seen
books do not differ (`assume_no_book_spread`): the reference is then a binomial at the
pooled out-of-fold rate (p-values from its posterior, a Beta(above + 1, snippets - above +
1)), and the judgement records the assumption.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError
from pddkit.evaluation.thresholds import Threshold, ThresholdSummary
from pddkit.studies.beta_binomial import (
    benjamini_hochberg,
    fit,
    posterior_grid,
    predictive_tails,
    tails,
)

NO_SPREAD_ASSUMED = ("never-seen books do not differ from one another in their rates beyond "
                     "chance (stated, not measured)")


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
    spread_accounted: bool  # False: between-book variation is not measured
    reason: str  # why the spread is not measured, or "" for the beta-binomial
    book_above: tuple[int, ...] = ()  # per never-seen validation book (beta-binomial only)
    book_snippets: tuple[int, ...] = ()
    out_of_fold: str = ""  # how the rate was cross-fitted (folds of texts or of whole books)
    assumption: str = ""  # the stated assumption the binomial rests on ("" when none)


def reference_from_books(above, snippets, out_of_fold: str = "") -> NeverSeenReference:
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
        book_above=tuple(map(int, x)), book_snippets=tuple(map(int, n)),
        out_of_fold=out_of_fold)


def pooled_reference(above: int, snippets: int, reason: str, out_of_fold: str = "",
                     assumption: str = "") -> NeverSeenReference:
    """The binomial reference at the pooled out-of-fold rate `above` / `snippets` (the spread
    between books not measured: `reason`)."""
    return NeverSeenReference(model="binomial", mean=above / snippets, rho=0.0, alpha=None,
                              beta=None, between_book_sd=0.0, books=0, snippets=int(snippets),
                              above=int(above), spread_accounted=False, reason=reason,
                              out_of_fold=out_of_fold, assumption=assumption)


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
    """Each audited book's p-value and q-value under a reference, and whether it is marked;
    when no verdict can be given (`given` False, `why_not` says why), p, q and the marks
    are None."""

    p_values: tuple[float | None, ...]
    q_values: tuple[float | None, ...]
    marked: tuple[bool | None, ...]
    fdr: float
    cutoff: float  # Benjamini-Hochberg's p-value threshold in effect: fdr x max(marked, 1) / books
    false_marks_bound: float  # never-seen books expected among the marked: at most fdr x marked
    expected_if_none_seen: float  # books expected to pass the cutoff were all of them never seen
    given: bool = True  # False: no book is marked, for `why_not`
    why_not: str = ""


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


def no_verdict(books: int, fdr: float, why: str) -> BookTest:
    """The test of `books` audited books when no verdict can be given, for `why`."""
    return BookTest(p_values=(None,) * books, q_values=(None,) * books,
                    marked=(None,) * books, fdr=fdr, cutoff=0.0, false_marks_bound=0.0,
                    expected_if_none_seen=0.0, given=False, why_not=why)


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
    assumption_unused: bool = False  # assume_no_book_spread given, but the spread was measured


def _usable_groups(groups, labels, min_books: int) -> tuple[list[str] | None, str]:
    """The validation groups when folds can be whole groups, else None; and why the
    reference cannot be the per-book spread ("" when it can)."""
    if groups is None or all(g is None for g in groups):
        return None, "the validation texts name no book (group)"
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


def require_out_of_fold(labels, what: str = "the validation data") -> None:
    """One sentence unless `labels` hold 2 or more texts of each class: the never-seen rate
    is estimated on folds the threshold was not chosen on, and each fold needs both."""
    y = np.asarray(labels).astype(int)
    pos, neg = int((y == 1).sum()), int((y == 0).sum())
    if pos < 2 or neg < 2:
        raise PddkitError(f"{what} has {pos} member and {neg} never-seen texts: the never-seen "
                          "rate is measured on texts that did not choose the threshold (folds), "
                          "which needs at least 2 of each; add labelled texts")


def judge_books(val_scores, val_labels, book_scores, *, val_groups=None,
                rule: str = "accuracy", fdr: float = 0.05, seed: int = 0, cv_folds: int = 5,
                min_books: int = 5, assume_no_book_spread: bool = False) -> BookJudgement:
    """Choose the threshold on validation scores with `rule`; estimate the never-seen rate
    out of fold (`cv_folds` folds, of whole books when `val_groups` names each text's book);
    test each audited book's scores (`book_scores`: one array per book) against the
    never-seen validation books' spread (beta-binomial), Benjamini-Hochberg at `fdr`.
    Without that spread (no groups, too few never-seen books) no book is marked and the
    test says why, unless `assume_no_book_spread` states that never-seen books do not
    differ: then a binomial at the pooled out-of-fold rate."""
    if not 0 < fdr < 1:
        raise PddkitError(f"`fdr` must be between 0 and 1 (e.g. 0.05), not {fdr!r}")
    if cv_folds < 2:
        raise PddkitError(f"`cv_folds` must be at least 2 (the never-seen rate is estimated "
                          f"out of fold), not {cv_folds}")
    y = np.asarray(val_labels).astype(int)
    require_out_of_fold(y)
    groups, reason = _usable_groups(val_groups, y, min_books)
    fitted = Threshold(rule, cv_folds=cv_folds, seed=seed).fit(val_scores, y, groups=groups)
    k = fitted.cv_folds_used_  # >= 2: 2 texts a class, and 2 books a class with groups
    how = (f"cross-fitted in {k} folds of {'whole books' if groups is not None else 'texts'}: "
           f"the threshold chosen on {k - 1} fold{'s' if k > 2 else ''}, the never-seen rate "
           "counted on the held-out fold, each fold in turn")
    calls = tuple(fitted.predict(s) for s in book_scores)
    above = tuple(int(c.sum()) for c in calls)
    snippets = tuple(int(c.size) for c in calls)
    unseen = y == 0
    if groups is not None and not reason:  # each never-seen book's out-of-fold count
        _, book = np.unique(np.asarray(groups, dtype=object)[unseen], return_inverse=True)
        reference = reference_from_books(np.bincount(book, weights=fitted.oof_calls_[unseen]),
                                         np.bincount(book), how)
        test = test_books(above, snippets, reference, fdr)
    else:
        reference = pooled_reference(int(fitted.oof_calls_[unseen].sum()), int(unseen.sum()),
                                     reason, how,
                                     NO_SPREAD_ASSUMED if assume_no_book_spread else "")
        test = (test_books(above, snippets, reference, fdr) if assume_no_book_spread else
                no_verdict(len(calls), fdr, f"{reason}, so nothing measures how much books the "
                           "model never saw differ from one another"))
    return BookJudgement(threshold=fitted.summary(), reference=reference, test=test,
                         above=above, snippets=snippets, calls=calls,
                         assumption_unused=assume_no_book_spread and reference.spread_accounted)
