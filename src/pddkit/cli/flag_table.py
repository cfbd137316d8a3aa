"""The way back from parameters to flags: lower layers' messages name parameters as Python
spells them (`batch_size`), and the command line shows them with its flags (--batch-size).
FLAGS (parameter -> flag) is read off the option lists themselves (cli/options.py,
cli/run_options.py, cli/sandbox_options.py; cli/study_options.py and cli/corpus_options.py
add theirs), so it cannot drift from the flags; `for_cli` rewrites a message."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import click

from pddkit.cli.options import BLIND_OPTIONS, BUILD_OPTIONS, FREQ_BUILD_OPTIONS, apply
from pddkit.cli.run_options import RUN_OPTIONS
from pddkit.cli.sandbox_options import SANDBOX_OPTIONS


def flags_of(*more: Sequence[Callable]) -> dict[str, str]:
    """Parameter name -> flag, read off the option lists, so the table cannot drift
    from the flags; a name that two commands spell differently is refused here."""
    table: dict[str, str] = {}
    for options in (RUN_OPTIONS, SANDBOX_OPTIONS, BLIND_OPTIONS, FREQ_BUILD_OPTIONS, *more):
        holder = apply(options)(lambda: None)
        for p in holder.__click_params__:
            if isinstance(p, click.Option):
                flag = max(p.opts, key=len)
                if table.setdefault(p.name, flag) != flag:
                    raise ValueError(f"parameter {p.name} is {table[p.name]} and {flag}")
    return table


# Lower layers (and the Python API's errors) name parameters as Python spells them, in
# backticks: "`batch_size` must be at least 1", "use `on_invalid='skip'`". For the command
# line, `for_cli` turns each one the table knows into its flag. Keys are parameter names
# (RunConfig's, SandboxConfig's, run_sandbox's, ...) or "name=value" where the flag differs.
FLAGS: dict[str, str] = {**flags_of(), "blind=False": "--no-blind"}


_PARAMETER = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(=[^`\s]+)?`")


def for_cli(message: str) -> str:
    """A message as a command-line user reads it: `name` -> its flag ("--batch-size"),
    `name='value'` -> flag and value ("--on-invalid skip"), `name=True` -> the flag; other
    backticked text (method names, `pip install ...`) stays as it is, backticks included."""

    def flag(m: re.Match) -> str:
        name, value = m.group(1), m.group(2)
        if f"{name}{value or ''}" in FLAGS:
            return FLAGS[f"{name}{value or ''}"]
        if name not in FLAGS or value == "=False":
            return m.group(0)
        if value is None or value == "=True":
            return FLAGS[name]
        return f"{FLAGS[name]} {value[1:].strip(chr(39) + chr(34))}"

    return _PARAMETER.sub(flag, message)
FLAGS.update(flags_of(BUILD_OPTIONS))  # BUILD_OPTIONS' parameters too (checked against the rest)
