"""One run: data -> plan -> backends -> score table -> metrics (evaluation/) -> RunResult.

`run_dataset(dataset, RunConfig(...))` is what `pddkit run`, the sandbox and the Python
API (api.py) call."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, replace

import numpy as np

from pddkit.backends.base import Backend
from pddkit.data.samples import Dataset
from pddkit.engine.blind_job import BlindJob, unfit_reason
from pddkit.engine.calibration_pass import calibration_set
from pddkit.engine.config import RunConfig
from pddkit.engine.corpus_stage import open_corpus
from pddkit.engine.executors import make_executor
from pddkit.engine.passes import PassContext, describe
from pddkit.engine.plan import Resources, make_plan, unused_resources
from pddkit.engine.score import score
from pddkit.engine.stages import optional_stages, run_stages
from pddkit.errors import PddkitError
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.results import MethodResult, RunResult
from pddkit.methods.base import Need

logger = logging.getLogger(__name__)


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


def capabilities_of(config: RunConfig, model=None):
    """The target backend's capabilities, known before anything loads."""
    from pddkit.backends import get_backend

    given = getattr(model, "capabilities", None)
    return given if given is not None else get_backend(config.backend).capabilities


def probes(config: RunConfig, model) -> bool:
    """Whether the target is a served model whose capabilities a probe finds (openai)."""
    from pddkit.backends import get_backend

    target = model if model is not None else get_backend(config.backend)
    return hasattr(target, "server_notices") or getattr(target, "probes", False)


def probed_target(config: RunConfig, model, notices: list[str]):
    """The target's backend (`model`, or loaded now) after its capability probe: one line
    saying what the server takes and gives, before any text is sent, so that the plan is
    made with what this server gives (a method it cannot serve is one notice or one
    sentence, not a failure after minutes)."""
    from pddkit.backends import get_backend

    if model is None:
        cls = get_backend(config.backend)
        model = cls.load(config.model, role="model", **{k: getattr(config, k) for k in cls.OPTIONS})
    for line in model.server_notices():  # the probe runs here
        logger.warning(line)
        notices.append(line)
    return model


