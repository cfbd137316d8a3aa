"""`pddkit cache info|clear DIR`: the statistics cache."""

from __future__ import annotations

import click

from pddkit.cli.app import cli
from pddkit.cli.sections import StepsGroup


@cli.group(short_help="The statistics cache: info, clear.", cls=StepsGroup)
def cache() -> None:
    """The statistics cache (--cache DIR / PDDKIT_CACHE)."""


@cache.command("info", short_help="What a cache folder holds: shards, entries, size, per model.")
@click.argument("directory", type=click.Path())
def cache_info_cmd(directory) -> None:
    """What a cache folder holds: shards, entries, size, per model."""
    from pddkit.cache import cache_info
    from pddkit.reporting.cache_info_text import cache_info_lines

    for line in cache_info_lines(cache_info(directory)):
        click.echo(line)


@cache.command("clear", short_help="Remove the cache's own files from a folder.")
@click.argument("directory", type=click.Path())
def cache_clear_cmd(directory) -> None:
    """Remove the cache's own files from a folder (nothing else in it)."""
    from pddkit.cache import cache_clear

    click.echo(f"removed {cache_clear(directory)} cache files from {directory}")
