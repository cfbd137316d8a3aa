"""One registry per plug-in kind (methods, benchmarks), filled by a decorator. Names are
looked up case-insensitively (`Mink` is `mink`); an unknown name is one sentence naming
the nearest known ones (difflib) and all of them."""

from __future__ import annotations

import difflib
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
        if name in self._entries:
            return self._entries[name]
        folded = {n.casefold(): n for n in self._entries}
        if name.strip().casefold() in folded:
            return self._entries[folded[name.strip().casefold()]]
        raise PddkitError(self.unknown(name))

    def unknown(self, name: str) -> str:
        """The sentence for a name that is not registered: the nearest names, then all."""
        known = sorted(self._entries)
        by_folded = {n.casefold(): n for n in known}
        near = [by_folded[n] for n in difflib.get_close_matches(
            name.strip().casefold(), list(by_folded), n=3, cutoff=0.6)]
        hint = f"; did you mean {' or '.join(near)}?" if near else ""
        return f"unknown {self.kind} {name!r}{hint} (the {self.kind}s: {', '.join(known)})"

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def __iter__(self) -> Iterator[T]:
        self._load()
        return iter([self._entries[n] for n in sorted(self._entries)])
