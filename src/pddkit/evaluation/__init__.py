"""Scores -> metrics (SPEC section 4), result files (section 6) and readable reports."""

from pddkit.evaluation.metrics import FPR_TARGETS, Interval, Metrics, compute_metrics

__all__ = ["FPR_TARGETS", "Interval", "Metrics", "compute_metrics"]
