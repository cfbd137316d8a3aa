"""Folds and samples of the blind baseline (blind/baseline.py): stratified by label, a
document's texts (`groups`) always kept together, seeded."""

from __future__ import annotations

import numpy as np


def folds(y: np.ndarray, groups: np.ndarray | None, k: int, seed: int):
    """(train, test) index pairs, stratified (and grouped), or None when k < 2 is possible."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    if groups is not None:
        per_class = min(len(set(groups[y == c])) for c in (0, 1))
    else:
        per_class = min(int((y == c).sum()) for c in (0, 1))
    k = min(k, per_class)
    if k < 2:
        return None
    idx = np.zeros(len(y))
    if groups is not None:
        return list(StratifiedGroupKFold(k, shuffle=True, random_state=seed).split(idx, y, groups))
    return list(StratifiedKFold(k, shuffle=True, random_state=seed).split(idx, y))


def stratified_sample(y, groups, size: int, seed: int) -> np.ndarray:
    """Sorted positions of about `size` of the texts (all of them when there are no more):
    members and non-members in their shares of all texts, drawn at random (seeded). With
    `groups`, whole documents are drawn (a document counts in its texts' majority class),
    each class's until its share is reached, so the size is met to within a document."""
    y = np.asarray(y)
    n = len(y)
    if size >= n:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    if groups is None:
        taken = []
        for c in (0, 1):
            idx = np.flatnonzero(y == c)
            want = min(len(idx), max(1, round(size * len(idx) / n)))
            taken.append(rng.choice(idx, want, replace=False))
        return np.sort(np.concatenate(taken))
    names, doc = np.unique(np.asarray(groups).astype(str), return_inverse=True)
    doc = doc.ravel()
    texts = np.bincount(doc, minlength=len(names))                     # [n_docs]
    cls = (2 * np.bincount(doc, weights=y, minlength=len(names)) >= texts).astype(int)
    chosen = np.zeros(len(names), dtype=bool)
    for c in (0, 1):
        order = rng.permutation(np.flatnonzero(cls == c))
        share = size * texts[order].sum() / n
        before = np.cumsum(texts[order]) - texts[order]                # texts taken before each
        chosen[order[(before < share) | (np.arange(len(order)) == 0)]] = True
    return np.flatnonzero(chosen[doc])
