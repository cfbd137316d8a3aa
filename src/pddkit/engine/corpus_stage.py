"""The corpus check of a run (`index`): every text measured against an infini-gram index
of the training corpus, each label checked, and the metrics again with the contradicted
texts left out.

`open_corpus(config)` opens the index before any model loads (an index folder that is not
one, or a tokenizer other than the index's, is one sentence then); `corpus_stage` is the
optional stage (engine/stages.py) that measures the texts after the scores and adds an
evaluation.corpus_check.CorpusCheck to the result. The overlap is a property of text and
corpus: it is measured with the index's tokenizer, whatever the model's is.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import numpy as np

from pddkit.engine.config import RunConfig
from pddkit.evaluation.results import RunResult

logger = logging.getLogger(__name__)


def open_corpus(config: RunConfig):
    """The CorpusIndex of `config.index` (None without one), opened with the tokenizer its
    manifest names, or `index_tokenizer` (a public index needs it; a pddkit index refuses
    one other than its own)."""
    if not config.index:
        return None
    from pddkit.corpus.index import open_index

    # one sentence for a folder that is not an index, or a public one without its tokenizer
    index = open_index(list(config.index), tokenizer_name=config.index_tokenizer,
                       local_files_only=config.local_files_only)
    what = ("normalised as it was built" if index.info.normalize else
            "as given (the index was built without normalising)" if index.info.built_by_pddkit
            else "as given (a public index: how it was normalised is unknown)")
    logger.info("labels will be checked against index %s (tokenizer %s; texts %s)",
                index.info.name, index.tokenizer_name, what)
    return index


def corpus_stage(result: RunResult, texts: list[str], index, config: RunConfig,
                 test_idx: np.ndarray | None) -> RunResult:
    """`result` with its CorpusCheck: per text (the run's `texts`, in `ids` order) the
    overlap with the corpus and the contradicted label, and per method with metrics those
    metrics with the contradicted texts left out."""
    from pddkit.corpus.overlap import contradicted_by, measure_overlap
    from pddkit.evaluation.corpus_check import CorpusCheck, metrics_without

    t0 = time.perf_counter()
    overlaps = measure_overlap(index, texts, config.index_n)
    labels = result.labels if result.labels is not None else (None,) * len(texts)
    reasons = contradicted_by(overlaps, labels, config.max_overlap, config.whole_training_set)
    evaluated = tuple(range(len(texts))) if test_idx is None else tuple(int(i) for i in test_idx)
    metrics: dict = {}
    if result.labels is not None:
        scored = {m.label: m.scores for m in result.methods if m.metrics is not None}
        if any(reasons[i] is not None for i in evaluated):
            metrics = metrics_without(reasons, evaluated, scored, result.labels,
                                      config.n_bootstrap, config.seed)
        else:  # nothing to leave out: the same texts, the same metrics
            metrics = {m.label: m.metrics for m in result.methods if m.metrics is not None}
    check = CorpusCheck(index=index.info.name, tokenizer=index.tokenizer_name,
                        built_by_pddkit=index.info.built_by_pddkit,
                        normalize=index.info.normalize, n=config.index_n,
                        max_overlap=config.max_overlap,
                        whole_training_set=config.whole_training_set, overlaps=tuple(overlaps),
                        contradicted=tuple(reasons), evaluated=evaluated, metrics=metrics)
    return replace(result, corpus=check,
                   timings={**result.timings, "corpus_check": time.perf_counter() - t0})
