"""CAMIA (Chang et al., EMNLP 2025, "Context-Aware Membership Inference Attacks against
Pre-trained Large Language Models"): 75 features of the per-token loss trajectory of the
text and of the text repeated six times (methods/camia_features.py), each compared with the
same feature of calibration non-members, and the comparisons combined (SPEC 3e).

Fitted on the calibration texts only (never on the texts under test, whose labels the
authors' code reads to orient the features, run_ours_train_lr.py:323-328):
- sign_f = -1 if the calibration members' mean of feature f is above the calibration
  non-members' mean, else +1, so that a member tends to be low after orientation;
- p_f(x) = scipy.stats.percentileofscore(sign_f f(calibration non-members), sign_f f(x)) / 100
  (kind "rank"), a p-value under "x is a non-member".

Score (higher = member, SPEC 1):
- combine=mean: -mean_f p_f(x) (train_lr.py:374-378,454);
- combine=pearson|fisher|mudholkar_george: -scipy.stats.combine_pvalues(clip(p, 1e-10,
  1 - 1e-10), method).pvalue (run_ours_different_agg.py:342-365; the authors replace exact
  0 and 1, which clipping equals as p is a multiple of 1/(2 N0));
- combine=lr: the log-odds of a logistic regression fitted on the calibration texts'
  features (members and non-members), standardised with the calibration texts' mean and
  standard deviation (a constant feature divided by 1), L2 penalty C = 1, lbfgs (no
  randomness: the fit is deterministic). The authors fit liblinear on min-max-scaled features
  (train_lr.py:33-53).

A text whose repeated text holds fewer than three copies of x_3..x_n (the repeated text cut
to the model's context, a text of two tokens or fewer, a copy tokenised otherwise) has 0
for the copy differences it lacks: counted by the fallback (a notice with the share)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError
from pddkit.methods.base import Calibrated, Calibration, Need, register_method
from pddkit.methods.camia_features import FEATURE_NAMES, USED, features, occurrences
from pddkit.methods.ranking import auc
from pddkit.stats import Observation

COMBINES = ("mean", "pearson", "fisher", "mudholkar_george", "lr")
P_CLIP = 1e-10  # p-values clipped to [P_CLIP, 1 - P_CLIP] before combine_pvalues
LR_C = 1.0  # inverse L2 strength of combine=lr (scikit-learn's default)


@dataclass(frozen=True, eq=False)
class CamiaFit:
    """What camia fitted on the calibration texts: per feature its orientation and the
    oriented calibration non-members; for combine=lr the standardisation and the model."""

    sign: np.ndarray  # [75] +1 / -1
    population: np.ndarray  # [N0, 75] sign * f of the calibration non-members
    members: int
    nonmembers: int
    center: np.ndarray | None = None  # [75] combine=lr: the calibration texts' means
    scale: np.ndarray | None = None  # [75] and standard deviations (0 -> 1)
    coef: np.ndarray | None = None  # [75] on the standardised features
    intercept: float = 0.0

    def __str__(self) -> str:  # results.json writes the fitted parameter as this text
        return (f"fitted on {self.members + self.nonmembers} calibration texts "
                f"({self.members} members, {self.nonmembers} non-members)")

    def p_values(self, f: np.ndarray) -> np.ndarray:
        """[75] p_f(x) of one text's features."""
        from scipy.stats import percentileofscore

        oriented = self.sign * f
        return np.array([percentileofscore(self.population[:, j], oriented[j], kind="rank")
                         for j in range(len(f))]) / 100.0

    def score(self, f: np.ndarray, combine: str) -> float:
        if combine == "lr":
            return float(((f - self.center) / self.scale) @ self.coef + self.intercept)
        p = self.p_values(f)
        if combine == "mean":
            return -float(np.mean(p))
        from scipy.stats import combine_pvalues

        return -float(combine_pvalues(np.clip(p, P_CLIP, 1 - P_CLIP), method=combine).pvalue)


def _check(combine: str, fitted) -> None:
    if combine not in COMBINES:
        raise PddkitError(f"combine must be one of {', '.join(COMBINES)}, not {combine!r}")
    if fitted is not None and not isinstance(fitted, CamiaFit):
        raise PddkitError("camia's parameter fitted is what it fits on the calibration "
                          "data; it cannot be given")


