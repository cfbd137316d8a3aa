"""Blind baseline (Das et al. 2024, "Blind baselines beat membership inference attacks for
foundation models"): a classifier that never looks at the model.

Five base models, stacked:
- `tfidf`: word 1-2-gram + character 3-5-gram TF-IDF, logistic regression (C from a grid);
- `bow`: a bag of words after Das et al., word 1-2-gram counts with multinomial naive Bayes
  (alpha from a grid);
- `style`: length, typography and stylometry (blind_features.STYLE_NAMES), logistic
  regression (C grid);
- `dates`: Das et al.'s date detection, the years and dates a text mentions
  (evaluation/blind_features.py), logistic regression (C from a grid);
- `neighbours`: a similarity-weighted nearest-neighbour vote on word TF-IDF (`_NeighbourVote`,
  the power p from a grid), for texts that cluster in time (one author's series, one
  event's reports).
Opt-in sixth base model `greedy` (`greedy=blind_greedy.GRID`, (min_df, k) pairs from a grid):
Das et al.'s greedy rare word selection (evaluation/blind_greedy.py). Off by default: on the
shared data it lowered WikiMIA-32/64/128/256 by 0.000-0.008 and ArxivMIA by 0.002 (all within
the CIs; benchmarks/blind_baseline.py), its signal being already in `tfidf` and `bow`.
A meta logistic regression combines the base models' scores, each standardised (their
scales differ by orders of magnitude, and an unscaled regularised fit would all but ignore
the small ones). Scores are out-of-fold
member probabilities: outer stratified k-fold (grouped by document when groups are given);
inside each outer training part, inner folds (grouped too) give every base model's
out-of-fold scores for each hyperparameter value; the value with the best inner AUC is
kept, the meta model is fitted on those inner scores, the base models are refitted on the
whole training part, and only then is the outer fold scored. Nothing is ever chosen or
fitted on the scored fold. Whether its AUC shows a shift, given the number of texts or
documents, is decided in evaluation/blind_verdict.py (above chance for its sample size, and
at least 0.55): then the data separates members from non-members without any model, so
detection AUCs on it prove little; otherwise this baseline found no shift.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import numpy as np
from scipy import sparse

from pddkit.errors import PddkitError
from pddkit.evaluation.blind_features import FoldTfidf, count_matrix, date_matrix, style_features
from pddkit.evaluation.blind_greedy import GreedyWords

logger = logging.getLogger(__name__)

MIN_PER_CLASS = 10  # `pddkit blind` refuses fewer texts per class


def require_blind_data(labels: Sequence[int | None], name: str,
                       min_per_class: int = MIN_PER_CLASS, unlabelled: str | None = None) -> None:
    """One sentence when the labels cannot support a cross-validated baseline;
    `unlabelled` says why a table gave no labels (its columns), when the loader knows."""
    if not len(labels) or any(v is None for v in labels):
        why = unlabelled or f"{name} has no labels"
        raise PddkitError(f"{why}: the blind baseline needs members (label 1) and "
                          "non-members (label 0)")
    y = np.asarray(labels)
    m, nm = int((y == 1).sum()), int((y == 0).sum())
    if m == 0 or nm == 0:
        have = "members (label 1)" if m else "non-members (label 0)"
        raise PddkitError(f"{name} has only {have}: the blind baseline needs members and "
                          "non-members")
    if min(m, nm) < min_per_class:
        raise PddkitError(f"{name} has {m} members and {nm} non-members: the blind baseline "
                          f"needs at least {min_per_class} of each")


class _Features:
    """The label-free matrices of all texts, computed once; models slice rows per fold."""

    def __init__(self, texts: list[str], max_features: int, word13: bool = False,
                 citations: bool = True) -> None:
        self.word12 = count_matrix(texts, "word", (1, 2), lowercase=True)
        self.word13 = count_matrix(texts, "word", (1, 3), lowercase=True) if word13 else None
        self.char35 = count_matrix(texts, "char_wb", (3, 5), lowercase=False)
        self.word12_bow = self.word12
        self.style = np.array([style_features(t) for t in texts])
        self.dates, self.date_names = date_matrix(texts, citations)
        self.max_features = max_features


def _liblinear_scores(X, y, Xt, C: float) -> np.ndarray:
    """Decision values on Xt of a logistic regression (liblinear, dual) fitted on (X, y)."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, solver="liblinear", dual=True, max_iter=5000,
                              random_state=0).fit(X, y).decision_function(Xt)


