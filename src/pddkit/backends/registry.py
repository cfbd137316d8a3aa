"""The backends' registry: `register_backend` (each backend module imports it) and
`get_backend`; the package's __init__ sets the loader that imports the built-in backends on
the first lookup."""

from __future__ import annotations

from pddkit.registry import Registry

BACKENDS: Registry[type] = Registry("backend")


def register_backend(name: str):
    """Class decorator: makes the backend available as `name` (--backend NAME)."""

    def wrap(cls: type) -> type:
        BACKENDS.add(name, cls)
        cls.kind = name
        return cls

    return wrap


def get_backend(name: str) -> type:
    return BACKENDS.get(name)
