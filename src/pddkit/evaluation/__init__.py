"""Scores -> metrics (AUC, TPR at low FPR, bootstrap intervals), validation, thresholds,
subsets, the document level and a run's results (results.py: RunResult and its
results.json form; reporting/run_files.py writes the files): numbers only; reporting/
renders them and evaluation imports nothing of it. The blind baseline is pddkit.blind; the
studies' statistics live in studies/.

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache, backends, corpus, data.builders, resources, methods and blind.
"""

from pddkit.evaluation.metrics import FPR_TARGETS, Interval, Metrics, compute_metrics

__all__ = ["FPR_TARGETS", "Interval", "Metrics", "compute_metrics"]
