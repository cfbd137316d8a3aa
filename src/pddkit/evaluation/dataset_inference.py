"""The statistics of dataset inference (Maini et al. 2024, "LLM Dataset Inference: Did
you train on my dataset?", arXiv 2406.06443), on feature matrices alone
(numbers only; studies/infer.py scores the texts and writes the report).

Each feature is oriented so that higher = more member-like; a linear classifier fitted on
one half of each set scores the other halves, and a one-sided t-test asks whether suspect
texts score higher. A false-positive check runs the same test on two halves of the
reference set, where no difference should be found: halves of whole documents when the
reference texts carry a `group` (windows of one document never sit on both sides), text by
text otherwise (and `CheckSplit.sentence` says so).

Two classifiers (`classifier`):

Both clip each set to its *own* 2.5-97.5% quantiles and z-score with the clipped suspect
set's mean and standard deviation.

- `nonnegative` (default): a logistic regression whose weights are constrained to be
  non-negative (`fit_nonnegative`), and Welch's t-test. Its score can only rise with
  features that rise with membership, so a small p-value means the suspect texts look
  *more* familiar than the reference texts. Suspect texts that look less familiar get
  weights of zero on the features where they are lower (all zero: constant scores, p = 1);
  `decide` then runs the mirrored test (features negated) and, when that one is
  significant, the verdict says the sets differ but the suspect texts look less familiar,
  which is not evidence of training.
- `paper`: Maini et al.'s procedure as in the authors' code (github.com/pratyushmaini/
  llm_dataset_inference, linear_di.py): per-set clipping as above, an unconstrained logistic
  regression (`fit_unconstrained`), Student's t-test (equal variances). It counts a
  difference in either direction. Where pddkit differs from that code: (1) the clip
  bounds are the 2.5% and 97.5% quantiles (numpy's linear interpolation);
  the code sets the floor(0.025 n) lowest and highest values to the nearest value it
  keeps; (2) the code runs 1000 full-batch Adam steps (lr 0.01, random start) on the
  unpenalised logistic loss, which stop short of the optimum (and of infinite weights when
  the fitted halves are separable); pddkit fits to the optimum of the same L2-penalised
  loss as the non-negative fit (scikit-learn's default, C = 1), deterministically; (3) the
  code labels the suspect set 0 and tests "suspect scores lower"; pddkit labels it 1 and
  tests "higher", which is the same test (the fit is symmetric: weights and intercept
  change sign); (4) the code fits on a fixed number of texts per set and its p-value curve
  takes the first n held-out scores of that one classifier; pddkit fits on the first half
  of each set and its curve reruns the whole test on the first n texts of each set.

Both shuffle each set with `numpy.random.default_rng(seed)`: the suspect set's permutation
first, then the reference set's. `compare_sets` and `false_positive_test` take
milliseconds, so the statistics can be rerun for many seeds on features computed once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pddkit.errors import PddkitError
from pddkit.evaluation.dataset_inference_fit import (
    fit_nonnegative,
    fit_unconstrained,
    t_test_greater,
)

CLIP = 0.025  # features are clipped to the quantiles [CLIP, 1 - CLIP]
MIN_PER_HALF = 4  # texts per half of a set: one half fits the classifier, one is tested
CLASSIFIERS = {
    "nonnegative": "logistic regression with non-negative weights on member-is-higher "
                   "features, each set clipped to its own 2.5-97.5% quantiles, "
                   "one-sided Welch t-test (pddkit's default)",
    "paper": "Maini et al.'s unconstrained logistic regression, each set clipped to its own "
             "2.5-97.5% quantiles, one-sided Student's t-test (equal variances)",
}
T_TESTS = {"nonnegative": "Welch", "paper": "Student"}


def check_classifier(classifier: str) -> str:
    """`classifier` when it is one pddkit knows; one sentence otherwise."""
    if classifier not in CLASSIFIERS:
        raise PddkitError(f"`classifier` must be one of {', '.join(CLASSIFIERS)}, not "
                          f"{classifier!r}")
    return classifier


@dataclass(frozen=True)
class FeatureMatrix:
    """Membership features (columns `names`, higher = more member-like) of each set's texts;
    `reference_groups`: the document (`group`) of each reference text, None for a text
    without one (None: no groups at all), which the false-positive check keeps whole."""

    names: tuple[str, ...]
    suspect: np.ndarray  # [n_suspect, F]
    reference: np.ndarray  # [n_reference, F]
    reference_groups: tuple[str | None, ...] | None = None


@dataclass(frozen=True)
class SetTest:
    """One dataset-inference test: classifier weights (on z-scored features), the one-sided
    t-test of the held-out halves' scores (suspect > reference), and those scores."""

    p_value: float
    t_statistic: float
    weights: dict[str, float]
    intercept: float
    gaps: dict[str, float]  # per feature: suspect mean - reference mean, in suspect std units
    n_fit: tuple[int, int]  # (suspect, reference) texts the classifier was fitted on
    n_test: tuple[int, int]  # (suspect, reference) texts the t-test compares
    suspect_scores: np.ndarray = field(repr=False)  # classifier log-odds of the tested halves
    reference_scores: np.ndarray = field(repr=False)

    def to_dict(self) -> dict:
        return {"p_value": self.p_value, "t_statistic": self.t_statistic,
                "weights": self.weights, "intercept": self.intercept, "gaps": self.gaps,
                "n_fit": {"suspect": self.n_fit[0], "reference": self.n_fit[1]},
                "n_test": {"suspect": self.n_test[0], "reference": self.n_test[1]},
                "scores": {"suspect": self.suspect_scores.tolist(),
                           "reference": self.reference_scores.tolist()}}


