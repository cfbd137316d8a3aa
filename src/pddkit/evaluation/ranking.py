"""Which texts look most like members when there are no labels: mean rank over methods."""

from __future__ import annotations

import numpy as np

from pddkit.evaluation.results import RunResult


def detection_methods(result: RunResult) -> list[str]:
    """Labels of the detection methods: the blind baseline is not one."""
    return [m.label for m in result.methods if m.label != "blind"]


def member_ranking(result: RunResult) -> tuple[np.ndarray, np.ndarray]:
    """Text indices from most to least likely member, and their mean rank over the
    detection methods (rank 1 = highest score; ties share their average rank; NaN last)."""
    from scipy.stats import rankdata

    labels = detection_methods(result)
    scores = result.scores()
    ranks = np.array([rankdata(-np.nan_to_num(np.asarray(scores[k], dtype=float),
                                              nan=-np.inf)) for k in labels])
    mean = ranks.mean(axis=0)
    order = np.argsort(mean, kind="stable")
    return order, mean[order]


def score_stats(scores: np.ndarray) -> tuple[float, float, float, float]:
    """Mean, median, min and max of the defined scores (NaN left out; all NaN if none is)."""
    s = np.asarray(scores, dtype=float)
    ok = s[~np.isnan(s)]
    if not ok.size:
        return (float("nan"),) * 4
    return float(ok.mean()), float(np.median(ok)), float(ok.min()), float(ok.max())
