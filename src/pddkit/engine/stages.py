"""A run's optional stages: what follows the scores and cannot take them down with it.

`run_dataset` (engine/run.py: `pddkit run`, the Python API, the sandbox) scores every
method and measures its metrics, hands that result to the caller's `on_scored` (the CLI
writes scores.jsonl and results.json there), and only then runs its optional stages in
turn: the validation summary, the blind baseline, the corpus check (engine/corpus_stage.py)
and the document level; the CLI adds the
report (its tables and plots). Each is guarded the same way by `run_stages`:
- done: the stage's result replaces the run's;
- skipped: the stage does not apply to these data (it raised `StageSkippedError`, or its `skip`
  reason was found before it ran, e.g. the blind baseline on texts without a word);
- failed: it raised anything else.
A skipped or failed stage is a notice naming the stage and the reason, logged as a warning
and kept in results.json (`notices`, and `stages`: each stage's status and reason); the
run goes on and exits 0 with everything else kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from pddkit.errors import PddkitError
from pddkit.evaluation.results import RunResult

logger = logging.getLogger(__name__)

REASON_CHARS = 300  # the longest reason kept in a notice (an exception's first line)
# the run's optional stages, by name (results.json `stages`, the notices)
VALIDATION, BLIND, DOCUMENTS = "validation summary", "blind baseline", "document level"
CORPUS = "corpus check"  # the labels checked against the training corpus (`index`)
REPORT = "report"  # report.html / report.md with their plots (the CLI's last stage)


class StageSkippedError(PddkitError):
    """A stage that does not apply to this run's data; its message is the reason."""


@dataclass(frozen=True)
class Stage:
    """An optional stage: `run(result) -> result`. `skip`: the reason it does not apply,
    found before it ran (already logged by whoever found it), else None."""

    name: str
    run: Callable[[RunResult], RunResult]
    skip: str | None = None


