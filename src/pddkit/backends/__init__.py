"""Backends: (model, texts) -> per-token statistics (base.Backend), one registry.

`hf` runs a Hugging Face causal LM in this process; `openai` reads prompt
log-probabilities from an OpenAI-compatible server. A backend module registers its class
with `register_backend("name")` (registry.py); the class has `from_spec(BackendSpec) ->
Backend`. caching.py puts a backend behind the statistics cache (pddkit.cache).

May import: errors, version, params, registry, progress, stats, provenance, output_dir, data
and cache.
"""

from __future__ import annotations

from pddkit.backends.base import Backend, BackendSpec, Capabilities, Encoded, token_stats
from pddkit.backends.registry import BACKENDS, get_backend, register_backend


def _load_builtins() -> None:
    """Import the built-in backends (each registers itself) on the first lookup."""
    from pddkit.backends import hf, openai_api  # noqa: F401


BACKENDS.set_loader(_load_builtins)

__all__ = ["BACKENDS", "Backend", "BackendSpec", "Capabilities", "Encoded", "get_backend",
           "register_backend", "token_stats"]
