"""Backends: (model, texts) -> per-token statistics (base.Backend), one registry.

`hf` runs a Hugging Face causal LM in this process; `openai` reads prompt
log-probabilities from an OpenAI-compatible server. A backend module registers its class
with `register_backend("name")`; the class has `from_spec(BackendSpec) -> Backend`.
"""

from __future__ import annotations

from pddkit.backends.base import Backend, BackendSpec, Capabilities, Encoded, token_stats
from pddkit.registry import Registry

BACKENDS: Registry[type] = Registry("backend")


def register_backend(name: str):
    """Class decorator: makes the backend available as `name` (--backend NAME)."""

    def wrap(cls: type) -> type:
        BACKENDS.add(name, cls)
        cls.kind = name
        return cls

    return wrap


def _load_builtins() -> None:
    import importlib

    for module in ("hf", "openai_api"):
        try:
            importlib.import_module(f"pddkit.backends.{module}")
        except ModuleNotFoundError as e:  # a module still being written, never a dependency
            if e.name != f"pddkit.backends.{module}":
                raise


BACKENDS.set_loader(_load_builtins)


def get_backend(name: str) -> type:
    return BACKENDS.get(name)


__all__ = ["BACKENDS", "Backend", "BackendSpec", "Capabilities", "Encoded", "get_backend",
           "register_backend", "token_stats"]