@dataclass(frozen=True)
class CheckSplit:
    """How the false-positive check cut the reference set: by whole documents (`group`) or
    text by text; texts and (by group) documents on each side."""

    by: str  # "group" or "text"
    texts: tuple[int, int]
    groups: tuple[int, int] | None = None  # documents per half (by group)
    ungrouped: int = 0  # reference texts without a group, each its own document

    def sentence(self) -> str:
        a, b = self.texts
        if self.by == "text":
            return (f"The false-positive check split the reference set text by text ({a} + {b} "
                    "texts; they have no 'group' column), so windows of one document may sit "
                    "on both halves and make them look alike; give each text its document "
                    "under 'group' to split by whole documents.")
        ga, gb = self.groups
        alone = (f"; {self.ungrouped} texts without a 'group' count as one document each"
                 if self.ungrouped else "")
        return (f"The false-positive check split the reference set by document ('group'): "
                f"{ga} documents ({a} texts) against {gb} documents ({b} texts), no document "
                f"on both sides{alone}.")

    def to_dict(self) -> dict:
        return {"by": self.by, "texts": list(self.texts),
                "groups": None if self.groups is None else list(self.groups),
                "ungrouped": self.ungrouped, "sentence": self.sentence()}


@dataclass(frozen=True)
class CurvePoint:
    """The test's p-value when only the first `n` texts of each (shuffled) set are used."""

    n: int
    p_value: float


@dataclass(frozen=True)
class Decision:
    """The test, the false-positive check (None when not asked for), p-value against the
    number of texts for both, and the verdict."""

    test: SetTest
    check: SetTest | None
    curve: tuple[CurvePoint, ...]
    check_curve: tuple[CurvePoint, ...]
    alpha: float
    used_in_training: bool
    verdict: str
    # the mirrored test (suspect texts look *less* familiar), run by the non-negative
    # classifier when the test is not significant; None when not run
    less_familiar_p_value: float | None = None
    classifier: str = "nonnegative"
    check_split: CheckSplit | None = None  # None when the check did not run


