"""The builders' registry: `register_builder`, the types a builder returns (Built, Source)
and the helpers builders share; each builder module imports this one, and the package's
__init__ imports the builders."""


from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pddkit.errors import PddkitError
from pddkit.registry import Registry


@dataclass(frozen=True)
class Source:
    """One input file: where it was read, its role and its sha256."""

    path: str
    role: str  # "member", "nonmember" or "documents"
    sha256: str
    bytes: int


@dataclass(frozen=True)
class Built:
    """What a builder made: JSONL rows (text, label, id, group, subset), its inputs and counts."""

    rows: tuple[dict, ...]
    sources: tuple[Source, ...]
    counts: dict
    language: str
    notes: tuple[str, ...] = field(default=())  # logged and saved in the manifest


@dataclass(frozen=True)
class BuilderSpec:
    name: str
    make: Callable[..., Built]
    defaults: dict
    description: str


BUILDERS: Registry[BuilderSpec] = Registry("builder")
PATH_PARAMETERS = {"members", "nonmembers", "inputs", "index"}


def register_builder(name: str, description: str):
    """Decorator: register `fn(*, params...) -> Built` under `name`."""

    def deco(fn: Callable[..., Built]) -> Callable[..., Built]:
        sig = inspect.signature(fn)
        defaults = {k: p.default for k, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY}
        BUILDERS.add(name, BuilderSpec(name, fn, defaults, description))
        return fn

    return deco


def word_counts(value: object, name: str = "words") -> tuple[int, ...]:
    """512, "512,1024" or [512, 1024] -> (512, 1024): sorted, distinct, positive."""
    items = value.split(",") if isinstance(value, str) else (
        [value] if isinstance(value, int) else list(value))  # type: ignore[arg-type]
    try:
        out = tuple(sorted({int(str(v).strip()) for v in items if str(v).strip()}))
    except ValueError:
        raise PddkitError(f"`{name}` {value!r} must be whole numbers of words") from None
    if not out or out[0] < 1:
        raise PddkitError(f"`{name}` {value!r} must be positive numbers of words")
    return out


def paths(value: object) -> tuple[Path, ...]:
    """A path or a sequence of paths -> tuple of Paths (None and () -> ())."""
    if value is None:
        return ()
    if isinstance(value, (str, Path)):
        return (Path(value),)
    return tuple(Path(v) for v in value)  # type: ignore[union-attr]


def source(path: Path, role: str, raw: bytes) -> Source:
    """The manifest entry of an input file read as `raw`."""
    return Source(path=str(path), role=role, sha256=hashlib.sha256(raw).hexdigest(),
                  bytes=len(raw))


def bind(name: str, params: dict) -> tuple[BuilderSpec, dict]:
    """The builder and its parameters: defaults updated by `params`; an unknown one is
    one sentence listing the builder's parameters."""
    spec = BUILDERS.get(name)
    unknown = [k for k in params if k not in spec.defaults]
    if unknown:
        known = ", ".join(f"`{k}`" for k in spec.defaults)
        raise PddkitError(f"builder {name} takes no `{unknown[0]}`; its parameters are {known}")
    bound = {**spec.defaults, **params}
    for key in PATH_PARAMETERS & set(bound):  # one spelling in the manifest, however given
        bound[key] = tuple(str(p) for p in paths(bound[key]))
    if "words" in bound:
        bound["words"] = word_counts(bound["words"])
    return spec, bound
