import numpy as np
import pytest

from pddkit.errors import PddkitError
from pddkit.evaluation.doc_classifier import DocumentClassifier


def _docs(shift: float, n_docs: int = 20, seed: int = 0):
    rng = np.random.default_rng(seed)
    values = [rng.normal(shift if d < n_docs // 2 else 0.0, 1.0, 40) for d in range(n_docs)]
    groups = [f"d{d}" for d in range(n_docs)]
    labels = {f"d{d}": int(d < n_docs // 2) for d in range(n_docs)}
    return values, groups, labels


@pytest.mark.slow
def test_separable_documents_score_members_higher_and_deterministic():
    values, groups, labels = _docs(3.0)
    clf = DocumentClassifier(trees=30, folds=5, seed=1)
    scores = clf.cross_val_scores(values, groups, labels)
    members = [scores[g] for g in groups if labels[g]]
    others = [scores[g] for g in groups if not labels[g]]
    assert min(members) > max(others)
    assert clf.cross_val_scores(values, groups, labels) == scores


def test_each_fold_scored_by_forest_fitted_on_the_other_fold_only():
    # Refit by hand: fold A's scores equal a forest fitted on fold B alone (labels of A flipped
    # there, so any use of A's documents in fitting would change them).
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import StratifiedKFold

    values, groups, labels = _docs(1.0, n_docs=8)
    clf = DocumentClassifier(trees=20, folds=2, seed=0)
    scores = clf.cross_val_scores(values, groups, labels)
    docs = sorted(set(groups))
    y = np.array([labels[d] for d in docs])
    vals = [values[groups.index(d)] for d in docs]
    edges = np.quantile(np.concatenate(vals), np.linspace(0, 1, clf.bins + 1))
    x = clf._features(vals, edges)
    train, test = next(StratifiedKFold(2, shuffle=True, random_state=0).split(x, y))
    forest = RandomForestClassifier(n_estimators=20, random_state=0).fit(x[train], y[train])
    expected = forest.predict_proba(x[test])[:, 1]
    assert [scores[docs[i]] for i in test] == pytest.approx(list(expected))


def test_too_few_documents_one_sentence():
    values, groups, labels = _docs(1.0, n_docs=2)
    with pytest.raises(PddkitError, match="at least 2 documents of each class"):
        DocumentClassifier(trees=5).cross_val_scores(values, groups, labels)
