"""Blind baseline (Das et al. 2024, "Blind baselines beat membership inference attacks for
foundation models"): a classifier that never looks at the model.

Five base models, stacked:
- `tfidf`: word 1-2-gram + character 3-5-gram TF-IDF, logistic regression (C from a grid);
- `bow`: a bag of words after Das et al., word 1-2-gram counts with multinomial naive Bayes
  (alpha from a grid);
- `style`: length, typography and stylometry (features.STYLE_NAMES), logistic
  regression (C grid);
- `dates`: Das et al.'s date detection, the years and dates a text mentions
  (blind/features.py), logistic regression (C from a grid);
- `neighbours`: a similarity-weighted nearest-neighbour vote on word TF-IDF (`_NeighbourVote`,
  the power p from a grid), for texts that cluster in time (one author's series, one
  event's reports).
Opt-in sixth base model `greedy` (`greedy=greedy.GRID`, (min_df, k) pairs from a grid):
Das et al.'s greedy rare word selection (blind/greedy.py). Off by default: on the
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
documents, is decided in blind/verdict.py (above chance for its sample size, and
at least 0.55): then the data separates members from non-members without any model, so
detection AUCs on it prove little; otherwise this baseline found no shift.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import numpy as np

from pddkit.blind.counts import (
    FoldTfidf,
    column_totals,
    count_matrix,
    stacked_transform,
)
from pddkit.blind.features import date_matrix, style_features
from pddkit.blind.folds import folds as _folds
from pddkit.blind.folds import stratified_sample
from pddkit.blind.greedy import GreedyWords
from pddkit.blind.lean_fits import lean_sklearn, naive_bayes_log_odds, roc_auc
from pddkit.blind.neighbours import NeighbourGraph, NeighbourVote
from pddkit.blind.requirements import TOO_FEW, word_shortage
from pddkit.errors import PddkitError

_NeighbourVote = NeighbourVote  # its former name here

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


def _fit_score(model, X, y, Xt, value) -> np.ndarray:
    """`model.fit_score`, or zeros (the base model abstains) when the training rows have
    no feature column: texts whose words all fell in the other folds."""
    if getattr(X, "ndim", 1) == 2 and X.shape[1] == 0:
        return np.zeros(Xt.shape[0])
    with lean_sklearn():  # the matrices are built here: no input checks per fit
        return model.fit_score(X, y, Xt, value)


class _Features:
    """The label-free matrices of all texts, computed once; models slice rows per fold."""

    def __init__(self, texts: list[str], max_features: int, word13: bool = False,
                 citations: bool = True) -> None:
        self.word12 = count_matrix(texts, "word", (1, 2), lowercase=True)
        self.word13 = count_matrix(texts, "word", (1, 3), lowercase=True) if word13 else None
        # whole counts are exact in float32; FoldTfidf computes in float64
        self.char35 = count_matrix(texts, "char_wb", (3, 5), lowercase=False, dtype=np.float32)
        self.word12_bow = self.word12
        self.style = np.array([style_features(t) for t in texts])        # [n, len(STYLE_NAMES)]
        self.dates, self.date_names = date_matrix(texts, citations)
        self.max_features = max_features
        self.graph: NeighbourGraph | None = None  # the neighbour search, when approximate
        self._totals: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def totals(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(document frequency, total count) [V] of a count matrix's columns over all rows."""
        if name not in self._totals:
            self._totals[name] = column_totals(getattr(self, name))
        return self._totals[name]


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
        f = self.f
        a = FoldTfidf(f.max_features).fit(f.word12, train, f.totals("word12"))
        b = FoldTfidf(f.max_features).fit(f.char35, train, f.totals("char35"))
        return lambda rows: stacked_transform([(a, f.word12), (b, f.char35)], rows)

    def fit_score(self, X, y, Xt, C: float) -> np.ndarray:
        return _liblinear_scores(X, y, Xt, C)


class _BowNB:
    name, param = "bow", "alpha"

    def __init__(self, feats: _Features) -> None:
        self.f = feats

    def prepare(self, train: np.ndarray):
        keep = FoldTfidf(use_idf=False).fit(self.f.word12_bow, train,
                                            self.f.totals("word12_bow")).columns_  # in training
        return lambda rows: self.f.word12_bow[rows][:, keep]

    def fit_score(self, X, y, Xt, alpha: float) -> np.ndarray:
        return naive_bayes_log_odds(X, y, Xt, alpha)  # MultinomialNB's, to the last bit


class _DatesLR:
    name, param = "dates", "C"

    def __init__(self, feats: _Features) -> None:
        self.f = feats

    def prepare(self, train: np.ndarray):
        return lambda rows: self.f.dates[rows]

    def fit_score(self, X, y, Xt, C: float) -> np.ndarray:
        return _liblinear_scores(X, y, Xt, C)


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


