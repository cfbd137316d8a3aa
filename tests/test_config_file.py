"""Run files (cli/config_file.py): `--config FILE.yaml` on every command that takes options,
flags typed override the file, bad files are one sentence, and every results folder's
run.yaml reruns its command exactly (scores.jsonl byte for byte) from any directory."""

import json
from pathlib import Path

import click
import pytest
import yaml
from cli_helpers import run_cli, write_jsonl
from click.core import ParameterSource

from pddkit.cli import config_file
from pddkit.cli.app import cli
from pddkit.version import __version__

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
COMMANDS = dict(config_file.commands(cli))


def _context(name, *args):
    """The command's parsed context (nothing runs, nothing loads)."""
    return COMMANDS[name].make_context(name, [str(a) for a in args])


def _file(path, text):
    path.write_text(text)
    return path


def _leaves(group, ctx, prefix=""):
    """click's own list of commands below `group`, walked with click's API."""
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from _leaves(cmd, ctx, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", cmd


def test_every_command_with_options_takes_config():
    leaves = dict(_leaves(cli, click.Context(cli)))
    assert leaves.keys() == COMMANDS.keys()
    without = [n for n, c in leaves.items()
               if any(isinstance(p, click.Option) for p in c.params)
               and not any(p.name == "config" and p.opts == ["--config"] for p in c.params)]
    assert not without, f"commands without --config (make them with @cli.command): {without}"
    assert all(isinstance(c, config_file.ConfigCommand) for c in leaves.values())
    taking = {n for n, c in leaves.items() if any(p.name == "config" for p in c.params)}
    assert {"run", "sandbox", "audit", "compare", "infer", "traps generate", "traps inject",
            "traps detect", "blind", "build", "freq build"} <= taking
    assert config_file.keys(COMMANDS["run"])["bootstrap"].name == "n_bootstrap"  # the flag's name
    assert config_file.keys(COMMANDS["compare"])["data"].name == "chunks"
    assert config_file.keys(COMMANDS["build"])["builder"].name == "builder"  # an argument
    assert "config" not in config_file.keys(COMMANDS["run"])


def test_flags_typed_override_the_file_which_overrides_the_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("PDDKIT_CACHE", raising=False)
    conf = _file(tmp_path / "c.yaml", "model: m\ndata: d.jsonl\noutput: o\nseed: 3\n"
                 "bootstrap: 7\nno-blind: true\nref_model: r\nbatch-size: auto\nlimit: null\n")
    ctx = _context("run", "--config", conf, "--seed", "5")
    p = ctx.params
    assert (p["seed"], p["n_bootstrap"], p["no_blind"], p["ref_model"], p["batch_size"]) == \
        (5, 7, True, "r", "auto")
    assert ctx.get_parameter_source("seed") == ParameterSource.COMMANDLINE
    assert ctx.get_parameter_source("n_bootstrap") == ParameterSource.DEFAULT_MAP
    assert (p["methods"], p["limit"]) == ("all", None)  # not in the file / null: the default
    assert ctx.get_parameter_source("methods") == ParameterSource.DEFAULT
    # what was typed wins, even when it is the default value
    assert _context("run", "--config", conf, "--seed", "0").params["seed"] == 0
    assert _context("run", "--config", conf, "--batch-size", "8").params["batch_size"] == 8
    # an environment variable sits between the flags and the file (click's order)
    _file(conf, "model: m\ndata: d\noutput: o\ncache: from-file\n")
    assert _context("run", "--config", conf).params["cache"] == "from-file"
    monkeypatch.setenv("PDDKIT_CACHE", "from-env")
    assert _context("run", "--config", conf).params["cache"] == "from-env"
    assert _context("run", "--config", conf, "--cache", "typed").params["cache"] == "typed"
    # lists for repeatable options and arguments; a single value is a list of one
    conf = _file(tmp_path / "b.yaml", "builder: cutoff\ninput: [a.jsonl, b.jsonl]\n"
                 "members: x\nmember-before: 2021-01-01\noutput: o\n")
    p = _context("build", "--config", conf).params
    assert (p["builder"], p["inputs"], p["members"]) == ("cutoff", ("a.jsonl", "b.jsonl"), ("x",))
    assert p["member_before"] == "2021-01-01"  # a YAML date, taken as the text it was
    conf = _file(tmp_path / "n.yaml", "model: m\ndata: d\noutput: 2024\n")
    assert _context("run", "--config", conf).params["output"] == "2024"  # a path, not a number
    # a YAML list for a comma-separated option is that option's comma-separated text
    conf = _file(tmp_path / "l.yaml", "model: m\ndata: d\noutput: o\nmethods: [loss, zlib, 'mink:k=0.2']\n"
                 "probe-lrs: [0.001, 0.0001]\n")
    p = _context("run", "--config", conf).params
    assert (p["methods"], p["probe_lrs"]) == ("loss,zlib,mink:k=0.2", "0.001,0.0001")


@pytest.mark.parametrize("body, words", [
    ("batchsize: 4", ["unknown key batchsize for pddkit run; did you mean batch-size?"]),
    ("ref_modle: x", ["unknown key ref_modle for pddkit run; did you mean ref-model?"]),
    # another command's key, and near one of this command's: the near one first
    ("method: loss", ["method is not an option of pddkit run; did you mean methods? (method "
                      "is an option of pddkit audit, pddkit compare)"]),
    ("batch-size: many", ["batch-size: 'many' is neither a whole number nor auto"]),
    ("seed: [1]", ["seed must be a whole number, not [1]"]),
    ("seed: 2.5", ["seed must be a whole number, not 2.5"]),
    ("seed: true", ["seed must be a whole number, not true"]),
    ("no-blind: 1", ["no-blind must be true or false, not 1"]),
    ("language: no", ["language must be text, not false (quote it if it is meant as text)"]),
    ("dtype: half", ["dtype must be one of auto, float32, bfloat16, float16, not \"half\""]),
    ("methods: {loss: 1}", ["methods must be text"]),
    ("help: true", ["unknown key help for pddkit run (its keys are the long options that "
                    "pddkit run --help lists)"]),
    ("methods: [loss, [zlib]]", ["methods must be text"]),
    ("sweep: lr=1,2", ["sweep is not an option of pddkit run (it is one of pddkit sandbox)"]),
    ("input: a.jsonl", ["input is not an option of pddkit run (it is one of pddkit build)"]),
    ("config: other.yaml", ["a run file cannot name another run file (config)"]),
    ("ref_model: a\nref-model: b", ["gives ref-model twice (as ref_model and ref-model)"]),
    ("- model\n- m", ["must hold key: value lines", "not a list"]),
    ("model: [m", ["is not valid YAML", "line 2"]),
    ("# usage: pddkit sandbox --config x.yaml\nseed: 1",
     ["is a run file for pddkit sandbox (its usage line), not for pddkit run"]),
])
def test_a_bad_run_file_is_one_sentence_naming_the_file(tmp_path, capsys, body, words):
    conf = _file(tmp_path / "c.yaml", body + "\n")
    code, _, err = run_cli(capsys, "run", "--config", conf, "--output", tmp_path / "o")
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"pddkit: error: {conf}") and "`" not in err, err
    for w in words:
        assert w in err, err
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_other_commands_and_a_missing_file(tmp_path, capsys):
    conf = _file(tmp_path / "c.yaml", "jaccard: much\n")
    code, _, err = run_cli(capsys, "traps", "generate", "--config", conf)
    assert code == 1 and f"{conf}: jaccard must be a number, not \"much\"" in err, err
    conf = _file(tmp_path / "c.yaml", "members: 10\nbatch-size: 4\n")
    code, _, err = run_cli(capsys, "sandbox", "--config", conf)
    assert code == 1 and "batch-size is not an option of pddkit sandbox (it is one of" in err, err
    code, _, err = run_cli(capsys, "blind", "--config", tmp_path / "nope.yaml")
    assert code == 1 and err.strip() == f"pddkit: error: --config {tmp_path / 'nope.yaml'}: no such file"


