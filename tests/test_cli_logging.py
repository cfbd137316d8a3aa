"""The command line's log handler follows sys.stderr: a command run while sys.stderr was a
temporary stream (pytest's capture, click's CliRunner) that is closed afterwards leaves no
handler writing to the closed stream ("--- Logging error --- ... I/O operation on closed
file" on every later log line, as the suite printed six times)."""

import io
import logging
import sys

from click.testing import CliRunner

from pddkit.cli import cli, main


def _log_after_closing(run_command, capsys):
    """Run a command with sys.stderr a temporary stream, close that stream, then log."""
    temporary = io.StringIO()
    saved, sys.stderr = sys.stderr, temporary
    try:
        run_command()
    finally:
        sys.stderr = saved
    temporary.close()
    capsys.readouterr()
    logging.getLogger("pddkit.somewhere").warning("a line after the command ended")
    return capsys.readouterr().err


def test_a_log_line_after_the_command_goes_to_the_current_stderr(capsys):
    err = _log_after_closing(lambda: main(["list"]), capsys)
    assert "Logging error" not in err and "closed file" not in err
    assert err == "pddkit: a line after the command ended\n"


def test_click_runner_streams_closed_after_invoke(capsys):
    """CliRunner swaps sys.stderr for its own stream during invoke and closes it after."""
    err = _log_after_closing(lambda: CliRunner().invoke(cli, ["list"]), capsys)
    assert "Logging error" not in err and "closed file" not in err
    assert "a line after the command ended" in err


def test_log_lines_during_a_command_reach_its_stderr(capsys):
    """The handler still writes the command's own lines where stderr is while it runs."""
    def command():
        main(["list"])
        logging.getLogger("pddkit.somewhere").warning("during the command")

    temporary = io.StringIO()
    saved, sys.stderr = sys.stderr, temporary
    try:
        command()
    finally:
        sys.stderr = saved
    assert "pddkit: during the command\n" in temporary.getvalue()
