"""Meeus et al.'s document classifier: "Did the Neurons Read your Book? Document-level
Membership Inference for Large Language Models" (USENIX Security 2024, arXiv 2310.15007).

Pipeline, as in the authors' code (computationalprivacy/document-level-membership-inference:
src/normalization.py, src/feature_extraction.py, src/meta_classifier.py, main.py,
config/books_128_token_freq_norm_{hist,agg}.ini, their RatioNormTF setup):

- per-token value v = -log(p(token) / f(token)) = log f(token) - log p(token), f the token's
  relative frequency (count / total tokens);
- per document, either a histogram (`features="histogram"`, their `hist_1000`): K = 1000
  equal-width bins spanning the min..max of the training documents' values
  (np.histogram(..., bins=K) edges), each document's density over those bins (values outside
  the training range fall out, as in np.histogram) - or aggregate statistics
  (`features="aggregate"`, their `simple_agg`): mean, min, max, std (ddof 0), count and the
  1, 5, 10, 25, 50, 75, 90, 95, 99th percentiles (linear interpolation);
- each feature column min-max scaled with the training documents' min and max (a column
  constant there: 0), as their scale_features (src/meta_classifier.py:41-52). Not a no-op
  for the forest: it stores features as float32, so a held-out document whose value equals
  a split's training value (frequent with histogram densities, counts over a bin width) can
  fall on the other side without it;
- a random forest of 500 trees, max_depth 5, min_samples_leaf 3, scikit-learn's other
  defaults; 5 folds balanced by label (their 5 chunks of equally many members and
  non-members): train on 4, score the held-out one. Everything fitted - the frequency table
  when counted from the documents (`token_ids`), the histogram edges, the forest - sees the
  training folds only, so no document is ever scored by anything fitted with it.

AUC, two ways, both kept (`cross_validate`): the authors compute one AUC per held-out chunk,
the forest of that fold ranking that chunk's documents (src/meta_classifier.py:28,
`validate_clf`'s test_auc, kept per fold by main.py:93-126, `results_per_fold[i]`); pddkit
gives their mean and range over the folds (`CrossValidated.per_fold`). The pooled out-of-fold AUC ranks
every document's probability together, though each comes from another forest (five forests
whose probabilities need not share a scale); it is what the document table's metrics and
bootstrap intervals are computed on, labelled as pooled wherever it is shown.

Where pddkit differs from the authors' code, and why:
- frequency table given (`token_values(stats, log_freq)`): pddkit's table (shared with
  DC-PDD) is add-one smoothed, so unseen tokens get 1 / (N + |V|); the authors
  give tokens missing from their table half the smallest frequency. Without a table, pass
  `token_ids` for the authors' per-fold counts over the training documents (unseen tokens:
  half the smallest frequency, as theirs); pddkit counts the tokens of the texts it scores
  (the documents' texts as given, cut by `split_words`/`max_texts` and the context), where
  the authors count every token of the whole training documents;
- folds: seeded StratifiedKFold over documents (or a given `fold_of`) instead of their
  pre-drawn chunk files, and fewer folds with a warning when a class has fewer than 5
  documents; the forest is seeded (theirs is unseeded), so scores are reproducible;
- a document with no value inside the training range gets an all-zero histogram (numpy would
  give 0/0 = NaN, which their forest cannot take); their non-finite per-token values become
  1e-5, as here (with a warning);
- not implemented: their MaxNorm (needs each position's top probability), general-probability
  normalisation and the logistic-regression / MLP meta-classifiers (the paper reports the
  forest).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)
AGGREGATE_NAMES = ("mean", "min", "max", "std", "count", *(f"p{q}" for q in PERCENTILES))
NON_FINITE_VALUE = 1e-5  # the authors' replacement for a NaN or infinite per-token value


def token_values(stats, log_freq: np.ndarray) -> list[np.ndarray]:
    """Per text, the [n_i] values log f(id) - L (the authors' -log(p / f)).

    `stats`: objects with `.L` ([n_i] log-probabilities) and `.ids` ([n_i] token ids).
    `log_freq`: [|V|] log frequencies of a table (without one, `cross_val_scores` with
    `token_ids` counts them on each fold's training documents, as the authors do).
    """
    return [_finite(log_freq[s.ids] - s.L.astype(np.float64)) for s in stats]  # each [n_i]


def _finite(v: np.ndarray) -> np.ndarray:
    bad = ~np.isfinite(v)  # [n]
    if bad.any():
        logger.warning("document classifier: %d non-finite token values set to %g",
                       int(bad.sum()), NON_FINITE_VALUE)
        v = np.where(bad, NON_FINITE_VALUE, v)
    return v


def train_log_freq(train_ids: Sequence[np.ndarray], vocab: int) -> np.ndarray:
    """[vocab] log f over the training documents' ids; unseen ids get half the smallest f."""
    counts = np.bincount(np.concatenate([np.asarray(i, dtype=np.int64) for i in train_ids]),
                         minlength=vocab).astype(np.float64)  # [V]
    freq = counts / counts.sum()  # [V]
    freq[counts == 0] = freq[counts > 0].min() / 2.0
    return np.log(freq)


def histogram_edges(train_values: Sequence[np.ndarray], bins: int) -> np.ndarray:
    """[bins + 1] equal-width edges over the min..max of the training documents' values."""
    return np.histogram_bin_edges(np.concatenate(train_values), bins=bins)


def histogram_features(values: Sequence[np.ndarray], edges: np.ndarray) -> np.ndarray:
    """[D, bins] density of each document's values over `edges` (values outside dropped)."""
    widths = np.diff(edges)  # [bins]
    rows = []
    for v in values:  # v: [n] one document's values
        counts, _ = np.histogram(v, bins=edges)  # [bins]
        inside = counts.sum()
        rows.append(counts / (inside * widths) if inside else np.zeros(len(widths)))
    return np.asarray(rows, dtype=np.float64)  # [D, bins]


def aggregate_features(values: Sequence[np.ndarray]) -> np.ndarray:
    """[D, 14] mean, min, max, std, count and the PERCENTILES of each document's values."""
    rows = [[v.mean(), v.min(), v.max(), v.std(), float(len(v)), *np.percentile(v, PERCENTILES)]
            for v in values]  # each v: [n]
    return np.asarray(rows, dtype=np.float64)  # [D, 14]


def scale_features(x_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """([D_train, F], [D_test, F]) with each column mapped by (x - min) / (max - min) of its
    training values; a column constant on the training documents is 0 in both."""
    lo, hi = x_train.min(axis=0), x_train.max(axis=0)  # [F] each
    span = hi - lo  # [F]
    flat = span == 0
    span = np.where(flat, 1.0, span)
    return (np.where(flat, 0.0, (x_train - lo) / span),  # [D_train, F]
            np.where(flat, 0.0, (x_test - lo) / span))  # [D_test, F]


@dataclass(frozen=True)
class FoldAUC:
    """One held-out fold: its documents of each class and the AUC of its own forest's
    probabilities over them (None when the fold holds one class only)."""

    fold: int
    members: int
    nonmembers: int
    auc: float | None


@dataclass(frozen=True)
class CrossValidated:
    """What `cross_validate` returns: each document's out-of-fold probability of "member",
    the fold it was held out in, and each fold's AUC (the authors' evaluation)."""

    scores: dict[str, float]  # document -> probability from the forest of its held-out fold
    fold_of: dict[str, int]  # document -> its fold
    folds: tuple[FoldAUC, ...]  # in fold order

    @property
    def fold_aucs(self) -> list[float]:
        """The AUCs of the folds that hold both classes."""
        return [f.auc for f in self.folds if f.auc is not None]

    def per_fold(self) -> dict:
        """results.json's per-fold block: mean, min and max of the fold AUCs, and each fold."""
        a = self.fold_aucs
        return {"auc_mean": float(np.mean(a)) if a else None,
                "auc_min": min(a) if a else None, "auc_max": max(a) if a else None,
                "folds_with_auc": len(a),
                "folds": [{"fold": f.fold, "members": f.members, "nonmembers": f.nonmembers,
                           "auc": f.auc} for f in self.folds]}


def fold_aucs(scores: np.ndarray, y: np.ndarray, fold: np.ndarray) -> tuple[FoldAUC, ...]:
    """Per fold k (sorted), the AUC of `scores` [D] against `y` [D] over the documents with
    fold == k: the authors' AUC of one held-out chunk."""
    from pddkit.evaluation.metrics import compute_metrics

    out = []
    for k in np.unique(fold):
        on = fold == k  # [D]
        n1, n0 = int((y[on] == 1).sum()), int((y[on] == 0).sum())
        auc = (compute_metrics(scores[on], y[on], n_bootstrap=0).auc if n1 and n0 else None)
        out.append(FoldAUC(int(k), n1, n0, auc))
    return tuple(out)


@dataclass(frozen=True)
class DocumentClassifier:
    """Random forest over per-document features; out-of-fold member probability per document.

    Defaults are the authors' books configuration (RatioNormTF, `hist_1000`, their forest).
    """

    features: str = "histogram"  # "histogram" (their hist_K) or "aggregate" (their simple_agg)
    bins: int = 1000
    trees: int = 500
    max_depth: int | None = 5
    min_samples_leaf: int = 3
    folds: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.features not in ("histogram", "aggregate"):
            raise PddkitError(f"document classifier features must be 'histogram' or "
                              f"'aggregate', not {self.features!r}")
        if self.bins < 1 or self.trees < 1 or self.min_samples_leaf < 1 or self.folds < 2:
            raise PddkitError("document classifier needs bins, trees and min_samples_leaf of "
                              "at least 1 and at least 2 folds")

    def fold_assignment(self, groups: Sequence[str],
                        labels_by_group: Mapping[str, int]) -> dict[str, int]:
        """The fold of every document that `cross_val_scores` uses when given no `fold_of`."""
        from sklearn.model_selection import StratifiedKFold

        docs = sorted(set(groups))
        y = self._labels(docs, labels_by_group)  # [D]
        smallest = min(int((y == 1).sum()), int((y == 0).sum()))
        if smallest < 2:
            raise PddkitError("the document classifier needs at least 2 documents of each class")
        k = min(self.folds, smallest)
        if k < self.folds:
            logger.warning("document classifier: %d folds instead of %d (too few documents)",
                           k, self.folds)
        fold = np.zeros(len(docs), dtype=np.int64)  # [D]
        cv = StratifiedKFold(n_splits=k, shuffle=True, random_state=self.seed)
        for i, (_, test) in enumerate(cv.split(np.zeros((len(docs), 1)), y)):
            fold[test] = i
        return {d: int(f) for d, f in zip(docs, fold, strict=True)}

    def cross_val_scores(self, token_values: Sequence[np.ndarray], groups: Sequence[str],
                         labels_by_group: Mapping[str, int], *,
                         fold_of: Mapping[str, int] | None = None,
                         token_ids: Sequence[np.ndarray] | None = None) -> dict[str, float]:
        """Out-of-fold probability of "member" for every document (`cross_validate`'s
        scores; its arguments)."""
        return self.cross_validate(token_values, groups, labels_by_group, fold_of=fold_of,
                                   token_ids=token_ids).scores

    def cross_validate(self, token_values: Sequence[np.ndarray], groups: Sequence[str],
                       labels_by_group: Mapping[str, int], *,
                       fold_of: Mapping[str, int] | None = None,
                       token_ids: Sequence[np.ndarray] | None = None) -> CrossValidated:
        """Out-of-fold probability of "member" for every document, its fold, and each
        fold's AUC.

        `token_values`: per text, [n_i] values (from `token_values(stats, log_freq)`), or, when
        `token_ids` is given, the texts' [n_i] log-probabilities L, normalised per fold with
        token frequencies counted over that fold's training documents (the authors' main.py).
        `groups`: per text, its document. `fold_of`: a document -> fold map to reuse (default:
        `fold_assignment`); a document is scored only by the forest of the fold it is in.
        """
        from sklearn.ensemble import RandomForestClassifier

        if len(token_values) != len(groups) or (token_ids is not None
                                                and len(token_ids) != len(groups)):
            raise PddkitError("the document classifier needs one group (and one id array, if "
                              "given) per text's token values")
        docs = sorted(set(groups))
        y = self._labels(docs, labels_by_group)  # [D]
        if fold_of is None:
            fold_of = self.fold_assignment(groups, labels_by_group)
        fold = self._check_folds(docs, y, fold_of)  # [D]
        values = self._by_document(docs, groups, token_values)  # D x [n_d]
        ids = None if token_ids is None else self._by_document(docs, groups, token_ids)
        if ids is None:
            values = [_finite(v.astype(np.float64)) for v in values]  # D x [n_d]
        vocab = 0 if ids is None else 1 + max(int(i.max()) for i in ids if len(i))
        scores = np.zeros(len(docs))  # [D]
        for k in np.unique(fold):
            test, train = np.flatnonzero(fold == k), np.flatnonzero(fold != k)  # [D_k], [D-D_k]
            vals = values
            if ids is not None:
                log_freq = train_log_freq([ids[i] for i in train], vocab)  # [V]
                vals = [_finite(log_freq[i] - v) for i, v in zip(ids, values, strict=True)]
            x_train, x_test = self._features([vals[i] for i in train], [vals[i] for i in test])
            forest = RandomForestClassifier(
                n_estimators=self.trees, max_depth=self.max_depth,
                min_samples_leaf=self.min_samples_leaf, random_state=self.seed)
            forest.fit(x_train, y[train])  # x_train: [D-D_k, F]
            scores[test] = forest.predict_proba(x_test)[:, 1]  # x_test: [D_k, F]
        logger.info("document classifier: %d documents, %d folds, %s features", len(docs),
                    len(np.unique(fold)), self.features)
        return CrossValidated({d: float(s) for d, s in zip(docs, scores, strict=True)},
                              {d: int(k) for d, k in zip(docs, fold, strict=True)},
                              fold_aucs(scores, y, fold))

    def _features(self, train: list[np.ndarray],
                  test: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """([D_train, F], [D_test, F]), min-max scaled with the training documents' columns;
        histogram edges from the training documents only."""
        if self.features == "aggregate":
            return scale_features(aggregate_features(train), aggregate_features(test))
        edges = histogram_edges(train, self.bins)  # [bins + 1]
        return scale_features(histogram_features(train, edges), histogram_features(test, edges))

    @staticmethod
    def _labels(docs: list[str], labels_by_group: Mapping[str, int]) -> np.ndarray:
        missing = [d for d in docs if d not in labels_by_group]
        if missing:
            raise PddkitError(f"document {missing[0]!r} has no label for the document classifier")
        y = np.array([int(labels_by_group[d]) for d in docs], dtype=np.int64)  # [D]
        if not np.isin(y, (0, 1)).all():
            raise PddkitError("document classifier labels must be 0 (non-member) or 1 (member)")
        return y

    @staticmethod
    def _check_folds(docs: list[str], y: np.ndarray, fold_of: Mapping[str, int]) -> np.ndarray:
        missing = [d for d in docs if d not in fold_of]
        if missing:
            raise PddkitError(f"document {missing[0]!r} has no fold in fold_of")
        fold = np.array([int(fold_of[d]) for d in docs], dtype=np.int64)  # [D]
        if len(np.unique(fold)) < 2:
            raise PddkitError("the document classifier needs at least 2 folds in fold_of")
        for k in np.unique(fold):
            if len(np.unique(y[fold != k])) < 2:
                raise PddkitError(f"the documents outside fold {k} hold only one class, so no "
                                  "classifier can be fitted to score that fold")
        return fold

    @staticmethod
    def _by_document(docs: list[str], groups: Sequence[str],
                     arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Per document, the concatenation of its texts' arrays (text order kept)."""
        parts: dict[str, list[np.ndarray]] = {d: [] for d in docs}
        for a, g in zip(arrays, groups, strict=True):
            parts[g].append(np.asarray(a))
        out = [np.concatenate(parts[d]) for d in docs]  # D x [n_d]
        empty = [d for d, a in zip(docs, out, strict=True) if not len(a)]
        if empty:
            raise PddkitError(f"document {empty[0]!r} has no token values for the classifier")
        return out
