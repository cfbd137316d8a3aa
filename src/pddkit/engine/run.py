"""One run as the list of its stages (`STAGES`): prepare the data, plan, hold out shots
and calibration texts (engine/prepare.py), start the blind baseline beside the passes, run
the passes, score every method, measure the metrics, run the optional stages
(engine/stages.py). Each stage is a function from typed values to one typed value
(engine/pipeline.py); `run_dataset(dataset, RunConfig(...))` runs them in this order, and
is what `pddkit run`, the sandbox, the studies and the Python API (api.py) call. Writing is
the caller's: `on_scored` receives the scores and metrics before the optional stages (the
CLI and the sandbox write them there), and the caller writes the rest, and its report, after.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from pddkit.backends.base import Backend
from pddkit.data.samples import Dataset
from pddkit.engine.blind_job import BlindJob, unfit_reason
from pddkit.engine.config import RunConfig
from pddkit.engine.executors import make_executor
from pddkit.engine.pass_context import PassContext
from pddkit.engine.passes import describe, run_passes
from pddkit.engine.pipeline import GIVEN, RESULT, Given, RunStage, run_in_order
from pddkit.engine.prepare import HeldOut, Planned, Prepared, hold_out, plan_run, prepare_data
from pddkit.engine.score import ScoreTable, score
from pddkit.engine.stages import optional_stages, run_stages
from pddkit.errors import PddkitError
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.results import MethodResult, RunResult
from pddkit.methods.base import Need

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BlindStart:
    """The blind baseline started beside the passes (`job`), or why it was not (`skip`,
    said as a notice once the scores stand); both None when it is not asked for."""

    job: BlindJob | None = None
    skip: str | None = None


@dataclass(frozen=True)
class Passed:
    """What the passes filled (`context`: the statistics of every text under test, and the
    counts, timings and notices so far) and the backends they opened: the target's, then
    the reference model's when one loaded."""

    context: PassContext
    opened: tuple[Backend, ...]


@dataclass(frozen=True)
class Scored:
    """Every method's score per text, and the run's notices so far."""

    table: ScoreTable
    notices: tuple[str, ...]


def start_blind(given: Given, held: HeldOut) -> BlindStart:
    """The blind baseline needs no model: it runs on an idle core while the model loads and
    runs; on texts it cannot fit (no word at all) it is skipped before it starts."""
    config, dataset = given.config, held.dataset
    if not (dataset.labelled and config.blind):
        return BlindStart()
    skip = unfit_reason(dataset)
    if skip is not None:  # said once the scores stand (run_stages)
        return BlindStart(skip=skip)
    return BlindStart(BlindJob.start(dataset, config, held.test_idx,
                                     model_given=given.model is not None))


def start_blind_early(dataset: Dataset, config: RunConfig) -> BlindJob | None:
    """`dataset`'s blind baseline started now in a child process, before the run that takes
    it over (`blind_started`): the sandbox starts it before training the model it
    evaluates; None where the run would start none (the run then says why)."""
    if not (dataset.labelled and config.blind) or unfit_reason(dataset) is not None:
        return None
    return BlindJob.start(dataset, config, None, where="process")


def blind_started(job: BlindJob | None) -> Callable[[Given, HeldOut], BlindStart]:
    """A "start blind baseline" stage (pipeline.replaced) that takes over `job`, started
    before the run (`start_blind_early`); a job whose inputs are not this run's is
    cancelled, and the stage starts the baseline as usual."""

    def stage(given: Given, held: HeldOut) -> BlindStart:
        if job is not None and held.dataset.labelled and given.config.blind and job.serves(
                held.dataset, given.config, held.test_idx):
            return BlindStart(job)
        if job is not None:
            logger.debug("the blind baseline started before the run is not this run's: "
                         "started again")
            job.cancel()
        return start_blind(given, held)

    return stage


