"""The seam between models and everything else (lm-evaluation-harness's abstract `LM`):
a backend turns (model, texts) into per-token statistics, once.

A backend encodes texts with its tokenizer (start token not included, cut to the context)
and computes `TokenStats` for token-id sequences. Splitting the two lets the statistics
cache (pddkit.cache) key each text by the exact token ids that are scored, and lets an
API backend send ids so that nothing is re-tokenised by a server.

Optional operation (not in the Protocol; a backend whose `capabilities.sampling` is True
has it): `sample(prompts, n, top_k, top_p, temperature, max_new_tokens, seeds, names=None)`
-> backends.sampling.Sampled, `n` continuations of each prompt (continuation text only),
each prompt's stream seeded by its own seed (`samia`; hf: backends/sampling.py, openai:
/v1/completions). CachingBackend passes it through the cache directory (cache/samples.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pddkit.stats import TokenStats

# bumped whenever the meaning or layout of TokenStats changes (it is in every cache key)
# 2: TokenStats.var, the variance computed without cancellation; entries without it are misses
STATS_FORMAT = 2


@dataclass(frozen=True)
class Capabilities:
    """What a backend can give. Without the full distribution, TokenStats.H, .M2 and .var
    are NaN and methods that read them (minkpp, surp) are skipped, never approximated."""

    full_distribution: bool = True  # H and M2 (the whole next-token distribution)
    hidden_states: bool = True  # activations (the probe)
    local_model: bool = True  # a torch model in this process (proxy fine-tuning)
    sampling: bool = True  # sampled continuations (samia): `sample` below
    prompt_logprobs: bool = True  # L, the log-probability of each text token (a server may not echo them)
    first_token: bool = True  # L of a text's first token (llama-cpp-python echoes it as null)

    def missing(self, needs: Sequence[str]) -> list[str]:
        """Names of the capabilities in `needs` this backend lacks."""
        return [n for n in needs if not getattr(self, n)]


@dataclass(frozen=True)
class Encoded:
    """Token ids of each text (start token not included), after truncation."""

    ids: list[list[int]]
    truncated: list[bool]


@dataclass(frozen=True)
class BackendSpec:
    """Everything needed to build a backend again in another process (a Ray actor):
    plain, picklable values only. `options` holds the backend's own settings (device,
    dtype, batch size, API base URL, ...) as (name, value) pairs."""

    kind: str  # registry name: "hf", "openai"
    model: str  # local directory, hub id or served model name
    options: tuple[tuple[str, object], ...] = field(default_factory=tuple)

    def option(self, name: str, default=None):
        return dict(self.options).get(name, default)

    def build(self) -> Backend:
        from pddkit.backends.registry import get_backend

        return get_backend(self.kind).from_spec(self)


@runtime_checkable
class Backend(Protocol):
    """(model, texts) -> per-token statistics."""

    name: str  # the model's name, as the user gave it
    capabilities: Capabilities

    def fingerprint(self) -> str:
        """A hex digest that changes whenever the statistics could change: weights,
        config, tokenizer, start token, dtype, backend kind and STATS_FORMAT."""

    def encode(self, texts: Sequence[str], names: Sequence[str], what: str = "statistics") -> Encoded:
        """Token ids the statistics will be computed for (cut to the context and to the
        backend's max_length); `names` name each text in errors."""

    def stats_for_ids(self, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                      desc: str = "statistics") -> list[TokenStats]:
        """TokenStats per id sequence, in order (one batched pass)."""

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids (the scored span of a truncated text)."""


def token_stats(backend: Backend, texts: Sequence[str], names: Sequence[str] | None = None,
                desc: str = "statistics") -> list[TokenStats]:
    """encode + stats_for_ids: TokenStats per text, in order."""
    names = list(names) if names is not None else [f"text {i + 1}" for i in range(len(texts))]
    enc = backend.encode(texts, names, what=desc)
    return backend.stats_for_ids(enc.ids, enc.truncated, desc=desc)
