"""FSD's pass (SPEC 3e): a LoRA adapter trained on the calibration non-members
(resources/fsd_tuning.py), then the texts under test through the target with that adapter,
a second backend behind the run's executor and statistics cache like the reference model.

Each distinct set of tuning settings among the fsd calls gets one adapter. With a
statistics cache the adapter is stored in it (CACHE/fsd-adapters/KEY, keyed by the target
model, the fine-tuning texts' token ids, the settings, the seed and the device kind): a
rerun trains nothing, and its statistics, keyed by the target's fingerprint and the
adapter's digest, are all found, so the tuned model is never even built. The adapter is
written to the run folder (fsd-adapter/, a PEFT adapter folder) and results.json records
how it was trained (`counts.fsd`, `models.fsd_adapter`)."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
from collections.abc import Sequence, Set
from pathlib import Path

from pddkit.engine.executors import LocalExecutor
from pddkit.engine.pass_context import PassContext, _inner, provider
from pddkit.errors import PddkitError
from pddkit.methods.base import Need
from pddkit.stats import TokenStats

logger = logging.getLogger(__name__)

ADAPTERS = "fsd-adapters"  # the statistics cache's folder of trained adapters
FOLDER = "fsd-adapter"  # the run folder's


class FineTunedBackend:
    """The target with an fsd adapter: the target's tokenizer and encodings, its own
    fingerprint (the target's and the adapter's digest), the tuned copy of the model built
    only when a statistic is not in the cache."""

    def __init__(self, target, adapter, settings) -> None:
        self.target = target  # the run's target backend (behind the cache when there is one)
        self.adapter = adapter
        self.settings = settings
        self.name = f"{target.name} + fsd adapter"
        self._hf = None

    @property
    def capabilities(self):
        return self.target.capabilities

    @property
    def batch_size(self):
        return getattr(_inner(self.target), "batch_size", 8)

    @property
    def max_length(self):
        return getattr(_inner(self.target), "max_length", None)

    def fingerprint(self) -> str:
        from pddkit.cache.fingerprint import fingerprint_of

        return fingerprint_of({"target": self.target.fingerprint(),
                               "fsd_adapter": self.adapter.digest})

    def facts(self) -> dict:
        own = getattr(self.target, "facts", None)
        found = (own() if own is not None else None) or {}
        return {**found, "fsd_adapter": self.adapter.digest}

    def encode(self, texts: Sequence[str], names: Sequence[str], what: str = "statistics"):
        return self.target.encode(texts, names, what=what)

    def decode(self, ids: Sequence[int]) -> str:
        return self.target.decode(ids)

    def context_limit(self) -> int | None:
        return self.target.context_limit()

    def stats_for_ids(self, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                      desc: str = "statistics", fields: Set[str] = frozenset()) -> list[TokenStats]:
        return self.tuned().stats_for_ids(ids, truncated, desc=desc, fields=fields)

    def tuned(self):
        """The HFBackend of the target's model with the adapter on a copy of it."""
        if self._hf is None:
            from pddkit.backends.hf import HFBackend
            from pddkit.backends.hf_loading import LoadedModel
            from pddkit.resources.fsd_tuning import with_adapter

            inner = _inner(self.target)
            lm = inner.lm
            # the causal LM with the LoRA layers in it (not the PeftModel wrapper, whose
            # base_model is no transformer body: the pass splits body and head)
            model = with_adapter(lm.model, self.adapter, self.settings).get_base_model()
            self._hf = HFBackend(LoadedModel(model, lm.tokenizer, self.name, lm.device, lm.dtype),
                                 batch_size=inner.batch_size, padding_side=inner.padding_side,
                                 max_length=inner.max_length)
        return self._hf


def fsd_calls(calls):
    return [c for c in calls if Need.FINETUNED in c.needs]