def cancel_blind(blind: BlindStart) -> None:
    if blind.job is not None:  # the run failed: nobody will ask for it now
        blind.job.cancel()


def pass_texts(given: Given, planned: Planned, held: HeldOut) -> Passed:
    """Load the backends as the passes need them and run the plan's passes on the texts."""
    config, dataset, plan = given.config, held.dataset, planned.plan
    aux, val_idx, val_dataset = held.aux, held.val_idx, held.val_dataset
    t0 = time.perf_counter()
    executor = make_executor(config)
    opened: list[Backend] = []

    def load(role: str, model) -> Backend:  # the Ray engine's driver loads no model: prepare
        opened.append(executor.prepare(load_backend(config, role, model)))
        return opened[-1]

    if Need.REFERENCE in plan.needs and given.ref_model is None:
        _check_reference_source(config)  # not after the target has loaded and scored
    failed = True
    try:
        target = load("model", planned.model)
        load_time = time.perf_counter() - t0
        ctx = PassContext(
            texts=[s.text for s in dataset.samples],
            names=[s.source or f"sample {s.id}" for s in dataset.samples],
            ids=[s.id for s in dataset.samples], calls=plan.calls, config=config,
            target=target, executor=executor, load_backend=load, ref_model=given.ref_model,
            aux=aux, sets=[] if val_idx is None else [val_idx, held.test_idx],
            notices=list(held.notices), models={"target": describe(target)},
            timings={"load": load_time}, given_neighbors=dataset.meta.get("neighbors"),
            language=dataset.language, shots=held.shots, calibration=held.calibration,
            document_fields=dataset.meta.get("document_fields"))
        ctx.counts.update(dataset.counts())
        if "split_words" in dataset.meta:
            ctx.counts["split_words"] = dataset.meta["split_words"]
        if "emmia_sample" in dataset.meta:  # emmia's seeded sample: counted, the rest listed
            from pddkit.engine.emmia_pass import record_sample

            record_sample(ctx, dataset)
        ctx.counts["label_leaks_left_out"] = {
            "val_data": 0 if val_dataset is None else val_dataset.meta.get("left_out_overlapping", 0),
            "probe_data": 0 if aux is None else aux.meta.get("left_out_overlapping", 0)}
        run_passes(ctx, plan.passes())
        failed = False
    finally:
        try:
            for b in opened:  # the statistics cache writes what it holds
                if hasattr(b, "store"):
                    b.close()
        finally:
            executor.close(failed=failed)  # the Ray engine's actors stop (or wait: keep_actors)
    return Passed(ctx, tuple(opened))


def score_texts(passed: Passed) -> Scored:
    """Every method call on what the passes filled; what the statistics cache found."""
    table = score(passed.context)
    notices = list(table.notices)
    cached = [b for b in passed.opened if hasattr(b, "store")]
    if cached:  # texts per pass found in the cache / computed
        table.counts["cache"] = {**{desc: {"hits": h, "misses": m} for b in cached
                                    for desc, (h, m) in b.counts().items()},
                                 **table.counts.get("cache", {})}  # fsd's tuned model
        notices.extend(dict.fromkeys(n for b in cached for n in b.notices()))  # unreadable files
    return Scored(table, tuple(notices))


