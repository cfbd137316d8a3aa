"""Seeded, stratified splits of labelled texts that keep each document (group) whole on one
side: the validation split (engine) and the calibration texts held out of the labelled data
(data/calibration.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pddkit.errors import PddkitError


def stratified_split(labels: Sequence[int], fraction: float, seed: int = 0,
                     groups: Sequence[str | None] | None = None,
                     what: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(validation indices, test indices): about `fraction` of each class, seeded, with
    every `group` (the document a text was cut from) wholly on one side. A text without a
    group is a group of its own, so without groups the split is exact per class.

    Groups are visited in seeded random order; a group joins validation while that does
    not overshoot any class's target share by more than half the group's own count.
    `what` names the split in errors (default: `val_fraction` and its value)."""
    if not 0 < fraction < 1:
        raise PddkitError(f"`val_fraction` must be between 0 and 1, not {fraction}")
    y = np.asarray(labels)
    keys = [f"\0text {i}" if groups is None or groups[i] is None else str(groups[i])
            for i in range(len(y))]
    members: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        members.setdefault(k, []).append(i)
    target = {c: fraction * int((y == c).sum()) for c in (0, 1)}
    in_val = {0: 0, 1: 0}
    val: list[int] = []
    order = np.random.default_rng(seed).permutation(len(members))
    names = list(members)
    for g in order:
        idx = members[names[g]]
        have = {c: int((y[idx] == c).sum()) for c in (0, 1)}
        if all(in_val[c] + have[c] <= target[c] + have[c] / 2 for c in (0, 1) if have[c]):
            val.extend(idx)
            for c in (0, 1):
                in_val[c] += have[c]
    val_idx = np.sort(np.array(val, dtype=int))
    test_idx = np.setdiff1d(np.arange(len(y)), val_idx)
    for c, name in ((1, "member"), (0, "non-member")):
        if not (y[val_idx] == c).any() or not (y[test_idx] == c).any():
            grouped = groups is not None and any(g is not None for g in groups)
            n_units = len({keys[i] for i in np.flatnonzero(y == c)})
            units = f"{n_units} documents with {name}s" if grouped else f"{n_units} {name}s"
            split, sides = ((f"`val_fraction` {fraction}", "validation and test each") if what is None
                            else (what, "both sides"))
            raise PddkitError(f"{split} leaves no {name} on one side "
                              f"({units}): {sides} need both classes")
    return val_idx, test_idx
