"""Command line: one module per command; only options.py, study_options.py and
corpus_options.py spell flags.
The commands wire data, engine, evaluation and reporting together and do nothing else."""

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
from pddkit.cli.app import cli, main

__all__ = ["cli", "main"]
