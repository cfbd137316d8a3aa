"""One registry per plug-in kind (methods, benchmarks), filled by a decorator."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from pddkit.errors import PddkitError

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> entry map for one kind of plug-in; `register` is the decorator's backend."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._loader: Callable[[], None] | None = None

    def set_loader(self, loader: Callable[[], None]) -> None:
        """Function that imports the built-in plug-ins on first lookup."""
        self._loader = loader

    def _load(self) -> None:
        if self._loader is not None:
            loader, self._loader = self._loader, None
            loader()

    def add(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> T:
        self._load()
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries))
            raise PddkitError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def __iter__(self) -> Iterator[T]:
        self._load()
        return iter([self._entries[n] for n in sorted(self._entries)])
