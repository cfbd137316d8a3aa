"""`pddkit report DIR`: rebuild the reports of a results (or sandbox) folder."""

from __future__ import annotations

from pathlib import Path

import click

from pddkit.cli.app import cli


@cli.command(short_help="Rebuild the reports of a results folder.")
@click.argument("directory", type=click.Path())
def report(directory) -> None:
    """Rebuild report.html / report.md from a results folder (or a whole sandbox folder)."""
    import json

    from pddkit.reporting.report import write_report

    d = Path(directory)
    if (d / "summary.json").is_file():
        from pddkit.reporting.sandbox_summary import result_dirs, write_summary

        summary = json.loads((d / "summary.json").read_text())
        for results in result_dirs(d, summary):
            write_report(results)
        click.echo(f"report: {write_summary(d, summary)}")
        return
    html, md = write_report(d)
    click.echo(f"report: {html} and {md}")
