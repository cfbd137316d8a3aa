"""One provider per need: each runs its pass (through the run's executor and cache) and
fills its field of the observations (stats.Observation). The target pass runs first for
every plan; the others run when plan.needs holds their Need, in the Need enum's order.

A provider is `fn(ctx: PassContext) -> None`, registered with `@provider(Need.X)`."""

from __future__ import annotations

import logging

import numpy as np

from pddkit.backends.base import Backend
from pddkit.engine import (  # noqa: F401  (each module registers its provider)
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
from pddkit.engine.pass_context import (
    PassContext,
    _inner,
    provider,
    run_providers,
    text_sets_stats,
)
from pddkit.errors import PddkitError
from pddkit.methods.base import Need
from pddkit.stats import TokenStats

logger = logging.getLogger(__name__)

PROBE_WARN_AUC = 0.6  # below this held-out auxiliary AUC the probe's scores are flagged


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
    from pddkit.resources.neighbor_sets import NeighborParams

    wanted: dict = {}
    for c in ctx.calls:
        if Need.NEIGHBORS not in c.spec.needs:
            continue
        p = c.params
        if p["n_neighbors"] < 1 or p["top_k"] < 1 or not 0 <= p["dropout"] < 1:
            raise PddkitError(f"{c.label} needs n_neighbors >= 1, top_k >= 1 and 0 <= dropout < 1")
        key = NeighborParams.of(p)
        wanted[key] = max(wanted.get(key, 0), int(p["n_neighbors"]))
    cfg = ctx.config
    if cfg.neighbors_file:
        sets, cut = neighbors.load(cfg.neighbors_file, ctx.ids, wanted), 0
    elif ctx.given_neighbors and not cfg.mask_model:
        from pddkit.resources.neighbor_files import as_sets

        sets, cut = as_sets(ctx.given_neighbors, ctx.ids, wanted, "the data set"), 0
    else:
        from pddkit.backends.devices import pick_device
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


def run_passes(ctx: PassContext, needs: list[Need]) -> None:
    """The target pass, then one provider per need, each timed (every pass module is
    imported above, so every provider is registered)."""
    run_providers(ctx, needs)
