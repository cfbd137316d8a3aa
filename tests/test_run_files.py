"""The files a run writes beside results.json: the SPEC 3b audit trail, and options given as
paths."""

import json
from pathlib import Path

import numpy as np

from pddkit.evaluation.results import MethodResult, RunResult
from pddkit.reporting.run_files import write_run


def _result(trail, config):
    return RunResult(ids=("a", "b"), labels=None,
                     methods=(MethodResult("loss", "loss", {}, np.array([-1.0, -2.0])),),
                     config=config, counts={}, timings={}, models={}, trail=trail)


def test_trail_files_keep_one_row_a_line_whatever_the_text_holds(tmp_path):
    odd = "a\u2028b\u0085c\nd"  # line separators a reader's splitlines() would split on
    rows = [{"id": "a", "method": "samia", "prompt": odd, "continuations": [odd, "x"]}]
    out = write_run(_result({"samples.jsonl": rows}, {"cache": None}), tmp_path)
    text = (out / "samples.jsonl").read_text(encoding="utf-8")
    assert [json.loads(line) for line in text.splitlines()] == rows


def test_an_option_given_as_a_path_is_written_as_text(tmp_path):
    out = write_run(_result({}, {"cache": Path("/tmp/some cache")}), tmp_path)
    assert json.loads((out / "results.json").read_text())["config"]["cache"] == "/tmp/some cache"
