"""`pddkit blind`: the blind baseline alone, with no model, to check a data set for a
distribution shift between members and non-members before spending GPU hours on it."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import numpy as np

from pddkit.blind.baseline import BlindBaseline, require_blind_data
from pddkit.blind.verdict import check_max_texts, with_sample
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.results import MethodResult, RunResult
from pddkit.evaluation.subsets import breakdown, fitted_within, run_units

if TYPE_CHECKING:
    from pddkit.data.sources import DataSource

logger = logging.getLogger(__name__)


def blind_result(dataset, seed: int = 0, n_bootstrap: int = 1000,
                 max_texts: int | None = None) -> RunResult:
    """Out-of-fold blind-baseline scores and metrics of a labelled Dataset, as a RunResult
    with one method, `blind` (so results.json / scores.jsonl / reports work as for `run`);
    `max_texts`: fitted on a stratified sample of that many texts (BlindBaseline)."""
    from pddkit.provenance import Provenance, now

    started = now()
    check_max_texts(max_texts)
    require_blind_data([s.label for s in dataset.samples], dataset.name,
                       unlabelled=dataset.meta.get("unlabelled"))
    groups = [s.group for s in dataset.samples]
    use_groups = any(g is not None for g in groups)
    if use_groups:
        groups = [g if g is not None else f"sample:{s.id}" for g, s in zip(groups, dataset.samples)]
    texts = [s.text for s in dataset.samples]
    labels = np.asarray(dataset.labels)
    model = BlindBaseline(seed=seed, max_texts=max_texts)
    t0 = time.perf_counter()
    scores = model.cross_val_scores(texts, labels, groups if use_groups else None)
    metrics = compute_metrics(scores, labels, n_bootstrap=n_bootstrap, seed=seed)
    params = {"folds": model.n_splits_used_, "grouped_by_document": use_groups,
              "chosen_per_fold": model.chosen_per_fold_,
              "neighbour_search": model.neighbour_search_}
    subsets = [s.subset for s in dataset.samples]
    params.update(run_units(labels, groups if use_groups else None, None, subsets))
    if model.sample_ is not None:
        params["sample"] = {"texts": len(model.sample_), "of": len(texts)}
        params["units"] = with_sample(params.get("units"), labels, params["sample"])
    notices: list[str] = []
    per: dict = {}
    if breakdown(subsets):  # fitted within each subset, its own cross-validation
        params["per_subset"] = "fitted within each subset (its own cross-validation)"
        per = fitted_within(subsets, labels, None, lambda idx: BlindBaseline(
                                seed=seed, max_texts=max_texts).cross_val_scores(
                                    [texts[i] for i in idx], labels[idx],
                                    [groups[i] for i in idx] if use_groups else None),
                            n_bootstrap, seed, notices)
    seconds = time.perf_counter() - t0
    config = {"command": "blind", "data": dataset.name, "seed": seed, "n_bootstrap": n_bootstrap,
              "blind": {"n_splits": model.n_splits, "inner_splits": model.inner_splits,
                        "tfidf_C": list(model.tfidf_C), "bow_alpha": list(model.bow_alpha),
                        "dates_C": list(model.dates_C), "style_C": list(model.style_C),
                        "neighbours_p": list(model.neighbours_p),
                        "neighbours_k": model.neighbours_k,
                        "greedy": [list(v) for v in model.greedy],
                        "citations": model.citations,
                        "meta_C": model.meta_C, "max_features": model.max_features,
                        "neighbours_exact_max": model.neighbours_exact_max,
                        "neighbours_candidates": model.neighbours_candidates,
                        "neighbours_max_df": model.neighbours_max_df,
                        "inner_max_texts": model.inner_max_texts,
                        "max_texts": model.max_texts}}
    return RunResult(ids=tuple(s.id for s in dataset.samples), labels=tuple(int(v) for v in labels),
                     methods=(MethodResult("blind", "blind", params, scores, metrics, per),),
                     config=config, counts=dataset.counts(), timings={"blind_baseline": seconds},
                     models={}, skipped=tuple((s.source, s.reason) for s in dataset.skipped),
                     notices=tuple(notices),
                     subsets=tuple(subsets) if any(x is not None for x in subsets) else None,
                     provenance=Provenance.collect(started, devices=["cpu"]))


def run_blind(source: DataSource, seed: int, n_bootstrap: int,
              max_texts: int | None = None) -> RunResult:
    """`pddkit blind`'s work: load `source`, fit the blind baseline alone (the command writes
    the result with reporting/run_files.py; reporting/terminal.py's `blind_summary` says it)."""
    check_max_texts(max_texts)  # before the data loads
    dataset = source.load()
    if dataset.skipped:
        logger.warning("left out %d invalid lines, e.g. %s: %s", len(dataset.skipped),
                       dataset.skipped[0].source, dataset.skipped[0].reason)
    return blind_result(dataset, seed=seed, n_bootstrap=n_bootstrap, max_texts=max_texts)
