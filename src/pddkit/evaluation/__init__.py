"""Scores -> metrics (SPEC section 4), validation, the blind baseline and result files
(section 6): numbers only; reporting/ turns them into tables and pages."""

from pddkit.evaluation.metrics import FPR_TARGETS, Interval, Metrics, compute_metrics

__all__ = ["FPR_TARGETS", "Interval", "Metrics", "compute_metrics"]
