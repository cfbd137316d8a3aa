"""Helpers shared by the CLI tests: run `pddkit` in-process, write JSONL inputs."""

import json

from pddkit.cli import main


def run_cli(capsys, *args):
    """(exit code, stdout, stderr) of `pddkit ARGS`."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def write_jsonl(path, rows):
    """One JSON object per line."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