class _TfidfLR:
    name, param = "tfidf", "C"

    def __init__(self, feats: _Features) -> None:
        self.f = feats

    def prepare(self, train: np.ndarray):
        a = FoldTfidf(self.f.max_features).fit(self.f.word12[train])
        b = FoldTfidf(self.f.max_features).fit(self.f.char35[train])
        return lambda rows: sparse.hstack([a.transform(self.f.word12[rows]),
                                           b.transform(self.f.char35[rows])]).tocsr()

    def fit_score(self, X, y, Xt, C: float) -> np.ndarray:
        return _liblinear_scores(X, y, Xt, C)


class _BowNB:
    name, param = "bow", "alpha"

    def __init__(self, feats: _Features) -> None:
        self.f = feats

    def prepare(self, train: np.ndarray):
        keep = np.flatnonzero(np.asarray(self.f.word12_bow[train].sum(axis=0)).ravel() > 0)
        return lambda rows: self.f.word12_bow[rows][:, keep]

    def fit_score(self, X, y, Xt, alpha: float) -> np.ndarray:
        from sklearn.naive_bayes import MultinomialNB

        nb = MultinomialNB(alpha=alpha).fit(X, y)
        lp = nb.predict_joint_log_proba(Xt)
        return lp[:, 1] - lp[:, 0]


class _DatesLR:
    name, param = "dates", "C"

    def __init__(self, feats: _Features) -> None:
        self.f = feats

    def prepare(self, train: np.ndarray):
        return lambda rows: self.f.dates[rows]

    def fit_score(self, X, y, Xt, C: float) -> np.ndarray:
        return _liblinear_scores(X, y, Xt, C)


class _NeighbourVote:
    """Similarity-weighted k-nearest-neighbour vote (Dudani 1976) on word 1-2-gram TF-IDF
    (fitted on the training rows): score_i = sum over the `k` training texts j most
    cosine-similar to text i of s_ij^p * (+1 member, -1 non-member). Texts written at one
    time cluster (follow-up papers, one event's reports, one author's series); a large
    power `p` lets the few close neighbours decide, which a linear model spreads thin."""

    name, param = "neighbours", "p"
    CHUNK = 512  # scored rows per similarity block: memory [CHUNK, n_train]

    def __init__(self, feats: _Features, k: int) -> None:
        if k < 1:
            raise ValueError(f"the neighbour vote needs at least 1 neighbour, not {k}")
        self.f = feats
        self.k = k
        self._cache: tuple = (None, None, None)

    def prepare(self, train: np.ndarray):
        a = FoldTfidf(self.f.max_features).fit(self.f.word12[train])
        return lambda rows: a.transform(self.f.word12[rows])

    def _nearest(self, X, Xt) -> tuple[np.ndarray, np.ndarray]:
        """(indices, similarities) [n_test, k] of each test row's k most similar training
        rows, computed once per (X, Xt) for all values of p."""
        if self._cache[0] is X and self._cache[1] is Xt:
            return self._cache[2]
        k = min(self.k, X.shape[0])
        idx, sim = np.zeros((Xt.shape[0], k), dtype=np.int64), np.zeros((Xt.shape[0], k))
        for lo in range(0, Xt.shape[0], self.CHUNK):
            S = (Xt[lo:lo + self.CHUNK] @ X.T).toarray()                  # [chunk, n_train]
            top = np.argpartition(-S, k - 1, axis=1)[:, :k]               # [chunk, k]
            idx[lo:lo + len(S)], sim[lo:lo + len(S)] = top, np.take_along_axis(S, top, 1)
        self._cache = (X, Xt, (idx, sim))
        return idx, sim

    def fit_score(self, X, y, Xt, p: float) -> np.ndarray:
        if not p > 0:
            raise ValueError(f"the neighbour vote's power p must be positive, not {p}")
        idx, sim = self._nearest(X, Xt)
        sign = 2.0 * np.asarray(y) - 1.0
        return (np.clip(sim, 0.0, None) ** p * sign[idx]).sum(axis=1)


