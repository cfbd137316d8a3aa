"""Typed run results: the numbers of a run and their results.json form (to_dict), which
reporting/run_files.py writes with scores.jsonl and the rest."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pddkit.evaluation.metrics import Metrics


@dataclass(frozen=True)
class MethodResult:
    label: str  # column name in scores.jsonl
    method: str
    params: dict
    scores: np.ndarray  # [n_texts] float64, higher = member
    metrics: Metrics | None = None
    subsets: dict = field(default_factory=dict)  # subset name -> Metrics, None with one class


@dataclass(frozen=True)
class RunResult:
    """One run's texts, scores and metrics: what `pddkit.evaluate` (and `pddkit.score`) returns and
    `pddkit run` writes. `scores()` and `metrics()` are keyed by method label (`mink`,
    `mink:k=0.1`, `blind`); `pddkit.reporting.run_files.write_run(result, DIR)` writes
    results.json, scores.jsonl and what the methods need to be checked by hand (the reports
    are written by the CLI or `pddkit report DIR`)."""

    ids: tuple[str, ...]
    labels: tuple[int, ...] | None
    methods: tuple[MethodResult, ...]
    config: dict
    counts: dict  # samples, members, nonmembers, skipped, truncated per pass
    timings: dict  # seconds per stage
    models: dict  # role -> {name, tokenizer, device, dtype, vocab_size}
    skipped: tuple = ()  # (source, reason) pairs left out by --on-invalid skip
    notices: tuple[str, ...] = field(default_factory=tuple)
    splits: tuple[str, ...] | None = None  # "val" / "test" per text when validating
    validation: dict = field(default_factory=dict)  # label -> evaluation.validation.Validated
    neighbors: object | None = None  # resources.neighbor_sets.NeighborSets: per parameter set, per text
    probe: object | None = None  # resources.probe.LinearProbe, saved to OUTPUT/probe
    probe_validated: object | None = None  # the probe chosen on validation: OUTPUT/probe-validated
    subsets: tuple[str | None, ...] | None = None  # each text's subset (domain, field, length)
    # the audit trail of SPEC 3b methods: file name (shots.jsonl, augmentations.jsonl,
    # samples.jsonl) -> its rows, written beside scores.jsonl
    trail: dict = field(default_factory=dict)
    # the document level (SPEC 3c): evaluation.document_level.DocumentLevel, written to
    # results.json ("documents") and documents.jsonl
    documents: object | None = None
    # pddkit.provenance.Provenance: versions, git commit, device, command line, times
    provenance: object | None = None
    # the optional stages (engine/stages.py) -> {"status": pending | done | skipped |
    # failed, "reason" when skipped or failed}
    stages: dict = field(default_factory=dict)
    # folders written beside scores.jsonl: name (fsd-adapter) -> an object with save(path)
    folders: dict = field(default_factory=dict)
    # the labels checked against the training corpus (`index`): evaluation.corpus_check.
    # CorpusCheck; its columns in scores.jsonl, its counts and metrics in results.json
    corpus: object | None = None
    # columns a benchmark ships with each record (OLMo-Detect's released n-gram overlaps):
    # id -> {column: value}, written beside the scores in scores.jsonl
    record_fields: dict | None = None

    def __repr__(self) -> str:
        c = self.counts
        n = c.get("samples", len(self.ids))
        who = (f" ({c.get('members', 0)} members, {c.get('nonmembers', 0)} non-members)"
               if self.labelled else ", unlabelled")
        labels = [m.label for m in self.methods]
        return (f"<RunResult: {n} texts{who}; methods {', '.join(labels) or 'none'}"
                f"{'; metrics on the test part' if self.splits else ''}; pddkit.summary(result) "
                "for the table>")

    def subset_counts(self) -> dict:
        """Subset name -> evaluation.subsets.SubsetCount of the texts the metrics are on
        (the test part when validating); {} when there is no breakdown by subset."""
        from pddkit.evaluation.subsets import breakdown, subset_counts, subset_indices

        names = breakdown(self.subsets)
        if not names or self.labels is None:
            return {}
        test = None if not self.splits else [i for i, s in enumerate(self.splits) if s == "test"]
        return subset_counts(self.labels, subset_indices(self.subsets, names, test))

    @property
    def labelled(self) -> bool:
        """Whether the texts carried labels (else there are scores and no metrics)."""
        return self.labels is not None

    def scores(self) -> dict[str, np.ndarray]:
        """Method label -> [n_texts] scores, higher = more likely a member."""
        return {m.label: m.scores for m in self.methods}

    def metrics(self) -> dict[str, Metrics]:
        """Method label -> its Metrics (AUC, TPR at low FPR, intervals), for labelled runs; on
        the test part when validating."""
        return {m.label: m.metrics for m in self.methods if m.metrics is not None}

    @property
    def blind(self):
        """The blind baseline's verdict (None when it did not run)."""
        from pddkit.blind.verdict import verdict

        m = next((m for m in self.methods if m.label == "blind"), None)
        return None if m is None or m.metrics is None else verdict(m.metrics, m.params.get("units"))

    def best(self, key: str = "auc") -> str | None:
        """The detection method (the blind baseline excluded) best on `key`."""
        ms = {k: v for k, v in self.metrics().items() if k != "blind"}
        if not ms:
            return None
        return max(ms, key=lambda k: ms[k].auc if key == "auc" else ms[k].tpr[float(key)])

    def _blind_dict(self) -> dict | None:
        """The blind verdict; per subset too when the baseline was fitted within subsets."""
        from pddkit.blind.verdict import verdict

        if self.blind is None:
            return None
        out = self.blind.to_dict()  # its sentence: reporting/run_files.py, in results.json
        blind = next(m for m in self.methods if m.label == "blind")
        units = blind.params.get("subset_units") or {}
        if blind.subsets:
            out["subsets"] = {k: None if v is None else verdict(v, units.get(k)).to_dict()
                              for k, v in blind.subsets.items()}
        return out

    def to_dict(self) -> dict:
        """The numbers of results.json (reporting/run_files.results_json adds the blind
        baseline's sentence: the file's contents)."""
        from pddkit.provenance import provenance_dict
        from pddkit.version import __version__

        counts = self.subset_counts()
        return {
            "pddkit_version": __version__,
            "config": self.config,
            "models": self.models,
            "counts": self.counts,
            "skipped": [{"source": s, "reason": r} for s, r in self.skipped],
            "timings_s": self.timings,
            "notices": list(self.notices),
            **({"stages": self.stages} if self.stages else {}),
            "blind_baseline": self._blind_dict(),
            **({"subsets": {k: c.to_dict() for k, c in counts.items()}} if counts else {}),
            "methods": {
                m.label: {
                    "method": m.method,
                    "params": m.params,
                    "metrics": None if m.metrics is None else m.metrics.to_dict(),
                    **({"subsets": {k: None if v is None else v.to_dict()
                                    for k, v in m.subsets.items()}} if counts else {}),
                    "validation": (self.validation[m.label].to_dict()
                                   if m.label in self.validation else None),
                    **self._without_contradicted(m.label),
                }
                for m in self.methods
            },
            **({"corpus_check": self.corpus.to_dict(self.labels)} if self.corpus is not None
               else {}),
            "metrics_on": "test part" if self.splits else "all texts",
            **({"documents": self.documents.to_dict()} if self.documents is not None else {}),
            "provenance": provenance_dict(self.provenance),
        }

    def _without_contradicted(self, label: str) -> dict:
        """results.json's `metrics_without_contradicted` of a method, beside `metrics`."""
        if self.corpus is None or label not in self.corpus.metrics:
            return {}
        m = self.corpus.metrics[label]
        return {"metrics_without_contradicted": None if m is None else m.to_dict()}


def _finite(obj):
    """JSON has no NaN: an undefined interval (tiny samples) is written as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
