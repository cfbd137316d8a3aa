"""A run's document level: text scores -> document scores -> metrics
over documents, and the curve of document AUC against texts per document.

Aggregations (any of them, in one run):
- `mean`: every method's document score is the mean of its texts' scores; metrics over
  all evaluated documents.
- `share` (Meeus et al. 2024, "SoK: Membership Inference Attacks on LLMs are Rushing
  Nowhere (and How to Fix It)", arXiv 2406.17975): documents split 50/50, seeded and
  stratified, into a calibration half (each method's threshold) and an evaluation half
  (metrics).
- `classifier` (Meeus et al. 2024, "Did the Neurons Read your Book?", arXiv 2310.15007):
  one row, a random forest over the documents' normalised token probabilities,
  cross-validated by document (evaluation/doc_classifier.py). Its metrics are the pooled
  out-of-fold ones (every document's probability ranked together); beside them, `per_fold`
  holds each held-out fold's AUC with their mean and range, as the authors evaluate, and
  documents.jsonl each document's fold.

The evaluated documents are those of the texts the text-level metrics are on (the test
part when validating: a validation split keeps each document on one side). Rows are keyed
"mean:<method>", "share:<method>" and "classifier". The curve (the SoK's x axis: 1, 2, 4,
... texts per document, a seeded random subset of each document's texts) recomputes each
row's document scores from the subset: `mean` and `share` with the same threshold,
`classifier` refitted on the subsets' tokens (pooled AUC, and the mean of its folds' AUCs)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from pddkit.errors import PddkitError
from pddkit.evaluation.doc_classifier import CrossValidated
from pddkit.evaluation.documents import (
    Documents,
    group_documents,
    mean_scores,
    share_level,
    share_scores,
    subsample,
    texts_per_document_steps,
)
from pddkit.evaluation.metrics import Metrics, compute_metrics

logger = logging.getLogger(__name__)

AGGREGATIONS = ("mean", "share", "classifier")
POOLED = ("pooled out-of-fold: every document's probability, each from the forest of the fold "
          "it was held out of, ranked together")
PER_FOLD = ("each fold's documents ranked by the forest fitted without them, one AUC per fold "
            "(the authors' evaluation); mean, lowest and highest over the folds")
DOC_FEATURES = ("histogram", "aggregate")  # doc_classifier.DocumentClassifier.features


@dataclass(frozen=True)
class DocumentRow:
    """One row of the document table: the document scores of one method and aggregation."""

    label: str  # "mean:mink", "share:mink" or "classifier"
    method: str  # the text-level method's label, or "classifier"
    aggregation: str
    scores: np.ndarray  # [D] float64; NaN for a document this row does not score
    evaluated: np.ndarray  # [D] bool: the documents its metrics are on
    metrics: Metrics | None
    curve: tuple[tuple[int, float], ...] = ()  # (texts per document, document AUC)
    threshold: float | None = None  # share: tau fitted on the calibration half
    params: dict = field(default_factory=dict)
    folds: CrossValidated | None = None  # classifier: each document's fold, each fold's AUC
    curve_fold_mean: tuple[float | None, ...] = ()  # classifier: per curve point, mean fold AUC

    def to_dict(self) -> dict:
        out = {"method": self.method, "aggregation": self.aggregation, "params": self.params,
               "threshold": self.threshold, "documents": int(self.evaluated.sum()),
               "metrics": None if self.metrics is None else self.metrics.to_dict(),
               "curve": [{"texts_per_document": k, "auc": a} for k, a in self.curve]}
        if self.folds is not None:
            out["metrics_are"] = POOLED
            out["per_fold"] = {**self.folds.per_fold(), "how": PER_FOLD}
            for point, m in zip(out["curve"], self.curve_fold_mean, strict=True):
                point["auc_per_fold_mean"] = m
        return out


@dataclass(frozen=True)
class DocumentLevel:
    """Documents (those of the evaluated texts), their text counts, and every row."""

    docs: Documents
    rows: tuple[DocumentRow, ...]
    aggregations: tuple[str, ...]
    calibration: np.ndarray | None = None  # [D] bool, share's calibration half
    seed: int = 0

    @property
    def labelled(self) -> bool:
        return bool(len(self.docs.labels)) and self.docs.labels.min() >= 0

    def to_dict(self) -> dict:
        sizes = self.docs.sizes
        out = {"aggregations": list(self.aggregations), "documents": len(self.docs.names),
               "texts": int(sizes.sum()),
               "texts_per_document": {"min": int(sizes.min()), "median": float(np.median(sizes)),
                                      "max": int(sizes.max())},
               "seed": self.seed,
               "rows": {r.label: r.to_dict() for r in self.rows}}
        if self.labelled:
            out["members"] = int((self.docs.labels == 1).sum())
            out["nonmembers"] = int((self.docs.labels == 0).sum())
        if self.calibration is not None:
            out["calibration_documents"] = int(self.calibration.sum())
            out["evaluation_documents"] = int((~self.calibration).sum())
        return out

    def jsonl_rows(self) -> list[dict]:
        """documents.jsonl: one row per document (group, label, texts, share's half, and
        each row's score, null where the row does not score the document)."""
        out = []
        for d, name in enumerate(self.docs.names):
            row = {"group": name, "label": int(self.docs.labels[d]) if self.labelled else None,
                   "texts": int(self.docs.sizes[d])}
            if self.calibration is not None:
                row["split"] = "calibration" if self.calibration[d] else "evaluation"
            for r in self.rows:
                s = float(r.scores[d])
                row[r.label] = s if np.isfinite(s) else None
                if r.folds is not None:  # the fold whose forest scored it
                    row[f"{r.label}_fold"] = r.folds.fold_of.get(name)
            out.append(row)
        return out


def check_aggregations(aggregations: Sequence[str]) -> tuple[str, ...]:
    """The requested aggregations in canonical order; one sentence for an unknown one."""
    wrong = [a for a in aggregations if a not in AGGREGATIONS]
    if wrong:
        raise PddkitError(f"`documents` must name some of {', '.join(AGGREGATIONS)}, not "
                          f"{wrong[0]!r}")
    return tuple(a for a in AGGREGATIONS if a in aggregations)


def document_level(method_scores: dict[str, np.ndarray], groups: Sequence[str | None],
                   labels: Sequence[int] | None, aggregations: Sequence[str], *,
                   evaluated: np.ndarray | None = None, n_bootstrap: int = 1000, seed: int = 0,
                   token_values: Callable[[np.ndarray], tuple[list, list | None]] | None = None,
                   classifier=None, curve: bool = True) -> DocumentLevel:
    """Document rows from each method's text scores ([N] each).

    `evaluated`: the indices of the texts the metrics are on (None: all). `token_values(idx)`
    gives the classifier's inputs for those texts: (per-token values [n_i] each, None) with
    a frequency table, or (log-probabilities, token ids) for frequencies counted on each
    fold's training documents; `classifier` is a doc_classifier.DocumentClassifier. Metrics
    need labels; without them only `mean` runs (document scores, no metrics)."""
    aggregations = check_aggregations(aggregations)
    idx = np.arange(len(groups)) if evaluated is None else np.asarray(evaluated)
    sub_groups = [groups[i] for i in idx]
    if labels is None:
        if aggregations != ("mean",):
            raise PddkitError("the share and classifier document levels fit on labels: "
                              "unlabelled texts get the mean only")
        docs = group_documents(sub_groups, [-1] * len(idx), labelled=False)
    else:
        docs = group_documents(sub_groups, [labels[i] for i in idx])
        n1, n0 = int((docs.labels == 1).sum()), int((docs.labels == 0).sum())
        if min(n1, n0) < 2:
            raise PddkitError(f"document-level metrics need at least 2 member and 2 non-member "
                              f"documents; the evaluated texts form {n1} member and {n0} "
                              "non-member documents")
    labelled = labels is not None
    y = docs.labels
    rows: list[DocumentRow] = []
    steps = texts_per_document_steps(int(docs.sizes.max()))

    def metrics_on(scores: np.ndarray, on: np.ndarray) -> Metrics | None:
        return compute_metrics(scores[on], y[on], n_bootstrap=n_bootstrap, seed=seed) if labelled else None

    def auc_curve(score_of: Callable[[np.ndarray], np.ndarray], full: np.ndarray,
                  on: np.ndarray):
        """(k, AUC) per step; at the last step every text is kept: the `full` scores."""
        if not (labelled and curve):
            return ()
        out = []
        for k in steps:
            s = full if k >= steps[-1] else score_of(subsample(docs, k, seed))  # [D]
            out.append((k, compute_metrics(s[on], y[on], n_bootstrap=0).auc))
        return tuple(out)

    everything = np.ones(len(docs.names), dtype=bool)
    if "mean" in aggregations:
        for label, s in method_scores.items():
            x = np.asarray(s, dtype=np.float64)[idx]  # [N'] evaluated texts
            doc_s = mean_scores(x, docs)  # [D]
            rows.append(DocumentRow(
                f"mean:{label}", label, "mean", doc_s, everything, metrics_on(doc_s, everything),
                auc_curve(lambda keep, x=x: mean_scores(x[keep], _kept(docs, keep)), doc_s,
                          everything)))
    calib = None
    if "share" in aggregations:
        y_texts = y[docs.index]  # [N'] each evaluated text's label
        for label, s in method_scores.items():
            x = np.asarray(s, dtype=np.float64)[idx]
            full, calib, tau = share_level(x, y_texts, docs, seed)
            doc_s = np.where(calib, np.nan, full)  # [D] evaluation half only
            rows.append(DocumentRow(
                f"share:{label}", label, "share", doc_s, ~calib, metrics_on(doc_s, ~calib),
                auc_curve(lambda keep, x=x, tau=tau: share_scores(x[keep], _kept(docs, keep), tau),
                          doc_s, ~calib), threshold=tau))
    if "classifier" in aggregations:
        if token_values is None or classifier is None:
            raise PddkitError("the document classifier needs the target model's token "
                              "statistics, which this run did not compute")
        values, ids = token_values(idx)  # per evaluated text, [n_i] each
        by_name = {n: int(lab) for n, lab in zip(docs.names, y)}
        names = list(docs.names)

        fits: list[CrossValidated] = []  # every fit, in order: all texts, then each curve point

        def classify(keep: np.ndarray) -> np.ndarray:
            chosen = np.flatnonzero(keep)
            fits.append(classifier.cross_validate(
                [values[i] for i in chosen], [names[docs.index[i]] for i in chosen], by_name,
                token_ids=None if ids is None else [ids[i] for i in chosen]))
            return np.array([fits[-1].scores[n] for n in names])

        doc_s = classify(np.ones(len(idx), dtype=bool))
        curve_pts = auc_curve(classify, doc_s, everything)  # refits at each k below the last
        # the curve's points in order: fits[1:] for k below the last step, the full fit last
        means = tuple(_mean_or_none(f.fold_aucs) for f in [*fits[1:], fits[0]][:len(curve_pts)])
        rows.append(DocumentRow("classifier", "classifier", "classifier", doc_s, everything,
                                metrics_on(doc_s, everything), curve_pts,
                                params=asdict(classifier), folds=fits[0],
                                curve_fold_mean=means if curve_pts else ()))
    return DocumentLevel(docs, tuple(rows), aggregations, calib, seed)


def _mean_or_none(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _kept(docs: Documents, keep: np.ndarray) -> Documents:
    """The documents with only the `keep` texts ([N'] bool); every document keeps one or more."""
    return Documents(docs.names, docs.labels, docs.index[keep])