def measure(given: Given, held: HeldOut, passed: Passed, scored: Scored) -> RunResult:
    """The scores as a RunResult, with each method's metrics when the texts are labelled
    (on the test part when validating; per subset too)."""
    from pddkit.provenance import Provenance, known_fingerprint

    config, dataset, table = given.config, held.dataset, scored.table
    notices = list(scored.notices)
    labels = tuple(dataset.labels) if dataset.labelled else None
    subsets = tuple(s.subset for s in dataset.samples)
    index = _subset_index(subsets, labels, held.test_idx, notices)
    timings = dict(table.timings)
    t0 = time.perf_counter()
    results = [_method_result(c, table.scores[c.label], labels, config, held.test_idx, index)
               for c in table.calls]
    timings["metrics"] = time.perf_counter() - t0
    search = table.extras.get("probe_search")
    val_idx, aux = held.val_idx, held.aux
    return RunResult(
        ids=tuple(s.id for s in dataset.samples), labels=labels, methods=tuple(results),
        config={**asdict(config), "dataset": dataset.name,
                "methods_resolved": [c.label for c in table.calls]},
        counts=table.counts, timings=timings, models=table.models,
        skipped=tuple((s.source, s.reason) for s in dataset.skipped + (aux.skipped if aux else ())),
        notices=tuple(notices),
        splits=None if val_idx is None else tuple(
            np.where(np.isin(np.arange(len(dataset.samples)), val_idx), "val", "test").tolist()),
        subsets=subsets if any(x is not None for x in subsets) else None,
        trail=dict(table.extras.get("trail", {})),
        folders=dict(table.extras.get("folders", {})),
        neighbors=table.extras.get("neighbor_sets"),
        probe=None if search is None else search.best,
        record_fields=dataset.meta.get("record_fields"),
        # opened: the target's backend, then the reference model's when one loaded
        provenance=Provenance.collect(given.started, models=table.models, fingerprints=dict(
            zip(("target", "reference"), map(known_fingerprint, passed.opened)))),
    )


def run_optional(given: Given, prepared: Prepared, held: HeldOut, blind: BlindStart,
                 scored: Scored, result: RunResult) -> RunResult:
    """The scores are the caller's (`on_scored`: the CLI writes them) before anything
    optional; then the validation summary, the blind baseline, the corpus check and the
    document level, each guarded (engine/stages.py)."""
    stages = optional_stages(held.dataset, given.config, scored.table, held.val_idx,
                             held.test_idx, blind.job, blind.skip, prepared.corpus_index)
    return run_stages(result, stages, on_start=given.on_scored)


# the run, in order: each stage reads what the caller gave ("given") or what a stage before
# it gives (engine/pipeline.py); replace or add one with pipeline.replaced / inserted
STAGES: tuple[RunStage, ...] = (
    RunStage("prepare data", prepare_data, (GIVEN,), "prepared"),
    RunStage("plan", plan_run, (GIVEN, "prepared"), "planned"),
    RunStage("hold out", hold_out, (GIVEN, "prepared", "planned"), "held"),
    RunStage("start blind baseline", start_blind, (GIVEN, "held"), "blind", undo=cancel_blind),
    RunStage("passes", pass_texts, (GIVEN, "planned", "held"), "passed"),
    RunStage("scores", score_texts, ("passed",), "scored"),
    RunStage("metrics", measure, (GIVEN, "held", "passed", "scored"), RESULT),
    RunStage("optional stages", run_optional,
             (GIVEN, "prepared", "held", "blind", "scored", RESULT), RESULT),
)


def run_dataset(dataset: Dataset, config: RunConfig, model=None, ref_model=None,
                val_dataset: Dataset | None = None,
                on_scored: Callable[[RunResult], None] | None = None,
                stages: Sequence[RunStage] = STAGES) -> RunResult:
    """Score `dataset` with every requested method; metrics when it is labelled.

    `model` / `ref_model` may be preloaded (a Backend or a LoadedModel; else loaded from
    the config). With `config.val_fraction` or a `val_dataset`, hyperparameters are also
    chosen on the validation texts and all metrics are measured on the test texts only.
    `on_scored(result)` receives the scores and metrics before the optional stages
    (engine/stages.py: validation summary, blind baseline, corpus check, document
    level) run, each guarded: one that is skipped or fails is a notice, and the rest is
    returned. `stages`: the stages run, in order (`STAGES`; engine/pipeline.py replaces
    or adds one).
    """
    from pddkit.provenance import now

    return run_in_order(Given(dataset, config, model, ref_model, val_dataset, on_scored,
                              started=now()), stages)