def features_of(obs: Observation) -> np.ndarray:
    """[75] camia's features of one observation (target and repeated-text statistics)."""
    if obs.repeated is None:
        raise PddkitError("camia reads the statistics of the repeated text, which this "
                          "observation does not hold: score it in a run (the repeated-text "
                          "pass computes them)")
    t, r = obs.target, obs.repeated
    return features(t.ids, t.L, r.ids, r.L)


def copies_found(obs: Observation) -> int:
    """How many occurrences of x_3..x_n the scored repeated text holds (camia reads three)."""
    return len(occurrences(obs.target.ids, obs.repeated.ids))


def fit(observations: Sequence[Observation], labels: np.ndarray, *, combine: str = "mean",
        fitted: CamiaFit | None = None) -> Calibrated:
    """Orientation, the non-member populations and (combine=lr) the regression, from the
    calibration texts and their labels alone."""
    _check(combine, fitted)
    if fitted is not None:
        raise PddkitError("camia's parameter fitted is what it fits on the calibration "
                          "data; it cannot be given")
    X = np.stack([features_of(o) for o in observations])  # [N, 75]
    y = np.asarray(labels)
    mem, non = X[y == 1], X[y == 0]
    if len(mem) == 0 or len(non) == 0:
        raise PddkitError("camia needs calibration members and non-members, "
                          f"not {len(mem)} members and {len(non)} non-members")
    sign = np.where(mem.mean(axis=0) > non.mean(axis=0), -1.0, 1.0)
    extra: dict = {}
    if combine == "lr":
        from sklearn.linear_model import LogisticRegression

        center, scale = X.mean(axis=0), X.std(axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        model = LogisticRegression(C=LR_C, max_iter=5000, random_state=0)
        model.fit((X - center) / scale, y)
        extra = {"center": center, "scale": scale, "coef": model.coef_[0].astype(np.float64),
                 "intercept": float(model.intercept_[0])}
    cal = CamiaFit(sign=sign, population=non * sign, members=len(mem), nonmembers=len(non),
                   **extra)
    own = np.array([cal.score(f, combine) for f in X])
    constant = [FEATURE_NAMES[j] for j in np.flatnonzero(np.ptp(X, axis=0) == 0)]
    record = {"texts": len(X), "members": len(mem), "nonmembers": len(non),
              "combine": combine, "features": len(FEATURE_NAMES),
              "oriented_down": int(np.sum(sign < 0)),
              "constant_features": constant,
              "texts_with_fewer_than_3_copies": sum(copies_found(o) < USED for o in observations),
              "calibration_auc_in_sample": auc(own, y)}
    if combine == "lr":
        record["lr"] = {"penalty": "l2", "C": LR_C, "standardised": True, "solver": "lbfgs"}
    return Calibrated({"combine": combine, "fitted": cal}, record)


def fewer_copies(obs: Observation, *, combine: str = "mean",
                 fitted: CamiaFit | None = None) -> str | None:
    if obs.repeated is None or copies_found(obs) >= USED:
        return None
    return ("had fewer than three copies of the text in its scored repeated text (cut to the "
            "model's context, or tokenised otherwise): the copy differences it lacks are 0")


@register_method("camia", needs=(Need.REPEATED,), named_only=True, fallback=fewer_copies,
                 calibration=Calibration(fit), paper="Chang et al. 2025",
                 cost="one more pass over the text repeated six times (about 6n tokens; "
                      "measured 4.8x a loss-only run on 130-token texts); 75 features per text",
                 summary="75 features of the loss trajectory of the text and of the text "
                         "repeated, compared with calibration non-members and combined")
def camia(obs: Observation, *, combine: str = "mean", fitted: CamiaFit | None = None) -> float:
    _check(combine, fitted)
    if fitted is None:
        raise PddkitError("camia orients and calibrates its features on labelled calibration "
                          "data, which one text cannot give: score the texts in a run with "
                          "calibration data (`calibration`, or labelled data to hold 30% out of)")
    return fitted.score(features_of(obs), combine)
