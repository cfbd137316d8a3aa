"""Only cli/ (cli/options.py and the option modules beside it) spells
command-line flags. Lower layers name parameters as Python spells them, in backticks
(`batch_size`, `on_invalid='skip'`); the CLI shows those as flags (flag_table.FLAGS,
flag_table.for_cli), the Python API as they are."""

import ast
import json
import logging
import re
from dataclasses import fields
from pathlib import Path

import pytest
from cli_helpers import run_cli, write_jsonl

import pddkit
from pddkit.cli import flag_table, options, run_options, sandbox_options
from pddkit.cli.app import _FlagFormatter
from pddkit.data import BENCHMARKS, load_jsonl
from pddkit.engine.config import RunConfig
from pddkit.methods import METHODS
from pddkit.sandbox.experiment import SandboxConfig

SRC = Path(pddkit.__file__).parent
CODE_NAMES = {m.name for m in METHODS} | {b.name for b in BENCHMARKS}  # `ref`, `wikimia`
NO_MODEL = "/nonexistent/model/dir"  # every check here answers before a model would load
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
PARAMETER = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(=[^`\s]+)?`")
# RunConfig / SandboxConfig fields and other Python parameters the command line does not
# set (cv_folds: evaluation.thresholds.Threshold's cross-validation of the expected FPR)
PYTHON_ONLY = {"ref_backend", "heads", "train_batch", "cv_folds"}
# backticked code in lower layers' messages that is not a parameter of pddkit's API
NOT_PARAMETERS = {"params",  # a key of neighbors.jsonl
                  "clear",  # `pddkit cache clear`
                  "sets"}  # an argument of resources.probe.probe_scores


def _messages():
    """(file:line, text) of every string constant below src/pddkit/ outside cli/ that is
    not a docstring (f-strings: their constant parts)."""
    for path in sorted(SRC.rglob("*.py")):
        if "cli" in path.relative_to(SRC).parts:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                           ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docstrings):
                yield f"{path.relative_to(SRC)}:{node.lineno}", node.value


def test_no_module_outside_cli_spells_a_flag():
    found = [f"{where}: {text!r}" for where, text in _messages() if FLAG.search(text)]
    assert not found, ("flags belong in cli/options.py or cli/study_options.py; name the "
                       "parameter in backticks:\n" + "\n".join(found))


def test_every_parameter_named_in_a_message_is_known_and_mapped():
    python_names = {f.name for f in fields(RunConfig)} | {f.name for f in fields(SandboxConfig)}
    unknown, unmapped = [], []
    for where, text in _messages():
        for m in PARAMETER.finditer(text):
            name = m.group(1)
            if name in flag_table.FLAGS:
                if m.group(2) and "`" in flag_table.for_cli(m.group(0)):
                    unmapped.append(f"{where}: {m.group(0)}")
            elif name in PYTHON_ONLY:
                continue
            elif name in python_names:  # a parameter the CLI sets, missing from the table
                unmapped.append(f"{where}: {m.group(0)}")
            elif name not in NOT_PARAMETERS and name not in CODE_NAMES:
                unknown.append(f"{where}: {m.group(0)}")
    assert not unmapped, "flag_table.FLAGS has no flag for:\n" + "\n".join(unmapped)
    assert not unknown, "not a parameter of pddkit's Python API:\n" + "\n".join(unknown)


def test_the_table_covers_every_option_the_cli_sets():
    """Every RunConfig / SandboxConfig field has its flag, under its Python name (a click
    option whose name differs from the field, like --no-blind, needs an entry)."""
    for cls in (RunConfig, SandboxConfig):
        missing = [f.name for f in fields(cls)
                   if f.name not in flag_table.FLAGS and f.name not in PYTHON_ONLY
                   and not any(k.startswith(f"{f.name}=") for k in flag_table.FLAGS)]
        assert not missing, f"{cls.__name__} fields without a flag in flag_table.FLAGS: {missing}"
    assert flag_table.FLAGS["n_bootstrap"] == "--bootstrap"
    assert flag_table.FLAGS["neighbors_file"] == "--neighbors"
    # method and benchmark names in backticks are never taken for parameters
    assert not set(flag_table.FLAGS) & CODE_NAMES
    assert all(flag.startswith("--") for flag in flag_table.FLAGS.values())


@pytest.mark.parametrize("message, shown", [
    ("`batch_size` must be at least 1, not 0", "--batch-size must be at least 1, not 0"),
    ("use `on_invalid='skip'` to leave them out", "use --on-invalid skip to leave them out"),
    ("pass `overwrite=True` to replace them", "pass --overwrite to replace them"),
    ("with `blind=False`", "with --no-blind"),
    ("try `dtype='float32'`", "try --dtype float32"),
    ("pass `probe_data` or `probe_load`", "pass --probe-data or --probe-load"),
    ("`n_bootstrap` and `neighbors_file`", "--bootstrap and --neighbors"),
    ("`ref` needs `pip install peft`; `heads` 4", "`ref` needs `pip install peft`; `heads` 4"),
    ("`trust_remote_code=False`", "`trust_remote_code=False`"),
])
def test_for_cli_turns_parameters_into_flags(message, shown):
    assert flag_table.for_cli(message) == shown


def test_cli_shows_flags_and_the_python_api_parameter_names(tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": f"text number {i} here", "label": i % 2}
                                              for i in range(6)])
    code, _, err = run_cli(capsys, "run", "--model", NO_MODEL, "--data", data, "--output",
                           tmp_path / "o", "--batch-size", "0")
    assert code == 1 and "--batch-size must be " in err and "`" not in err, err
    with pytest.raises(pddkit.PddkitError) as e:
        pddkit.evaluate(["a text", "another text"], [1, 0], NO_MODEL, batch_size=0)
    assert "`batch_size` must be " in str(e.value) and "--" not in str(e.value)

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine", "label": 1}\nnot json\n')
    code, _, err = run_cli(capsys, "run", "--model", NO_MODEL, "--data", bad, "--output",
                           tmp_path / "o")
    assert code == 1 and "(use --on-invalid skip to leave such lines out" in err, err
    with pytest.raises(pddkit.PddkitError, match="use `on_invalid='skip'` to leave") as e:
        load_jsonl(bad)
    assert "--" not in str(e.value)


