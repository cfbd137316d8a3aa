"""Scores -> metrics (AUC, TPR at low FPR, bootstrap intervals), validation, the blind
baseline and result files (results.json, scores.jsonl): numbers only; reporting/ turns them
into tables and pages."""

from pddkit.evaluation.metrics import FPR_TARGETS, Interval, Metrics, compute_metrics

__all__ = ["FPR_TARGETS", "Interval", "Metrics", "compute_metrics"]
