"""Metrics per subset (a MIMIR domain, an ArxivMIA field, a Dolma-Book position, a WikiMIA
length) beside the pooled ones, as the papers' tables show them: numbers only; reporting/
lays them out as one column per subset.

A subset's metrics are those of its own texts alone (the same routine as the pooled ones,
on fewer texts), on the test part when there is a validation split. A subset with one
class among those texts has no AUC: its entry is None, never an error.

The blind baseline per subset is fitted within the subset (its own cross-validation on
that subset's texts only): a per-subset column asks "do this subset's members and
non-members differ without any model?", and a classifier fitted on the pooled texts
would answer a different question (it can separate the subsets from each other, and its
pooled fit borrows strength from the other subsets)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pddkit.blind.verdict import effective_units
from pddkit.evaluation.metrics import Metrics, compute_metrics

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SubsetCount:
    """Members and non-members of one subset among the texts the metrics are on."""

    members: int
    nonmembers: int

    @property
    def both_classes(self) -> bool:
        return self.members > 0 and self.nonmembers > 0

    def to_dict(self) -> dict:
        return {"members": self.members, "nonmembers": self.nonmembers,
                "auc_defined": self.both_classes}


def breakdown(subsets: Sequence[str | None] | None) -> list[str]:
    """The subsets to report on their own, in order of first appearance: [] when no text
    names one, or when one subset holds every text (its column would repeat the pooled)."""
    if not subsets:
        return []
    names = list(dict.fromkeys(s for s in subsets if s is not None))
    if len(names) == 1 and all(s is not None for s in subsets):
        return []
    return names


def subset_indices(subsets: Sequence[str | None], names: Sequence[str],
                   within: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per subset name, the indices of its texts (only those in `within`, e.g. the test
    part, when given), ascending."""
    tags = np.asarray([s if s is not None else "" for s in subsets], dtype=object)  # [n]
    keep = np.ones(len(tags), dtype=bool)
    if within is not None:
        keep[:] = False
        keep[np.asarray(within, dtype=int)] = True
    return {name: np.flatnonzero((tags == name) & keep) for name in names}


def subset_counts(labels: Sequence[int], index: dict[str, np.ndarray]) -> dict[str, SubsetCount]:
    y = np.asarray(labels)
    return {name: SubsetCount(int((y[idx] == 1).sum()), int((y[idx] == 0).sum()))
            for name, idx in index.items()}


def subset_metrics(scores: np.ndarray, labels: Sequence[int], index: dict[str, np.ndarray],
                   n_bootstrap: int = 1000, seed: int = 0) -> dict[str, Metrics | None]:
    """Metrics of `scores` on each subset's texts alone (None for a subset with one class)."""
    y = np.asarray(labels)
    s = np.asarray(scores, dtype=np.float64)
    out: dict[str, Metrics | None] = {}
    for name, idx in index.items():
        yy = y[idx]
        both = bool((yy == 1).any() and (yy == 0).any())
        out[name] = compute_metrics(s[idx], yy, n_bootstrap=n_bootstrap, seed=seed) if both else None
    return out


def one_class(counts: dict[str, SubsetCount]) -> dict[str, str]:
    """Subsets without an AUC -> the class they hold ("members" / "non-members" / "no texts")."""
    out = {}
    for name, c in counts.items():
        if not c.both_classes:
            out[name] = "members" if c.members else "non-members" if c.nonmembers else "no texts"
    return out


def fitted_within(subsets: Sequence[str | None], labels: Sequence[int],
                  test_idx: np.ndarray | None, scores_of: Callable[[np.ndarray], np.ndarray],
                  n_bootstrap: int = 1000, seed: int = 0,
                  notices: list[str] | None = None) -> dict[str, Metrics | None]:
    """Per subset, the metrics of a model fitted within it: `scores_of(idx)` gives the
    out-of-fold scores of the texts `idx` (all of the subset's texts, validation part
    included, as the pooled fit sees all texts) from a model fitted on them alone; the
    metrics are on the subset's test part. None where that part has one class, or where
    `scores_of` raises PddkitError (too few texts to cross-validate: added to `notices`)."""
    from pddkit.errors import PddkitError

    y = np.asarray(labels)
    out: dict[str, Metrics | None] = {}
    for name, idx in subset_indices(subsets, breakdown(subsets)).items():
        rows = np.arange(len(idx)) if test_idx is None else np.flatnonzero(np.isin(idx, test_idx))
        measured = y[idx][rows]
        out[name] = None
        if not ((measured == 1).any() and (measured == 0).any()):
            continue  # one class: the caller says so once for every method
        try:
            scores = scores_of(idx)
        except PddkitError as e:
            logger.warning("no blind baseline for subset %s: %s", name, e)
            if notices is not None:
                notices.append(f"no blind baseline for subset {name}: {e}")
            continue
        out[name] = compute_metrics(scores[rows], measured, n_bootstrap=n_bootstrap, seed=seed)
    return out


def run_units(labels, groups, test_idx=None, subsets=None) -> dict:
    """The verdict's units of a run's blind baseline, for MethodResult.params: `units`
    (of the texts its metrics are on, the test part when validating) and, when the data
    has subsets, `subset_units` per subset; {} without groups."""
    if groups is None:
        return {}
    y, g = np.asarray(labels), np.asarray(groups, dtype=object)
    sel = np.arange(len(y)) if test_idx is None else np.asarray(test_idx, dtype=int)
    out: dict = {"units": effective_units(y[sel], list(g[sel]))}
    names = breakdown(subsets) if subsets is not None else []
    if names:
        out["subset_units"] = {name: effective_units(y[idx], list(g[idx])) for name, idx in
                               subset_indices(subsets, names, test_idx).items()}
    return out
