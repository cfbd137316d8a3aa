"""The statistics of dataset inference (Maini et al. 2024), on feature matrices alone
(numbers only; studies/infer.py scores the texts and writes the report).

Each feature is oriented so that higher = more member-like; a linear classifier fitted on
one half of each set scores the other halves, and a one-sided Welch t-test asks whether
suspect texts score higher. A false-positive check runs the same test on two halves of the
reference set, where no difference should be found.

The direction is part of the test: the classifier's weights are constrained to be
non-negative (a logistic regression fitted with bounds, `fit_nonnegative`), so its score
can only rise with features that rise with membership, and a small p-value means the
suspect texts look *more* familiar than the reference texts. Suspect texts that look less
familiar get weights of zero on the features where they are lower (all zero: constant
scores, p = 1); `decide` then runs the mirrored test (features negated) and, when that one
is significant, the verdict says the sets differ but the suspect texts look less familiar,
which is not evidence of training (`used_in_training` False).

`compare_sets` and `false_positive_test` take milliseconds, so the statistics can be rerun
for many seeds on features computed once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pddkit.errors import PddkitError

CLIP = 0.025  # each feature is clipped to its suspect quantiles [CLIP, 1 - CLIP]
MIN_PER_HALF = 4  # texts per half of a set: one half fits the classifier, one is tested


@dataclass(frozen=True)
class FeatureMatrix:
    """Membership features (columns `names`, higher = more member-like) of each set's texts."""

    names: tuple[str, ...]
    suspect: np.ndarray  # [n_suspect, F]
    reference: np.ndarray  # [n_reference, F]


@dataclass(frozen=True)
class SetTest:
    """One dataset-inference test: classifier weights (on z-scored features), the Welch
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
    number of texts for both, and the verdict."""

    test: SetTest
    check: SetTest | None
    curve: tuple[CurvePoint, ...]
    check_curve: tuple[CurvePoint, ...]
    alpha: float
    used_in_training: bool
    verdict: str
    # the mirrored test (suspect texts look *less* familiar), run when the test is not
    # significant; None when not run
    less_familiar_p_value: float | None = None


def normalise(suspect: np.ndarray, reference: np.ndarray,
              clip: float = CLIP) -> tuple[np.ndarray, np.ndarray]:
    """Both sets' features clipped to the suspect set's [clip, 1 - clip] quantiles, then
    z-scored with the clipped suspect set's mean and standard deviation (a constant
    feature: divided by 1)."""
    S = np.asarray(suspect, dtype=np.float64)
    R = np.asarray(reference, dtype=np.float64)
    lo, hi = np.quantile(S, [clip, 1 - clip], axis=0)
    S, R = np.clip(S, lo, hi), np.clip(R, lo, hi)
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
                 n: int | None = None) -> SetTest:
    """Maini et al.'s test on feature matrices: each set shuffled (seeded) and cut to its
    first `n` texts (all by default); features clipped and z-scored (`normalise`); a
    logistic regression with non-negative weights (`fit_nonnegative`) fitted on the first
    half of each set (suspect 1, reference 0) scores the second halves; one-sided Welch
    t-test that suspect scores are higher. Features are oriented higher = more member-like,
    so the test looks only for suspect texts that look *more* familiar: a feature on which
    the suspect texts are lower gets weight 0, and when every weight is 0 the scores are
    constant and p = 1. `gaps` show per feature whether the suspect texts look more
    familiar (positive) or less."""
    rng = np.random.default_rng(seed)
    S = np.asarray(suspect, dtype=np.float64)[rng.permutation(len(suspect))][:n]
    R = np.asarray(reference, dtype=np.float64)[rng.permutation(len(reference))][:n]
    require_sizes(len(S), len(R), False)
    S, R = normalise(S, R)
    hs, hr = len(S) // 2, len(R) // 2
    X = np.vstack([S[:hs], R[:hr]])
    y = np.r_[np.ones(hs), np.zeros(hr)]
    w, b = fit_nonnegative(X, y)
    s_scores, r_scores = S[hs:] @ w + b, R[hr:] @ w + b
    t, p = welch_greater(s_scores, r_scores)
    return SetTest(p_value=p, t_statistic=t,
                   weights={k: float(v) for k, v in zip(names, w)},
                   intercept=float(b),
                   gaps={k: float(g) for k, g in zip(names, S.mean(axis=0) - R.mean(axis=0))},
                   n_fit=(hs, hr), n_test=(len(S) - hs, len(R) - hr),
                   suspect_scores=s_scores, reference_scores=r_scores)


