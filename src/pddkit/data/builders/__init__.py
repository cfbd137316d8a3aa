"""Benchmark builders: `pddkit build NAME ... --output DIR` -> labelled JSONL + manifest.json.

One module per builder; each registers itself with `register_builder`, the one place
builders are named. A builder is `fn(*, params...) -> Built` (keyword-only parameters with
defaults, as benchmarks); `build` runs one and writes its rows and a manifest (sources
with their sha256, parameters, seed, counts, language, pddkit version) so the benchmark
can be cited and rebuilt. The same inputs and seed give byte-identical files.

The registry and the types a builder returns live in registry.py (each builder imports it);
this __init__ runs and writes builds and imports the builder modules on first lookup.

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache, backends and corpus.
"""

from __future__ import annotations

from pathlib import Path

from pddkit.data.builders.registry import (
    BUILDERS,
    Built,
    Source,
    bind,
    register_builder,
)


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