def test_build_writes_run_yaml_that_rebuilds_the_same_data(tmp_path, capsys, monkeypatch):
    """A fast command (no model): run.yaml holds every option's final value, an argument
    included, local paths absolute, overwrite never; it rebuilds data.jsonl byte for byte."""
    rows = [{"id": f"d{i}", "text": " ".join(f"doc{i}-w{j}" for j in range(40 + 3 * i)),
             "date": f"{2018 + i % 8}-0{1 + i % 9}-15"} for i in range(40)]
    work = tmp_path / "work"
    work.mkdir()
    write_jsonl(work / "docs.jsonl", rows)
    monkeypatch.chdir(work)
    code, _, err = run_cli(capsys, "build", "cutoff", "--input", "docs.jsonl", "--member-before",
                           "2021-01-01", "--nonmember-after", "2022-12-31", "--words", "32",
                           "--output", "built", "--overwrite")
    assert code == 0, err
    text = (work / "built" / "run.yaml").read_text()
    saved = yaml.safe_load(text)
    assert list(saved) == [k for k in config_file.keys(COMMANDS["build"]) if k != "overwrite"]
    assert saved["builder"] == "cutoff" and saved["input"] == [str(work / "docs.jsonl")]
    assert saved["output"] == str(work / "built") and saved["seed"] is None
    assert text.startswith(f"# pddkit {__version__} run file of `pddkit build`")
    assert "# ran as: pddkit build cutoff --input docs.jsonl" in text
    assert f"# usage: pddkit build --config {work / 'built' / 'run.yaml'} --output NEW_FOLDER" in text
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    code, _, err = run_cli(capsys, "build", "--config", work / "built", "--output", "again")
    assert code == 0, err
    assert (other / "again" / "data.jsonl").read_bytes() == (work / "built" / "data.jsonl").read_bytes()
    assert yaml.safe_load((other / "again" / "run.yaml").read_text()) == \
        {**saved, "output": str(other / "again")}
    code, _, err = run_cli(capsys, "build", "--config", work / "built" / "run.yaml")
    assert code == 1 and "already holds manifest.json" in err, err  # its own folder: refused


