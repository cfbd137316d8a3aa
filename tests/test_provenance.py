"""The provenance block of results.json (pddkit/provenance.py): what ran, where and when."""

import json
import shutil
import subprocess
import sys
from datetime import datetime
from importlib.metadata import version
from pathlib import Path

import pytest
from cli_helpers import run_cli, write_jsonl

import pddkit
from pddkit.provenance import (
    API,
    LIBRARIES,
    Provenance,
    command_line,
    current_command,
    git_state,
    known_fingerprint,
)
from pddkit.reporting.page import Config, Page, to_page_html, to_page_markdown
from pddkit.reporting.run_files import write_run

SOURCE = Path(pddkit.__file__).resolve().parent
KEYS = {"pddkit_version", "git", "python", "libraries", "devices", "cpu", "command",
        "started_at", "finished_at", "models"}


def _git(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(SOURCE), *args], capture_output=True, text=True)


def _in_checkout() -> bool:
    return shutil.which("git") is not None and _git("rev-parse", "HEAD").returncode == 0


def _times_ordered(p: dict) -> None:
    start, end = (datetime.fromisoformat(p[k]) for k in ("started_at", "finished_at"))
    assert start.tzinfo is not None and end.tzinfo is not None
    assert start <= end


def test_collect_records_versions_git_devices_and_times():
    before = Provenance.collect().started_at
    p = Provenance.collect(before).to_dict()
    assert set(p) == KEYS
    assert p["pddkit_version"] == pddkit.__version__
    assert p["python"] == ".".join(map(str, sys.version_info[:3]))
    assert set(p["libraries"]) == set(LIBRARIES)
    for name, got in p["libraries"].items():
        assert got == version(name)
    assert p["devices"] == [{"device": "cpu", "name": p["cpu"]["model"]}]
    assert p["cpu"]["count"] >= 1 and p["cpu"]["usable"] >= 1
    assert p["command"] == API and p["models"] == {}
    assert p["started_at"] == before
    _times_ordered(p)
    json.dumps(p)  # plain JSON


@pytest.mark.skipif(not _in_checkout(), reason="pddkit is not running from a git checkout")
def test_git_commit_and_dirty_flag_are_the_checkouts():
    for _ in range(3):  # others may commit or edit while this runs: retry a moving tree
        head, status = _git("rev-parse", "HEAD").stdout.strip(), _git("status", "--porcelain").stdout
        got = git_state()
        if (head, status) == (_git("rev-parse", "HEAD").stdout.strip(),
                              _git("status", "--porcelain").stdout):
            break
    assert got == {"commit": head, "dirty": bool(status.strip()), "reason": None}
    assert Provenance.collect().git == got


def test_git_missing_or_not_a_checkout_is_null_with_a_reason(tmp_path, monkeypatch):
    got = git_state(tmp_path)  # a folder outside any work tree
    assert got["commit"] is None and got["dirty"] is None and got["reason"]
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on the PATH
    got = git_state()
    assert got == {"commit": None, "dirty": None, "reason": "git is not installed"}


def test_command_line_inside_the_cli_and_python_api_outside():
    assert current_command() == API
    with command_line(["run", "--model", "my model", "--data", "x.jsonl"]) as line:
        assert line == "pddkit run --model 'my model' --data x.jsonl"
        assert Provenance.collect().command == line
    assert current_command() == API


def test_devices_from_the_models_and_fingerprints_already_computed():
    models = {"target": {"name": "m", "device": "cpu"}, "reference": {"name": "r", "device": "cpu"},
              "frequency_table": {"path": "f.npz"}}
    p = Provenance.collect(models=models, fingerprints={"target": "ab" * 32, "reference": None})
    assert [d["device"] for d in p.devices] == ["cpu"]
    assert p.models["target"] == {"name": "m", "fingerprint": "ab" * 32}
    assert p.models["reference"]["fingerprint"] is None and p.models["reference"]["reason"]
    assert "frequency_table" not in p.models

    class Inner:  # an hf backend that fingerprinted its model
        _fingerprint = "cd" * 32

    class Cached:  # the statistics cache: its own _fingerprint is its key, not the model's
        def __init__(self, facts):
            self._fingerprint, self.store, self.backend = "ef" * 32, object(), Inner()
            self._facts = facts

    assert known_fingerprint(Inner()) == "cd" * 32
    assert known_fingerprint(Cached({"fingerprint": "12" * 32})) == "12" * 32
    assert known_fingerprint(Cached(None)) == "cd" * 32
    assert known_fingerprint(object()) is None