def run_dataset(dataset: Dataset, config: RunConfig, model=None, ref_model=None,
                val_dataset: Dataset | None = None,
                on_scored: Callable[[RunResult], None] | None = None) -> RunResult:
    """Score `dataset` with every requested method; metrics when it is labelled.

    `model` / `ref_model` may be preloaded (a Backend or a LoadedModel; else loaded from
    the config). With `config.val_fraction` or a `val_dataset`, hyperparameters are also
    chosen on the validation texts and all metrics are measured on the test texts only.
    `on_scored(result)` receives the scores and metrics before the optional stages
    (engine/stages.py: validation summary, blind baseline, corpus check, document
    level) run, each
    guarded: one that is skipped or fails is a notice, and the rest is returned.
    """
    from pddkit.provenance import Provenance, known_fingerprint, now

    started = now()
    config.check()
    corpus_index = open_corpus(config)  # a folder that is not an index: one sentence, no model
    if config.split_words is not None:  # each row a document, cut into consecutive texts
        from pddkit.data.split_words import split_documents

        dataset = split_documents(dataset, config.split_words, config.max_texts)
    notices: list[str] = []
    model_given = model is not None
    resources = Resources.of(config, ref_model is not None, dataset)
    if probes(config, model):  # a served model: what it gives is asked before any text is
        # sent, once the methods are known to exist (a misspelt one waits for no server)
        make_plan(config.methods, resources, capabilities_of(config, model), [],
                  language=dataset.language)
        model = probed_target(config, model, notices)
    plan = make_plan(config.methods, resources, capabilities_of(config, model), notices,
                     language=dataset.language)
    if config.documents:
        _check_documents(dataset, config)  # no group, or a group with both labels
        if "classifier" in config.documents and config.freq:  # the classifier's normaliser
            plan = replace(plan, needs=plan.needs | {Need.FREQUENCY})
    for line in unused_resources(config, plan):  # given, and silently ignored otherwise
        logger.warning(line)
        notices.append(line)
    if Need.FREQUENCY in plan.needs:  # a file that is not a table: one sentence, no model loaded
        from pddkit.resources.frequency import FrequencyTable

        FrequencyTable.check_file(config.freq)
    if config.doc_features != "histogram" and "classifier" not in config.documents:
        line = ("`doc_features` chooses the document classifier's features; without the "
                "classifier document level it changes nothing")
        logger.warning(line)
        notices.append(line)
    if dataset.labelled:
        dataset.require_both_classes()
    elif dataset.meta.get("unlabelled"):  # which columns it has, and that no metrics follow
        line = (f"{dataset.meta['unlabelled']}: the texts are scored without labels and no "
                "metrics are computed")
        (logger.warning if dataset.meta.get("unlabelled_warn") else logger.info)(line)
        notices.append(line)
    shots = None
    if Need.SHOTS in plan.needs:  # drawn shots leave the evaluation before anything sees it
        from pddkit.engine.shots_pass import shot_pool

        dataset, shots = shot_pool(dataset, config, plan.calls)
    # calibration texts (SPEC 3e) leave the evaluation before anything else sees it too
    dataset, calibration = calibration_set(dataset, config, plan)
    if Need.QUIZ in plan.needs:  # decop's paraphrases file and titles: one sentence, no model
        from pddkit.engine.decop_pass import check_inputs

        check_inputs(dataset, config)
    aux = _auxiliary_data(dataset, config) if Need.PROBE in plan.needs and config.probe_data else None
    if val_dataset is not None:  # its labels choose hyperparameters: none may be under test
        from pddkit.data.overlap import without_overlap

        val_dataset = without_overlap(val_dataset, dataset, f"`val_data` {val_dataset.name}",
                                      config.on_invalid)
        if shots is not None:  # a shot in the validation data would choose gamma on itself
            from pddkit.data.shots import refuse_overlap

            refuse_overlap(shots, val_dataset, f"`val_data` {val_dataset.name}")
    if Need.PAIRS in plan.needs:  # emmia: over its cap, its cost refused or a seeded sample
        from pddkit.engine.emmia_pass import emmia_texts

        dataset = emmia_texts(dataset, plan.calls, config.seed,
                              0 if val_dataset is None else len(val_dataset.samples),
                              capabilities_of(config, model))
    dataset, val_idx, test_idx = _with_validation(dataset, config, val_dataset)
    if config.documents and (shots is not None or calibration is not None or test_idx is not None
                             or "emmia_sample" in dataset.meta):
        _check_documents(dataset, config, test_idx)  # what shots and validation left to evaluate
    # the blind baseline needs no model: it runs on an idle core while the model loads and
    # runs; on texts it cannot fit (no word at all) it is skipped before it starts
    blind, blind_skip = None, None
    if dataset.labelled and config.blind:
        blind_skip = unfit_reason(dataset)
        if blind_skip is None:  # a skip is said once the scores stand (run_stages)
            blind = BlindJob.start(dataset, config, test_idx, model_given=model_given)
    try:
        opened: list[Backend] = []
        table = _score_passes(dataset, config, plan, model, ref_model, aux, val_idx, test_idx,
                              val_dataset, notices, opened, shots, calibration)
        cached = [b for b in opened if hasattr(b, "store")]
        if cached:  # texts per pass found in the cache / computed
            table.counts["cache"] = {**{desc: {"hits": h, "misses": m} for b in cached
                                        for desc, (h, m) in b.counts().items()},
                                     **table.counts.get("cache", {})}  # fsd's tuned model
            notices.extend(dict.fromkeys(n for b in cached for n in b.notices()))  # unreadable files

        labels = tuple(dataset.labels) if dataset.labelled else None
        subsets = tuple(s.subset for s in dataset.samples)
        index = _subset_index(subsets, labels, test_idx, notices)
        timings = dict(table.timings)
        t0 = time.perf_counter()
        results = [_method_result(c, table.scores[c.label], labels, config, test_idx, index)
                   for c in table.calls]
        timings["metrics"] = time.perf_counter() - t0
        search = table.extras.get("probe_search")
        scored = RunResult(
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
            provenance=Provenance.collect(started, models=table.models, fingerprints=dict(
                zip(("target", "reference"), map(known_fingerprint, opened)))),
        )
        # the scores are the caller's (on_scored: the CLI writes them) before anything optional
        stages = optional_stages(dataset, config, table, val_idx, test_idx, blind, blind_skip,
                                 corpus_index)
        return run_stages(scored, stages, on_start=on_scored)
    except BaseException:
        if blind is not None:  # nobody will ask for it now
            blind.cancel()
        raise


def _check_documents(dataset: Dataset, config: RunConfig, idx: np.ndarray | None = None) -> None:
    """`documents` on data without a document per text, with a document holding both
    labels, with fewer than 2 documents of a class among the texts evaluated (`idx`: the
    test part), or (share, classifier) unlabelled: one sentence before any model loads."""
    from pddkit.evaluation.documents import group_documents

    samples = dataset.samples if idx is None else [dataset.samples[i] for i in idx]
    groups = [s.group for s in samples]
    if all(g is None for g in groups):
        raise PddkitError(f"{dataset.name}: the document level needs the document each text "
                          "belongs to, and no text names one (a group column, or "
                          "`split_words` to cut whole documents into texts)")
    if not dataset.labelled:
        if set(config.documents) != {"mean"}:
            raise PddkitError(f"{dataset.name} is unlabelled: the share and classifier "
                              "document levels fit on labels (the mean needs none)")
        group_documents(groups, [], labelled=False, sources=[s.source for s in samples])
        return
    docs = group_documents(groups, [s.label for s in samples], sources=[s.source for s in samples])
    n1, n0 = int((docs.labels == 1).sum()), int((docs.labels == 0).sum())
    if min(n1, n0) < 2:
        what = "its texts" if idx is None else "the texts left to evaluate (test part, shots left out)"
        raise PddkitError(f"{dataset.name}: document-level metrics need at least 2 member and 2 "
                          f"non-member documents, and {what} form {n1} member and {n0} "
                          "non-member documents")