@pytest.mark.slow
def test_run_yaml_reruns_the_scores_bit_for_bit_from_another_directory(tmp_path, capsys,
                                                                      monkeypatch):
    from tiny_models import save_tiny_gpt2

    work = tmp_path / "work"
    work.mkdir()
    save_tiny_gpt2(work / "tiny")
    words = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
    write_jsonl(work / "texts.jsonl", [{"text": " ".join(words[i % 5:] + words[:i % 7]) + f" {i}",
                                        "label": i % 2} for i in range(16)])
    monkeypatch.chdir(work)
    code, _, err = run_cli(capsys, "run", "--model", "tiny", "--data", "texts.jsonl", "--output",
                           "out", "--methods", "loss,zlib,mink:k=0.3", "--bootstrap", "20",
                           "--device", "cpu", "--no-report", "--overwrite")
    assert code == 0, err
    saved = yaml.safe_load((work / "out" / "run.yaml").read_text())
    assert set(saved) == set(config_file.keys(COMMANDS["run"])) - {"overwrite"}  # defaults too
    assert (saved["model"], saved["data"], saved["output"]) == \
        (str(work / "tiny"), str(work / "texts.jsonl"), str(work / "out"))
    assert (saved["seed"], saved["batch-size"], saved["bootstrap"], saved["no-blind"]) == \
        (0, 8, 20, False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, _, err = run_cli(capsys, "run", "--config", work / "out" / "run.yaml", "--output", "again")
    assert code == 0, err
    first = (work / "out" / "scores.jsonl").read_bytes()
    again = (elsewhere / "again" / "scores.jsonl").read_bytes()
    assert again == first and {"loss", "zlib", "mink", "blind"} <= set(json.loads(first.splitlines()[0]))
    # without --output the file aims at the folder it was written in, which holds results
    code, _, err = run_cli(capsys, "run", "--config", work / "out" / "run.yaml")
    assert code == 1 and "already holds pddkit results" in err and "--overwrite" in err, err


EXAMPLE_FILES = sorted(EXAMPLES.iterdir())


def test_examples_cover_each_seed_papers_main_table():
    names = {p.name for p in EXAMPLE_FILES}
    assert {"minkprob-wikimia.yaml", "dcpdd-wikimia.yaml", "surp-mimir.yaml",
            "surp-dolma-book.yaml", "probe-arxivmia.yaml", "sandbox-tiny.yaml"} <= names


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_parses_and_names_only_options_of_its_command(path):
    assert path.suffix == ".yaml", f"examples/ holds run files only: {path.name}"
    text = path.read_text()
    usage = config_file.USAGE.search(text)
    assert usage, f"{path.name}: no '# usage: pddkit COMMAND --config examples/{path.name}' line"
    name = usage.group(1)
    assert name in COMMANDS and f"--config examples/{path.name}" in usage.group(0) + text
    _, data = config_file.read(path)
    assert {str(k).replace("_", "-") for k in data} <= set(config_file.keys(COMMANDS[name]))
    ctx = _context(name, "--config", path)  # every value converts; nothing runs or downloads
    assert all(ctx.get_parameter_source(config_file.keys(COMMANDS[name])[str(k)].name)
               == ParameterSource.DEFAULT_MAP for k in data)


def test_a_file_turning_on_trust_remote_code_is_said(tmp_path, caplog):
    conf = _file(tmp_path / "t.yaml", "model: m\ndata: d\noutput: o\ntrust-remote-code: true\n")
    with caplog.at_level("WARNING", logger="pddkit"):
        assert _context("run", "--config", conf).params["trust_remote_code"] is True
    assert [r.getMessage() for r in caplog.records] == [
        f"{conf} turns on trust-remote-code: the model repository's own Python code will run "
        "on this machine"]
