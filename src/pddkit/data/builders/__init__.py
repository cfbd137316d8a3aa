"""Benchmark builders: `pddkit build NAME ... --output DIR` -> labelled JSONL + manifest.json.

One module per builder; each registers itself with `register_builder`, the one place
builders are named. A builder is `fn(*, params...) -> Built` (keyword-only parameters with
defaults, as benchmarks); `build` runs one and writes its rows and a manifest (sources
with their sha256, parameters, seed, counts, language, pddkit version) so the benchmark
can be cited and rebuilt. The same inputs and seed give byte-identical files.
"""

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


def make(name: str, **params) -> Built:
    """Run builder `name` in memory (nothing written)."""
    spec, bound = bind(name, params)
    return spec.make(**bound)


def build(name: str, output: str | Path, overwrite: bool = False, **params) -> Path:
    """Run builder `name` and write OUTPUT/data.jsonl and OUTPUT/manifest.json; -> OUTPUT."""
    from pddkit.data.builders.manifest import write_build
    from pddkit.provenance import now

    started = now()
    spec, bound = bind(name, params)
    built = spec.make(**bound)
    return write_build(output, name, bound, built, overwrite=overwrite, started_at=started)


def _load_all() -> None:
    """Import every builder module (each registers itself)."""
    from pddkit.data.builders import cutoff, dolma_book  # noqa: F401


BUILDERS.set_loader(_load_all)

__all__ = ["BUILDERS", "Built", "Source", "build", "make", "register_builder"]
