"""The statistics of dataset inference (Maini et al. 2024, "LLM Dataset Inference: Did
you train on my dataset?", arXiv 2406.06443), on feature matrices alone
(numbers only; studies/infer.py scores the texts and writes the report).

Each feature is oriented so that higher = more member-like. Per feature, the values are
clipped (`clip`, below), then z-scored with the clipped suspect set's mean and standard
deviation; a linear classifier fitted on one half of each set scores the other halves, and
a one-sided t-test asks whether suspect texts score higher. A false-positive check runs the
same test on two halves of the reference set, where no difference should be found: halves
of whole documents when the reference texts carry a `group` (windows of one document never
sit on both sides), text by text otherwise (and `CheckSplit.sentence` says so).

Clipping (`clip`, SPEC 3d):

- `pooled` (default): one pair of bounds per feature, the 2.5% and 97.5% quantiles of the
  two sets pooled, applied to both. The bounds are a symmetric function of all the texts,
  so which text sits in which set does not change how it is clipped, and under the null
  (both sets from one distribution) the held-out scores of the two sets are exchangeable.
- `per-set`: each set clipped to its own 2.5% and 97.5% quantiles, computed on its fitted
  and tested halves together, as the authors' code does. With heavy-tailed features the two
  sets' bounds differ by chance, which shifts each set's clipped mean; that shift is shared
  by the set's fitted and tested halves, so the classifier learns it on the first and finds
  it again in the second: a null with 5 lognormal features (exp(1.5 z)) among 20 gives
  p < 0.05 in 9-20% of draws at 100-4000 texts per set, where pooled bounds give 4-7%
  (benchmarks/infer_null.py; docs/guides/infer.md has the figures).

The false-positive check follows the same rule on its own two sets: `pooled` clips both
halves to the quantiles of the two halves pooled (the reference set's own quantiles), not to
the main test's bounds (suspect texts included). The check is the test run on two sets
known to be alike, so it must be the same procedure on the sets it compares: then its
p-values are as calibrated as the main test's under the null, and it depends on the
reference texts alone (a suspect set that is far off cannot move its bounds). `per-set`
clips each half to its own quantiles, as the authors' false-positive run does
(linear_di.py:201-202 splits the validation set, 216-217 clip each part).

Two classifiers (`classifier`):

- `nonnegative` (default): a logistic regression whose weights are constrained to be
  non-negative (`fit_nonnegative`), and Welch's t-test. Its score can only rise with
  features that rise with membership, so a small p-value means the suspect texts look
  *more* familiar than the reference texts. Suspect texts that look less familiar get
  weights of zero on the features where they are lower (all zero: constant scores, p = 1);
  `decide` then runs the mirrored test (features negated) and, when that one is
  significant, the verdict says the sets differ but the suspect texts look less familiar,
  which is not evidence of training.
- `paper`: Maini et al.'s classifier: an unconstrained logistic regression
  (`fit_unconstrained`), Student's t-test (equal variances). It counts a difference in
  either direction.

Where `classifier="paper", clip="per-set"` differs from the authors' code
(github.com/pratyushmaini/llm_dataset_inference, linear_di.py at 6f25d41; each item says
whether it changes p-values):

1. Clip bounds (changes p-values slightly): pddkit takes the 2.5% and 97.5% quantiles
   (numpy's linear interpolation). The code (remove_outliers, 128-166, called with
   remove_frac=0.05 at 216-217) takes k = int(0.025 n) (134) and sets the k - 1 values
   below the k-th smallest to the k-th smallest and the k - 1 values above the k-th largest
   to the k-th largest (154-157): bounds one order statistic further out than the
   quantiles (about), so it moves one value fewer per tail. With n < 40, k = 0 and the code
   raises an IndexError (155); pddkit clips any n >= 8.
2. Fit (changes p-values): the code fits nn.Linear with BCEWithLogitsLoss (the mean
   log-loss, unpenalised) by 1000 full-batch Adam steps at lr 0.01 (36-66, 235) from
   PyTorch's random initialisation, in float32; that stops short of the optimum, and of
   infinite weights when the fitted halves are separable. pddkit fits to the optimum of
   scikit-learn's L2-penalised loss (C = 1: the summed log-loss + ||w||^2 / 2), in float64,
   deterministically. With item 1, on the six features of tests/test_infer.py (400 texts
   per set) the authors' procedure unchanged gives p-values 5% and 16% away from pddkit's
   (seeds 0 and 1: 5.5e-11 against 5.7e-11, 2.5e-11 against 2.1e-11).
3. Split (changes p-values when the sets differ in size): the code fits on the first
   `num_samples` texts of each set (default 1000, 26 and 232-233) and tests the rest;
   pddkit fits on the first half of each set.
4. Shuffle (changes which texts fit and which are tested): the code shuffles each set with
   the unseeded global numpy generator (228-229); pddkit with
   `numpy.random.default_rng(seed)`: the suspect set's permutation first, then the
   reference set's.
5. Labels (does not change p-values): the code labels the suspect set 0 and tests "suspect
   scores lower" (85, 174: `alternative='less'`); pddkit labels it 1 and tests "higher",
   the same test (the fit is symmetric: weights and intercept change sign).
6. p-value curve (changes the curve, not the p-value): the code takes the first n held-out
   scores of one classifier for n in a fixed list (20, 169-176); pddkit reruns the whole
   test on the first n texts of each set.
7. A constant feature (changes nothing else): the code divides by its zero standard
   deviation (118-119: NaN); pddkit divides by 1.

Both z-score with the clipped suspect set's mean and population standard deviation
(normalize="train", 97-126 and 225). The paper's features are not pddkit's: see
docs/guides/infer.md. `compare_sets` and `false_positive_test` take milliseconds, so the
statistics can be rerun for many seeds on features computed once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pddkit.errors import PddkitError
from pddkit.reporting.dataset_inference_text import verdict_sentence
from pddkit.studies.dataset_inference_fit import (
    fit_nonnegative,
    fit_unconstrained,
    t_test_greater,
)
from pddkit.studies.dataset_inference_halves import (  # noqa: F401 (re-exported)
    MIN_PER_HALF,
    CheckSplit,
    check_halves,
    reference_halves,
    split_groups,
    split_reference,
)

CLIP = 0.025  # features are clipped to the quantiles [CLIP, 1 - CLIP]
CLASSIFIERS = {
    "nonnegative": "logistic regression with non-negative weights on member-is-higher "
                   "features, one-sided Welch t-test (pddkit's default)",
    "paper": "Maini et al.'s unconstrained logistic regression, one-sided Student's t-test "
             "(equal variances)",
}
T_TESTS = {"nonnegative": "Welch", "paper": "Student"}
# Decision.outcome: what the test and the check found (reporting writes the sentence)
USED, NO_EVIDENCE, INCONCLUSIVE, LESS_FAMILIAR = ("used", "no evidence", "inconclusive",
                                                  "less familiar")
CLIPS = {
    "pooled": "every feature clipped to the 2.5% and 97.5% quantiles of the two sets pooled "
              "(one pair of bounds for both; pddkit's default)",
    "per-set": "each set clipped to its own 2.5% and 97.5% quantiles (the authors' code; "
               "not calibrated with heavy-tailed features)",
}


def check_classifier(classifier: str) -> str:
    """`classifier` when it is one pddkit knows; one sentence otherwise."""
    if classifier not in CLASSIFIERS:
        raise PddkitError(f"`classifier` must be one of {', '.join(CLASSIFIERS)}, not "
                          f"{classifier!r}")
    return classifier


def check_clip(clip: str) -> str:
    """`clip` when it is one pddkit knows; one sentence otherwise."""
    if clip not in CLIPS:
        raise PddkitError(f"`clip` must be one of {', '.join(CLIPS)}, not {clip!r}")
    return clip


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
class CurvePoint:
    """The test's p-value when only the first `n` texts of each (shuffled) set are used."""

    n: int
    p_value: float