def normalise(suspect: np.ndarray, reference: np.ndarray,
              clip: float = CLIP) -> tuple[np.ndarray, np.ndarray]:
    """Each set's features clipped to its own [clip, 1 - clip] quantiles (as the
    paper's code), then z-scored with the clipped suspect set's mean and standard
    deviation (a constant feature: divided by 1)."""
    S = np.asarray(suspect, dtype=np.float64)
    R = np.asarray(reference, dtype=np.float64)
    lo, hi = np.quantile(S, [clip, 1 - clip], axis=0)
    r_lo, r_hi = np.quantile(R, [clip, 1 - clip], axis=0)
    S, R = np.clip(S, lo, hi), np.clip(R, r_lo, r_hi)
    mean, std = S.mean(axis=0), S.std(axis=0)
    std = np.where(std > 1e-12, std, 1.0)
    return (S - mean) / std, (R - mean) / std


def require_sizes(n_suspect: int, n_reference: int, false_positive_check: bool) -> None:
    """One sentence when a set is too small to be cut into two halves of MIN_PER_HALF."""
    need = 2 * MIN_PER_HALF
    if n_suspect < need or n_reference < need:
        raise PddkitError(
            f"dataset inference needs at least {need} suspect and {need} reference texts (two "
            f"halves of {MIN_PER_HALF}: one fits the classifier, one is tested), but got "
            f"{n_suspect} suspect and {n_reference} reference texts")
    if false_positive_check and n_reference < 2 * need:
        raise PddkitError(
            f"the false-positive check splits the {n_reference} reference texts into two sets "
            f"of at least {need} each, so it needs {2 * need}; give more reference texts or "
            "`false_positive_check=False`")


def compare_sets(suspect: np.ndarray, reference: np.ndarray, names: Sequence[str], seed: int = 0,
                 n: int | None = None, classifier: str = "nonnegative") -> SetTest:
    """Maini et al.'s test on feature matrices: each set shuffled (seeded) and cut to its
    first `n` texts (all by default); features clipped and z-scored (`normalise`); a
    logistic regression fitted on the first half of each set (suspect 1, reference 0)
    scores the second halves; a one-sided t-test that suspect scores are higher.
    `nonnegative`: weights >= 0 (`fit_nonnegative`) and Welch's test, so only suspect texts
    that look *more* familiar count (a feature on which they are lower gets weight 0; every
    weight 0: constant scores, p = 1). `paper`: an unconstrained fit
    (`fit_unconstrained`) and Student's test. `gaps` show per feature whether the suspect
    texts look more familiar (positive) or less."""
    paper = check_classifier(classifier) == "paper"
    rng = np.random.default_rng(seed)
    S = np.asarray(suspect, dtype=np.float64)[rng.permutation(len(suspect))][:n]
    R = np.asarray(reference, dtype=np.float64)[rng.permutation(len(reference))][:n]
    require_sizes(len(S), len(R), False)
    S, R = normalise(S, R)
    hs, hr = len(S) // 2, len(R) // 2
    X = np.vstack([S[:hs], R[:hr]])
    y = np.r_[np.ones(hs), np.zeros(hr)]
    w, b = fit_unconstrained(X, y) if paper else fit_nonnegative(X, y)
    s_scores, r_scores = S[hs:] @ w + b, R[hr:] @ w + b
    t, p = t_test_greater(s_scores, r_scores, equal_var=paper)
    return SetTest(p_value=p, t_statistic=t,
                   weights={k: float(v) for k, v in zip(names, w)},
                   intercept=float(b),
                   gaps={k: float(g) for k, g in zip(names, S.mean(axis=0) - R.mean(axis=0))},
                   n_fit=(hs, hr), n_test=(len(S) - hs, len(R) - hr),
                   suspect_scores=s_scores, reference_scores=r_scores)