def _check_reference_source(config: RunConfig) -> None:
    """A reference model loaded here that cannot load (a folder that does not exist, a hub
    id neither cached nor reachable): one sentence before the target loads."""
    if (config.ref_backend or "hf") != "hf" or not isinstance(config.ref_model, str):
        return
    from pddkit.backends.hf_loading import checked_source

    checked_source(config.ref_model, config.ref_adapter, role="reference model",
                   trust_remote_code=config.trust_remote_code, revision=config.revision,
                   local_files_only=config.local_files_only)


def _score_passes(dataset: Dataset, config: RunConfig, plan, model, ref_model, aux, val_idx,
                  test_idx, val_dataset, notices: list[str], opened: list[Backend], shots=None,
                  calibration=None):
    """Load the backends as the passes need them and score: the ScoreTable."""
    t0 = time.perf_counter()
    executor = make_executor(config)

    def load(role: str, given) -> Backend:  # the Ray engine's driver loads no model: prepare
        opened.append(executor.prepare(load_backend(config, role, given)))
        return opened[-1]

    if Need.REFERENCE in plan.needs and ref_model is None:
        _check_reference_source(config)  # not after the target has loaded and scored
    target = load("model", model)
    load_time = time.perf_counter() - t0
    ctx = PassContext(
        texts=[s.text for s in dataset.samples],
        names=[s.source or f"sample {s.id}" for s in dataset.samples],
        ids=[s.id for s in dataset.samples], calls=plan.calls, config=config, target=target,
        executor=executor, load_backend=load,
        ref_model=ref_model, aux=aux, sets=[] if val_idx is None else [val_idx, test_idx],
        notices=notices, models={"target": describe(target)}, timings={"load": load_time},
        given_neighbors=dataset.meta.get("neighbors"), language=dataset.language, shots=shots,
        calibration=calibration, document_fields=dataset.meta.get("document_fields"))
    ctx.counts.update(dataset.counts())
    if "split_words" in dataset.meta:
        ctx.counts["split_words"] = dataset.meta["split_words"]
    if "emmia_sample" in dataset.meta:  # emmia's seeded sample: counted, the rest listed
        from pddkit.engine.emmia_pass import record_sample

        record_sample(ctx, dataset)
    ctx.counts["label_leaks_left_out"] = {
        "val_data": 0 if val_dataset is None else val_dataset.meta.get("left_out_overlapping", 0),
        "probe_data": 0 if aux is None else aux.meta.get("left_out_overlapping", 0)}
    try:
        table = score(ctx, plan)
    finally:
        for b in opened:  # the statistics cache writes what it holds
            if hasattr(b, "store"):
                b.close()
    return table


def _auxiliary_data(dataset: Dataset, config: RunConfig) -> Dataset:
    """The probe's auxiliary texts, read before any model loads; texts that are also under
    test are refused (or left out with on_invalid="skip"): their labels would leak."""
    from pddkit.data.overlap import without_overlap
    from pddkit.data.tables import load_table

    aux = load_table(config.probe_data, on_invalid=config.on_invalid)
    return without_overlap(aux, dataset, f"`probe_data` {config.probe_data}", config.on_invalid)


def _with_validation(dataset: Dataset, config: RunConfig, val_dataset: Dataset | None):
    """(all texts, validation indices, test indices); indices are None without validation."""
    from pddkit.data.stratified import stratified_split

    if config.val_fraction is None and val_dataset is None:
        return dataset, None, None
    if not dataset.labelled:
        note = dataset.meta.get("unlabelled")
        raise PddkitError("choosing hyperparameters on validation data needs labelled data"
                          + (f", and {note}" if note else ""))
    if val_dataset is not None:
        if not val_dataset.labelled:
            note = val_dataset.meta.get("unlabelled")
            raise PddkitError(f"validation data {val_dataset.name} has no labels"
                              + (f": {note}" if note else ""))
        val_dataset.require_both_classes()
        n = len(dataset.samples)
        both = Dataset(dataset.name, dataset.samples + val_dataset.samples,
                       dataset.skipped + val_dataset.skipped, dataset.meta)
        return both, np.arange(n, len(both.samples)), np.arange(n)
    val_idx, test_idx = stratified_split(dataset.labels, config.val_fraction, config.seed,
                                         groups=[s.group for s in dataset.samples])
    return dataset, val_idx, test_idx


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