def test_cli_log_lines_show_flags(tmp_path, capsys):
    """Lower layers' warnings (here: methods `all` skips) reach the terminal with flags."""
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": f"text number {i} here", "label": i % 2}
                                              for i in range(6)])
    code, _, err = run_cli(capsys, "run", "--model", NO_MODEL, "--data", data, "--output",
                           tmp_path / "o", "--no-blind")
    assert code == 1 and "does not exist" in err, err
    assert "skipping ref: it needs a reference model (--ref-model)" in err
    assert "skipping probe: it needs a probe (--probe-data or --probe-load)" in err
    record = logging.LogRecord("pddkit", logging.WARNING, __file__, 1,
                               "%s: `overwrite`: removed %d files", ("x", 3), None)
    assert _FlagFormatter("%(message)s").format(record) == "x: --overwrite: removed 3 files"


def test_output_folder_errors_name_the_parameter_in_python(tmp_path):
    from pddkit import output_dir

    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "results.json").write_text(json.dumps({}))
    with pytest.raises(pddkit.PddkitError, match=r"pass `overwrite=True` to replace them") as e:
        output_dir.prepare(tmp_path / "o")
    assert str(e.value).startswith("`output` ")
    assert flag_table.for_cli(str(e.value)).startswith("--output ")


# -- --help: every option explained, every summary whole, run --help in sections ----------


