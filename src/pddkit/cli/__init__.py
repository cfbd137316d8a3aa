"""Command line: one module per command; only options.py, study_options.py and
corpus_options.py spell flags.
The commands wire data, engine, evaluation and reporting together and do nothing else.

May import: errors, version, params, registry, progress, stats, provenance, output_dir,
data, cache, backends, corpus, data.builders, resources, methods, blind, evaluation, engine,
reporting, api, studies, sandbox and pddkit.
"""

from pddkit.cli import (  # noqa: F401  (register)
    audit,
    blind,
    build,
    cache,
    compare,
    corpus,
    freq,
    infer,
    listing,
    report,
    run,
    sandbox,
    traps,
)
from pddkit.cli.app import cli, entry, main

__all__ = ["cli", "entry", "main"]