@dataclass(frozen=True)
class Decision:
    """The test, the false-positive check (None when not asked for), p-value against the
    number of texts for both, and the outcome (`outcome`, a code; `verdict`, the sentence
    reporting/dataset_inference_text.py writes of it)."""

    test: SetTest
    check: SetTest | None
    curve: tuple[CurvePoint, ...]
    check_curve: tuple[CurvePoint, ...]
    alpha: float
    used_in_training: bool
    # the mirrored test (suspect texts look *less* familiar), run by the non-negative
    # classifier when the test is not significant; None when not run
    less_familiar_p_value: float | None = None
    classifier: str = "nonnegative"
    check_split: CheckSplit | None = None  # None when the check did not run
    clip: str = "pooled"

    @property
    def outcome(self) -> str:
        """LESS_FAMILIAR (not significant, and the mirrored test finds the suspect texts
        less familiar), INCONCLUSIVE (significant, and so is the false-positive check), USED
        (significant, the check not) or NO_EVIDENCE."""
        p, alpha = self.test.p_value, self.alpha
        less_p = self.less_familiar_p_value
        if p >= alpha and less_p is not None and less_p < alpha:
            return LESS_FAMILIAR
        if p < alpha and self.check is not None and self.check.p_value < alpha:
            return INCONCLUSIVE
        return USED if p < alpha else NO_EVIDENCE

    @property
    def verdict(self) -> str:
        """The verdict for a non-specialist (reporting/dataset_inference_text.py)."""
        return verdict_sentence(self.test.p_value,
                                None if self.check is None else self.check.p_value, self.alpha,
                                self.less_familiar_p_value, self.classifier)