def fit_nonnegative(X: np.ndarray, y: np.ndarray, C: float = 1.0) -> tuple[np.ndarray, float]:
    """(weights, intercept) of an L2-penalised logistic regression (scikit-learn's objective:
    C * log-loss summed over rows + ||w||^2 / 2, intercept not penalised) with every weight
    constrained to be >= 0: L-BFGS-B from zero with the exact gradient, deterministic."""
    from scipy.optimize import minimize

    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    F = X.shape[1]

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:F], theta[F]
        z = X @ w + b
        # log(1 + exp(-z)) for y = 1, log(1 + exp(z)) for y = 0
        loss = C * float(np.sum(np.logaddexp(0.0, np.where(y > 0, -z, z)))) + 0.5 * float(w @ w)
        r = C * (0.5 * (1.0 + np.tanh(0.5 * z)) - y)  # sigmoid(z) - y, overflow-free
        return loss, np.r_[X.T @ r + w, r.sum()]

    res = minimize(objective, np.zeros(F + 1), jac=True, method="L-BFGS-B",
                   bounds=[(0.0, None)] * F + [(None, None)],
                   options={"maxiter": 1000, "gtol": 1e-8, "ftol": 1e-12})
    w = np.maximum(res.x[:F], 0.0)
    return w, float(res.x[F])


def welch_greater(suspect_scores: np.ndarray, reference_scores: np.ndarray) -> tuple[float, float]:
    """(t, p) of the one-sided Welch t-test that suspect scores are higher; p = 1 when
    neither set's scores vary (no evidence of a difference)."""
    from scipy.stats import ttest_ind

    if np.ptp(suspect_scores) == 0 and np.ptp(reference_scores) == 0:
        return 0.0, 1.0
    t, p = ttest_ind(suspect_scores, reference_scores, equal_var=False, alternative="greater")
    return (float(t), float(p)) if np.isfinite(p) else (0.0, 1.0)


def split_reference(reference: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The reference set shuffled (seeded) and cut into two halves: a pretend suspect set
    and a pretend reference set, neither of them trained on."""
    R = np.asarray(reference)[np.random.default_rng(seed).permutation(len(reference))]
    return R[:len(R) // 2], R[len(R) // 2:]


def false_positive_test(reference: np.ndarray, names: Sequence[str], seed: int = 0,
                        n: int | None = None) -> SetTest:
    """The false-positive check: `compare_sets` on two halves of the reference set."""
    a, b = split_reference(reference, seed)
    return compare_sets(a, b, names, seed, n)


def curve_sizes(n_max: int) -> list[int]:
    """Texts per set for the p-value curve: about ten sizes, evenly spaced on a log scale,
    from 2 * MIN_PER_HALF to `n_max`."""
    lo = 2 * MIN_PER_HALF
    if n_max < lo:
        return []
    return sorted({round(float(x)) for x in np.geomspace(lo, n_max, 10)} | {n_max})


def decide(features: FeatureMatrix, alpha: float = 0.05, false_positive_check: bool = True,
           seed: int = 0) -> Decision:
    """The test, the false-positive check, p-value curves and the verdict, from features."""
    if not 0 < alpha < 1:
        raise PddkitError(f"`alpha` must be between 0 and 1, not {alpha}")
    S, R, names = features.suspect, features.reference, features.names
    require_sizes(len(S), len(R), false_positive_check)
    test = compare_sets(S, R, names, seed)
    curve = tuple(CurvePoint(n, compare_sets(S, R, names, seed, n).p_value)
                  for n in curve_sizes(max(len(S), len(R))))
    check, check_curve = None, ()
    if false_positive_check:
        check = false_positive_test(R, names, seed)
        check_curve = tuple(CurvePoint(n, false_positive_test(R, names, seed, n).p_value)
                            for n in curve_sizes(len(R) - len(R) // 2))
    used = test.p_value < alpha and (check is None or check.p_value >= alpha)
    # not significant: do the suspect texts look *less* familiar instead? (the same test with
    # every feature negated, so that higher = less member-like)
    less_p = None if test.p_value < alpha else compare_sets(-S, -R, names, seed).p_value
    return Decision(test, check, curve, check_curve, alpha, used,
                    verdict_sentence(test.p_value, None if check is None else check.p_value,
                                     alpha, less_p),
                    less_p)


def verdict_sentence(p: float, check_p: float | None, alpha: float,
                     less_p: float | None = None) -> str:
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
        return (f"Used in training: the model treats the suspect texts as familiar, unlike "
                f"comparable texts it never saw ({ps}, below the {alpha:g} threshold){check}. "
                "This assumes the reference texts come from the same source as the suspect texts.")
    return (f"No evidence of training on the suspect texts: the model does not treat them "
            f"differently from comparable texts it never saw ({ps}, not below the {alpha:g} "
            "threshold). This does not prove they were not used; more texts make the test "
            "more sensitive.")