class _StyleLR:
    name, param = "style", "C"

    def __init__(self, feats: _Features) -> None:
        self.f = feats

    def prepare(self, train: np.ndarray):
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler().fit(self.f.style[train])
        return lambda rows: scaler.transform(self.f.style[rows])

    def fit_score(self, X, y, Xt, C: float) -> np.ndarray:
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(C=C, max_iter=2000).fit(X, y).decision_function(Xt)


def _folds(y: np.ndarray, groups: np.ndarray | None, k: int, seed: int):
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


class BlindBaseline:
    """`fit(texts, labels, groups) -> self`; `predict_proba(texts)`; `cross_val_scores(...)`.

    Grids are tuples of candidate values chosen per training part by `inner_splits`
    inner folds (an empty `greedy` or `neighbours_p` grid leaves that base model out);
    `neighbours_k` is the number of neighbours that vote; `citations` adds the newest
    cited year to the date block (blind_features.citation_years); `meta_C` is the meta
    logistic regression's inverse regularisation.
    """

    def __init__(self, n_splits: int = 5, inner_splits: int = 4,
                 tfidf_C: tuple[float, ...] = (1.0, 10.0),
                 bow_alpha: tuple[float, ...] = (0.1, 1.0),
                 dates_C: tuple[float, ...] = (0.1, 1.0),
                 style_C: tuple[float, ...] = (0.1, 1.0),
                 neighbours_p: tuple[float, ...] = (2.0, 4.0, 8.0), neighbours_k: int = 50,
                 greedy: tuple[tuple[int, int], ...] = (),
                 citations: bool = True,
                 meta_C: float = 1.0, max_features: int = 50000, seed: int = 0) -> None:
        self.n_splits = n_splits
        self.inner_splits = inner_splits
        self.tfidf_C = tfidf_C
        self.bow_alpha = bow_alpha
        self.dates_C = dates_C
        self.style_C = style_C
        self.neighbours_p = neighbours_p
        self.neighbours_k = neighbours_k
        self.greedy = greedy
        self.citations = citations
        self.meta_C = meta_C
        self.max_features = max_features
        self.seed = seed

    # -- one training part ------------------------------------------------------------------
    def _models(self, feats: _Features):
        models = [(_TfidfLR(feats), self.tfidf_C), (_BowNB(feats), self.bow_alpha),
                  (_DatesLR(feats), self.dates_C), (_StyleLR(feats), self.style_C)]
        if self.neighbours_p:
            models.append((_NeighbourVote(feats, self.neighbours_k), self.neighbours_p))
        if self.greedy:
            models.append((GreedyWords(feats.word13, self.greedy), self.greedy))
        return models

    def _features(self, texts: list[str]) -> _Features:
        return _Features(texts, self.max_features, word13=bool(self.greedy),
                         citations=self.citations)

    def _fit_part(self, feats: _Features, y: np.ndarray, train: np.ndarray,
                  groups: np.ndarray | None):
        """Choose each base model's hyperparameter and fit the meta model on inner folds of
        `train` only; returns (chosen values, meta model, base models fitted on `train`)."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.metrics import roc_auc_score
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        yt = y[train]
        inner = _folds(yt, None if groups is None else groups[train], self.inner_splits,
                       self.seed + 1)
        models = self._models(feats)
        chosen: dict[str, object] = {}
        meta = None
        if inner is not None:
            oof = {m.name: np.zeros((len(grid), len(train))) for m, grid in models}
            for itr, ite in inner:
                for m, grid in models:
                    make = m.prepare(train[itr])
                    X, Xt = make(train[itr]), make(train[ite])
                    for j, v in enumerate(grid):
                        oof[m.name][j, ite] = m.fit_score(X, yt[itr], Xt, v)
            Z = []
            for m, grid in models:
                aucs = [roc_auc_score(yt, s) for s in oof[m.name]]
                j = int(np.argmax(aucs))
                chosen[m.name] = grid[j]
                Z.append(oof[m.name][j])
            meta = make_pipeline(StandardScaler(), LogisticRegression(C=self.meta_C, max_iter=2000)
                                 ).fit(np.stack(Z, 1), yt)
        else:  # too few texts for inner folds: first grid values, mean of the raw scores
            chosen = {m.name: grid[0] for m, grid in models}
        fitted = []
        for m, _ in models:
            make = m.prepare(train)
            fitted.append((m, make, make(train), chosen[m.name]))
        return chosen, meta, fitted, yt

    @staticmethod
    def _score(part, rows: np.ndarray) -> np.ndarray:
        _chosen, meta, fitted, yt = part
        Z = np.stack([m.fit_score(X, yt, make(rows), v) for m, make, X, v in fitted], 1)
        if meta is None:
            return 1.0 / (1.0 + np.exp(-Z.mean(axis=1)))
        return meta.predict_proba(Z)[:, 1]

    # -- public interface -------------------------------------------------------------------
    def fit(self, texts: Sequence[str], labels: Sequence[int],
            groups: Sequence[str] | None = None) -> BlindBaseline:
        """Fit on all given texts (hyperparameters chosen by inner folds of them)."""
        self.texts_ = list(texts)
        y = np.asarray(labels)
        feats = self._features(self.texts_)
        g = None if groups is None else np.asarray(groups)
        self.part_ = self._fit_part(feats, y, np.arange(len(y)), g)
        self.chosen_ = self.part_[0]
        return self

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Member probabilities of new texts. Counts are taken over training and new texts
        together (label-free); the base models are refitted on the training rows with the
        chosen hyperparameters and see only the training texts' vocabulary."""
        texts = list(texts)
        n = len(self.texts_)
        feats = self._features(self.texts_ + texts)
        chosen, meta, _, yt = self.part_
        train = np.arange(n)
        fitted = []
        for m, _grid in self._models(feats):
            make = m.prepare(train)
            fitted.append((m, make, make(train), chosen[m.name]))
        return self._score((chosen, meta, fitted, yt), np.arange(n, n + len(texts)))

    def cross_val_scores(self, texts: Sequence[str], labels: Sequence[int],
                         groups: Sequence[str] | None = None,
                         splits: Iterable[tuple[np.ndarray, np.ndarray]] | None = None
                         ) -> np.ndarray:
        """Out-of-fold member probabilities [n]: each text scored by models fitted, and
        hyperparameters chosen, without it (nor, with groups, any text of its document).
        `splits` overrides the outer folds."""
        y = np.asarray(labels)
        texts = list(texts)
        g = None if groups is None else np.asarray(groups)
        folds = list(splits) if splits is not None else _folds(y, g, self.n_splits, self.seed)
        if folds is None:
            raise PddkitError("the blind baseline needs at least 2 members and 2 non-members "
                              "(2 documents of each with groups)")
        feats = self._features(texts)
        scores = np.full(len(texts), np.nan)
        self.chosen_per_fold_ = []
        for train, test in folds:
            part = self._fit_part(feats, y, np.asarray(train), g)
            scores[test] = self._score(part, np.asarray(test))
            self.chosen_per_fold_.append(part[0])
        self.n_splits_used_ = len(folds)
        return scores
