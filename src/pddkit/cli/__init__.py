"""Command line: one module per command; only options.py spells flags. The commands
wire data, engine, evaluation and reporting together and do nothing else."""

from pddkit.cli import blind, build, cache, freq, listing, report, run, sandbox  # noqa: F401  (register)
from pddkit.cli.app import cli, main

__all__ = ["cli", "main"]
