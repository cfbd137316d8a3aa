"""Document-level scores (SPEC 3c) recomputed by hand on small tables."""

from __future__ import annotations

import numpy as np
import pytest

from pddkit.errors import PddkitError
from pddkit.evaluation.documents import (
    calibration_split,
    group_documents,
    mean_scores,
    share_level,
    share_threshold,
)


def test_mean_scores_by_hand():
    groups = ["a", "b", "a", "c", "b", "a"]
    labels = [1, 0, 1, 1, 0, 1]
    scores = np.array([1.0, 2.0, 3.0, 4.0, 6.0, 5.0])
    docs = group_documents(groups, labels)
    assert docs.names == ("a", "b", "c")
    assert docs.labels.tolist() == [1, 0, 1]
    assert mean_scores(scores, docs).tolist() == [3.0, 4.0, 4.0]


def test_mixed_labels_and_missing_groups_are_one_sentence():
    with pytest.raises(PddkitError, match="'b' holds both"):
        group_documents(["a", "b", "b"], [1, 0, 1])
    with pytest.raises(PddkitError, match="1 of 3 texts have none"):
        group_documents(["a", None, "b"], [1, 0, 1])


def test_threshold_is_the_last_best_of_500_evenly_spaced():
    scores = np.array([0.0, 1.0, 2.0, 3.0])
    labels = np.array([0, 0, 1, 1])
    best, best_acc = None, -1.0
    for tau in np.linspace(0.0, 3.0, 500):  # the authors' loop
        acc = np.mean((scores >= tau) == (labels == 1))
        if acc >= best_acc:
            best, best_acc = tau, acc
    # one of the same 500 float64 values numpy.linspace gives: 1e-12 (relative) leaves
    # room for a linspace computed otherwise, a few roundings of 1e-16 each
    assert share_threshold(scores, labels) == pytest.approx(best, rel=1e-12)
    assert 1.0 < best <= 2.0


def test_share_with_a_known_calibration_split():
    rng = np.random.default_rng(3)
    groups = [f"d{i // 4}" for i in range(40)]  # 10 documents of 4 texts
    labels = [int(i // 4 < 5) for i in range(40)]
    scores = rng.normal(size=40) + np.array(labels)
    docs = group_documents(groups, labels)
    calib = calibration_split(docs, seed=7)
    assert calib.sum() == 4 and calib[docs.labels == 1].sum() == 2  # stratified halves
    got, mask, tau = share_level(scores, labels, docs, seed=7)
    assert (mask == calib).all()
    on = np.array([calib[int(g[1:])] for g in groups])
    assert tau == share_threshold(scores[on], np.asarray(labels)[on])
    for d, name in enumerate(docs.names):
        mine = [s for s, g in zip(scores, groups) if g == name]
        # a count over a count: one float64 division, 1e-12 leaves room for a mean summed
        assert got[d] == pytest.approx(np.mean([s >= tau for s in mine]), rel=1e-12)


def test_share_needs_both_classes_in_each_half():
    docs = group_documents(["a", "b", "c"], [1, 0, 1])  # one non-member document
    with pytest.raises(PddkitError, match="only one class"):
        share_level(np.array([1.0, 0.0, 2.0]), [1, 0, 1], docs, seed=0)


def _docs(*texts, labels=None):
    from pddkit.data.samples import Sample, make_dataset

    labels = labels or [1] * len(texts)
    return make_dataset("docs", [Sample(id=f"d{i}", text=t, label=y, source=f"line {i + 1}")
                                 for i, (t, y) in enumerate(zip(texts, labels))], [])


def test_split_words_verbatim_consecutive_and_counted():
    from pddkit.data.split_words import split_documents

    long = "One  two\nthree four.\n\nfive six seven eight nine"
    out = split_documents(_docs(long, "too short", labels=[1, 0]), 3)
    assert [s.text for s in out.samples] == ["One  two\nthree", "four.\n\nfive six",
                                            "seven eight nine"]
    assert {s.group for s in out.samples} == {"d0"} and out.samples[0].id == "d0@0"
    assert all(s.text in long and s.label == 1 for s in out.samples)
    assert out.meta["split_words"]["documents_too_short"] == 1
    assert "line 2" in out.skipped[0].source
    assert len(split_documents(_docs(long), 3, max_texts=2).samples) == 2
    assert split_documents(_docs(long), 4).meta["split_words"]["trailing_words_dropped"] == 1


def test_split_words_zero_is_one_sentence():
    from pddkit.data.split_words import split_documents

    with pytest.raises(PddkitError, match="at least 1"):
        split_documents(_docs("a b c"), 0)
