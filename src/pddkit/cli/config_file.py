"""Run files: `--config FILE.yaml` on every command that takes options, and the `run.yaml`
each results folder gets, which reruns the command exactly.

Implemented once, for every command: the `pddkit` group (cli/app.py) is a ConfigGroup, so
each command made with `@cli.command` / `@traps.command` is a ConfigCommand, which adds
--config to its options and, once it has succeeded, writes OUTPUT/run.yaml. A new command
or a new option is covered without any code here.

The rules, as the docs page Run files states them:

- keys are the long option names without the dashes (`ref-model`, `bootstrap`,
  `no-blind`, `contamination-poisson`; an argument by its name, `builder`); `ref_model` is
  the same key as `ref-model` (giving both is refused); `null` means the option's default.
- precedence: flags typed on the command line > environment variables (PDDKIT_CACHE) >
  the file > the defaults (click's default_map, so only what the user typed overrides).
- a value means what it means on the command line: a relative path is relative to the
  current directory, not to the file's folder.
- run.yaml holds every option's final value, defaults included, under a comment header
  (pddkit version, the command line as typed, how to rerun it). Values of path options
  (--data, --output, --cache, --freq, ...) and model options (--model, --ref-model,
  --tokenizer, ...) that name an existing local file or folder are written absolute, so
  the file reruns from any directory; hub ids and everything else as given. `overwrite` is
  never saved: `pddkit run --config OUT/run.yaml` without --output aims at OUT, which holds
  results and is refused (output_dir.prepare) unless --overwrite is typed.
- errors are one sentence: an unknown key names the nearest valid one (difflib: a run
  file's `method:` points at `methods`) and, if it is another command's key, that
  command; a wrong-typed value names the key, the file and the type expected.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from pddkit.cli import options
from pddkit.errors import PddkitError

logger = logging.getLogger("pddkit")

RUN_FILE = "run.yaml"
NEVER_SAVED = ("overwrite",)  # a rerun replaces results only when its command line says so
# a run file's usage line, "# usage: pddkit traps detect --config ...", names its command
USAGE = re.compile(r"^#\s*usage:\s*pddkit\s+([a-z][a-z -]*?)\s+--config\b", re.M)
# options naming a model or tokenizer: a hub id, or a local folder (written absolute)
_MODEL_LIKE = re.compile(r"(^|_)(model|tokenizer|adapter)(_|$)")
_ARGS, _FILE = "pddkit.config_file.args", "pddkit.config_file.path"


class ConfigCommand(click.Command):
    """A command with --config FILE.yaml (when it has options) that writes OUTPUT/run.yaml
    once it has succeeded (when it has an --output folder)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if any(isinstance(p, click.Option) for p in self.params):
            self.params.append(options.config_option(load))

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGS] = list(args)  # the command line as typed, for run.yaml's header
        return _with_context(super().parse_args, ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        from pddkit import output_dir

        with output_dir.removed_if_failed():  # a failed command leaves no empty folder
            value = super().invoke(ctx)
        write_run_file(ctx)
        return value


class ConfigGroup(click.Group):
    """The `pddkit` group: its commands are ConfigCommands, its groups ConfigGroups."""

    command_class = ConfigCommand
    group_class = type

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return _with_context(super().parse_args, ctx, args)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Also records the group on the command, so that a command knows its run files'
        name ("pddkit traps detect") and its sibling commands (root_of)."""
        super().add_command(cmd, name)
        cmd.config_group = self  # type: ignore[attr-defined]


def _with_context(parse, ctx: click.Context, args: list[str]) -> list[str]:
    """`parse(ctx, args)`, a usage error it raises given the command's context (click's
    parser leaves it out of some, "Option '--seed' requires an argument"), so the one-line
    error (cli/app.py) names the command."""
    try:
        return parse(ctx, args)
    except click.UsageError as e:
        if e.ctx is None:
            e.ctx = ctx
        raise


def key_of(param: click.Parameter) -> str:
    """A parameter's key in a run file: its longest flag without the dashes, or an
    argument's name ("builder")."""
    if isinstance(param, click.Option):
        return max([o for o in param.opts if o.startswith("--")] or param.opts, key=len).lstrip("-")
    return (param.name or "").replace("_", "-")


def keys(command: click.Command) -> dict[str, click.Parameter]:
    """key -> parameter, for every parameter a run file of `command` may set."""
    return {key_of(p): p for p in command.params if p.expose_value and p.name}


def root_of(command: click.Command) -> click.Command:
    """The outermost ConfigGroup `command` was added to (the `pddkit` group, cli/app.py),
    or the command itself when it is in none."""
    while (group := getattr(command, "config_group", None)) is not None:
        command = group
    return command


