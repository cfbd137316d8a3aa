"""Wires the stages: dataset -> statistics passes (the union of needs) -> methods -> metrics.

`run_dataset(dataset, RunConfig(...))` -> RunResult; the CLI and the sandbox call it, and
the Python API (api.py) wraps it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass

import numpy as np

from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.results import MethodResult, RunResult
from pddkit.methods.base import MethodCall, Need, resolve_methods
from pddkit.stats import Observation, TokenStats

logger = logging.getLogger(__name__)

PROBE_WARN_AUC = 0.6  # below this held-out auxiliary AUC the probe's scores are flagged


@dataclass(frozen=True)
class RunConfig:
    """Everything a run depends on besides the data; written into results.json."""

    model: str
    methods: str = "all"
    ref_model: str | None = None
    freq: str | None = None
    batch_size: int = 8
    max_length: int | None = None
    device: str = "auto"
    dtype: str = "auto"
    padding_side: str = "right"
    trust_remote_code: bool = False
    local_files_only: bool = False
    n_bootstrap: int = 1000
    seed: int = 0
    blind: bool = True  # the model-free baseline, for every labelled run
    val_fraction: float | None = None  # hyperparameters chosen on this stratified share
    val_data: str | None = None  # ... or on this labelled file (recorded; loaded by the caller)
    mask_model: str | None = None  # masked LM for `neighbor` (roberta-base when it is named)
    neighbors_file: str | None = None  # reuse neighbours saved by an earlier run
    probe_data: str | None = None  # auxiliary non-member texts for the probe's proxy model
    probe_load: str | None = None  # a probe saved by an earlier run (OUTPUT/probe)
    probe_lrs: tuple[float, ...] = (1e-4, 1e-3)  # proxy learning rates, chosen on held-out rows
    probe_lora: bool = False
    probe_standardize: str = "per_set"  # each set of activations with its own mean/std, or "train"
    on_invalid: str = "error"  # auxiliary texts that are also under test: refused, or left out


def _load(name_or_model, config: RunConfig, role: str):
    from pddkit.runner.loading import LoadedModel, load_model

    if isinstance(name_or_model, LoadedModel):
        return name_or_model
    return load_model(name_or_model, device=config.device, dtype=config.dtype,
                      trust_remote_code=config.trust_remote_code,
                      local_files_only=config.local_files_only, role=role)


def _model_info(lm) -> dict:
    return {"name": lm.name, "tokenizer": getattr(lm.tokenizer, "name_or_path", lm.name),
            "vocab_size": len(lm.tokenizer), "device": lm.device, "dtype": lm.dtype,
            "context_length": lm.context_length}


def _check_finite(stats: list[TokenStats], names: list[str], what: str) -> None:
    for st, name in zip(stats, names):
        if not (np.isfinite(st.L).all() and np.isfinite(st.H).all() and np.isfinite(st.M2).all()):
            raise PddkitError(f"{what} gave non-finite log-probabilities for {name} "
                              "(a float16 overflow? try --dtype float32)")


def run_dataset(dataset: Dataset, config: RunConfig, model=None, ref_model=None,
                val_dataset: Dataset | None = None) -> RunResult:
    """Score `dataset` with every requested method; metrics when it is labelled.

    `model` / `ref_model` may be preloaded `LoadedModel`s (else loaded from the config).
    With `config.val_fraction` or a `val_dataset`, hyperparameters are also chosen on the
    validation texts and all metrics are measured on the test texts only.
    """
    from pddkit.runner.frequency import FrequencyTable
    from pddkit.runner.token_stats import StatsRunner

    timings: dict[str, float] = {}
    available = {Need.LOWERCASE}
    if config.ref_model or ref_model is not None:
        available.add(Need.REFERENCE)
    if config.freq:
        available.add(Need.FREQUENCY)
    if config.mask_model or config.neighbors_file or "neighbor" in config.methods:
        available.add(Need.NEIGHBORS)
    if config.probe_data or config.probe_load:
        available.add(Need.PROBE)
    notices: list[str] = []
    calls = resolve_methods(config.methods, available, notices)
    needs = set().union(*(c.spec.needs for c in calls))
    if dataset.labelled:
        dataset.require_both_classes()
    aux = _auxiliary_data(dataset, config) if Need.PROBE in needs and config.probe_data else None
    if val_dataset is not None:  # its labels choose hyperparameters: none may be under test
        from pddkit.data.overlap import without_overlap

        val_dataset = without_overlap(val_dataset, dataset, f"--val-data {val_dataset.name}",
                                      config.on_invalid)
    dataset, val_idx, test_idx = _with_validation(dataset, config, val_dataset)

    t0 = time.perf_counter()
    lm = _load(model if model is not None else config.model, config, "model")
    models = {"target": _model_info(lm)}
    log_freq = None
    if Need.FREQUENCY in needs:
        table = FrequencyTable.load(config.freq)
        table.check_tokenizer(lm.tokenizer, lm.name, config.freq)
        log_freq = table.log_freq()
        models["frequency_table"] = {"path": str(config.freq), **{
            k: v for k, v in table.meta().items() if k != "sources"}}
    timings["load"] = time.perf_counter() - t0

    texts = [s.text for s in dataset.samples]
    names = [s.source or f"sample {s.id}" for s in dataset.samples]
    runner = StatsRunner(lm, batch_size=config.batch_size, padding_side=config.padding_side,
                         max_length=config.max_length)
    t0 = time.perf_counter()
    target = runner.run(texts, names, desc="target pass")
    _check_finite(target, names, lm.name)
    timings["target_pass"] = time.perf_counter() - t0
    # SPEC section 3: for a truncated text, `zlib` and `lowercase` use the scored span
    spans = [lm.tokenizer.decode(st.ids.tolist()) if st.truncated else text
             for text, st in zip(texts, target)]
    counts = dict(dataset.counts())
    leaks = {"val_data": 0 if val_dataset is None else val_dataset.meta.get("left_out_overlapping", 0),
             "probe_data": 0 if aux is None else aux.meta.get("left_out_overlapping", 0)}
    counts["label_leaks_left_out"] = leaks
    counts["truncated"] = {"target": sum(s.truncated for s in target)}
    counts["tokens"] = {"target": int(sum(len(s) for s in target))}

    lower = reference = None
    if Need.LOWERCASE in needs:
        t0 = time.perf_counter()
        lower = runner.run([t.lower() for t in spans], names, desc="lowercase pass")
        _check_finite(lower, names, f"{lm.name} (lowercased text)")
        timings["lowercase_pass"] = time.perf_counter() - t0
        counts["truncated"]["lowercase"] = sum(s.truncated for s in lower)
    if Need.REFERENCE in needs:
        t0 = time.perf_counter()
        rlm = _load(ref_model if ref_model is not None else config.ref_model, config,
                    "reference model")
        models["reference"] = _model_info(rlm)
        reference = StatsRunner(rlm, batch_size=config.batch_size,
                                padding_side=config.padding_side,
                                max_length=config.max_length).run(texts, names, "reference pass")
        _check_finite(reference, names, rlm.name)
        timings["reference_pass"] = time.perf_counter() - t0
        counts["truncated"]["reference"] = sum(s.truncated for s in reference)

    neighbor_stats, neighbor_texts = None, None
    if Need.NEIGHBORS in needs:
        t0 = time.perf_counter()
        neighbor_texts, counts["truncated"]["neighbor_mask_model"] = _neighbor_texts(
            texts, names, [s.id for s in dataset.samples], calls, config)
        unique: dict[str, str] = {}  # neighbour text -> its name; each scored once, all sets
        for params, per_text in neighbor_texts.texts.items():
            for n, nbs in zip(names, per_text):
                for t in nbs:
                    unique.setdefault(t, f"a neighbour of {n} ({params.label()})")
        flat = list(unique)
        stats = runner.run(flat, list(unique.values()), desc="neighbour pass")  # one batched pass
        _check_finite(stats, list(unique.values()), lm.name)
        counts["truncated"]["neighbors"] = sum(s.truncated for s in stats)
        by_text = dict(zip(flat, stats))
        neighbor_stats = [{params: tuple(by_text[t] for t in per_text[i])
                           for params, per_text in neighbor_texts.texts.items()}
                          for i in range(len(texts))]
        timings["neighbors"] = time.perf_counter() - t0
        counts["neighbor_texts"] = len(flat)

    probe_search = probe_grid = probe_scores = None
    if Need.PROBE in needs:
        t0 = time.perf_counter()
        probe_search, probe_grid, counts["truncated"]["probe"] = _probe_scores(
            lm, texts, config, aux, [np.arange(len(texts))] if val_idx is None else [val_idx, test_idx])
        if config.probe_data:  # the auxiliary texts are the user's input too: count their cuts
            counts["truncated"]["probe_data"] = probe_search.best.meta_["aux_texts_cut"]
        probe_scores = probe_grid[:, int(np.argmax(probe_search.aux_val_auc))]
        best_auc = float(np.max(probe_search.aux_val_auc))
        if config.probe_data and best_auc < PROBE_WARN_AUC:
            line = (f"probe: the best probe (layer {probe_search.best.layer_}, proxy lr "
                    f"{probe_search.best.proxy_lr_:g}) separates the held-out auxiliary texts with "
                    f"AUC {best_auc:.2f} only, so its scores are unlikely to carry membership")
            logger.warning(line)
            notices.append(line)
        timings["probe"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    obs = [Observation(text=spans[i], target=target[i],
                       lower=None if lower is None else lower[i],
                       reference=None if reference is None else reference[i],
                       log_freq=log_freq,
                       neighbors=None if neighbor_stats is None else neighbor_stats[i],
                       probe=None if probe_scores is None else float(probe_scores[i]))
           for i in range(len(texts))]
    labels = tuple(dataset.labels) if dataset.labelled else None
    results = [_score_method(c, obs, labels, config, test_idx) for c in calls]
    timings["methods_and_metrics"] = time.perf_counter() - t0
    validation = {}
    if val_idx is not None:
        t0 = time.perf_counter()
        validation = _validate(calls, target, log_freq, np.asarray(labels), val_idx, test_idx,
                               config, probe_search, probe_grid, notices)
        timings["validation"] = time.perf_counter() - t0
    if labels is not None and config.blind:
        t0 = time.perf_counter()
        blind = _blind_baseline(dataset, config, notices, test_idx)
        if blind is not None:
            results.append(blind)
        timings["blind_baseline"] = time.perf_counter() - t0

    return RunResult(
        ids=tuple(s.id for s in dataset.samples), labels=labels, methods=tuple(results),
        config={**asdict(config), "dataset": dataset.name,
                "methods_resolved": [c.label for c in calls]},
        counts=counts, timings=timings, models=models,
        skipped=tuple((s.source, s.reason) for s in dataset.skipped + (aux.skipped if aux else ())),
        notices=tuple(notices),
        splits=None if val_idx is None else tuple(
            np.where(np.isin(np.arange(len(dataset.samples)), val_idx), "val", "test").tolist()),
        validation=validation,
        neighbors=neighbor_texts,
        probe=None if probe_search is None else probe_search.best,
        probe_validated=None if "probe" not in validation else next(
            p for p, g in zip(probe_search.probes, probe_search.grid)
            if g == validation["probe"].chosen),
    )


def _auxiliary_data(dataset: Dataset, config: RunConfig) -> Dataset:
    """The probe's auxiliary texts, read before any model loads; texts that are also under
    test are refused (or left out with on_invalid="skip"): their labels would leak."""
    from pddkit.data.jsonl import load_jsonl
    from pddkit.data.overlap import without_overlap

    aux = load_jsonl(config.probe_data, name="--probe-data", on_invalid=config.on_invalid)
    return without_overlap(aux, dataset, f"--probe-data {config.probe_data}", config.on_invalid)


def _probe_scores(lm, texts, config: RunConfig, aux: Dataset | None, sets: list[np.ndarray]):
    """(ProbeSearch, [N, G] member log-odds of every probe, texts cut): trained on the
    auxiliary texts (one probe per proxy learning rate and layer) or loaded (G = 1). With
    config.probe_standardize "per_set", each of `sets` (validation texts, test texts; or all
    texts) is standardised with its own statistics; "train" uses the probe's training rows'
    (a loaded probe's saved mean and scale)."""
    from pddkit.runner.probe import LinearProbe, ProbeSearch, probe_scores, train_probes

    if config.probe_load:
        probe = LinearProbe.load(config.probe_load)
        search = ProbeSearch((probe,), np.array([probe.meta_.get("aux_val_auc", 0.0)]))
    else:
        search = train_probes(lm.model, lm.tokenizer, [s.text for s in aux.samples],
                              config.probe_lrs, config.seed, config.probe_lora, config.batch_size,
                              aux_labels=list(aux.labels) if aux.labelled else None,
                              standardize=config.probe_standardize)
    scores, cut = probe_scores(lm.model, lm.tokenizer, texts, search.probes, config.batch_size,
                               lm.name, config.probe_standardize, sets)
    return search, scores, cut


def _neighbor_texts(texts, names, ids, calls, config: RunConfig):
    """(NeighborSets, texts longer than the masked LM's context (0 for a saved file)):
    each distinct (top_k, dropout, seed) among the `neighbor` calls gets its own
    neighbours, generated (or read from --neighbors) once for its largest n_neighbors."""
    from pddkit.runner import neighbors
    from pddkit.runner.loading import pick_device

    wanted: dict = {}
    for c in calls:
        if Need.NEIGHBORS not in c.spec.needs:
            continue
        p = c.params
        if p["n_neighbors"] < 1 or p["top_k"] < 1 or not 0 <= p["dropout"] < 1:
            raise PddkitError(f"{c.label} needs n_neighbors >= 1, top_k >= 1 and 0 <= dropout < 1")
        key = neighbors.NeighborParams.of(p)
        wanted[key] = max(wanted.get(key, 0), int(p["n_neighbors"]))
    if config.neighbors_file:
        return neighbors.load(config.neighbors_file, ids, wanted), 0
    mm = neighbors.load_mask_model(config.mask_model or "roberta-base",
                                   device=pick_device(config.device),
                                   local_files_only=config.local_files_only,
                                   trust_remote_code=config.trust_remote_code)
    return neighbors.generate_sets(mm, texts, names, wanted)


def _with_validation(dataset: Dataset, config: RunConfig, val_dataset: Dataset | None):
    """(all texts, validation indices, test indices); indices are None without validation."""
    from pddkit.evaluation.validation import stratified_split

    if config.val_fraction is None and val_dataset is None:
        return dataset, None, None
    if not dataset.labelled:
        raise PddkitError("choosing hyperparameters on validation data needs labelled data")
    if val_dataset is not None:
        if not val_dataset.labelled:
            raise PddkitError(f"validation data {val_dataset.name} has no labels")
        val_dataset.require_both_classes()
        n = len(dataset.samples)
        both = Dataset(dataset.name, dataset.samples + val_dataset.samples,
                       dataset.skipped + val_dataset.skipped, dataset.meta)
        return both, np.arange(n, len(both.samples)), np.arange(n)
    val_idx, test_idx = stratified_split(dataset.labels, config.val_fraction, config.seed,
                                         groups=[s.group for s in dataset.samples])
    return dataset, val_idx, test_idx


def _validate(calls, target, log_freq, labels, val_idx, test_idx, config, probe_search=None,
              probe_grid=None, notices=None) -> dict:
    """For each method with a grid: the value chosen on validation, measured on test. The
    probe's grid is (proxy learning rate, layer); its default is the auxiliary-data choice."""
    from pddkit.evaluation.validation import validate
    from pddkit.methods.grid import GRIDS, Padded, grid_points, grid_scores

    out = {}
    padded = None
    for c in calls:
        if c.label in out:
            continue
        if c.spec.name == "probe" and probe_search is not None:
            if len(probe_search.probes) == 1:
                notices.append(f"probe: loaded from {config.probe_load}; its layer and proxy "
                               "learning rate are fixed, so the validation split does not choose them")
                continue
            best = probe_search.best
            out[c.label] = validate("probe", probe_search.grid, probe_grid, labels, val_idx,
                                    test_idx, config.n_bootstrap, config.seed,
                                    default={"proxy_lr": best.proxy_lr_, "layer": best.layer_})
            continue
        if c.spec.name not in GRIDS:
            continue
        padded = padded or Padded.of(target)
        grid = grid_points(c.spec.name)
        scores = grid_scores(c.spec.name, padded, log_freq)  # [N, G], no forward pass
        out[c.label] = validate(c.spec.name, grid, scores, labels, val_idx, test_idx,
                                config.n_bootstrap, config.seed)
    return out


def _score_method(call: MethodCall, obs: list[Observation], labels, config: RunConfig,
                  test_idx: np.ndarray | None = None):
    scores = np.fromiter((call(o) for o in obs), dtype=np.float64, count=len(obs))
    if not np.isfinite(scores).all():  # a method bug, never the user's fault
        raise RuntimeError(f"method {call.label} produced a non-finite score")
    metrics = None
    if labels is not None:
        sel = slice(None) if test_idx is None else test_idx
        metrics = compute_metrics(scores[sel], np.asarray(labels)[sel],
                                  n_bootstrap=config.n_bootstrap, seed=config.seed)
    return MethodResult(call.label, call.spec.name, dict(call.params), scores, metrics)


def _blind_baseline(dataset: Dataset, config: RunConfig, notices: list[str],
                    test_idx: np.ndarray | None = None):
    """Out-of-fold scores of the model-free classifier (evaluation/blind.py) for every
    text; its metrics on the test part when there is a validation split."""
    from pddkit.evaluation.blind import BlindBaseline

    groups = [s.group for s in dataset.samples]
    use_groups = any(g is not None for g in groups)
    if use_groups:
        groups = [g if g is not None else f"sample:{s.id}" for g, s in zip(groups, dataset.samples)]
    texts = [s.text for s in dataset.samples]
    model = BlindBaseline(seed=config.seed)
    try:
        scores = model.cross_val_scores(texts, dataset.labels, groups if use_groups else None)
    except PddkitError as e:
        logger.warning("no blind baseline: %s", e)
        notices.append(f"no blind baseline: {e}")
        return None
    sel = slice(None) if test_idx is None else test_idx
    metrics = compute_metrics(scores[sel], np.asarray(dataset.labels)[sel],
                              n_bootstrap=config.n_bootstrap, seed=config.seed)
    params = {"folds": model.n_splits_used_, "grouped_by_document": use_groups}
    return MethodResult("blind", "blind", params, scores, metrics)