@provider(Need.FINETUNED)
def finetuned_pass(ctx: PassContext) -> None:
    """One adapter per distinct tuning settings of the fsd calls (trained, or found in the
    cache), then the texts under test through the target with it."""
    from pddkit.resources.fsd_tuning import TuningSettings

    cal = ctx.calibration
    if cal is None:  # engine/prepare.py makes it whenever the plan needs it
        raise RuntimeError("the fsd pass ran without calibration data")
    tuning = [s for s in cal.samples if s.label == 0]
    if not tuning:
        raise PddkitError(f"fsd fine-tunes on the calibration non-members, and the calibration "
                          f"data ({cal.source}) holds none: give `calibration` with non-members "
                          "(label 0)")
    enc = ctx.target.encode([s.text for s in tuning],
                            [f"calibration text {s.source or s.id}" for s in tuning],
                            what="fsd fine-tuning texts")
    wanted: dict = {}  # settings -> the optional fields their bases read
    for c in fsd_calls(ctx.calls):
        settings = TuningSettings.of(c.params)
        settings.check()
        wanted[settings] = wanted.get(settings, frozenset()) | c.reads
    # the tuned copy lives in this process (no Ray actor can build it): its pass runs here
    here = ctx if ctx.executor.name == "local" else dataclasses.replace(ctx, executor=LocalExecutor())
    per_text: list[dict] = [{} for _ in ctx.texts]
    records, cut = {}, 0
    for n, (settings, fields) in enumerate(wanted.items()):
        t0 = time.perf_counter()
        adapter, trained, key = _adapter(ctx, enc.ids, settings)
        ctx.timings["fsd_training"] = ctx.timings.get("fsd_training", 0.0) + time.perf_counter() - t0
        name = FOLDER if n == 0 else f"{FOLDER}-{n + 1}"
        ctx.extras.setdefault("folders", {})[name] = adapter
        backend = FineTunedBackend(ctx.target, adapter, settings)
        if ctx.config.cache:
            from pddkit.backends.caching import CachingBackend
            from pddkit.cache import StatsStore

            backend = CachingBackend(backend, StatsStore.open(ctx.config.cache))
        try:
            stats = here.stats(backend, ctx.texts, ctx.names, "fine-tuned pass", fields=fields)
        finally:
            if hasattr(backend, "store"):
                _count(ctx, backend)
                backend.close()
        for row, st in zip(per_text, stats):
            row[settings.key()] = st
        cut = max(cut, sum(st.truncated for st in stats))
        records[name] = {**adapter.record, "trained": trained, "adapter_key": key,
                         "digest": adapter.digest,
                         "fine_tuning_texts_cut": sum(enc.truncated)}
    ctx.fields["finetuned"] = per_text
    ctx.counts["truncated"]["fine-tuned"] = cut
    ctx.counts["fsd"] = records
    ctx.models["fsd_adapter"] = {k: {"digest": r["digest"], "trained": r["trained"]}
                                 for k, r in records.items()}


def _count(ctx: PassContext, backend) -> None:
    """The tuned model's cache hits and misses, beside the other passes' in results.json
    counts.cache (engine/run.py adds those of the backends it opened)."""
    for desc, (h, m) in backend.counts().items():
        ctx.counts.setdefault("cache", {})[desc] = {"hits": h, "misses": m}


def _adapter(ctx: PassContext, ids, settings):
    """(the adapter, whether it was trained now, its cache key or None without a cache): from
    the statistics cache when it holds one under the key, else trained (and stored there)."""
    from pddkit.backends.devices import pick_device
    from pddkit.resources.fsd_tuning import Adapter, adapter_key, train_adapter

    key, stored = None, None
    if ctx.config.cache:  # the key names the target by its fingerprint: asked only here
        device = pick_device(ctx.config.device).split(":")[0]
        key = adapter_key(ctx.target.fingerprint(), ids, settings, ctx.config.seed, device)
        stored = Path(ctx.config.cache) / ADAPTERS / key
        found = Adapter.load(stored)
        if found is not None:
            logger.info("fsd: the adapter trained before is in the cache (%s)", stored)
            return found, False, key
    inner = _inner(ctx.target)
    lm = getattr(inner, "lm", None)
    if lm is None:
        raise PddkitError(f"fsd fine-tunes the target, and {ctx.target.name} is not a local "
                          "model (use the hf backend)")
    adapter = train_adapter(lm.model, inner.runner.start_id, ids, settings, ctx.config.seed,
                            base_name=str(ctx.target.name))
    if stored is not None:  # written whole, then moved into place
        tmp = adapter.save(stored.with_name(f".{key}.{os.getpid()}.tmp"))
        try:
            tmp.replace(stored)
        except OSError:  # another run stored it meanwhile: the same adapter
            shutil.rmtree(tmp, ignore_errors=True)
    return adapter, True, key