def reason_of(error: BaseException) -> str:
    """One line: a PddkitError's sentence, else the exception's type and first line."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if not isinstance(error, PddkitError):
        text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."


def notice(name: str, status: str, reason: str) -> str:
    """The notice of a stage that was skipped or failed."""
    if status == "skipped":
        return f"{name} skipped: {reason}"
    return f"{name} failed ({reason}); the scores and every other result are kept"


def run_stages(result: RunResult, stages: Sequence[Stage],
               on_start: Callable[[RunResult], None] | None = None) -> RunResult:
    """Run `stages` in order on `result`, each guarded (module docstring); `on_start` gets
    the result before the first, every stage marked "pending" in `result.stages`."""
    status = {**result.stages, **{s.name: {"status": "pending"} for s in stages}}
    result = replace(result, stages=status)
    for stage in stages:  # known before: said now, and in what on_start writes too
        if stage.skip is not None:
            result = _record(result, stage.name, "skipped", stage.skip)
    if on_start is not None:
        on_start(result)
    for stage in stages:
        if stage.skip is not None:
            continue
        try:
            done = stage.run(result)
        except StageSkippedError as e:
            result = _record(result, stage.name, "skipped", reason_of(e))
        except Exception as e:  # any failure of an optional stage is a notice
            logger.debug("%s failed", stage.name, exc_info=True)
            result = _record(result, stage.name, "failed", reason_of(e))
        else:
            result = replace(done, stages={**done.stages, stage.name: {"status": "done"}})
    return result


def _record(result: RunResult, name: str, status: str, reason: str) -> RunResult:
    line = notice(name, status, reason)
    logger.warning(line)
    return replace(result, notices=(*result.notices, line),
                   stages={**result.stages, name: {"status": status, "reason": reason}})


# -- the optional stages of a run (engine/run.py) ---------------------------------------------

def optional_stages(dataset, config, table, val_idx, test_idx, blind, blind_skip: str | None,
                    corpus_index=None) -> list[Stage]:
    """The stages `run_dataset` runs after the scores, in order: the validation summary
    (with a validation split), the blind baseline (labelled runs; `blind` its BlindJob,
    `blind_skip` the reason it was not started), the corpus check (`corpus_index`, opened
    by engine/corpus_stage.open_corpus; after the blind baseline, whose metrics it measures
    again without the contradicted texts too), the document level (`config.documents`;
    after the blind baseline, whose scores it aggregates too)."""
    stages = []
    if val_idx is not None:
        stages.append(Stage(VALIDATION, lambda r: _validation_stage(r, table, val_idx, test_idx,
                                                                    config)))
    if blind is not None or blind_skip is not None:
        stages.append(Stage(BLIND, lambda r: _blind_stage(r, blind), skip=blind_skip))
    if corpus_index is not None:
        from pddkit.engine.corpus_stage import corpus_stage

        texts = [s.text for s in dataset.samples]
        stages.append(Stage(CORPUS, lambda r: corpus_stage(r, texts, corpus_index, config,
                                                           test_idx)))
    if config.documents:
        stages.append(Stage(DOCUMENTS, lambda r: _documents_stage(r, dataset, config, table,
                                                                  test_idx)))
    return stages


def _validation_stage(r: RunResult, table, val_idx, test_idx, config) -> RunResult:
    t0 = time.perf_counter()
    notes: list[str] = []
    found = _validate(table, np.asarray(r.labels), val_idx, test_idx, config, notes)
    search = table.extras.get("probe_search")
    chosen = None if "probe" not in found else next(
        p for p, g in zip(search.probes, search.grid) if g == found["probe"].chosen)
    return replace(r, validation=found, probe_validated=chosen, notices=(*r.notices, *notes),
                   timings={**r.timings, "validation": time.perf_counter() - t0})


def _blind_stage(r: RunResult, job) -> RunResult:
    t0 = time.perf_counter()
    notes: list[str] = []
    found = job.result(notes)
    timings = {**r.timings, "blind_baseline": job.seconds,  # its own time (thread, process, inline)
               "blind_baseline_wait": time.perf_counter() - t0}  # beyond the passes
    return replace(r, methods=(*r.methods, found), notices=(*r.notices, *notes), timings=timings)


def _documents_stage(r: RunResult, dataset, config, table, test_idx) -> RunResult:
    t0 = time.perf_counter()
    documents = _document_level(dataset, config, table, r.methods, test_idx)
    return replace(r, documents=documents,
                   timings={**r.timings, "documents": time.perf_counter() - t0})


def _document_level(dataset, config, table, results, test_idx):
    """Every method's text scores (the blind baseline's too) -> evaluation.document_level."""
    from pddkit.evaluation.doc_classifier import DocumentClassifier
    from pddkit.evaluation.doc_classifier import token_values as values_of
    from pddkit.evaluation.document_level import document_level

    def token_values(idx: np.ndarray):  # the classifier's inputs (document_level)
        stats = [table.target[i] for i in idx]
        if not any(len(st) for st in stats):
            raise PddkitError("the document classifier reads the target model's token "
                              "log-probabilities, and this run computed none")
        if table.log_freq is not None:  # --freq: values normalised by the table
            return values_of(stats, table.log_freq), None
        # no table: each fold's frequencies counted on its training documents (the authors')
        return [st.L.astype(np.float64) for st in stats], [st.ids for st in stats]

    return document_level(
        {m.label: m.scores for m in results}, [s.group for s in dataset.samples],
        dataset.labels if dataset.labelled else None, config.documents, evaluated=test_idx,
        n_bootstrap=config.n_bootstrap, seed=config.seed, token_values=token_values,
        classifier=DocumentClassifier(features=config.doc_features, seed=config.seed))


def _validate(table, labels, val_idx, test_idx, config, notices) -> dict:
    """For each method with a grid: the value chosen on validation, measured on test. The
    probe's grid is (proxy learning rate, layer); its default is the auxiliary-data choice."""
    from pddkit.evaluation.validation import validate
    from pddkit.methods.grid import Padded

    out = {}
    padded = None
    search, probe_grid = table.extras.get("probe_search"), table.extras.get("probe_grid")
    for c in table.calls:
        if c.label in out:
            continue
        if c.spec.name == "probe" and search is not None:
            if len(search.probes) == 1:
                notices.append(f"probe: loaded from {config.probe_load}; its layer and proxy "
                               "learning rate are fixed, so the validation split does not choose them")
                continue
            best = search.best
            out[c.label] = validate("probe", search.grid, probe_grid, labels, val_idx, test_idx,
                                    config.n_bootstrap, config.seed,
                                    default={"proxy_lr": best.proxy_lr_, "layer": best.layer_})
            continue
        if c.spec.grid is None:
            continue
        if not c.spec.grid.per_text:
            padded = padded or Padded.of(table.target)
        scores = c.spec.grid.scores(padded, table.log_freq, table.observations,
                                    c.params)  # [N, G], no forward pass
        out[c.label] = validate(c.spec.name, c.spec.grid.points(), scores, labels, val_idx,
                                test_idx, config.n_bootstrap, config.seed)
    return out
