"""The `hf` backend: a Hugging Face causal LM in this process (backends/hf_loading.py loads it,
backends/stats_pass.py is its one batched statistics pass, SPEC section 2)."""

from __future__ import annotations

from collections.abc import Sequence

from pddkit.backends import register_backend
from pddkit.backends.base import STATS_FORMAT, BackendSpec, Capabilities, Encoded
from pddkit.stats import TokenStats


@register_backend("hf")
class HFBackend:
    """A loaded model (backends.hf_loading.LoadedModel) and its statistics pass."""

    capabilities = Capabilities(full_distribution=True, hidden_states=True, local_model=True)
    # the run options `load` takes (engine.config.RunConfig field names)
    OPTIONS = ("device", "dtype", "trust_remote_code", "local_files_only", "revision",
               "batch_size", "padding_side", "max_length")

    def __init__(self, lm, *, batch_size: int = 8, padding_side: str = "right",
                 max_length: int | None = None, spec: BackendSpec | None = None) -> None:
        from pddkit.backends.stats_pass import StatsRunner

        self.lm = lm
        self.name = lm.name
        self.max_length = max_length
        self.runner = StatsRunner(lm, batch_size=batch_size, padding_side=padding_side,
                                  max_length=max_length)
        self._spec = spec
        self._fingerprint: str | None = None

    @classmethod
    def load(cls, name: str, *, device: str = "auto", dtype: str = "auto",
             trust_remote_code: bool = False, local_files_only: bool = False,
             revision: str | None = None, batch_size: int = 8, padding_side: str = "right",
             max_length: int | None = None, role: str = "model") -> HFBackend:
        """Load `name` (a local directory or a hub id)."""
        from pddkit.backends.hf_loading import load_model

        options = {"device": device, "dtype": dtype, "trust_remote_code": trust_remote_code,
                   "local_files_only": local_files_only, "revision": revision,
                   "batch_size": batch_size, "padding_side": padding_side,
                   "max_length": max_length, "role": role}
        lm = load_model(name, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                        local_files_only=local_files_only, revision=revision, role=role)
        return cls(lm, batch_size=batch_size, padding_side=padding_side, max_length=max_length,
                   spec=BackendSpec("hf", name, tuple(sorted(options.items()))))

    @classmethod
    def from_spec(cls, spec: BackendSpec) -> HFBackend:
        return cls.load(spec.model, **dict(spec.options))

    @property
    def spec(self) -> BackendSpec | None:
        """How to load this backend again elsewhere; None for a model handed over in memory."""
        return self._spec

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            from pddkit.cache.fingerprint import hf_fingerprint

            self._fingerprint = hf_fingerprint(self.lm.model, self.lm.tokenizer,
                                               start_id=self.runner.start_id,
                                               dtype=self.lm.dtype, backend="hf",
                                               stats_format=STATS_FORMAT)
        return self._fingerprint

    def encode(self, texts: Sequence[str], names: Sequence[str], what: str = "statistics") -> Encoded:
        from pddkit.backends.stats_pass import encode

        enc = encode(self.lm, texts, names, self.max_length, what=what)
        return Encoded(ids=enc.ids, truncated=enc.truncated)

    def stats_for_ids(self, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                      desc: str = "statistics") -> list[TokenStats]:
        return self.runner.run_ids([list(s) for s in ids], list(truncated), desc=desc)

    def decode(self, ids: Sequence[int]) -> str:
        return self.lm.tokenizer.decode(list(ids))