def load_backend(config: RunConfig, role: str, given=None) -> Backend:
    """The backend of the target ("model") or reference model: `given` (a Backend, a
    LoadedModel, or None to load config.model / config.ref_model with config.backend /
    config.ref_backend), behind the statistics cache when config.cache is set."""
    from pddkit.backends import Backend as BackendType
    from pddkit.backends import get_backend
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.hf_loading import LoadedModel

    reference = role != "model"
    adapter = config.ref_adapter if reference else config.adapter
    if given is not None and adapter is not None:
        param = "ref_adapter" if reference else "adapter"
        raise PddkitError(f"`{param}` goes onto a model pddkit loads by name; a model handed "
                          "over in memory brings its adapter itself (a PeftModel, or "
                          "model.load_adapter)")
    if isinstance(given, BackendType):
        backend = given
    elif isinstance(given, LoadedModel):
        backend = HFBackend(given, batch_size=config.batch_size, padding_side=config.padding_side,
                            max_length=config.max_length)
    else:
        kind = (config.ref_backend or "hf") if reference else config.backend
        name = config.ref_model if reference else config.model
        cls = get_backend(kind)
        options = {k: getattr(config, k) for k in cls.OPTIONS}
        if adapter is not None:  # RunConfig.check: only with the hf backend
            options["adapter"] = adapter
        backend = cls.load(name, role=role, **options)
    if config.cache:
        from pddkit.backends.caching import CachingBackend
        from pddkit.cache import StatsStore

        backend = CachingBackend(backend, StatsStore.open(config.cache))
    return backend


def _check_reference_source(config: RunConfig) -> None:
    """A reference model loaded here that cannot load (a folder that does not exist, a hub
    id neither cached nor reachable): one sentence before the target loads."""
    if (config.ref_backend or "hf") != "hf" or not isinstance(config.ref_model, str):
        return
    from pddkit.backends.adapters import checked_source

    checked_source(config.ref_model, config.ref_adapter, role="reference model",
                   trust_remote_code=config.trust_remote_code, revision=config.revision,
                   local_files_only=config.local_files_only)


def _subset_index(subsets, labels, test_idx: np.ndarray | None,
                  notices: list[str]) -> dict[str, np.ndarray]:
    """Per subset to report on its own (evaluation/subsets.py), the indices of its texts
    that metrics are on (the test part when validating); a notice for each subset with
    one class there (it gets no AUC) and for texts that name no subset."""
    from pddkit.evaluation.subsets import breakdown, one_class, subset_counts, subset_indices

    names = breakdown(subsets)
    if labels is None or not names:
        return {}
    index = subset_indices(subsets, names, test_idx)
    where = "" if test_idx is None else " on the test part"
    lines = [f"subset {name} has only {what}{where}: it gets no AUC of its own" if what != "no texts"
             else f"subset {name} has no texts{where}: it gets no AUC of its own"
             for name, what in one_class(subset_counts(labels, index)).items()]
    unnamed = sum(x is None for x in subsets)
    if unnamed:
        lines.append(f"{unnamed} of {len(subsets)} texts name no subset: they count in the "
                     "pooled metrics only")
    for line in lines:
        logger.warning(line)
    notices.extend(lines)
    return index


def _method_result(call, scores: np.ndarray, labels, config: RunConfig,
                   test_idx: np.ndarray | None, index: dict | None = None) -> MethodResult:
    from pddkit.evaluation.subsets import subset_metrics

    metrics, per = None, {}
    if labels is not None:
        sel = slice(None) if test_idx is None else test_idx
        metrics = compute_metrics(scores[sel], np.asarray(labels)[sel],
                                  n_bootstrap=config.n_bootstrap, seed=config.seed)
        if index:
            per = subset_metrics(scores, labels, index, config.n_bootstrap, config.seed)
    return MethodResult(call.label, call.spec.name, dict(call.params), scores, metrics, per)
