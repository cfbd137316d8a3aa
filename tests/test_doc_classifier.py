"""Meeus et al.'s document classifier ("Did the Neurons Read your Book?", arXiv 2310.15007):
formulas on hand-made values, then the whole cross-validation against a transcription of
the authors' pipeline (computationalprivacy/document-level-membership-inference, written
here from their src/normalization.py, feature_extraction.py, meta_classifier.py and
main.py), with each held-out fold's AUC as they compute it, beside the pooled AUC."""

import math
from collections import Counter
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

# Tolerances: every expected value here is computed in float64 from a handful of operations
# (a mean, a log, a ratio of counts), as pddkit computes it; two such computations agree to a
# few units in the last place (~1e-16 relative), so rel=1e-12 (abs=1e-15 near zero) leaves
# room for a different order of summation and nothing more. An AUC is a ratio of integer
# counts: exact to rounding, hence abs=1e-15.
EXACT = {"rel": 1e-12, "abs": 1e-15}


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
    assert out[0] == pytest.approx([math.log(0.5) + 1.0, math.log(0.25) + 2.0], **EXACT)


def test_train_log_freq_gives_unseen_ids_half_the_smallest_frequency():
    # ids 0,0,0,1 -> f = 3/4, 1/4; ids 2, 3 unseen -> 1/8
    lf = train_log_freq([np.array([0, 0, 1]), np.array([0])], vocab=4)
    assert np.exp(lf) == pytest.approx([0.75, 0.25, 0.125, 0.125], **EXACT)


def test_histogram_is_the_density_over_equal_width_training_edges():
    edges = histogram_edges([np.array([0.0, 1.0]), np.array([4.0, 2.0, 3.0])], bins=4)
    assert edges == pytest.approx([0.0, 1.0, 2.0, 3.0, 4.0], **EXACT)
    # 9.0 lies outside the training range and is dropped; 3 values inside, bin width 1;
    # 4.0 is the right edge and counts in the last bin (numpy's rule)
    x = histogram_features([np.array([0.5, 0.5, 3.5, 9.0]), np.array([4.0]),
                            np.array([-1.0])], edges)
    assert x[0] == pytest.approx([2 / 3, 0.0, 0.0, 1 / 3], **EXACT)
    assert x[1] == pytest.approx([0.0, 0.0, 0.0, 1.0], **EXACT)
    assert x[2] == pytest.approx([0.0, 0.0, 0.0, 0.0], **EXACT)  # nothing inside: zeros, not 0/0


def test_histogram_density_scales_with_bin_width():
    edges = histogram_edges([np.array([0.0, 10.0])], bins=2)  # [0, 5, 10]
    assert histogram_features([np.array([1.0, 6.0])], edges)[0] == pytest.approx([0.1, 0.1], **EXACT)


def test_aggregate_features_by_hand():
    x = aggregate_features([np.array([4.0, 1.0, 3.0, 2.0])])
    assert x.shape == (1, 14)
    mean, lo, hi, std, count, *pct = x[0]
    assert (mean, lo, hi, count) == (2.5, 1.0, 4.0, 4.0)
    assert std == pytest.approx(math.sqrt(1.25), **EXACT)  # ddof 0
    # linear interpolation on sorted 1,2,3,4: position q/100 * 3
    expected = [1.0 + 3 * q / 100 for q in (1, 5, 10, 25, 50, 75, 90, 95, 99)]
    assert pct == pytest.approx(expected, **EXACT)


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


# --- the authors' pipeline, transcribed ------------------------------------------------
#
# Their main.py, fold by fold: token frequencies over the training chunks (with token ids:
# compute_token_freq.py's count / total, main.py's get_train_token_norm; a token missing
# from the table gets half the smallest frequency, normalization.py get_norm_val), each
# token's -log(p / f) (normalize_token_loss), features (feature_extraction.py: np.histogram
# bins over all training values, each document's density=True histogram; or simple_agg),
# scale_features (min-max per training column, a constant column 0), their forest
# (RandomForestClassifier(500, max_depth=5, min_samples_leaf=3); seeded here as pddkit
# seeds it, theirs is not) and validate_clf's test AUC (roc_auc_score on the held-out chunk).

