"""The blind baseline of a run (evaluation/blind.py), computed on a CPU thread.

It needs the texts and labels only, no model, so where the model passes leave a CPU core
idle (a GPU, a served model, a machine with many cores) the engine starts it before them
and collects it after: it then costs no wall time. On a small CPU-only machine the
forward pass uses every core and a thread beside it slows it by more than the baseline
costs (measured: 2 cores, benchmarks/run_overhead.py), so it runs after the passes.
Its scores are the same either way (the classifier is seeded and runs on one thread).
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from pddkit.data.samples import Dataset
from pddkit.engine.config import RunConfig
from pddkit.errors import PddkitError
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.results import MethodResult

logger = logging.getLogger(__name__)


class BlindJob:
    """`BlindJob.start(dataset, config, test_idx)` now, `.result(notices)` later."""

    def __init__(self, dataset: Dataset, config: RunConfig, test_idx: np.ndarray | None) -> None:
        self._args = (dataset, config, test_idx)
        self._notices: list[str] = []
        self._result: MethodResult | None = None
        self._error: BaseException | None = None
        self.seconds = 0.0
        self._thread = threading.Thread(target=self._work, name="pddkit-blind", daemon=True)

    @classmethod
    def start(cls, dataset: Dataset, config: RunConfig, test_idx: np.ndarray | None,
              background: bool | None = None) -> BlindJob:
        """Begin now on a thread when `background` (default: `beside_the_passes(config)`),
        else when `result` is asked for."""
        job = cls(dataset, config, test_idx)
        if beside_the_passes(config) if background is None else background:
            job._thread.start()
        return job

    def _work(self) -> None:
        t0 = time.perf_counter()
        try:
            self._result = blind_baseline(*self._args, self._notices)
        except BaseException as e:  # re-raised in the caller's thread by result()
            self._error = e
        self.seconds = time.perf_counter() - t0

    def result(self, notices: list[str]) -> MethodResult | None:
        """The baseline's MethodResult (None when it could not be fitted: the reason is
        added to `notices`); waits for the thread, or computes it now."""
        if self._thread.ident is None:  # not started in the background
            self._thread.start()
        self._thread.join()
        notices.extend(self._notices)
        if self._error is not None:
            raise self._error
        return self._result


MANY_CORES = 8  # a CPU-only forward pass hardly misses one core out of this many


def beside_the_passes(config: RunConfig) -> bool:
    """Whether the model passes leave a core for the baseline: a served model, a GPU or
    MPS device, or (device "auto" on an unknown machine, told without importing torch)
    at least MANY_CORES cores."""
    import os

    if config.backend != "hf":
        return True
    device = str(config.device)
    if device.startswith(("cuda", "mps", "xpu")):
        return True
    return device == "auto" and (os.cpu_count() or 1) >= MANY_CORES


def blind_baseline(dataset: Dataset, config: RunConfig, test_idx: np.ndarray | None,
                   notices: list[str]) -> MethodResult | None:
    """Out-of-fold scores of the model-free classifier for every text; its metrics on the
    test part when there is a validation split. When the data set has subsets
    (evaluation/subsets.py), the classifier is also fitted within each subset, with its
    own cross-validation on that subset's texts only, for that subset's metrics."""
    from pddkit.evaluation.subsets import breakdown, fitted_within

    labels = np.asarray(dataset.labels)
    try:
        scores, folds, grouped = _out_of_fold(dataset.samples, labels, config)
    except PddkitError as e:
        logger.warning("no blind baseline: %s", e)
        notices.append(f"no blind baseline: {e}")
        return None
    sel = slice(None) if test_idx is None else test_idx
    metrics = compute_metrics(scores[sel], labels[sel], n_bootstrap=config.n_bootstrap,
                              seed=config.seed)
    params: dict = {"folds": folds, "grouped_by_document": grouped}
    subsets = [s.subset for s in dataset.samples]
    per: dict = {}
    if breakdown(subsets):
        params["per_subset"] = "fitted within each subset (its own cross-validation)"
        per = fitted_within(subsets, labels, test_idx, lambda idx: _out_of_fold(
            tuple(dataset.samples[i] for i in idx), labels[idx], config)[0],
            config.n_bootstrap, config.seed, notices)
    return MethodResult("blind", "blind", params, scores, metrics, subsets=per)


def _out_of_fold(samples, labels: np.ndarray, config: RunConfig) -> tuple[np.ndarray, int, bool]:
    """(out-of-fold scores, folds used, grouped by document) of these texts, from the
    cache's memo when it holds them; PddkitError when they are too few to cross-validate."""
    from pddkit.evaluation.blind import BlindBaseline

    groups = [s.group for s in samples]
    use_groups = any(g is not None for g in groups)
    if use_groups:
        groups = [g if g is not None else f"sample:{s.id}" for g, s in zip(groups, samples)]
    model = BlindBaseline(seed=config.seed)
    texts = [s.text for s in samples]
    memo, key = _blind_memo(config, model, texts, labels, groups if use_groups else None)
    found = memo.get_result("blind", key) if memo is not None else None
    if found is not None:  # the same texts, labels, groups and classifier: its scores
        return found[0]["scores"], found[1]["folds"], use_groups
    scores = model.cross_val_scores(texts, labels, groups if use_groups else None)
    folds = model.n_splits_used_
    if memo is not None:
        memo.put_result("blind", key, {"scores": scores}, {"folds": folds})
    return scores, folds, use_groups


def _blind_memo(config: RunConfig, model, texts, labels, groups):
    """(the cache's memo, the key of these blind-baseline scores), or (None, None) without
    a cache. The key covers the texts, labels, groups, the classifier's hyperparameters and
    the pddkit and scikit-learn versions."""
    if not config.cache:
        return None, None
    from importlib.metadata import version as package_version
    from pathlib import Path

    from pddkit.cache.memo import Memo, result_key, text_digest
    from pddkit.version import __version__

    parts = {"texts": [text_digest(t) for t in texts], "labels": [int(v) for v in labels],
             "groups": None if groups is None else [str(g) for g in groups],
             "params": {k: v for k, v in vars(model).items() if not k.endswith("_")},
             "pddkit": __version__, "sklearn": package_version("scikit-learn")}
    return Memo(Path(config.cache).expanduser()), result_key("blind", 1, parts)