def split_groups(groups: Sequence[str | None], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of two halves made of whole documents: the documents (a text whose group
    is None: a document of its own) in a seeded random order, then largest first (ties keep
    that order), each to the half holding fewer texts so far."""
    rows: dict = {}
    for i, g in enumerate(groups):
        rows.setdefault(("doc", g) if g is not None else ("text", i), []).append(i)
    docs = list(rows.values())
    docs = [docs[i] for i in np.random.default_rng(seed).permutation(len(docs))]
    docs.sort(key=len, reverse=True)  # stable: equal sizes keep the shuffled order
    halves: tuple[list[int], list[int]] = ([], [])
    for d in docs:
        halves[0 if len(halves[0]) <= len(halves[1]) else 1].extend(d)
    return np.array(sorted(halves[0]), dtype=int), np.array(sorted(halves[1]), dtype=int)


def reference_halves(n_reference: int, seed: int = 0,
                     groups: Sequence[str | None] | None = None
                     ) -> tuple[np.ndarray, np.ndarray, CheckSplit]:
    """Row indices of the false-positive check's two halves of the reference set and how they
    were cut: by whole documents when `groups` is given (`split_groups`), else the set
    shuffled (seeded) and cut text by text."""
    if groups is None:
        perm = np.random.default_rng(seed).permutation(n_reference)
        a, b = perm[:n_reference // 2], perm[n_reference // 2:]
        return a, b, CheckSplit("text", (len(a), len(b)))
    if len(groups) != n_reference:
        raise PddkitError(f"{len(groups)} reference groups for {n_reference} reference texts")
    a, b = split_groups(groups, seed)
    docs = lambda idx: len({groups[i] if groups[i] is not None else ("text", i)  # noqa: E731
                            for i in idx})
    return a, b, CheckSplit("group", (len(a), len(b)), (docs(a), docs(b)),
                            sum(g is None for g in groups))


def check_halves(n_reference: int, seed: int = 0,
                 groups: Sequence[str | None] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, CheckSplit]:
    """`reference_halves`, or one sentence when a half made of whole documents holds fewer
    than 2 * MIN_PER_HALF texts."""
    a, b, split = reference_halves(n_reference, seed, groups)
    if min(len(a), len(b)) < 2 * MIN_PER_HALF:
        raise PddkitError(
            f"the false-positive check splits the reference set by document ('group'), but "
            f"its {n_reference} texts from {sum(split.groups)} documents give halves of "
            f"{len(a)} and {len(b)} texts, and each needs at least {2 * MIN_PER_HALF}; "
            "give more reference documents or `false_positive_check=False`")
    return a, b, split


def split_reference(reference: np.ndarray, seed: int = 0,
                    groups: Sequence[str | None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The reference set cut into two halves (`reference_halves`): a pretend suspect set and
    a pretend reference set, neither of them trained on."""
    R = np.asarray(reference)
    a, b, _ = reference_halves(len(R), seed, groups)
    return R[a], R[b]


def false_positive_test(reference: np.ndarray, names: Sequence[str], seed: int = 0,
                        n: int | None = None, groups: Sequence[str | None] | None = None,
                        classifier: str = "nonnegative") -> SetTest:
    """The false-positive check: `compare_sets` on two halves of the reference set (whole
    documents on each side when `groups` is given)."""
    a, b = split_reference(reference, seed, groups)
    return compare_sets(a, b, names, seed, n, classifier)


def curve_sizes(n_max: int) -> list[int]:
    """Texts per set for the p-value curve: about ten sizes, evenly spaced on a log scale,
    from 2 * MIN_PER_HALF to `n_max`."""
    lo = 2 * MIN_PER_HALF
    if n_max < lo:
        return []
    return sorted({round(float(x)) for x in np.geomspace(lo, n_max, 10)} | {n_max})


def decide(features: FeatureMatrix, alpha: float = 0.05, false_positive_check: bool = True,
           seed: int = 0, classifier: str = "nonnegative") -> Decision:
    """The test, the false-positive check (by document when `features.reference_groups` is
    given), p-value curves and the verdict, from features."""
    if not 0 < alpha < 1:
        raise PddkitError(f"`alpha` must be between 0 and 1, not {alpha}")
    check_classifier(classifier)
    S, R, names = features.suspect, features.reference, features.names
    require_sizes(len(S), len(R), false_positive_check)
    test = compare_sets(S, R, names, seed, classifier=classifier)
    curve = tuple(CurvePoint(n, compare_sets(S, R, names, seed, n, classifier).p_value)
                  for n in curve_sizes(max(len(S), len(R))))
    check, check_curve, split = None, (), None
    if false_positive_check:
        groups = features.reference_groups
        a, b, split = check_halves(len(R), seed, groups)
        check = false_positive_test(R, names, seed, groups=groups, classifier=classifier)
        check_curve = tuple(
            CurvePoint(n, false_positive_test(R, names, seed, n, groups, classifier).p_value)
            for n in curve_sizes(max(len(a), len(b))))
    used = test.p_value < alpha and (check is None or check.p_value >= alpha)
    # the non-negative classifier, not significant: do the suspect texts look *less*
    # familiar instead? (the same test with every feature negated, so that higher = less
    # member-like). The paper's unconstrained fit is symmetric: negated features give the
    # same p-value, so it has no mirrored test.
    less_p = (None if test.p_value < alpha or classifier == "paper"
              else compare_sets(-S, -R, names, seed).p_value)
    return Decision(test, check, curve, check_curve, alpha, used,
                    verdict_sentence(test.p_value, None if check is None else check.p_value,
                                     alpha, less_p, classifier),
                    less_p, classifier, split)


def verdict_sentence(p: float, check_p: float | None, alpha: float,
                     less_p: float | None = None, classifier: str = "nonnegative") -> str:
    """The verdict for a non-specialist; `less_p` is the mirrored test's p-value (suspect
    texts less familiar), given when the test itself is not significant."""
    ps = f"p = {p:.2g}"
    if p >= alpha and less_p is not None and less_p < alpha:
        return (f"No evidence of training on the suspect texts: the model does treat them "
                f"differently from the reference texts, but it finds them LESS familiar "
                f"(p = {less_p:.2g} for less familiar; {ps} for more familiar, not below the "
                f"{alpha:g} threshold), which is not evidence of training. The reference texts "
                "probably differ from the suspect texts in some other way (source, time, "
                "topic); use a reference set drawn from the same source as the suspect texts.")
    if p < alpha and check_p is not None and check_p < alpha:
        return (f"Inconclusive: the model treats the suspect texts differently from the reference "
                f"texts ({ps}), but it also separates two halves of the reference set, which it "
                f"never saw (p = {check_p:.2g}), so the difference may come from the texts "
                "themselves rather than from training; use a larger reference set drawn from the "
                "same source as the suspect texts.")
    if p < alpha:
        check = ("" if check_p is None else
                 f", and two halves of the reference set show no such difference (p = {check_p:.2g})")
        if classifier == "paper":
            return (f"Used in training (Maini et al.'s test): the model treats the suspect texts "
                    f"differently from comparable texts it never saw ({ps}, below the {alpha:g} "
                    f"threshold){check}. The paper's classifier counts a difference in either "
                    "direction, also suspect texts that look LESS familiar (see the feature "
                    "gaps); the non-negative classifier counts only texts that look more "
                    "familiar. This assumes the reference texts come from the same source as "
                    "the suspect texts.")
        return (f"Used in training: the model treats the suspect texts as familiar, unlike "
                f"comparable texts it never saw ({ps}, below the {alpha:g} threshold){check}. "
                "This assumes the reference texts come from the same source as the suspect texts.")
    return (f"No evidence of training on the suspect texts: the model does not treat them "
            f"differently from comparable texts it never saw ({ps}, not below the {alpha:g} "
            "threshold). This does not prove they were not used; more texts make the test "
            "more sensitive.")
