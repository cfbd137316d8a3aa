import math
from types import SimpleNamespace

import numpy as np
import pytest

from pddkit.errors import PddkitError
from pddkit.evaluation.doc_classifier import (
    DocumentClassifier,
    aggregate_features,
    histogram_edges,
    histogram_features,
    token_values,
    train_log_freq,
)


def _docs(shift: float, n_docs: int = 20, seed: int = 0, n: int = 40):
    rng = np.random.default_rng(seed)
    values = [rng.normal(shift if d < n_docs // 2 else 0.0, 1.0, n) for d in range(n_docs)]
    groups = [f"d{d}" for d in range(n_docs)]
    labels = {f"d{d}": int(d < n_docs // 2) for d in range(n_docs)}
    return values, groups, labels


def _stats(L, ids):
    return SimpleNamespace(L=np.array(L, dtype=np.float32), ids=np.array(ids, dtype=np.int64))


# --- formulas on hand-made values -------------------------------------------------------

def test_token_values_with_a_table_are_log_freq_minus_log_prob():
    # -log(p / f) for p = e^-1, f = 0.5 and p = e^-2, f = 0.25
    out = token_values([_stats([-1.0, -2.0], [0, 1])], np.log([0.5, 0.25]))
    assert out[0] == pytest.approx([math.log(0.5) + 1.0, math.log(0.25) + 2.0])


def test_train_log_freq_gives_unseen_ids_half_the_smallest_frequency():
    # ids 0,0,0,1 -> f = 3/4, 1/4; ids 2, 3 unseen -> 1/8
    lf = train_log_freq([np.array([0, 0, 1]), np.array([0])], vocab=4)
    assert np.exp(lf) == pytest.approx([0.75, 0.25, 0.125, 0.125])


def test_histogram_is_the_density_over_equal_width_training_edges():
    edges = histogram_edges([np.array([0.0, 1.0]), np.array([4.0, 2.0, 3.0])], bins=4)
    assert edges == pytest.approx([0.0, 1.0, 2.0, 3.0, 4.0])
    # 9.0 lies outside the training range and is dropped; 3 values inside, bin width 1;
    # 4.0 is the right edge and counts in the last bin (numpy's rule)
    x = histogram_features([np.array([0.5, 0.5, 3.5, 9.0]), np.array([4.0]),
                            np.array([-1.0])], edges)
    assert x[0] == pytest.approx([2 / 3, 0.0, 0.0, 1 / 3])
    assert x[1] == pytest.approx([0.0, 0.0, 0.0, 1.0])
    assert x[2] == pytest.approx([0.0, 0.0, 0.0, 0.0])  # nothing inside: zeros, not 0/0


def test_histogram_density_scales_with_bin_width():
    edges = histogram_edges([np.array([0.0, 10.0])], bins=2)  # [0, 5, 10]
    assert histogram_features([np.array([1.0, 6.0])], edges)[0] == pytest.approx([0.1, 0.1])


def test_aggregate_features_by_hand():
    x = aggregate_features([np.array([4.0, 1.0, 3.0, 2.0])])
    assert x.shape == (1, 14)
    mean, lo, hi, std, count, *pct = x[0]
    assert (mean, lo, hi, count) == (2.5, 1.0, 4.0, 4.0)
    assert std == pytest.approx(math.sqrt(1.25))  # ddof 0
    # linear interpolation on sorted 1,2,3,4: position q/100 * 3
    expected = [1.0 + 3 * q / 100 for q in (1, 5, 10, 25, 50, 75, 90, 95, 99)]
    assert pct == pytest.approx(expected)


def test_defaults_are_the_authors_books_configuration():
    clf = DocumentClassifier()
    assert (clf.features, clf.bins, clf.trees, clf.max_depth, clf.min_samples_leaf,
            clf.folds) == ("histogram", 1000, 500, 5, 3, 5)


# --- cross-validation ---------------------------------------------------------------------

@pytest.mark.slow
def test_separable_documents_score_members_higher_and_deterministic():
    values, groups, labels = _docs(3.0)
    clf = DocumentClassifier(trees=30, bins=10, folds=5, seed=1)
    scores = clf.cross_val_scores(values, groups, labels)
    members = [scores[g] for g in groups if labels[g]]
    others = [scores[g] for g in groups if not labels[g]]
    assert min(members) > max(others)
    assert clf.cross_val_scores(values, groups, labels) == scores


def test_aggregate_features_separate_too():
    values, groups, labels = _docs(3.0)
    scores = DocumentClassifier(features="aggregate", trees=30).cross_val_scores(
        values, groups, labels)
    assert min(scores[g] for g in groups if labels[g]) > max(
        scores[g] for g in groups if not labels[g])


def test_each_fold_scored_by_forest_fitted_on_the_other_fold_only():
    # Refit by hand: fold A's scores equal a forest fitted on fold B alone, with histogram
    # edges from fold B's values only.
    from sklearn.ensemble import RandomForestClassifier

    values, groups, labels = _docs(1.0, n_docs=8)
    clf = DocumentClassifier(trees=20, bins=10, folds=2, seed=0)
    folds = clf.fold_assignment(groups, labels)
    scores = clf.cross_val_scores(values, groups, labels)
    docs = sorted(set(groups))
    test = [d for d in docs if folds[d] == 0]
    train = [d for d in docs if folds[d] != 0]
    vals = {d: values[groups.index(d)] for d in docs}
    edges = histogram_edges([vals[d] for d in train], 10)
    forest = RandomForestClassifier(n_estimators=20, max_depth=5, min_samples_leaf=3,
                                    random_state=0)
    forest.fit(histogram_features([vals[d] for d in train], edges), [labels[d] for d in train])
    expected = forest.predict_proba(histogram_features([vals[d] for d in test], edges))[:, 1]
    assert [scores[d] for d in test] == pytest.approx(list(expected))


def test_default_folds_are_the_fold_assignment_and_stratified():
    values, groups, labels = _docs(1.0, n_docs=10)
    clf = DocumentClassifier(trees=10, bins=10, folds=5)
    folds = clf.fold_assignment(groups, labels)
    assert sorted(set(folds.values())) == [0, 1, 2, 3, 4]
    for k in range(5):  # one member and one non-member per fold
        assert sorted(labels[d] for d in folds if folds[d] == k) == [0, 1]
    assert clf.cross_val_scores(values, groups, labels) == clf.cross_val_scores(
        values, groups, labels, fold_of=folds)


@pytest.mark.parametrize("features", ["histogram", "aggregate"])
@pytest.mark.parametrize("with_ids", [False, True])
def test_flipping_the_labels_of_the_scored_fold_leaves_its_scores_unchanged(features, with_ids):
    # The requirement: a document is never scored by anything fitted with it. Flip the
    # labels of exactly one fold's documents, reuse the fold assignment: that fold's scores
    # are identical (its forest, edges and token frequencies never saw those documents),
    # while the other folds, whose training data changed, move.
    rng = np.random.default_rng(3)
    values, groups, labels = _docs(0.7, n_docs=12, n=30)
    ids = [rng.integers(0, 50, len(v)) for v in values] if with_ids else None
    clf = DocumentClassifier(features=features, bins=20, trees=25, folds=3, seed=0)
    folds = clf.fold_assignment(groups, labels)
    before = clf.cross_val_scores(values, groups, labels, fold_of=folds, token_ids=ids)
    scored = [d for d in folds if folds[d] == 1]
    flipped = {d: (1 - y if d in scored else y) for d, y in labels.items()}
    after = clf.cross_val_scores(values, groups, flipped, fold_of=folds, token_ids=ids)
    assert [after[d] for d in scored] == [before[d] for d in scored]
    assert any(after[d] != before[d] for d in folds if d not in scored)


@pytest.mark.parametrize("with_ids", [False, True])
def test_changing_a_scored_document_leaves_its_fold_mates_scores_unchanged(with_ids):
    # The label flip cannot see a label-free fit on all documents (histogram edges, token
    # frequencies): change one scored document's values (and ids) instead. Anything fitted
    # on it would move the other documents of its fold; fitted on the training folds only,
    # their scores stay identical.
    rng = np.random.default_rng(4)
    values, groups, labels = _docs(0.7, n_docs=12, n=30)
    ids = [rng.integers(0, 50, len(v)) for v in values] if with_ids else None
    clf = DocumentClassifier(features="histogram", bins=20, trees=25, folds=3, seed=0)
    folds = clf.fold_assignment(groups, labels)
    before = clf.cross_val_scores(values, groups, labels, fold_of=folds, token_ids=ids)
    scored = [d for d in folds if folds[d] == 1]
    changed = scored[0]
    values2 = [v * 50.0 + 100.0 if g == changed else v for v, g in zip(values, groups)]
    ids2 = None if ids is None else [np.full(len(i), 49) if g == changed else i
                                     for i, g in zip(ids, groups)]
    after = clf.cross_val_scores(values2, groups, labels, fold_of=folds, token_ids=ids2)
    assert [after[d] for d in scored[1:]] == [before[d] for d in scored[1:]]


def test_token_ids_normalise_with_the_training_folds_frequencies():
    # With token_ids, each fold's values are log f_train(id) - L; recomputed by hand for one
    # fold with aggregate features (one text per document, ids 0..3).
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(5)
    L = [rng.normal(-2.0, 1.0, 15) for _ in range(8)]
    ids = [rng.integers(0, 4, 15) for _ in range(8)]
    groups = [f"d{d}" for d in range(8)]
    labels = {g: int(i < 4) for i, g in enumerate(groups)}
    clf = DocumentClassifier(features="aggregate", trees=15, folds=2)
    folds = clf.fold_assignment(groups, labels)
    scores = clf.cross_val_scores(L, groups, labels, fold_of=folds, token_ids=ids)
    train = [i for i, g in enumerate(groups) if folds[g] != 0]
    test = [i for i, g in enumerate(groups) if folds[g] == 0]
    lf = train_log_freq([ids[i] for i in train], vocab=4)
    x = aggregate_features([lf[i] - v for i, v in zip(ids, L, strict=True)])
    forest = RandomForestClassifier(n_estimators=15, max_depth=5, min_samples_leaf=3,
                                    random_state=0).fit(x[train], [labels[groups[i]] for i in train])
    assert [scores[groups[i]] for i in test] == pytest.approx(
        list(forest.predict_proba(x[test])[:, 1]))


def test_texts_of_one_document_are_pooled():
    values, groups, labels = _docs(1.0, n_docs=8)
    split_values = [part for v in values for part in (v[:15], v[15:])]
    split_groups = [g for g in groups for _ in range(2)]
    clf = DocumentClassifier(trees=10, bins=10, folds=2)
    assert clf.cross_val_scores(split_values, split_groups, labels) == clf.cross_val_scores(
        values, groups, labels)


# --- bad input ----------------------------------------------------------------------------

def test_too_few_documents_one_sentence():
    values, groups, labels = _docs(1.0, n_docs=2)
    with pytest.raises(PddkitError, match="at least 2 documents of each class"):
        DocumentClassifier(trees=5).cross_val_scores(values, groups, labels)


def test_bad_fold_of_and_labels_one_sentence():
    values, groups, labels = _docs(1.0, n_docs=8)
    clf = DocumentClassifier(trees=5, bins=10)
    with pytest.raises(PddkitError, match="no fold in fold_of"):
        clf.cross_val_scores(values, groups, labels, fold_of={"d0": 0})
    by_label = {d: labels[d] for d in labels}  # fold 0 = non-members: outside it, members only
    with pytest.raises(PddkitError, match="outside fold 0 hold only one class"):
        clf.cross_val_scores(values, groups, labels, fold_of=by_label)
    with pytest.raises(PddkitError, match="has no label"):
        clf.cross_val_scores(values, groups, {"d0": 1})
    with pytest.raises(PddkitError, match="'histogram' or 'aggregate'"):
        DocumentClassifier(features="stats")
