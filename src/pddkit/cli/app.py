"""The `pddkit` command group, logging set-up and the entry point: every user error, click's
own usage errors (a missing or unknown option, a bad value or choice) included, becomes
one line on stderr, `pddkit: error: <sentence>`, and exit code 1. Errors and log lines of
lower layers name parameters as Python spells them (`batch_size`); here they are shown
with the flags (flag_table.for_cli)."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import sys
import threading

import click

from pddkit import progress
from pddkit.cli import flag_table
from pddkit.cli.config_file import ConfigGroup
from pddkit.errors import PddkitError
from pddkit.version import __version__

logger = logging.getLogger("pddkit")


class _FlagFormatter(logging.Formatter):
    """Log lines as the command line's user reads them: parameters named as flags."""

    def format(self, record: logging.LogRecord) -> str:
        return flag_table.for_cli(super().format(record))


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record is emitted, not the stream that was
    sys.stderr when the command started: a caller that swaps sys.stderr for a while (pytest's
    capture, click's CliRunner) and closes it afterwards leaves no handler writing to a
    closed file (logging's own last-resort handler does the same)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ and setStream assign it
        pass


def _setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO)
    handler = _StderrHandler()
    handler.setFormatter(_FlagFormatter("pddkit: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    for noisy in ("transformers", "huggingface_hub", "datasets", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    # transformers reads these when it is imported (importing it here would cost a cached
    # rerun, which never needs it, a second); if it already is, tell it directly
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if not progress.enabled():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        if not progress.enabled():
            hf_logging.disable_progress_bar()


@click.group(cls=ConfigGroup, context_settings={"help_option_names": ["-h", "--help"]})  # --config, run.yaml
@click.version_option(__version__, prog_name="pddkit")
@click.option("-v", "--verbose", count=True, help="More log output.")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
def cli(verbose: int, quiet: bool) -> None:
    """pddkit: was this text in this language model's pre-training data?"""
    _setup_logging(verbose, quiet)


def usage_sentence(e: click.ClickException) -> str:
    """One line for one of click's errors: the command, what is wrong in click's words (it
    names the option, and for an unknown option or command the nearest ones), the missing
    option's own help, or where the options are listed. "Missing option '--model'." in
    `pddkit run` becomes "pddkit run: missing option '--model' (Target model: ...)"."""
    message = " ".join(e.format_message().split()).rstrip(".")
    message = message[:1].lower() + message[1:]
    # click's "No such command 'rnu'. Did you mean 'run'?" and "... '--modle'. (Did you mean
    # one of: ...?)": one sentence
    message = re.sub(r"\.\s*\(?did you mean ([^)]*)\)?$", r"; did you mean \1",
                     message, flags=re.I)
    ctx = getattr(e, "ctx", None)
    param = getattr(e, "param", None)
    where = f"{ctx.command_path}: " if ctx is not None and ctx.parent is not None else ""
    if isinstance(e, click.MissingParameter) and getattr(param, "help", None):
        return f"{where}{message} ({param.help.rstrip('.')})"
    if "did you mean" in message or ctx is None:
        return where + message
    return f"{where}{message}; see `{ctx.command_path} --help`"


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors become one line on stderr and exit code 1; a command
    group called without a command (`pddkit`, `pddkit traps`) shows its help."""
    from pddkit.provenance import command_line

    try:
        with command_line(argv):  # what results.json's provenance records as the command
            cli.main(args=argv, prog_name="pddkit", standalone_mode=False)
    except PddkitError as e:
        click.echo(f"pddkit: error: {flag_table.for_cli(str(e))}", err=True)
        return 1
    except click.exceptions.Abort:
        click.echo("pddkit: aborted", err=True)
        return 130
    except click.exceptions.NoArgsIsHelpError as e:  # nothing asked: the help, not an error
        click.echo(e.ctx.get_help())
        return 0
    except click.ClickException as e:  # usage errors (exit 2 in click) and file errors
        click.echo(f"pddkit: error: {usage_sentence(e)}", err=True)
        return 1
    return 0


def entry() -> None:
    """The `pddkit` executable and `python -m pddkit`: the C heap tuned for large arrays
    (cli/heap.py), main(), then exit_now() (sys.exit under a profiler or debugger)."""
    from pddkit.cli.heap import keep_freed_memory

    keep_freed_memory()
    code = main()
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)  # under a profiler or debugger (`python -m cProfile -m pddkit`), which
        # writes its findings after the program returns: the ordinary exit
    exit_now(code)


def exit_now(code: int) -> None:
    """End the process as Python would, without its last step: other threads joined, every
    atexit function run (the statistics cache's last rows, logging, temporary folders,
    Ray), the standard streams flushed, then os._exit. What is skipped is the interpreter
    tearing down its modules one by one, which once torch and transformers are imported
    takes about 2 s on 2 cores (measured: 0.9 s for `import torch` alone, 1.8 s after
    loading a model, 2.8 s with matplotlib) and does nothing a finished command needs."""
    # what the interpreter does first at exit: threading's exit hooks (concurrent.futures
    # stops its executors there), then every other non-daemon thread joined
    threading._shutdown()
    atexit._run_exitfuncs()  # the functions sys.exit would run, in the same order
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to write
            stream.flush()
    os._exit(code)
