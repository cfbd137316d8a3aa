"""`pddkit report DIR`: rebuild the reports of a results (or sandbox) folder."""

from __future__ import annotations

from pathlib import Path

import click

from pddkit.cli.app import cli


@cli.command(short_help="Rebuild the reports of a results folder.")
@click.argument("directory", type=click.Path(), metavar="FOLDER")
def report(directory) -> None:
    """Rebuild report.html / report.md from a results folder (or a whole sandbox folder)."""
    import json

    from pddkit.errors import PddkitError
    from pddkit.reporting.report import write_report

    d = Path(directory).expanduser()
    if not d.exists():
        raise PddkitError(f"folder {directory} does not exist: give a results folder (the "
                          "--output of pddkit run, sandbox, infer, audit or traps detect)")
    if not d.is_dir():
        raise PddkitError(f"{directory} is a file, not a results folder: give the folder that "
                          "holds results.json (or a sandbox's summary.json)")
    if (d / "summary.json").is_file():
        from pddkit.reporting.sandbox_summary import result_dirs, write_summary

        summary = json.loads((d / "summary.json").read_text())
        for results in result_dirs(d, summary):
            write_report(results)
        click.echo(f"report: {write_summary(d, summary)}")
        return
    html, md = _study_report(d) or write_report(d)
    click.echo(f"report: {html} and {md}")


def _study_report(d: Path):
    """(html, md) of a case study's folder rebuilt from its results.json; None for a run."""
    import json

    from pddkit.errors import PddkitError

    try:
        data = json.loads((d / "results.json").read_text())
    except (OSError, ValueError):
        return None
    study = data.get("study") if isinstance(data, dict) else None
    if study == "audit":
        from pddkit.reporting.audit_report import write_audit_report

        return write_audit_report(d)
    if study == "infer":
        from pddkit.reporting.infer_report import write_infer_report

        return write_infer_report(d, data)
    if study == "traps detect":
        from pddkit.reporting.traps_report import write_traps_report

        return write_traps_report(d)
    if study is not None:
        raise PddkitError(f"{d} holds a `pddkit {study}` result, whose report that command "
                          "writes (its results.json keeps only what the report summarises): "
                          "run it again to rebuild the report")
    return None
