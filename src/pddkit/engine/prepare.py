"""The first stages of a run (engine/run.py lists them all): prepare the data, plan the
methods, hold texts out. Everything here runs before any model loads (a served model's
capability probe aside), so that a mistake in the data or the options is one sentence
before minutes of model time.

- `prepare_data(given) -> Prepared`: the options checked, the corpus index opened, rows cut
  into texts (`split_words`);
- `plan_run(given, prepared) -> Planned`: the method calls that can run and the passes they
  need, with what was given and is not used said;
- `hold_out(given, prepared, planned) -> HeldOut`: the labels checked; the shots and the
  calibration texts left out of the evaluation before anything else sees it; the probe's
  auxiliary texts; emmia's sample; the validation split.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from pddkit.data.samples import Dataset
from pddkit.engine.calibration_pass import calibration_set
from pddkit.engine.config import RunConfig
from pddkit.engine.corpus_stage import open_corpus
from pddkit.engine.pipeline import Given
from pddkit.engine.plan import Plan, Resources, make_plan, unused_resources
from pddkit.errors import PddkitError
from pddkit.methods.base import Need

if TYPE_CHECKING:
    from pddkit.data.calibration import CalibrationSet
    from pddkit.data.shots import ShotPool

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """The data as the run reads it: as given, or its rows cut into texts (`split_words`);
    `corpus_index`: the corpus.index.CorpusIndex of `config.index` (None without one)."""

    dataset: Dataset
    corpus_index: object | None = None


@dataclass(frozen=True)
class Planned:
    """The plan; `model`: the target as given (None: loaded by the passes), or a served
    model after its capability probe; `notices`: the run's notices so far."""

    plan: Plan
    model: object
    notices: tuple[str, ...]


@dataclass(frozen=True)
class HeldOut:
    """The texts to score and what was held out of them before anything saw them:
    `dataset` (shots and calibration texts left out, emmia's sample drawn, given validation
    texts appended after the texts under test), the validation / test indices into it (None
    without validation), the given validation data with texts under test left out."""

    dataset: Dataset
    notices: tuple[str, ...]
    shots: ShotPool | None = None
    calibration: CalibrationSet | None = None
    aux: Dataset | None = None  # the probe's auxiliary texts
    val_dataset: Dataset | None = None
    val_idx: np.ndarray | None = None
    test_idx: np.ndarray | None = None


def prepare_data(given: Given) -> Prepared:
    config = given.config
    config.check()
    corpus_index = open_corpus(config)  # a folder that is not an index: one sentence, no model
    dataset = given.dataset
    if config.split_words is not None:  # each row a document, cut into consecutive texts
        from pddkit.data.split_words import split_documents

        dataset = split_documents(dataset, config.split_words, config.max_texts)
    return Prepared(dataset, corpus_index)


def plan_run(given: Given, prepared: Prepared) -> Planned:
    config, dataset, model = given.config, prepared.dataset, given.model
    notices: list[str] = []
    resources = Resources.of(config, given.ref_model is not None, dataset)
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
    return Planned(plan, model, tuple(notices))


def hold_out(given: Given, prepared: Prepared, planned: Planned) -> HeldOut:
    config, dataset, plan = given.config, prepared.dataset, planned.plan
    notices = list(planned.notices)
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
    val_dataset = given.val_dataset
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
                              capabilities_of(config, planned.model))
    dataset, val_idx, test_idx = _with_validation(dataset, config, val_dataset)
    if config.documents and (shots is not None or calibration is not None or test_idx is not None
                             or "emmia_sample" in dataset.meta):
        _check_documents(dataset, config, test_idx)  # what shots and validation left to evaluate
    return HeldOut(dataset, tuple(notices), shots, calibration, aux, val_dataset, val_idx,
                   test_idx)


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
