"""The `hf` backend: a Hugging Face causal LM in this process (backends/hf_loading.py loads it,
backends/stats_pass.py is its one batched statistics pass).

Loaded by name (`HFBackend.load`), the model is read from disk only when it is first
needed: a rerun whose statistics are all in the cache never loads it. `load_key()` names
what loading would give without loading anything (backends/hf_load_key.py: the model
directory's files by size and mtime, the options, the library versions), so the cache can
remember the fingerprint, the facts results.json reports and the texts' token ids under it
(cache/memo.py).
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from pathlib import Path

from pddkit.backends.base import STATS_FORMAT, BackendSpec, Capabilities, Encoded
from pddkit.backends.hf_load_key import load_key, local_folder
from pddkit.backends.registry import register_backend
from pddkit.errors import PddkitError
from pddkit.stats import TokenStats


@register_backend("hf")
class HFBackend:
    """A model (backends.hf_loading.LoadedModel, or a way to load one) and its statistics pass."""

    capabilities = Capabilities(full_distribution=True, hidden_states=True, local_model=True,
                                sampling=True)
    # the run options `load` takes (engine.config.RunConfig field names)
    OPTIONS = ("device", "dtype", "trust_remote_code", "local_files_only", "revision",
               "batch_size", "padding_side", "max_length", "engine", "quantize")

    def __init__(self, lm=None, *, batch_size: int | str = 8, padding_side: str = "right",
                 max_length: int | None = None, spec: BackendSpec | None = None,
                 name: str | None = None) -> None:
        if batch_size != "auto" and (not isinstance(batch_size, int) or batch_size < 1):
            raise PddkitError(f"`batch_size` must be at least 1 or 'auto', not {batch_size!r}")
        if padding_side not in ("left", "right"):
            raise PddkitError(f"`padding_side` must be 'left' or 'right', not {padding_side!r}")
        if lm is None and spec is None:
            raise ValueError("HFBackend needs a loaded model or a spec to load one from")
        if lm is not None and getattr(lm.model, "config", None) is not None:
            from pddkit.backends.model_config import check_causal

            model = getattr(lm.model, "_orig_mod", lm.model)  # torch.compile's wrapper
            check_causal(model.config, lm.name, architectures=[type(model).__name__])
        self._lm = lm
        self.name = lm.name if lm is not None else (name or spec.model)
        self.batch_size = batch_size
        self.padding_side = padding_side
        self.max_length = max_length
        self._runner = None
        self._spec = spec
        self._fingerprint: str | None = None
        self._load_key: str | None = None
        self._identity = None  # run_elsewhere: () -> (fingerprint, facts) from where it runs
        self._where: str | None = None
        self._tokens = None  # run_elsewhere: the tokenizer alone (hf_tokenizers.TokenizerView)
        self._shared_cache: bool | None = None  # infill_stats: whether the KV cache can be shared
        self._shared_prefix: bool | None = None  # stats_given_prefix: the same, for the shots
        self._parts: tuple[str, str | None] | None = None  # load: (base model, adapter or None)

    @classmethod
    def load(cls, name: str, *, device: str = "auto", dtype: str = "auto",
             trust_remote_code: bool = False, local_files_only: bool = False,
             revision: str | None = None, batch_size: int | str = 8, padding_side: str = "right",
             max_length: int | None = None, engine: str = "local",
             role: str = "model", adapter: str | None = None,
             quantize: str | None = None) -> HFBackend:
        """`name` (a local directory or a hub id), loaded when first needed. A missing local
        path, a hub id that can be fetched neither from the local cache nor from the hub, or
        a `device` this machine does not have is refused now. `engine="ray"`: never loaded
        here unless a pass needs the model itself (the actors run it: run_elsewhere).
        `adapter`: a PEFT adapter (folder or hub id) on the model; a local folder `name`
        holding an adapter alone loads its base with it (adapters.resolve_adapter).
        `quantize`: "8bit" or "4bit" (bitsandbytes on a CUDA GPU; refused now without one)."""
        from pddkit.backends.adapters import checked_source
        from pddkit.backends.devices import DTYPES, check_device, check_quantize

        if dtype not in DTYPES:
            raise PddkitError(f"`dtype` must be one of {', '.join(DTYPES)}, not {dtype!r}")
        # a device this machine lacks: one sentence now; with Ray the actors' machines
        # decide (each actor loads through from_spec, which checks there)
        if device not in ("auto", "cpu") and engine == "local":
            check_device(device)
        if engine == "local":
            check_quantize(quantize, device)
        options = {"device": device, "dtype": dtype, "trust_remote_code": trust_remote_code,
                   "local_files_only": local_files_only, "revision": revision,
                   "batch_size": batch_size, "padding_side": padding_side,
                   "max_length": max_length, "role": role}
        if adapter is not None:  # only when set: a spec without them stays as it was
            options["adapter"] = adapter
        if quantize is not None:
            options["quantize"] = quantize
        base, with_adapter, local_files_only = checked_source(
            name, adapter, role=role, trust_remote_code=trust_remote_code, revision=revision,
            local_files_only=local_files_only)
        options["local_files_only"] = local_files_only
        backend = cls(None, batch_size=batch_size, padding_side=padding_side,
                      max_length=max_length, spec=BackendSpec("hf", name, tuple(sorted(options.items()))),
                      name=name)
        backend._parts = (base, with_adapter)
        if engine == "local" and backend._folders() is None:  # nothing to remember it by
            backend.lm  # noqa: B018
        return backend

    @classmethod
    def from_spec(cls, spec: BackendSpec) -> HFBackend:
        return cls.load(spec.model, **dict(spec.options))

    @property
    def spec(self) -> BackendSpec | None:
        """How to load this backend again elsewhere; None for a model handed over in memory."""
        return self._spec

    @property
    def lm(self):
        """The LoadedModel, loaded now if it was not yet."""
        if self._lm is None:
            from pddkit.backends.hf_loading import load_model

            o = dict(self._spec.options)
            self._lm = load_model(self._spec.model, device=o["device"], dtype=o["dtype"],
                                  trust_remote_code=o["trust_remote_code"],
                                  local_files_only=o["local_files_only"], revision=o["revision"],
                                  role=o["role"], adapter=o.get("adapter"),
                                  quantize=o.get("quantize"))
        return self._lm

    @property
    def runner(self):
        """The statistics pass (backends/stats_pass.py StatsRunner) over the loaded model
        (batch size 1 until an "auto" batch size is found)."""
        if self._runner is None:
            from pddkit.backends.stats_pass import StatsRunner

            size = 1 if self.batch_size == "auto" else self.batch_size
            self._runner = StatsRunner(self.lm, batch_size=size, padding_side=self.padding_side,
                                       max_length=self.max_length)
        return self._runner

    def model_directory(self) -> Path | None:
        """The local folder the model is read from, when that is known without loading it:
        a local path, or its snapshot in the hub cache when loading is offline (for a PEFT
        adapter folder given as the model: its base model's folder)."""
        if self._spec is None:
            return None
        name = self._parts[0] if self._parts else self._spec.model
        o = dict(self._spec.options)
        return local_folder(name, "config.json", o.get("revision"), o.get("local_files_only"))

    def adapter_directory(self) -> Path | None:
        """The local folder of the PEFT adapter on the model (as model_directory finds the
        model's), None without one or when it is not known without loading."""
        if self._spec is None or not self._parts or self._parts[1] is None:
            return None
        return local_folder(self._parts[1], "adapter_config.json", None,
                            dict(self._spec.options).get("local_files_only"))

    def _folders(self) -> list[Path] | None:
        """The folders loading reads (the model's, then its adapter's), or None when one of
        them is not known without loading."""
        d = self.model_directory()
        if d is None:
            return None
        if self._parts and self._parts[1] is not None:
            a = self.adapter_directory()
            return None if a is None else [d, a]
        return [d]

    def load_key(self) -> str | None:
        """What loading would give, named without loading (backends/hf_load_key.py): the
        model directory's files (name, size, mtime), the load options with device and dtype
        resolved, the library versions and the statistics format. None when it cannot be
        named (a model in memory, a hub id online)."""
        if self._load_key is None:
            folders = self._folders()
            if folders is None:
                return None
            self._load_key = load_key(folders, dict(self._spec.options), self._where)
        return self._load_key

    def run_elsewhere(self, identity, where: str) -> None:
        """Make this the driver's view of a model that other processes run (the Ray engine's
        actors): texts are encoded with the tokenizer alone, `identity()` -> (fingerprint,
        facts) is asked of where the model runs (same device and dtype as the statistics),
        and `where` joins the load key. The model is loaded here only if a pass needs it."""
        self._identity, self._where, self._load_key = identity, where, None

    def _tokenizer_view(self):
        """The tokenizer and context without the model: the loaded model's when there is
        one, else (run_elsewhere) the tokenizer and config files alone, loaded once."""
        if self._lm is not None or self._identity is None:
            return self.lm
        if self._tokens is None:
            from pddkit.backends.hf_tokenizers import load_tokenizer_view

            o = dict(self._spec.options)
            self._tokens = load_tokenizer_view(self._spec.model, role=o["role"],
                                               trust_remote_code=o["trust_remote_code"],
                                               local_files_only=o["local_files_only"],
                                               revision=o["revision"], adapter=o.get("adapter"))
        return self._tokens

    def fingerprint(self) -> str:
        if self._fingerprint is None and self._identity is not None:
            self._fingerprint = self._identity()[0]
        if self._fingerprint is not None:
            return self._fingerprint
        from pddkit.cache.fingerprint import hf_fingerprint

        # loaded here by name: its files name it (kept for this backend's life); handed
        # over: it may change between two runs of this backend, so its tensors name it
        # each time (cache/tensor_digest.py remembers the digest while they are unchanged)
        fp = hf_fingerprint(self.lm.model, self.lm.tokenizer, start_id=self.runner.start_id,
                            dtype=self.lm.dtype, backend="hf", stats_format=STATS_FORMAT,
                            weights="files" if self._spec else "tensors")
        if self._spec:
            self._fingerprint = fp
        return fp

    def facts(self) -> dict:
        """What results.json reports about the model (loads it; run_elsewhere: asked of
        where it runs)."""
        from pddkit.cache.fingerprint import vocab_fingerprint

        if self._identity is not None:
            return dict(self._identity()[1])
        lm = self.lm
        facts = {"tokenizer": getattr(lm.tokenizer, "name_or_path", lm.name) or lm.name,
                 "vocab_size": len(lm.tokenizer), "vocab_fingerprint": vocab_fingerprint(lm.tokenizer),
                 "device": lm.device, "dtype": lm.dtype, "context_length": lm.context_length}
        adapter, base, quantize = (getattr(lm, k, None) for k in ("adapter", "base", "quantize"))
        if adapter is not None:  # only when set: facts without them stay as they were
            facts.update(adapter=adapter, base_model=base)
        if quantize is not None:
            facts["quantize"] = quantize
        return facts

    def encode(self, texts: Sequence[str], names: Sequence[str], what: str = "statistics") -> Encoded:
        from pddkit.backends.stats_pass import encode

        enc = encode(self._tokenizer_view(), texts, names, self.max_length, what=what)
        return Encoded(ids=enc.ids, truncated=enc.truncated)

    def stats_for_ids(self, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                      desc: str = "statistics", fields: Set[str] = frozenset()) -> list[TokenStats]:
        """TokenStats per id sequence; `fields` asks for the optional fields computed only on
        request (stats.ON_REQUEST: `tempered`, acmia)."""
        if self.batch_size == "auto" and ids:
            from pddkit.backends.stats_pass import largest_batch

            self.batch_size = self.runner.batch_size = largest_batch(
                self.runner, max(ids, key=len), len(ids))
        return self.runner.run_ids([list(s) for s in ids], list(truncated), desc=desc,
                                   tempered="tempered" in fields)

    def tokenize(self, text: str) -> list[int]:
        """Token ids of `text` (add_special_tokens=False), never cut (recall's shots)."""
        return list(self._tokenizer_view().tokenizer(text, add_special_tokens=False)["input_ids"])

    def added_prefix_ids(self) -> list[int]:
        """The special ids the tokenizer puts before a text by default (its BOS, if it adds
        one): recall's `variant=reference`."""
        from pddkit.backends.prefix_pass import added_prefix

        return added_prefix(self._tokenizer_view().tokenizer)

    def context_limit(self) -> int | None:
        """Tokens a sequence may hold, start token included: the context and `max_length`."""
        limit = self._tokenizer_view().context_length
        if self.max_length is not None:
            limit = self.max_length if limit is None else min(limit, self.max_length)
        return limit

    def stats_given_prefix(self, prefix: Sequence[int], ids: Sequence[Sequence[int]],
                           truncated: Sequence[bool], desc: str = "conditioned pass") -> list[TokenStats]:
        """TokenStats of each id sequence x given `prefix` ([start] + P + x, over
        x's positions), the prefix's key/value cache computed once and shared by every text
        (backends/prefix_pass.py); the plain pass when this model's cache cannot be shared."""
        from pddkit import progress
        from pddkit.backends.prefix_pass import (
            plain_prefix_stats,
            shared_prefix_stats,
            shared_prefix_works,
        )

        seqs, flags = [list(s) for s in ids], [bool(t) for t in truncated]
        if not seqs:
            return []
        runner = self.runner
        size = self.batch_size if isinstance(self.batch_size, int) else runner.batch_size
        if self._shared_prefix is None:
            self._shared_prefix = shared_prefix_works(runner, prefix, seqs, size)
        bar = progress.bar(total=sum(len(s) for s in seqs), desc=desc, unit="tok")
        try:
            if self._shared_prefix:
                return shared_prefix_stats(runner, prefix, seqs, flags, size)
            return plain_prefix_stats(runner, prefix, seqs, flags)
        finally:
            bar.update(sum(len(s) for s in seqs))
            bar.close()

    def infill_stats(self, bases: Sequence[TokenStats],
                     rows: Sequence[Sequence[tuple[int, Sequence[int]]]]) -> list[list[TokenStats]]:
        """`infill`'s variants (i, ids) of each text whose target statistics are `bases[t]`,
        each text's key/value cache shared by its variants (backends/infill_windows.py);
        the plain pass when this model's cache cannot be shared (checked once)."""
        import torch

        from pddkit.backends.infill_windows import shared_cache_works, windows_of_text

        runner = self.runner
        size = self.batch_size if isinstance(self.batch_size, int) else 8
        if self._shared_cache is None:
            first = next((t for t, r in enumerate(rows) if r), None)
            if first is None:
                return [[] for _ in rows]
            self._shared_cache = shared_cache_works(runner, bases[first], rows[first], size)
        if not self._shared_cache:
            flat = [list(seq) for r in rows for _, seq in r]
            stats = iter(self.stats_for_ids(flat, [False] * len(flat), desc="infilling pass"))
            return [[next(stats) for _ in r] for r in rows]
        from pddkit import progress

        bar = progress.bar(total=sum(len(r) for r in rows), desc="infilling pass", unit="variant")
        out = []
        with torch.inference_mode():
            for base, r in zip(bases, rows):
                out.append(windows_of_text(runner, base, r, size) if r else [])
                bar.update(len(r))
        bar.close()
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer_view().tokenizer.decode(list(ids))

    def sample(self, prompts: Sequence[str], n: int, top_k: int, top_p: float,
               temperature: float, max_new_tokens: int | None, seeds: Sequence[int],
               names: Sequence[str] | None = None):
        """`n` continuations of each prompt, seeded per prompt by `seeds` (backends/sampling.py):
        backends.sampling.Sampled, continuation texts only. Prompts of similar length are
        decoded together, as many as keep a batch within `batch_size` rows (prompts x `n`;
        at least one prompt): each draws what it would draw alone."""
        from pddkit import progress
        from pddkit.backends import sampling

        names = list(names) if names is not None else [f"prompt {i + 1}" for i in range(len(prompts))]
        enc = self.encode(prompts, names, what="sampling prompts")
        lm, start = self.lm, self.runner.start_id
        ends = sampling.end_token_ids(lm.model, lm.tokenizer)
        full = [[start, *ids] for ids in enc.ids]
        budgets = [sampling.continuation_budget(len(p), lm.context_length, max_new_tokens)
                   for p in full]
        rows = self.batch_size if isinstance(self.batch_size, int) else 8
        per_batch = max(1, rows // max(1, n))
        order = sorted(range(len(full)), key=lambda i: -len(full[i]))  # little padding
        out: list = [None] * len(full)
        bar = progress.bar(total=len(prompts), desc="sampling", unit="text")
        for c in range(0, len(order), per_batch):
            part = order[c:c + per_batch]
            got = sampling.sample_many(lm.model, [full[i] for i in part], n, top_k=top_k,
                                       top_p=top_p, temperature=temperature,
                                       max_new=[budgets[i] for i in part],
                                       seeds=[seeds[i] for i in part], end_ids=ends)
            for i, texts in zip(part, got):
                out[i] = tuple(lm.tokenizer.decode(r, skip_special_tokens=True) for r in texts)
            bar.update(len(part))
        bar.close()
        return sampling.Sampled(tuple(out))