def commands(root: click.Command) -> Iterator[tuple[str, click.Command]]:
    """("traps detect", command) for every command below `root` (the `pddkit` group,
    cli/app.py), groups walked; a lone command is its own only one."""
    if not isinstance(root, click.Group):
        return iter([(root.name or "?", root)])

    def walk(group: click.Group, prefix: str) -> Iterator[tuple[str, click.Command]]:
        for name, cmd in sorted(group.commands.items()):
            if isinstance(cmd, click.Group):
                yield from walk(cmd, f"{prefix}{name} ")
            else:
                yield f"{prefix}{name}", cmd

    return walk(root, "")


def name_of(command: click.Command) -> str:
    """"pddkit traps detect" for that command."""
    return "pddkit " + next((n for n, c in commands(root_of(command)) if c is command),
                            command.name or "?")


# ---- reading


def load(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """--config's callback (eager, so it runs before the other options are read): the
    file's values become the command's default_map, which flags typed and environment
    variables override."""
    if value is None or ctx.resilient_parsing:
        return
    path, data = read(value)
    usage = USAGE.search(path.read_text(encoding="utf-8"))
    this = name_of(ctx.command)
    if usage and f"pddkit {usage.group(1)}" != this and any(
            n == usage.group(1) for n, _ in commands(root_of(ctx.command))):
        raise PddkitError(f"{path} is a run file for pddkit {usage.group(1)} (its usage line), "
                          f"not for {this}")
    valid = keys(ctx.command)
    defaults: dict[str, Any] = {}
    given: dict[str, str] = {}
    for raw, v in data.items():
        key = str(raw).replace("_", "-")
        if key in given:
            raise PddkitError(f"{path} gives {key} twice (as {given[key]} and {raw})")
        given[key] = str(raw)
        if key not in valid:
            raise PddkitError(_not_a_key(path, str(raw), key, ctx.command, valid))
        if v is not None:  # null: the option's default
            defaults[valid[key].name] = checked(ctx, valid[key], str(raw), v, path)
    if defaults.get("trust_remote_code") is True:  # said: a shared file turns it on unseen
        logger.warning("%s turns on trust-remote-code: the model repository's own Python code "
                       "will run on this machine", path)
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    ctx.meta[_FILE] = path


def read(value: str) -> tuple[Path, dict]:
    """The mapping a run file holds (a results folder: its run.yaml); one sentence if
    there is none."""
    import yaml

    path = Path(value).expanduser()
    if path.is_dir() and (path / RUN_FILE).is_file():
        path = path / RUN_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PddkitError(f"--config {value}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or e
        raise PddkitError(f"cannot read --config {value}: {reason}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise PddkitError(f"{path} is not valid YAML ({getattr(e, 'problem', None) or e}"
                          f"{where})") from None
    if data is None:
        return path, {}
    if not isinstance(data, dict):
        raise PddkitError(f"{path} must hold key: value lines (option names and values), not "
                          f"a {type(data).__name__}")
    return path, data


def _not_a_key(path: Path, raw: str, key: str, command: click.Command,
               valid: dict[str, click.Parameter]) -> str:
    """The sentence for a key `command` does not take: the nearest key it does take
    (`method` -> `methods`), and the commands whose key it is."""
    this = name_of(command)
    if key == "config":
        return f"{path}: a run file cannot name another run file (config)"
    owners = [f"pddkit {n}" for n, c in commands(root_of(command))
              if c is not command and key in keys(c)]
    theirs = f"{', '.join(owners[:3])}{', ...' if len(owners) > 3 else ''}"
    # another command's key is taken for a slip only when very near one of this command's
    # (method -> methods, ratio 0.92; not sweep -> seed, 0.67)
    nearest = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.8 if owners else 0.6)
    if nearest and owners:
        return (f"{path}: {raw} is not an option of {this}; did you mean {nearest[0]}? "
                f"({raw} is an option of {theirs})")
    if nearest:
        return f"{path}: unknown key {raw} for {this}; did you mean {nearest[0]}?"
    if owners:
        return f"{path}: {raw} is not an option of {this} (it is one of {theirs})"
    return (f"{path}: unknown key {raw} for {this} (its keys are the long options that "
            f"{this} --help lists)")


def expected(param: click.Parameter) -> str:
    """What a parameter's value must be, in words."""
    t = param.type
    if getattr(param, "is_bool_flag", False) or isinstance(t, click.types.BoolParamType):
        one = "true or false"
    elif isinstance(t, click.Choice):
        one = "one of " + ", ".join(map(str, t.choices))
    elif isinstance(t, click.types.IntParamType):
        one = "a whole number"
    elif isinstance(t, click.types.FloatParamType):
        one = "a number"
    elif isinstance(t, click.Path):
        one = "a path"
    else:
        one = "text"
    return f"{one}, or a list of them" if _many(param) else one


def _many(param: click.Parameter) -> bool:
    return bool(getattr(param, "multiple", False)) or param.nargs != 1


def checked(ctx: click.Context, param: click.Parameter, key: str, value: Any, path: Path) -> Any:
    """`value` as click will take it from default_map, once it is known to convert (and
    to pass the option's callback); one sentence naming the key, the file and the type
    expected otherwise. Stricter than click's conversion: no list for a single value, no
    true/false for a number or text, no 2.5 for a whole number."""
    many = _many(param)
    if (not many and isinstance(value, list) and value and type(param.type) is
            click.types.StringParamType and all(isinstance(v, (str, int, float)) and
                                                not isinstance(v, bool) for v in value)):
        value = ",".join(map(str, value))  # methods: [loss, zlib] as --methods loss,zlib
    items = list(value) if many and isinstance(value, list) else [value]
    boolean = isinstance(param.type, click.types.BoolParamType)  # flags included
    shown = json.dumps(value, default=str)

    def wrong(extra: str = "") -> PddkitError:
        return PddkitError(f"{path}: {key} must be {expected(param)}, not {shown}{extra}")

    text = isinstance(param.type, (click.types.StringParamType, click.Path, click.Choice))
    for i, item in enumerate(items):
        if isinstance(item, (list, dict)):
            raise wrong()
        if boolean != isinstance(item, bool):
            raise wrong(" (quote it if it is meant as text)" if isinstance(item, bool) else "")
        if isinstance(param.type, click.types.IntParamType) and isinstance(item, float):
            raise wrong()
        if text and not isinstance(item, str):  # output: 2024, member-before: 2021-01-01
            items[i] = str(item)
    try:
        converted = param.type_cast_value(ctx, items if many else items[0])
    except (click.BadParameter, TypeError, ValueError):
        raise wrong() from None
    if param.callback is not None and not param.is_eager:
        try:
            param.callback(ctx, param, converted)
        except click.BadParameter as e:
            raise PddkitError(f"{path}: {key}: {e.message}") from None
    return items if many else items[0]


# ---- writing


def resolved(ctx: click.Context) -> dict[str, Any]:
    """Every parameter's final value under its key (overwrite left out); existing local
    paths of path and model options made absolute."""
    out: dict[str, Any] = {}
    for key, param in keys(ctx.command).items():
        if param.name in NEVER_SAVED or param.name not in ctx.params:
            continue
        value = _plain(ctx.params[param.name])
        if isinstance(param.type, click.Path) or _MODEL_LIKE.search(param.name or ""):
            value = [_absolute(v) for v in value] if isinstance(value, list) else _absolute(value)
        out[key] = value
    return out


def _plain(value: Any) -> Any:
    """A value YAML writes plainly: tuples as lists, anything unusual as text."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _absolute(value: Any) -> Any:
    """An existing local file or folder's absolute path; anything else as it is."""
    if isinstance(value, str) and value and os.path.exists(os.path.expanduser(value)):
        return os.path.abspath(os.path.expanduser(value))
    return value


def write_run_file(ctx: click.Context) -> Path | None:
    """OUTPUT/run.yaml, when the command has an --output folder (not a file, as `freq
    build`'s table); None otherwise."""
    import yaml

    from pddkit.version import __version__

    output = ctx.params.get("output")
    if not output or not os.path.isdir(os.path.expanduser(str(output))):
        return None
    path = Path(os.path.expanduser(str(output))).absolute() / RUN_FILE
    name = name_of(ctx.command)
    typed = shlex.join([*name.split(), *ctx.meta.get(_ARGS, [])]).replace("\n", " ")
    header = (f"# pddkit {__version__} run file of `{name}`: every option's final value, "
              "defaults included\n"
              "# (null: the option's default; existing local paths absolute; overwrite is "
              "never saved)\n"
              f"# ran as: {typed}\n"
              f"# usage: {name} --config {shlex.quote(str(path))} --output NEW_FOLDER\n"
              "# (flags given on the command line override this file's values)\n")
    body = yaml.safe_dump(resolved(ctx), sort_keys=False, allow_unicode=True,
                          default_flow_style=False, width=10_000)
    path.write_text(header + body, encoding="utf-8")
    logger.debug("run file: %s", path)
    return path
