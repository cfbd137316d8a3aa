"""The blind baseline's verdict: does its out-of-fold AUC show a shift between members and
non-members, given how many texts (or documents) it had? The verdict is data (BlindVerdict:
the AUC, its interval, the p-value, the counts and the outcome); reporting/
blind_verdict_text.py writes it as the sentence results.json, the terminal and the report
show.

Under random labels the out-of-fold AUC of a cross-validated classifier spreads more than
a plain AUC on the same counts (the classifier is refitted on every fold, and it is refitted
on labels that vary with the draw): `benchmarks/blind_null.py` measured its standard
deviation at 1.27-1.31 times the Mann-Whitney null spread sqrt((n1 + n0 + 1) / (12 n1 n0))
on the calibration sets (60 random labelings each of 40 WikiMIA-32 texts, 160 WikiMIA-64
texts, 160 Gutenberg paragraphs). `NULL_INFLATION` is the largest ratio times 1.18 (the
upper 95% bound of a spread estimated from 60 draws), rounded up to 0.05: 1.55, so the test
errs on the side of silence. Its false-fire rate on held-out sets is on the docs' page
The blind baseline and reports (When it warns). Checked by the same rule at 1,000 texts
(100 labelings: ratio 1.35, rule 1.55) and 5,000 texts (60 labelings: 1.06, rule 1.30), it
holds (same page, Checked at 1,000 and 5,000 texts).

- p-value: one-sided, P(Z >= (AUC - 0.5) / s0) with s0 = NULL_INFLATION x the
  Mann-Whitney null spread: the chance of an AUC this high without any shift.
- interval (95%): the AUCs A the observed one is compatible with, |AUC - A| <= 1.96 x
  NULL_INFLATION x sd(A), sd(A) Hanley and McNeil's (1982) spread of an AUC of A (at
  A = 0.5 the Mann-Whitney one); inverted like a score interval, so its lower end is above
  0.5 exactly when p < 0.025. It is wider than the metrics table's bootstrap CI of the same
  AUC, which resamples the texts with their out-of-fold scores held fixed: this one also
  counts the spread from refitting the classifier on every fold (NULL_INFLATION). Both
  are printed, each labelled (reporting/blind_verdict_text.py's INTERVAL_LABEL, the table's note there).
- warning: p < ALPHA (0.025: the interval's lower end above 0.5) and AUC >= MIN_AUC (0.55;
  a shift this small leaves detection AUCs well above it meaningful). A significant AUC
  below MIN_AUC is reported as a small shift without the warning.
- units: with document ids (`group`) and grouped folds, a document's texts are not
  independent, so n1 and n0 are the numbers of member and non-member documents (the
  conservative end: their texts could be up to independent); otherwise texts.
- sample (`blind_max_texts`): the baseline fitted on a stratified sample of N texts
  scores those out-of-fold and the others with a model fitted on the whole sample, so
  every text's score is still from a model that never saw it; the verdict counts all the
  texts the AUC is on (the others' AUC is a plain held-out one, whose null spread is the
  Mann-Whitney one, below the inflated out-of-fold spread used) and says it was sampled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

NULL_INFLATION = 1.55  # out-of-fold null spread / Mann-Whitney null spread (see docstring)
ALPHA = 0.025         # one-sided; the 95% interval's lower end above 0.5
MIN_AUC = 0.55        # smallest AUC that warns
Z95 = 1.959963984540054
# BlindVerdict.outcome: a shift that warns, a shift below MIN_AUC, or none found
WARN, SMALL_SHIFT, NO_SHIFT = "warn", "small shift", "no shift"


def null_sd(n1: int, n0: int, inflation: float = NULL_INFLATION) -> float:
    """Spread of the out-of-fold AUC under random labels with n1 members, n0 non-members."""
    return inflation * math.sqrt((n1 + n0 + 1) / (12.0 * n1 * n0))


def auc_sd(auc, n1: int, n0: int, inflation: float = NULL_INFLATION):
    """Hanley-McNeil spread of an AUC of `auc` (a float or an array), times `inflation`."""
    a = np.clip(np.maximum(auc, 1.0 - np.asarray(auc, dtype=float)), 0.5, 1.0)  # symmetric
    q1, q2 = a / (2.0 - a), 2.0 * a * a / (1.0 + a)
    var = (a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n1 * n0)
    return inflation * np.sqrt(np.maximum(var, 0.0))


def p_value(auc: float, n1: int, n0: int) -> float:
    """One-sided p-value of an out-of-fold AUC this high without any shift."""
    z = (auc - 0.5) / null_sd(n1, n0)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def interval(auc: float, n1: int, n0: int, steps: int = 2000) -> tuple[float, float]:
    """95% interval: the AUCs A with |auc - A| <= 1.96 x auc_sd(A) next to `auc` on each
    side (on a grid of 1/steps)."""
    offsets = np.arange(1, steps + 1) / steps
    bounds = []
    for side in (-1.0, 1.0):
        a = auc + side * offsets
        a = a[(a >= 0.0) & (a <= 1.0)]
        inside = np.abs(auc - a) <= Z95 * auc_sd(a, n1, n0) + 1e-12
        first_out = int(np.argmin(inside)) if not inside.all() else len(a)
        bounds.append(a[first_out - 1] if first_out else auc)
    return float(max(bounds[0], 0.0)), float(min(bounds[1], 1.0))


@dataclass(frozen=True)
class BlindVerdict:
    auc: float
    low: float
    high: float
    p: float
    n_members: int
    n_nonmembers: int
    unit: str  # "texts" or "documents"
    warn: bool
    shift: bool  # above chance (p < ALPHA), whatever the size
    sample: dict | None = None  # {"texts": N, "of": n}: fitted on a stratified sample

    @property
    def outcome(self) -> str:
        """WARN (above chance and at least MIN_AUC), SMALL_SHIFT (above chance, below
        MIN_AUC) or NO_SHIFT (not above chance)."""
        return WARN if self.warn else SMALL_SHIFT if self.shift else NO_SHIFT

    def to_dict(self) -> dict:
        return {"auc": self.auc, "interval": [self.low, self.high], "p": self.p,
                "n_members": self.n_members, "n_nonmembers": self.n_nonmembers,
                "unit": self.unit, "shift": self.shift, "warn": self.warn,
                **({"sample": self.sample} if self.sample else {})}


def verdict_for(auc: float, n1: int, n0: int, unit: str = "texts",
                sample: dict | None = None) -> BlindVerdict:
    """The verdict on an out-of-fold AUC with n1 member and n0 non-member units (`sample`:
    {"texts", "of"} when the baseline was fitted on a stratified sample)."""
    auc = float(auc)
    p = p_value(auc, n1, n0)
    low, high = interval(auc, n1, n0)
    shift = p < ALPHA
    return BlindVerdict(auc=auc, low=low, high=high, p=p, n_members=int(n1),
                        n_nonmembers=int(n0), unit=unit, warn=shift and auc >= MIN_AUC,
                        shift=shift, sample=sample)


def verdict(metrics, units: dict | None = None) -> BlindVerdict:
    """The verdict on a Metrics; `units` ({"members", "nonmembers", "unit"}, from
    `effective_units`) when the units are documents rather than the metrics' texts (and
    only where both classes have one: else the texts'); its "sample" ({"texts", "of"}),
    when there is one, says the baseline was fitted on a stratified sample."""
    sample = (units or {}).get("sample")
    if units and units.get("members") and units.get("nonmembers"):
        return verdict_for(metrics.auc, units["members"], units["nonmembers"], units["unit"],
                           sample)
    return verdict_for(metrics.auc, metrics.n_members, metrics.n_nonmembers, sample=sample)


def effective_units(labels, groups) -> dict | None:
    """{"members", "nonmembers", "unit": "documents"}: the distinct documents among the
    members and among the non-members; None without groups, or when every document holds
    one text (the units are then the texts)."""
    if groups is None or len(set(groups)) == len(groups):
        return None
    members = {g for g, y in zip(groups, labels) if int(y) == 1}
    nonmembers = {g for g, y in zip(groups, labels) if int(y) == 0}
    return {"members": len(members), "nonmembers": len(nonmembers), "unit": "documents"}


MIN_SAMPLE = 20  # the smallest `blind_max_texts`: 10 texts of each class


def check_max_texts(max_texts: int | None) -> None:
    """One sentence when a sample size for the blind baseline is too small to fit it."""
    from pddkit.errors import PddkitError

    if max_texts is not None and max_texts < MIN_SAMPLE:
        raise PddkitError(f"`blind_max_texts` must be at least {MIN_SAMPLE} (10 texts of each "
                          f"class), not {max_texts}")


def with_sample(units: dict | None, labels, sample: dict) -> dict:
    """The verdict's `units` (MethodResult.params["units"]) saying that the baseline was
    fitted on a stratified sample ({"texts", "of"}); the texts of `labels` are the units
    when `units` names none."""
    y = np.asarray(labels)
    out = dict(units) if units else {"members": int((y == 1).sum()),
                                     "nonmembers": int((y == 0).sum()), "unit": "texts"}
    return {**out, "sample": sample}