def _their_features(train: list, test: list, features: str, bins: int):
    def simple_agg(nlls):
        return [np.mean(nlls), np.min(nlls), np.max(nlls), np.std(nlls), len(nlls),
                *(np.percentile(nlls, q) for q in (1, 5, 10, 25, 50, 75, 90, 95, 99))]

    if features == "aggregate":
        x_train = np.array([simple_agg(v) for v in train])
        x_test = np.array([simple_agg(v) for v in test])
    else:
        everything = []
        for nlls in train:
            everything += list(nlls)
        edges = np.histogram(everything, bins=bins)[1]
        x_train = np.array([np.histogram(v, edges, density=True)[0] for v in train])
        x_test = np.array([np.histogram(v, edges, density=True)[0] for v in test])
    for col in range(x_train.shape[1]):  # scale_features
        lo, hi = x_train[:, col].min(), x_train[:, col].max()
        if hi == lo:
            x_train[:, col], x_test[:, col] = 0.0, 0.0
        else:
            x_train[:, col] = (x_train[:, col] - lo) / (hi - lo)
            x_test[:, col] = (x_test[:, col] - lo) / (hi - lo)
    return x_train, x_test


def authors_pipeline(values: dict, labels: dict, fold_of: dict, *, features: str, bins: int,
                     trees: int, seed: int, ids: dict | None = None):
    """(document -> held-out probability, fold -> test AUC): their main.py over the folds
    of `fold_of`. `values`: document -> per-token values, or log-probabilities L when `ids`
    (document -> token ids) asks for per-fold frequencies."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.metrics import roc_auc_score

    scores, aucs = {}, {}
    for k in sorted(set(fold_of.values())):
        train = sorted(d for d in values if fold_of[d] != k)
        test = sorted(d for d in values if fold_of[d] == k)
        if ids is None:
            norm = {d: list(values[d]) for d in values}
        else:
            count = Counter()
            for d in train:
                count.update(int(t) for t in ids[d])
            total = sum(count.values())
            freq = {t: c / total for t, c in count.items()}
            floor = min(freq.values()) / 2.0
            norm = {d: [-np.log(np.exp(L) / freq.get(int(t), floor))
                        for L, t in zip(values[d], ids[d])] for d in values}
        x_train, x_test = _their_features([norm[d] for d in train], [norm[d] for d in test],
                                          features, bins)
        forest = RandomForestClassifier(n_estimators=trees, max_depth=5, min_samples_leaf=3,
                                        random_state=seed)
        forest.fit(x_train, [labels[d] for d in train])
        proba = forest.predict_proba(x_test)[:, 1]
        scores.update(zip(test, proba))
        aucs[k] = roc_auc_score([labels[d] for d in test], proba)
    return scores, aucs


@pytest.mark.slow
@pytest.mark.parametrize("features", ["histogram", "aggregate"])
@pytest.mark.parametrize("with_ids", [False, True])
def test_cross_validation_is_the_authors_pipeline_with_their_per_fold_auc(features, with_ids):
    # 12 documents, hand-made folds (d % 3: two members and two non-members in each), a weak
    # signal so that the folds' AUCs differ. Seed 11 draws held-out documents whose feature
    # equals a split's training value, where the authors' min-max scaling decides the side
    # (float32 forest): without it the histogram runs' scores differ by up to 0.027.
    rng = np.random.default_rng(11)
    docs = [f"d{d:02d}" for d in range(12)]
    labels = {g: int(d < 6) for d, g in enumerate(docs)}
    fold_of = {g: d % 3 for d, g in enumerate(docs)}
    L = {g: rng.normal(-2.0 + 0.3 * labels[g], 1.0, 30) for g in docs}
    ids = {g: rng.integers(0, 12, 30) for g in docs} if with_ids else None
    clf = DocumentClassifier(features=features, bins=20, trees=25, folds=3, seed=0)
    got = clf.cross_validate([L[g] for g in docs], docs, labels, fold_of=fold_of,
                             token_ids=None if ids is None else [ids[g] for g in docs])
    want, want_auc = authors_pipeline(L, labels, fold_of, features=features, bins=20, trees=25,
                                      seed=0, ids=ids)
    # The same trees on the same features: a tree's leaf probability is a ratio of counts and
    # the forest averages 25 of them, so equal splits give equal probabilities up to the
    # order of that sum (1e-12 is far above its rounding, far below one leaf count's 1/25).
    # The features themselves differ only in float64 rounding (another order of the same
    # arithmetic), which moves no split unless it crosses a float32 boundary.
    assert [got.scores[g] for g in docs] == pytest.approx([want[g] for g in docs], abs=1e-12)
    assert got.fold_of == fold_of
    assert [(f.fold, f.members, f.nonmembers) for f in got.folds] == [
        (0, 2, 2), (1, 2, 2), (2, 2, 2)]
    # each fold's AUC is a count of the 2 x 2 pairs ranked right, over 4: exact in quarters
    assert [f.auc for f in got.folds] == [want_auc[k] for k in range(3)]
    per = got.per_fold()
    # the mean of three quarters-multiples: exact up to one rounding of the division by 3
    assert per["auc_mean"] == pytest.approx(np.mean(list(want_auc.values())), abs=1e-15)
    assert (per["auc_min"], per["auc_max"]) == (min(want_auc.values()), max(want_auc.values()))
    assert per["folds_with_auc"] == 3
    assert [f["auc"] for f in per["folds"]] == [want_auc[k] for k in range(3)]


def test_a_fold_holding_one_class_has_no_auc_and_is_left_out_of_the_mean():
    from sklearn.metrics import roc_auc_score

    values, groups, labels = _docs(0.5, n_docs=12, n=30)
    # fold 0: members d0, d1 only; folds 1 and 2: the other four members and six non-members
    fold_of = {"d0": 0, "d1": 0, "d2": 1, "d3": 1, "d4": 2, "d5": 2,
               "d6": 1, "d7": 1, "d8": 1, "d9": 2, "d10": 2, "d11": 2}
    got = DocumentClassifier(features="aggregate", trees=15, folds=3).cross_validate(
        values, groups, labels, fold_of=fold_of)
    assert (got.folds[0].members, got.folds[0].nonmembers, got.folds[0].auc) == (2, 0, None)
    by_hand = [roc_auc_score([labels[d] for d in fold_of if fold_of[d] == k],
                             [got.scores[d] for d in fold_of if fold_of[d] == k])
               for k in (1, 2)]
    per = got.per_fold()
    # pair counts over 2 x 3 pairs (exact in sixths), mean of two: one rounding each
    assert [got.folds[1].auc, got.folds[2].auc] == pytest.approx(by_hand, abs=1e-15)
    assert per["folds_with_auc"] == 2
    assert per["auc_mean"] == pytest.approx(np.mean(by_hand), abs=1e-15)


def test_default_folds_are_a_seeded_stratified_k_fold_over_sorted_documents():
    from sklearn.model_selection import StratifiedKFold

    values, groups, labels = _docs(1.0, n_docs=10)
    clf = DocumentClassifier(features="aggregate", trees=10, folds=5, seed=3)
    got = clf.cross_validate(values, groups, labels)
    docs = sorted(groups)  # the documents in string order: d0, d1, ..., d9
    y = [labels[d] for d in docs]
    want = {}
    for k, (_, test) in enumerate(StratifiedKFold(5, shuffle=True, random_state=3).split(
            np.zeros((10, 1)), y)):
        want.update({docs[i]: k for i in test})
    assert got.fold_of == want
    for k in range(5):  # one member and one non-member per fold
        assert sorted(labels[d] for d in want if want[d] == k) == [0, 1]
    assert clf.fold_assignment(groups, labels) == want


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
