"""`--help` in sections: a command with many options (`pddkit run`) lists them under
headings (Model, Data, Methods, ...) instead of one flat list, with click's own
formatting hooks (Command.format_options), no other dependency. The sections are named by
flag in cli/run_options.py (RUN_SECTIONS); an option no section names is listed under "Other
options", so a new option is never hidden (tests/test_flags.py asks each to be placed).
A group of steps (`pddkit traps`) lists them in the order they are used."""

from __future__ import annotations

from typing import Any

import click

from pddkit.cli.config_file import ConfigCommand, ConfigGroup

OTHER = "Other options"
LAST = "Run file and help"  # --config and --help, which every command has
COL_MAX = 30  # click's own limit of the first column


def flag_of(param: click.Parameter) -> str:
    """An option's longest flag (`--bootstrap`), the name sections use."""
    return max(param.opts, key=len)


class SectionedCommand(ConfigCommand):
    """A ConfigCommand whose --help lists its options in `sections`: (heading, flags)
    pairs, in order; the options of a section in the order its flags are given."""

    def __init__(self, *args: Any, sections: tuple[tuple[str, tuple[str, ...]], ...] = (),
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sections = sections

    def grouped(self, ctx: click.Context) -> list[tuple[str, list[tuple[str, str]]]]:
        """(heading, help rows) per non-empty section: the named sections, then options no
        section names, then --config and --help."""
        rows: dict[str, tuple[str, str]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and isinstance(param, click.Option):
                rows[flag_of(param)] = record
        out = []
        for heading, flags in self.sections:
            found = [rows.pop(f) for f in flags if f in rows]
            if found:
                out.append((heading, found))
        last = [rows.pop(f) for f in ("--config", "--help") if f in rows]
        if rows:
            out.append((OTHER, list(rows.values())))
        if last:
            out.append((LAST, last))
        return out

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        grouped = self.grouped(ctx)
        # one first column for every section (click sizes each list on its own): the terms
        # padded to the widest that fits within COL_MAX
        width = min(COL_MAX, max((len(t) for _, rows in grouped for t, _ in rows), default=0))
        for heading, rows in grouped:
            with formatter.section(heading):
                formatter.write_dl([(t.ljust(width), h) for t, h in rows], col_max=COL_MAX)


class StepsGroup(ConfigGroup):
    """A command group whose steps --help lists in the order they are used (the order they
    are defined: `traps generate`, `inject`, `detect`), not alphabetically."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)