def normalise(suspect: np.ndarray, reference: np.ndarray, clip: str = "pooled",
              tail: float = CLIP) -> tuple[np.ndarray, np.ndarray]:
    """Both sets' features clipped to the [tail, 1 - tail] quantiles (numpy's linear
    interpolation) of the two sets pooled (`clip="pooled"`) or each to its own
    (`"per-set"`, the authors' code), then z-scored with the clipped suspect set's mean and
    (population) standard deviation; a constant feature is divided by 1."""
    S = np.asarray(suspect, dtype=np.float64)
    R = np.asarray(reference, dtype=np.float64)
    if check_clip(clip) == "pooled":
        lo, hi = np.quantile(np.vstack([S, R]), [tail, 1 - tail], axis=0)
        S, R = np.clip(S, lo, hi), np.clip(R, lo, hi)
    else:
        lo, hi = np.quantile(S, [tail, 1 - tail], axis=0)
        r_lo, r_hi = np.quantile(R, [tail, 1 - tail], axis=0)
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
                 n: int | None = None, classifier: str = "nonnegative",
                 clip: str = "pooled") -> SetTest:
    """Maini et al.'s test on feature matrices: each set shuffled (seeded) and cut to its
    first `n` texts (all by default); features clipped (`clip`: to the quantiles of the two
    sets pooled, or each set to its own) and z-scored (`normalise`); a logistic regression
    fitted on the first half of each set (suspect 1, reference 0) scores the second halves;
    a one-sided t-test that suspect scores are higher.
    `nonnegative`: weights >= 0 (`fit_nonnegative`) and Welch's test, so only suspect texts
    that look *more* familiar count (a feature on which they are lower gets weight 0; every
    weight 0: constant scores, p = 1). `paper`: an unconstrained fit
    (`fit_unconstrained`) and Student's test. `gaps` show per feature whether the suspect
    texts look more familiar (positive) or less."""
    paper = check_classifier(classifier) == "paper"
    check_clip(clip)
    rng = np.random.default_rng(seed)
    S = np.asarray(suspect, dtype=np.float64)[rng.permutation(len(suspect))][:n]
    R = np.asarray(reference, dtype=np.float64)[rng.permutation(len(reference))][:n]
    require_sizes(len(S), len(R), False)
    S, R = normalise(S, R, clip)
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


def false_positive_test(reference: np.ndarray, names: Sequence[str], seed: int = 0,
                        n: int | None = None, groups: Sequence[str | None] | None = None,
                        classifier: str = "nonnegative", clip: str = "pooled") -> SetTest:
    """The false-positive check: `compare_sets` on two halves of the reference set (whole
    documents on each side when `groups` is given), clipped by the same rule as the main
    test applied to those two halves (`pooled`: to the quantiles of the two halves
    together, i.e. of the reference set; the module docstring says why)."""
    a, b = split_reference(reference, seed, groups)
    return compare_sets(a, b, names, seed, n, classifier, clip)


def curve_sizes(n_max: int) -> list[int]:
    """Texts per set for the p-value curve: about ten sizes, evenly spaced on a log scale,
    from 2 * MIN_PER_HALF to `n_max`."""
    lo = 2 * MIN_PER_HALF
    if n_max < lo:
        return []
    return sorted({round(float(x)) for x in np.geomspace(lo, n_max, 10)} | {n_max})


def decide(features: FeatureMatrix, alpha: float = 0.05, false_positive_check: bool = True,
           seed: int = 0, classifier: str = "nonnegative", clip: str = "pooled") -> Decision:
    """The test, the false-positive check (by document when `features.reference_groups` is
    given), p-value curves and the verdict, from features; `clip` for all of them."""
    if not 0 < alpha < 1:
        raise PddkitError(f"`alpha` must be between 0 and 1, not {alpha}")
    check_classifier(classifier)
    check_clip(clip)
    S, R, names = features.suspect, features.reference, features.names
    require_sizes(len(S), len(R), false_positive_check)
    test = compare_sets(S, R, names, seed, classifier=classifier, clip=clip)
    curve = tuple(CurvePoint(n, compare_sets(S, R, names, seed, n, classifier, clip).p_value)
                  for n in curve_sizes(max(len(S), len(R))))
    check, check_curve, split = None, (), None
    if false_positive_check:
        groups = features.reference_groups
        a, b, split = check_halves(len(R), seed, groups)
        check = false_positive_test(R, names, seed, groups=groups, classifier=classifier,
                                    clip=clip)
        check_curve = tuple(
            CurvePoint(n, false_positive_test(R, names, seed, n, groups, classifier,
                                              clip).p_value)
            for n in curve_sizes(max(len(a), len(b))))
    used = test.p_value < alpha and (check is None or check.p_value >= alpha)
    # the non-negative classifier, not significant: do the suspect texts look *less*
    # familiar instead? (the same test with every feature negated, so that higher = less
    # member-like; the quantiles of -x are minus those of x, so clipping commutes). The
    # paper's unconstrained fit is symmetric: negated features give the same p-value, so it
    # has no mirrored test.
    less_p = (None if test.p_value < alpha or classifier == "paper"
              else compare_sets(-S, -R, names, seed, clip=clip).p_value)
    return Decision(test, check, curve, check_curve, alpha, used, less_p, classifier, split,
                    clip)
