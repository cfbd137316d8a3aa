"""The AUC a calibrated method fits on (acmia's beta, camia's combination): computed here
because methods sit below the evaluation layer and never import it."""

from __future__ import annotations

import numpy as np


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The AUC of `scores` against labels (1 = member): the Mann-Whitney U statistic over
    the member / non-member pairs, ties counted one half."""
    from scipy.stats import rankdata

    ranks = rankdata(scores)
    pos = labels == 1
    n1, n0 = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