def _tree():
    """(command path, command, its group or None) for `pddkit` and everything below it,
    click's own command tree walked."""
    import click

    from pddkit.cli import cli

    def walk(cmd, path, parent):
        yield path, cmd, parent
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, f"{path} {name}", cmd)

    return list(walk(cli, "pddkit", None))


def test_every_option_of_every_command_has_a_help_text():
    import click

    tree = _tree()
    assert len(tree) >= 19  # pddkit, 12 commands, 3 groups' 6 subcommands (walked, not listed)
    bare = [f"{path} {max(p.opts, key=len)}" for path, cmd, _ in tree for p in cmd.params
            if isinstance(p, click.Option) and not p.hidden and not (p.help or "").strip()]
    assert not bare, "options without a help text:\n" + "\n".join(bare)


def test_every_command_summary_is_whole_in_its_groups_help():
    """click cuts a summary that does not fit its group's listing with '...' (`freq build`'s
    was cut mid-sentence): each command's summary fits, in 80 columns, as click lays it out
    (HelpFormatter width 78, less 6 and the longest command name of the group)."""
    from click.testing import CliRunner

    cut = []
    for path, cmd, parent in _tree():
        if parent is None:
            continue
        limit = 78 - 6 - max(len(n) for n in parent.commands)
        shown = cmd.get_short_help_str(limit)
        if shown.endswith("...") or not cmd.short_help or shown != cmd.short_help:
            cut.append(f"{path}: {shown!r}")
    assert not cut, "summaries cut or left to click:\n" + "\n".join(cut)
    out = CliRunner().invoke(_tree()[0][1], ["freq", "--help"], terminal_width=80)
    listing = out.output[out.output.index("Commands:"):]
    assert "build  Count token ids over text files: a table for dcpdd.\n" in listing
    assert "..." not in listing


def test_run_help_is_in_sections_and_places_every_option_once():
    from click.testing import CliRunner

    from pddkit.cli import cli
    from pddkit.cli.sections import flag_of

    for cmd_name, option_list, sections in (("run", run_options.RUN_OPTIONS, run_options.RUN_SECTIONS),
                                            ("sandbox", sandbox_options.SANDBOX_OPTIONS,
                                             sandbox_options.SANDBOX_SECTIONS)):
        placed = [f for _, flags in sections for f in flags]
        assert len(placed) == len(set(placed)), f"{cmd_name}: a flag in two sections"
        holder = options.apply(option_list)(lambda: None)
        flags = {flag_of(p) for p in holder.__click_params__ if hasattr(p, "opts")}
        assert flags == set(placed), (f"{cmd_name}: not placed {sorted(flags - set(placed))}; "
                                      f"placed but no option {sorted(set(placed) - flags)}")
    out = CliRunner().invoke(cli, ["run", "--help"], terminal_width=100).output
    headings = [line for line in out.splitlines() if line and not line.startswith(" ")
                and line.endswith(":")]
    assert headings == ["Model:", "Data:", "Methods:", "Evaluation:", "Output:", "Engine:",
                        "Run file and help:"], headings
    model = out[out.index("Model:"):out.index("Data:")]
    assert "--model TEXT" in model and "--data PATH" not in model
    # one first column for every section (click would size each on its own): every help
    # text beside its option starts in the same column
    starts = {m.start(2) for m in (re.match(r"(  -\S.*?)\s{2,}(\S)", line)
                                   for line in out.splitlines()) if m}
    assert len(starts) == 1, starts
    engine = out[out.index("Engine:"):out.index("Run file and help:")]
    assert "--gpus-per-actor FLOAT" in engine and "GPUs each Ray actor holds" in engine


def test_traps_lists_its_steps_in_the_order_they_are_used():
    from click.testing import CliRunner

    from pddkit.cli import cli

    out = CliRunner().invoke(cli, ["traps", "--help"], terminal_width=100).output
    listed = [line.split()[0] for line in out[out.index("Commands:"):].splitlines()[1:] if line]
    assert listed == ["generate", "inject", "detect"]
