"""One provider per need: each runs its pass (through the run's executor and cache) and
fills its field of the observations (stats.Observation). The target pass runs first for
every plan; the others run when plan.needs holds their Need, in the Need enum's order.

A provider is `fn(ctx: PassContext) -> None`, registered with `@provider(Need.X)`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pddkit.backends.base import Backend
from pddkit.data.samples import Dataset
from pddkit.engine.config import RunConfig
from pddkit.engine.executors import Executor
from pddkit.errors import PddkitError
from pddkit.methods.base import MethodCall, Need
from pddkit.stats import TokenStats

logger = logging.getLogger(__name__)

PROBE_WARN_AUC = 0.6  # below this held-out auxiliary AUC the probe's scores are flagged


@dataclass
class PassContext:
    """What the providers read and write for one run (mutable: filled pass by pass)."""

    texts: list[str]
    names: list[str]  # each text's name in errors ("FILE line 3")
    ids: list[str]
    calls: tuple[MethodCall, ...]
    config: RunConfig
    target: Backend  # the target model's backend (behind the cache when there is one)
    executor: Executor
    load_backend: Callable[[str, object], Backend]  # (role, given model or None) -> Backend
    ref_model: object = None  # a preloaded reference model, if the caller gave one
    aux: Dataset | None = None  # the probe's auxiliary texts
    sets: list[np.ndarray] = field(default_factory=list)  # validation / test indices
    spans: list[str] = field(default_factory=list)  # the scored span of each text
    fields: dict = field(default_factory=dict)  # Observation field -> per-text values
    # neighbour sets, probe search and grid; "trail": file name -> rows written beside
    # scores.jsonl (shots.jsonl, augmentations.jsonl, samples.jsonl)
    extras: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    given_neighbors: dict | None = None  # id -> neighbour texts the data set carries (meta)
    shots: object | None = None  # data.shots.ShotPool of recall / conrecall (SPEC 3b)
    language: str | None = None  # the data set's declared language ("zh": jieba words)
    calibration: object | None = None  # data.calibration.CalibrationSet (SPEC 3e)
    # id -> the data's title, author and source columns (decop; data/paraphrases.py)
    document_fields: dict | None = None

    def stats(self, backend: Backend, texts: list[str], names: list[str], desc: str,
              fields: frozenset[str] = frozenset()) -> list[TokenStats]:
        """TokenStats of `texts` under `backend`, through the executor; never non-finite.
        `fields`: the optional TokenStats fields the methods read (executors.py)."""
        out = self.executor.token_stats(backend, texts, names, desc, fields=fields)
        finite = backend.capabilities.full_distribution
        for st, name in zip(out, names):
            bad = not np.isfinite(st.L).all() or (
                finite and not (np.isfinite(st.H).all() and np.isfinite(st.M2).all()
                                and (st.Lmax is None or np.isfinite(st.Lmax).all())
                                and (st.tempered is None or np.isfinite(st.tempered).all())))
            if bad:
                raise PddkitError(f"{backend.name} gave non-finite log-probabilities for {name} "
                                  "(a float16 overflow? try `dtype='float32'`)")
        return out


PROVIDERS: dict[Need | None, Callable[[PassContext], None]] = {}


def provider(need: Need | None):
    """Register the provider of `need` (None: the target pass, always run)."""

    def wrap(fn: Callable[[PassContext], None]) -> Callable[[PassContext], None]:
        PROVIDERS[need] = fn
        return fn

    return wrap


def run_passes(ctx: PassContext, needs: list[Need]) -> None:
    """The target pass, then one provider per need, each timed."""
    from pddkit.engine import (  # noqa: F401
        augment_pass,
        calibration_pass,
        decop_pass,
        emmia_pass,
        fsd_pass,
        infill_pass,
        repeat_pass,
        sample_pass,
        shots_pass,
    )

    for need in [None, *needs]:
        t0 = time.perf_counter()
        PROVIDERS[need](ctx)
        ctx.timings[_TIMING[need]] = time.perf_counter() - t0


_TIMING = {None: "target_pass", Need.LOWERCASE: "lowercase_pass", Need.REFERENCE: "reference_pass",
           Need.FREQUENCY: "frequency_table", Need.NEIGHBORS: "neighbors", Need.PROBE: "probe",
           Need.SHOTS: "conditioned_pass", Need.AUGMENTATIONS: "augmentation_pass",
           Need.SAMPLES: "sampling", Need.INFILL: "infill_passes",
           Need.CALIBRATION: "calibration_passes", Need.FINETUNED: "fsd",
           Need.REPEATED: "repeated_pass", Need.PAIRS: "emmia_pairs_pass",
           Need.QUIZ: "decop_quiz"}


@provider(None)
def target_pass(ctx: PassContext) -> None:
    """The target statistics; skipped when no method reads them (`reads_target=False`:
    samia on a served model without log-probabilities): the texts are only encoded (for the
    scored spans), and each Observation.target is an empty TokenStats, not statistics."""
    if ctx.calls and not any(c.spec.reads_target for c in ctx.calls):
        enc = ctx.target.encode(ctx.texts, ctx.names, what="target texts")
        empty = np.zeros(0, dtype=np.float32)
        ctx.fields["target"] = [TokenStats(np.zeros(0, dtype=np.int64), empty, empty, empty, cut)
                                for cut in enc.truncated]
        ctx.spans = [ctx.target.decode(ids) if cut else text
                     for text, ids, cut in zip(ctx.texts, enc.ids, enc.truncated)]
        ctx.counts.setdefault("truncated", {})["target"] = sum(enc.truncated)
        ctx.counts.setdefault("tokens", {})["target"] = 0
        logger.info("no method of this run reads the target statistics: the target pass "
                    "is skipped (the texts are only tokenised)")
        return
    fields = frozenset().union(*(c.reads for c in ctx.calls))  # Lmax for gapk
    target = ctx.stats(ctx.target, ctx.texts, ctx.names, "target pass", fields=fields)
    ctx.fields["target"] = target
    # SPEC section 3: for a truncated text, `zlib` and `lowercase` use the scored span
    ctx.spans = [ctx.target.decode(st.ids.tolist()) if st.truncated else text
                 for text, st in zip(ctx.texts, target)]
    ctx.counts.setdefault("truncated", {})["target"] = sum(s.truncated for s in target)
    ctx.counts.setdefault("tokens", {})["target"] = int(sum(len(s) for s in target))


@provider(Need.LOWERCASE)
def lowercase_pass(ctx: PassContext) -> None:
    lower = ctx.stats(ctx.target, [t.lower() for t in ctx.spans], ctx.names, "lowercase pass")
    ctx.fields["lower"] = lower
    ctx.counts["truncated"]["lowercase"] = sum(s.truncated for s in lower)


@provider(Need.REFERENCE)
def reference_pass(ctx: PassContext) -> None:
    ref = ctx.load_backend("reference model", ctx.ref_model)
    ctx.models["reference"] = describe(ref)
    reference = ctx.stats(ref, ctx.texts, ctx.names, "reference pass")
    ctx.fields["reference"] = reference
    ctx.counts["truncated"]["reference"] = sum(s.truncated for s in reference)


@provider(Need.FREQUENCY)
def frequency_table(ctx: PassContext) -> None:
    from pddkit.resources.frequency import FrequencyTable

    table = FrequencyTable.load(ctx.config.freq)
    vocab = _facts(ctx.target)
    if "vocab_size" in vocab:
        table.check_vocab(vocab["vocab_size"], vocab.get("vocab_fingerprint"), ctx.target.name,
                          ctx.config.freq)
    ctx.fields["log_freq"] = table.log_freq()
    ctx.models["frequency_table"] = {"path": str(ctx.config.freq), **{
        k: v for k, v in table.meta().items() if k != "sources"}}


@provider(Need.NEIGHBORS)
def neighbor_pass(ctx: PassContext) -> None:
    """Each distinct (top_k, dropout, seed) among the `neighbor` calls gets its own
    neighbours (generated, or read from the neighbours file, once for its largest
    n_neighbors; without a file or mask model, those the data set carries, e.g. WikiMIA's
    perturbed variant); every distinct neighbour text is scored once in one batched pass."""
    from pddkit.resources import neighbors

    wanted: dict = {}
    for c in ctx.calls:
        if Need.NEIGHBORS not in c.spec.needs:
            continue
        p = c.params
        if p["n_neighbors"] < 1 or p["top_k"] < 1 or not 0 <= p["dropout"] < 1:
            raise PddkitError(f"{c.label} needs n_neighbors >= 1, top_k >= 1 and 0 <= dropout < 1")
        key = neighbors.NeighborParams.of(p)
        wanted[key] = max(wanted.get(key, 0), int(p["n_neighbors"]))
    cfg = ctx.config
    if cfg.neighbors_file:
        sets, cut = neighbors.load(cfg.neighbors_file, ctx.ids, wanted), 0
    elif ctx.given_neighbors and not cfg.mask_model:
        from pddkit.resources.neighbor_files import as_sets

        sets, cut = as_sets(ctx.given_neighbors, ctx.ids, wanted, "the data set"), 0
    else:
        from pddkit.backends.hf_loading import pick_device
        from pddkit.data.builders.words import is_chinese

        default = "bert-base-chinese" if ctx.language and is_chinese(ctx.language) else "roberta-base"
        mm = neighbors.load_mask_model(cfg.mask_model or default, device=pick_device(cfg.device),
                                       local_files_only=cfg.local_files_only,
                                       trust_remote_code=cfg.trust_remote_code)
        sets, cut = neighbors.generate_sets(mm, ctx.texts, ctx.names, wanted, language=ctx.language)
    ctx.counts["truncated"]["neighbor_mask_model"] = cut
    for params, n in wanted.items():  # given neighbours may be fewer than asked for
        if sets.n_generated[params] < n:
            line = (f"neighbor: {sets.mask_model} holds {sets.n_generated[params]} neighbours "
                    f"per text; n_neighbors={n} uses those")
            logger.warning(line)
            ctx.notices.append(line)
    ctx.fields["neighbors"], ctx.counts["neighbor_texts"], ctx.counts["truncated"]["neighbors"] = \
        text_sets_stats(ctx, sets.texts, "a neighbour of", "neighbour pass")
    ctx.extras["neighbor_sets"] = sets


def text_sets_stats(ctx: PassContext, sets: dict, what: str, desc: str):
    """(per text {key: its texts' TokenStats}, distinct texts, of them truncated) for
    `sets` (key -> per text, a tuple of texts: neighbours, pac's copies): every distinct text
    of every set scored once, in one batched pass of the target; `what` names them in
    errors ("a neighbour of")."""
    unique: dict[str, str] = {}  # text -> its name in errors
    for key, per_text in sets.items():
        for name, texts in zip(ctx.names, per_text):
            for t in texts:
                unique.setdefault(t, f"{what} {name} ({key.label()})")
    flat = list(unique)
    stats = ctx.stats(ctx.target, flat, list(unique.values()), desc)
    by_text = dict(zip(flat, stats))
    fields = [{key: tuple(by_text[t] for t in per_text[i]) for key, per_text in sets.items()}
              for i in range(len(ctx.texts))]
    return fields, len(flat), sum(st.truncated for st in stats)


@provider(Need.PROBE)
def probe_pass(ctx: PassContext) -> None:
    """Trained on the auxiliary texts (one probe per proxy learning rate and layer) or
    loaded; each of ctx.sets standardised on its own with probe_standardize "per_set"."""
    from pddkit.resources.probe import LinearProbe, ProbeSearch, probe_scores, train_probes

    cfg = ctx.config
    lm = getattr(_inner(ctx.target), "lm", None)
    if lm is None:
        raise PddkitError(f"probe needs the hidden states of a local model; {ctx.target.name} "
                          "is not one")
    if cfg.probe_load:
        probe = LinearProbe.load(cfg.probe_load)
        search = ProbeSearch((probe,), np.array([probe.meta_.get("aux_val_auc", 0.0)]))
    else:
        aux = ctx.aux
        search = train_probes(lm.model, lm.tokenizer, [s.text for s in aux.samples],
                              cfg.probe_lrs, cfg.seed, cfg.probe_lora, cfg.fixed_batch_size,
                              aux_labels=list(aux.labels) if aux.labelled else None,
                              standardize=cfg.probe_standardize)
    grid, ctx.counts["truncated"]["probe"] = probe_scores(
        lm.model, lm.tokenizer, ctx.texts, search.probes, cfg.fixed_batch_size, lm.name,
        cfg.probe_standardize, ctx.sets or [np.arange(len(ctx.texts))])
    if cfg.probe_data:  # the auxiliary texts are the user's input too: count their cuts
        ctx.counts["truncated"]["probe_data"] = search.best.meta_["aux_texts_cut"]
    ctx.fields["probe"] = [float(x) for x in grid[:, int(np.argmax(search.aux_val_auc))]]
    best_auc = float(np.max(search.aux_val_auc))
    if cfg.probe_data and best_auc < PROBE_WARN_AUC:
        line = (f"probe: the best probe (layer {search.best.layer_}, proxy lr "
                f"{search.best.proxy_lr_:g}) separates the held-out auxiliary texts with "
                f"AUC {best_auc:.2f} only, so its scores are unlikely to carry membership")
        logger.warning(line)
        ctx.notices.append(line)
    ctx.extras["probe_search"], ctx.extras["probe_grid"] = search, grid


def _inner(backend: Backend) -> Backend:
    """The backend itself, behind the statistics cache if there is one."""
    return getattr(backend, "backend", backend)


def _facts(backend: Backend) -> dict:
    """What the backend tells about its model and tokenizer: the backend's (or the cache's
    memo of them) `facts()`, else read from its tokenizer (every backend has one: ids are
    computed here)."""
    facts = getattr(backend, "facts", None)
    found = facts() if facts is not None else None
    if found is not None:
        return found
    from pddkit.cache.fingerprint import vocab_fingerprint

    tok = getattr(_inner(backend), "tokenizer", None)
    if tok is None:
        return {}
    return {"tokenizer": getattr(tok, "name_or_path", "?"), "vocab_size": len(tok),
            "vocab_fingerprint": vocab_fingerprint(tok)}


def describe(backend: Backend) -> dict:
    """The model's entry in results.json `models`."""
    inner = _inner(backend)
    info = {"name": backend.name, "backend": getattr(inner, "kind", "?")}
    info.update({k: v for k, v in _facts(backend).items() if k != "vocab_fingerprint"})
    if hasattr(inner, "server"):  # a served model: what its capability probe found
        info["server"] = inner.server.to_dict()
    return info
