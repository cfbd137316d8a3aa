"""A score threshold chosen on labelled validation data and applied elsewhere, with the
false-positive rate to expect stated (Shi et al. 2024, "Detecting pretraining data from
large language models", case study on copyrighted books: the threshold that maximises
accuracy on a validation set of known members and non-members).

`Threshold("accuracy").fit(scores, labels).predict(new_scores)`; a text is called a
member when its score is strictly above `threshold_` (higher = member, as for every method).
Rules: "accuracy" (the paper's choice; ties go to the higher threshold, the one with
fewer false positives) or "fpr=X" (the lowest threshold whose validation FPR is at most
X, i.e. the highest TPR at that FPR). Candidate thresholds lie midway between
consecutive distinct validation scores, so a new text scoring exactly like a validation
text is called what that text was called.

The false-positive rate to expect on never-seen texts is measured out of sample: the same
rule is fitted on `cv_folds` - 1 stratified folds of the validation data and applied to the
held-out fold's non-members, pooled over folds (`cv_fpr_`). The in-sample rate of the
threshold on the texts that chose it (`val_fpr_`) is optimistic, most of all with few
validation texts; it is the expected rate only when there are too few texts per class
(fewer than 2) to cross-validate.

With `groups` (the document each text was cut from, e.g. BookMIA's book) the folds are
whole groups (`group_folds`: seeded, balanced per class), so texts of one book never sit on
both sides; each validation text's out-of-fold call (`oof_calls_`) then gives every
never-seen book's own out-of-fold count (studies/book_rates.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError


def parse_rule(rule: str) -> tuple[str, float | None]:
    """"accuracy" -> ("accuracy", None); "fpr=0.05" -> ("fpr", 0.05)."""
    text = str(rule).strip().lower().replace(" ", "")
    if text == "accuracy":
        return "accuracy", None
    if text.startswith("fpr="):
        try:
            target = float(text[4:])
        except ValueError:
            target = math.nan
        if 0 < target < 1:
            return "fpr", target
    raise PddkitError(f"`threshold` must be 'accuracy' or 'fpr=X' with X between 0 and 1 "
                      f"(e.g. fpr=0.05), not {rule!r}")


def wilson_interval(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval (95% by default) of a proportion k/n; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if k == 0 else max(0.0, centre - half)  # exact ends: no 5.6e-17 for 0 of n
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def group_folds(labels, groups, k: int, seed: int = 0) -> np.ndarray:
    """The fold (0..k-1) of each text, whole groups to a fold: each group goes with its
    majority label (ties: member); per label, groups in seeded random order, larger first,
    each to the fold holding fewest texts of that label so far. With at least k groups per
    label every fold holds both labels."""
    y = np.asarray(labels).astype(int)
    g = np.asarray([str(v) for v in groups], dtype=object)
    names, inverse = np.unique(g, return_inverse=True)
    size = np.bincount(inverse, minlength=len(names))
    label = (np.bincount(inverse, weights=y, minlength=len(names)) * 2 >= size).astype(int)
    order = np.random.default_rng(seed).permutation(len(names))
    fold_of = np.empty(len(names), dtype=int)
    for cls in (1, 0):
        mine = [i for i in order if label[i] == cls]
        mine.sort(key=lambda i: -size[i])  # stable: equal sizes keep the seeded order
        load = np.zeros(k, dtype=int)
        for i in mine:
            f = int(np.argmin(load))
            fold_of[i] = f
            load[f] += size[i]
    return fold_of[inverse]


def require_both_classes(labels, what: str = "the validation data") -> tuple[int, int]:
    """(members, non-members) among `labels`; one class only is one sentence."""
    y = np.asarray(labels)
    pos, neg = int((y == 1).sum()), int((y == 0).sum())
    if pos + neg != y.size:
        raise PddkitError(f"labels of {what} must be 1 (member) or 0 (non-member)")
    if pos == 0 or neg == 0:
        have = f"only members ({pos} texts)" if pos else f"only non-members ({neg} texts)"
        raise PddkitError(f"{what} has {have}: choosing a threshold needs both members "
                          "(label 1) and non-members (label 0)")
    return pos, neg


@dataclass(frozen=True)
class ThresholdSummary:
    """What a fitted Threshold found on validation, for results.json and reports."""

    rule: str
    threshold: float
    val_auc: float
    val_tpr: float
    val_accuracy: float
    expected_fpr: float  # the rate expected for never-seen texts (cross-validated when possible)
    expected_fpr_ci: tuple[float, float]  # its Wilson 95% interval
    expected_fpr_source: str  # "cross-validated (K folds)", "... (K folds of whole groups)", "in-sample"
    val_fpr: float  # the threshold's FPR on the validation texts that chose it (optimistic)
    n_val: int
    n_val_members: int
    n_val_nonmembers: int


class Threshold:
    """Choose a threshold on validation scores (`fit`), apply it (`predict`)."""

    def __init__(self, rule: str = "accuracy", cv_folds: int = 5, seed: int = 0) -> None:
        self.rule = rule
        self.cv_folds = cv_folds
        self.seed = seed
        self.kind_, self.target_fpr_ = parse_rule(rule)
        if cv_folds == 1 or cv_folds < 0:
            raise PddkitError(f"`cv_folds` must be 0 (no cross-validation) or at least 2, "
                              f"not {cv_folds}")

    def fit(self, scores, labels, groups=None) -> Threshold:
        """Choose the threshold on `scores` (higher = member) with `labels` (1/0); `groups`
        (one name per text, e.g. its book) makes the cross-validation folds whole groups."""
        s = np.asarray(scores, dtype=float)
        y = np.asarray(labels).astype(int)
        if s.shape != y.shape or s.ndim != 1:
            raise PddkitError(f"{s.size} validation scores but {y.size} labels")
        if not np.all(np.isfinite(s)):
            raise PddkitError("validation scores must be finite numbers")
        if groups is not None and len(groups) != y.size:
            raise PddkitError(f"{y.size} validation texts but {len(groups)} group names")
        pos, neg = require_both_classes(y)
        values, where, ties = np.unique(s, return_inverse=True, return_counts=True)  # ascending
        # candidate t_j: below the lowest score (all called members), midpoints, the highest
        cands = np.r_[np.nextafter(values[0], -np.inf), (values[:-1] + values[1:]) / 2,
                      values[-1]]
        # texts above each candidate, counted on sorted scores (no [candidates x texts] table)
        tp = pos - np.searchsorted(np.sort(s[y == 1]), cands, side="right")
        fp = neg - np.searchsorted(np.sort(s[y == 0]), cands, side="right")
        tpr, fpr, acc = tp / pos, fp / neg, (tp + neg - fp) / y.size
        if self.kind_ == "accuracy":
            j = int(np.flatnonzero(acc == acc.max())[-1])  # ties: the highest threshold
        else:
            j = int(np.flatnonzero(fpr <= self.target_fpr_ + 1e-12)[0])  # the lowest allowed
        self.threshold_ = float(cands[j])
        self.val_tpr_ = float(tpr[j])
        self.val_fpr_ = float(fpr[j])
        self.val_accuracy_ = float(acc[j])
        ranks = (np.cumsum(ties) - (ties - 1) / 2)[where]  # average ranks, 1-based
        # AUC = Mann-Whitney U / (pos x neg): a tied member/non-member pair counts half
        self.val_auc_ = float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))
        self.n_val_, self.n_val_members_, self.n_val_nonmembers_ = int(y.size), pos, neg
        self.n_false_positives_ = int(fp[j])
        self.grouped_ = groups is not None
        self.cv_folds_used_, self.oof_calls_ = self._cross_validate(s, y, groups)
        self.cv_false_positives_ = int(self.oof_calls_[y == 0].sum()) if self.cv_folds_used_ else 0
        if self.cv_folds_used_:
            self.cv_fpr_ = self.cv_false_positives_ / neg
            self.expected_fpr_, fp = self.cv_fpr_, self.cv_false_positives_
        else:
            self.cv_fpr_ = None
            self.expected_fpr_, fp = self.val_fpr_, self.n_false_positives_
        self.expected_fpr_ci_ = wilson_interval(fp, neg)
        return self

    def _cross_validate(self, s: np.ndarray, y: np.ndarray, groups) -> tuple[int, np.ndarray | None]:
        """(folds used, each text's call by the threshold of the folds without it); (0, None)
        when a class has fewer than 2 texts (groups: 2 groups) or `cv_folds` < 2."""
        if groups is None:
            k = min(self.cv_folds, int((y == 1).sum()), int((y == 0).sum()))
        else:
            label = {}
            for name, cls in zip(groups, y):
                label.setdefault(str(name), []).append(cls)
            major = [2 * sum(v) >= len(v) for v in label.values()]
            k = min(self.cv_folds, sum(major), len(major) - sum(major))
        if k < 2:
            return 0, None
        if groups is None:
            from sklearn.model_selection import StratifiedKFold

            splits = StratifiedKFold(k, shuffle=True, random_state=self.seed).split(s, y)
        else:
            fold = group_folds(y, groups, k, self.seed)
            splits = ((np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(k))
        calls = np.zeros(y.size, dtype=int)
        for train, test in splits:
            inner = Threshold(self.rule, cv_folds=0).fit(s[train], y[train])
            calls[test] = s[test] > inner.threshold_
        return k, calls

    def predict(self, scores) -> np.ndarray:
        """1 (member) where a score is strictly above the threshold, else 0."""
        if not hasattr(self, "threshold_"):
            raise PddkitError("the threshold is not fitted yet: call fit(scores, labels) first")
        return (np.asarray(scores, dtype=float) > self.threshold_).astype(int)

    def summary(self) -> ThresholdSummary:
        self.predict([])  # fitted?
        return ThresholdSummary(
            rule=self.rule, threshold=self.threshold_, val_auc=self.val_auc_,
            val_tpr=self.val_tpr_, val_accuracy=self.val_accuracy_,
            expected_fpr=self.expected_fpr_, expected_fpr_ci=self.expected_fpr_ci_,
            expected_fpr_source=(f"cross-validated ({self.cv_folds_used_} folds"
                                 f"{' of whole groups' if self.grouped_ else ''})"
                                 if self.cv_folds_used_ else "in-sample"),
            val_fpr=self.val_fpr_,
            n_val=self.n_val_, n_val_members=self.n_val_members_,
            n_val_nonmembers=self.n_val_nonmembers_)