def test_collecting_imports_neither_torch_nor_transformers():
    code = ("import sys; from pddkit.provenance import Provenance; "
            "from pddkit.evaluation.results import RunResult; "
            "p = Provenance.collect(models={'target': {'name': 'm', 'device': 'cuda:0'}}); "
            "assert p.devices[0]['name'] is None and p.devices[0]['reason'], p.devices; "
            "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; "
            "assert not bad, bad")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_report_shows_provenance_collapsed():
    prov = Provenance.collect().to_dict()
    page = Page("t", (Config({"a": 1}, provenance=prov),))
    html = to_page_html(page)
    assert "<details id='provenance'><summary>Provenance: pddkit" in html
    assert html.index("<details") > html.index("<pre>") and "</details>" in html
    assert "<details><summary>Provenance</summary>" in to_page_markdown(page)
    assert "<details" not in to_page_html(Page("t", (Config({"a": 1}),)))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tiny_models import save_tiny_gpt2

    return save_tiny_gpt2(tmp_path_factory.mktemp("tiny"))


def _data(tmp_path):
    words = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
    return write_jsonl(tmp_path / "d.jsonl", [
        {"id": f"t{i}", "text": " ".join(words[i % 9:] + words[:i % 9]), "label": i % 2}
        for i in range(8)])


@pytest.mark.slow
def test_cli_run_records_its_command_line_fingerprint_and_report(tiny_model, tmp_path, capsys,
                                                                 monkeypatch):
    from pddkit.engine.config import RunConfig
    from pddkit.engine.run import load_backend

    monkeypatch.delenv("PDDKIT_CACHE", raising=False)
    data = _data(tmp_path)
    args = ["run", "--model", tiny_model, "--data", data, "--methods", "loss", "--no-blind",
            "--bootstrap", "10", "--device", "cpu"]
    code, _, err = run_cli(capsys, *args, "--cache", tmp_path / "cache", "--output", tmp_path / "o")
    assert code == 0, err
    p = json.loads((tmp_path / "o" / "results.json").read_text())["provenance"]
    assert set(p) == KEYS
    assert p["command"] == "pddkit " + " ".join(
        map(str, [*args, "--cache", tmp_path / "cache", "--output", tmp_path / "o"]))
    _times_ordered(p)
    assert p["devices"][0]["device"] == "cpu" and p["cpu"]["count"] >= 1
    fp = p["models"]["target"]["fingerprint"]
    # the fingerprint the statistics cache computed: the model's own
    assert fp == load_backend(RunConfig(model=str(tiny_model), methods="loss",
                                        device="cpu"), "model").fingerprint()
    assert p["models"]["target"]["name"] == str(tiny_model)
    html = (tmp_path / "o" / "report.html").read_text()
    assert "<details id='provenance'>" in html and fp in html
    # without the cache the weights are not hashed for provenance: null, with the reason
    code, _, err = run_cli(capsys, *args, "--output", tmp_path / "o2")
    assert code == 0, err
    p2 = json.loads((tmp_path / "o2" / "results.json").read_text())["provenance"]
    assert p2["models"]["target"]["fingerprint"] is None and p2["models"]["target"]["reason"]


@pytest.mark.slow
def test_python_api_records_python_api(tiny_model, tmp_path):
    texts = [json.loads(line)["text"] for line in _data(tmp_path).read_text().splitlines()]
    result = pddkit.evaluate(texts, [i % 2 for i in range(8)], str(tiny_model), "loss",
                             blind=False, n_bootstrap=10, device="cpu")
    assert result.provenance.command == API
    d = result.to_dict()["provenance"]
    assert set(d) == KEYS and d["models"]["target"]["fingerprint"] is None
    _times_ordered(d)
    write_run(result, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "results.json").read_text())["provenance"] == d