class BlindBaseline:
    """`fit(texts, labels, groups) -> self`; `predict_proba(texts)`; `cross_val_scores(...)`.

    Grids are tuples of candidate values chosen per training part by `inner_splits`
    inner folds (an empty `greedy` or `neighbours_p` grid leaves that base model out);
    `neighbours_k` is the number of neighbours that vote; `citations` adds the newest
    cited year to the date block (features.citation_years); `meta_C` is the meta
    logistic regression's inverse regularisation.

    Cost (linear in the number of texts past these sizes): the neighbour search is exact
    up to `neighbours_exact_max` texts and approximate beyond (neighbours.py:
    `neighbours_candidates` per text, among terms in at most `neighbours_max_df` texts);
    a training part of more than `inner_max_texts` texts chooses hyperparameters and fits
    the meta model on inner folds of a stratified sample of that many (the neighbour vote,
    which costs only its search, still votes among the whole part), then refits the base
    models on the whole part. `max_texts` fits the baseline on a stratified sample of at
    most that many texts: out-of-fold scores there, and the other texts scored by a model
    fitted on the whole sample.
    """

    def __init__(self, n_splits: int = 5, inner_splits: int = 4,
                 tfidf_C: tuple[float, ...] = (1.0, 10.0),
                 bow_alpha: tuple[float, ...] = (0.1, 1.0),
                 dates_C: tuple[float, ...] = (0.1, 1.0),
                 style_C: tuple[float, ...] = (0.1, 1.0),
                 neighbours_p: tuple[float, ...] = (2.0, 4.0, 8.0), neighbours_k: int = 50,
                 greedy: tuple[tuple[int, int], ...] = (),
                 citations: bool = True,
                 meta_C: float = 1.0, max_features: int = 50000, seed: int = 0,
                 neighbours_exact_max: int = 5000, neighbours_candidates: int = 150,
                 neighbours_max_df: int = 300, inner_max_texts: int = 8000,
                 max_texts: int | None = None) -> None:
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
        self.neighbours_exact_max = neighbours_exact_max
        self.neighbours_candidates = neighbours_candidates
        self.neighbours_max_df = neighbours_max_df
        self.inner_max_texts = inner_max_texts
        self.max_texts = max_texts

    # -- one training part ------------------------------------------------------------------
    def _models(self, feats: _Features):
        models = [(_TfidfLR(feats), self.tfidf_C), (_BowNB(feats), self.bow_alpha),
                  (_DatesLR(feats), self.dates_C), (_StyleLR(feats), self.style_C)]
        if self.neighbours_p:
            models.append((NeighbourVote(feats, self.neighbours_k), self.neighbours_p))
        if self.greedy:
            models.append((GreedyWords(feats.word13, self.greedy), self.greedy))
        return models

    def _features(self, texts: list[str]) -> _Features:
        why = word_shortage(texts)
        if why is not None:
            raise PddkitError(why)
        return _Features(texts, self.max_features, word13=bool(self.greedy),
                         citations=self.citations)

    def _search(self, feats: _Features, pool: np.ndarray) -> None:
        """The neighbour search over `pool` (the texts that may vote): exact per fold up to
        `neighbours_exact_max` of them, else one approximate graph for all folds."""
        feats.graph = None
        self.neighbour_search_ = "exact"
        if self.neighbours_p and len(pool) > self.neighbours_exact_max:
            whole = len(pool) == feats.word12.shape[0]
            feats.graph = NeighbourGraph(self.neighbours_candidates, self.neighbours_max_df,
                                         self.max_features).fit(
                feats.word12, None if whole else pool, feats.totals("word12"))
            self.neighbour_search_ = (f"approximate ({self.neighbours_candidates} candidates, "
                                      f"terms in at most {self.neighbours_max_df} texts)")

    def _fit_part(self, feats: _Features, y: np.ndarray, train: np.ndarray,
                  groups: np.ndarray | None):
        """Choose each base model's hyperparameter and fit the meta model on inner folds of
        `train` only (of a stratified sample of it past `inner_max_texts`); returns (chosen
        values, meta model, base models fitted on `train`, their labels)."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        yt = y[train]
        gt = None if groups is None else groups[train]
        sub = train
        if len(train) > self.inner_max_texts:
            sub = train[stratified_sample(yt, gt, self.inner_max_texts, self.seed + 2)]
        ys = y[sub]
        inner = _folds(ys, None if groups is None else groups[sub], self.inner_splits,
                       self.seed + 1)
        models = self._models(feats)
        chosen: dict[str, object] = {}
        meta = None
        if inner is not None:
            oof = {m.name: np.zeros((len(grid), len(sub))) for m, grid in models}
            for itr, ite in inner:
                for m, grid in models:
                    rows = sub[itr]
                    if isinstance(m, NeighbourVote) and len(sub) < len(train):
                        rows = np.setdiff1d(train, sub[ite])  # the whole part votes
                    make = m.prepare(rows)
                    X, Xt = make(rows), make(sub[ite])
                    for j, v in enumerate(grid):
                        oof[m.name][j, ite] = _fit_score(m, X, y[rows], Xt, v)
            Z = []
            for m, grid in models:
                aucs = [roc_auc(ys, s) for s in oof[m.name]]
                j = int(np.argmax(aucs))
                chosen[m.name] = grid[j]
                Z.append(oof[m.name][j])
            with lean_sklearn():
                meta = make_pipeline(StandardScaler(),
                                     LogisticRegression(C=self.meta_C, max_iter=2000)
                                     ).fit(np.stack(Z, 1), ys)              # Z: [n_sub, models]
        else:  # too few texts for inner folds: first grid values, mean of the raw scores
            chosen = {m.name: grid[0] for m, grid in models}
        fitted = [(m, train, chosen[m.name]) for m, _ in models]
        return chosen, meta, fitted, yt

    @staticmethod
    def _score(part, rows: np.ndarray) -> np.ndarray:
        """Member probabilities of `rows` from a part's base models, each fitted on the
        part's training rows now (one model's matrices in memory at a time)."""
        _chosen, meta, fitted, yt = part
        Z = []
        for m, train, v in fitted:
            make = m.prepare(train)
            Z.append(_fit_score(m, make(train), yt, make(rows), v))
        Z = np.stack(Z, 1)                                                  # [n_rows, models]
        if meta is None:
            return 1.0 / (1.0 + np.exp(-Z.mean(axis=1)))
        with lean_sklearn():
            return meta.predict_proba(Z)[:, 1]

    # -- public interface -------------------------------------------------------------------
    def fit(self, texts: Sequence[str], labels: Sequence[int],
            groups: Sequence[str] | None = None) -> BlindBaseline:
        """Fit on all given texts (on a stratified sample of `max_texts` of them when there
        are more; hyperparameters chosen by inner folds of them)."""
        texts, y = list(texts), np.asarray(labels)
        g = None if groups is None else np.asarray(groups)
        keep = np.arange(len(y))
        if self.max_texts is not None:
            keep = stratified_sample(y, g, self.max_texts, self.seed)
        self.texts_ = [texts[i] for i in keep]
        y, g = y[keep], None if g is None else g[keep]
        feats = self._features(self.texts_)
        self._search(feats, np.arange(len(y)))
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
        train = np.arange(n)
        self._search(feats, train)
        chosen, meta, _, yt = self.part_
        fitted = [(m, train, chosen[m.name]) for m, _grid in self._models(feats)]
        return self._score((chosen, meta, fitted, yt), np.arange(n, n + len(texts)))

    def cross_val_scores(self, texts: Sequence[str], labels: Sequence[int],
                         groups: Sequence[str] | None = None,
                         splits: Iterable[tuple[np.ndarray, np.ndarray]] | None = None
                         ) -> np.ndarray:
        """Member probabilities [n], each text scored by models fitted, and hyperparameters
        chosen, without it (nor, with groups, any text of its document): out-of-fold, or,
        past `max_texts` texts, out-of-fold on a stratified sample (`sample_`) and from a
        model fitted on the whole sample for the others. `splits` overrides the outer
        folds (and cannot be combined with a sample)."""
        y = np.asarray(labels)
        texts = list(texts)
        g = None if groups is None else np.asarray(groups)
        n = len(texts)
        self.sample_ = None
        on = np.arange(n)
        if self.max_texts is not None and n > self.max_texts:
            if splits is not None:
                raise ValueError("give the blind baseline its outer folds or a sample size, not both")
            on = self.sample_ = stratified_sample(y, g, self.max_texts, self.seed)
        if splits is not None:
            folds = [(np.asarray(tr), np.asarray(te)) for tr, te in splits]
        else:
            found = _folds(y[on], None if g is None else g[on], self.n_splits, self.seed)
            folds = None if found is None else [(on[tr], on[te]) for tr, te in found]
        if folds is None:
            raise PddkitError(TOO_FEW)
        feats = self._features(texts)
        self._search(feats, on)
        scores = np.full(n, np.nan)
        self.chosen_per_fold_ = []
        for train, test in folds:
            part = self._fit_part(feats, y, train, g)
            scores[test] = self._score(part, test)
            self.chosen_per_fold_.append(part[0])
        self.n_splits_used_ = len(folds)
        if self.sample_ is not None:  # the others: a model fitted on the whole sample
            rest = np.setdiff1d(np.arange(n), self.sample_)
            scores[rest] = self._score(self._fit_part(feats, y, self.sample_, g), rest)
        return scores
