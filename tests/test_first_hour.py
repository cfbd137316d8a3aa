"""A new user's first hour (issue 28, item 10 and "Bad input"): every mistake is one line,
`pddkit: error: <sentence>`, exit code 1, naming the file, column or option and what to do;
click's own usage errors included; nothing the user gave is lost, and a failed run leaves
no empty folder behind."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_helpers import run_cli, write_jsonl
from tiny_models import save_tiny_gpt2, small_tokenizer

from pddkit.errors import PddkitError

ROWS = [{"text": f"the quick brown fox number {i} jumps over the lazy dog", "label": i % 2}
        for i in range(8)]


def _one_error_line(code: int, err: str) -> str:
    """The error line, once it is checked to be one line, the last on stderr (log lines of
    what went before it may precede it), with exit code 1."""
    lines = err.strip().splitlines()
    errors = [line for line in lines if "error" in line.lower()]
    assert code == 1 and errors == lines[-1:] and lines[-1].startswith("pddkit: error: "), (
        code, err)
    assert "Traceback" not in err and "Usage:" not in err
    return lines[-1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random one-layer GPT-2 saved as a folder (seconds; nothing trained)."""
    return str(save_tiny_gpt2(tmp_path_factory.mktemp("tiny") / "model"))


# -- click's usage errors: one line, exit 1 ----------------------------------------------


def test_run_without_model_prints_one_line_and_exits_1(tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    code, out, err = run_cli(capsys, "run", "--data", data, "--output", tmp_path / "o")
    line = _one_error_line(code, err)
    # the option, and what it is (its own help)
    assert line == ("pddkit: error: pddkit run: missing option '--model' (Target model: local "
                    "directory or hub id (--backend openai: the served name))"), line
    assert out == "" and not (tmp_path / "o").exists()


@pytest.mark.parametrize("args, words", [
    (["run", "--modle", "m"], ["pddkit run: no such option '--modle'; did you mean one of:",
                               "'--model'"]),
    (["run", "--model", "m", "--dtype", "half"],
     ["pddkit run: invalid value for '--dtype': 'half' is not one of 'auto', 'float32', "
      "'bfloat16', 'float16'; see `pddkit run --help`"]),
    (["run", "--model", "m", "--seed", "x"],
     ["pddkit run: invalid value for '--seed': 'x' is not a valid integer"]),
    (["run", "--model", "m", "--seed"], ["pddkit run: option '--seed' requires an argument"]),
    (["run", "--model", "m", "--batch-size", "many"],
     ["invalid value for '--batch-size': 'many' is neither a whole number nor auto"]),
    (["rnu"], ["pddkit: error: no such command 'rnu'; did you mean 'run'?"]),
    (["report"], ["pddkit report: missing argument 'FOLDER'"]),
    (["report", "a", "b"], ["pddkit report: got unexpected extra argument (b)"]),
    (["traps", "detect", "--bogus"], ["pddkit traps detect: no such option '--bogus'"]),
    (["-x"], ["pddkit: error: no such option '-x'; see `pddkit --help`"]),
])
def test_click_usage_errors_are_one_line_with_exit_1(capsys, args, words):
    code, out, err = run_cli(capsys, *args)
    line = _one_error_line(code, err)
    for w in words:
        assert w in line, line
    assert out == ""


def test_the_installed_entry_point_says_a_usage_error_in_one_line(tmp_path):
    """The console script (`python -m pddkit`, as `pddkit`) and not only main(): exit 1."""
    done = subprocess.run([sys.executable, "-m", "pddkit", "run", "--output", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr.strip().splitlines() == [
        "pddkit: error: pddkit run: missing option '--model' (Target model: local directory or "
        "hub id (--backend openai: the served name))"]


@pytest.mark.parametrize("args, first", [([], "Usage: pddkit [OPTIONS] COMMAND"),
                                         (["traps"], "Usage: pddkit traps [OPTIONS] COMMAND")])
def test_a_group_without_a_command_shows_its_help_not_an_error(capsys, args, first):
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and err == "" and out.startswith(first)


# -- models, files, columns ---------------------------------------------------------------


def test_a_folder_holding_only_a_tokenizer_is_one_sentence(tmp_path, capsys):
    small_tokenizer().save_pretrained(tmp_path / "tok")
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "tok", "--data", data,
                           "--methods", "loss", "--output", tmp_path / "o")
    line = _one_error_line(code, err)
    files = ", ".join(sorted(f.name for f in (tmp_path / "tok").iterdir()))  # by version
    assert line == (f"pddkit: error: model folder {tmp_path / 'tok'} holds only a tokenizer "
                    f"({files}), no model: a model folder also "
                    "needs config.json and the weights (model.safetensors), as the model's "
                    "save_pretrained writes them; give that folder"), line
    assert "model_type" not in line and not (tmp_path / "o").exists()
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "empty", "--data", data,
                           "--output", tmp_path / "o")
    assert "holds no model: config.json is missing" in _one_error_line(code, err)


@pytest.mark.parametrize("name, said", [
    ("d.jsonl", "is empty (0 bytes): give one JSON object per line"),
    ("d.csv", "is empty (0 bytes): give a header line naming the columns"),
    ("d.tsv", "is empty (0 bytes): give a header line naming the columns"),
])
def test_an_empty_data_file_says_it_is_empty(tmp_path, capsys, name, said):
    (tmp_path / name).write_bytes(b"")
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "no-model", "--data",
                           tmp_path / name, "--output", tmp_path / "o")
    line = _one_error_line(code, err)
    assert f"data file {tmp_path / name} {said}" in line and "columns are none" not in line
    assert not (tmp_path / "o").exists()


def test_blank_lines_only_and_a_header_without_rows_are_said(tmp_path):
    from pddkit.data import load_table

    (tmp_path / "b.jsonl").write_text("\n  \n")
    with pytest.raises(PddkitError, match="holds only blank lines"):
        load_table(tmp_path / "b.jsonl")
    (tmp_path / "h.csv").write_text("text,label\n")
    with pytest.raises(PddkitError) as e:
        load_table(tmp_path / "h.csv")
    assert str(e.value) == (f"data file {tmp_path / 'h.csv'} has a header line ('text', 'label') "
                            "but no rows: give one row per text")


@pytest.mark.parametrize("name, sep, shown", [("d.csv", ";", "';', not ','"),
                                              ("d.csv", "\t", "a tab, not ','"),
                                              ("d.csv", "|", "'|', not ','"),
                                              ("d.tsv", ";", "';', not a tab"),
                                              ("d.tsv", ",", "',', not a tab")])
def test_a_table_separated_otherwise_is_read_and_said(tmp_path, caplog, name, sep, shown):
    from pddkit.data import load_table

    path = tmp_path / name
    path.write_text(f"text{sep}label\n" + "".join(f"text number {i}{sep}{i % 2}\n" for i in range(4)))
    with caplog.at_level("INFO", logger="pddkit"):
        ds = load_table(path)
    assert [s.text for s in ds.samples] == [f"text number {i}" for i in range(4)]
    assert ds.labels == [0, 1, 0, 1]
    assert f"{path} is separated by {shown}: read so (its columns: 'text', 'label')" in caplog.text


def test_a_table_separated_otherwise_without_the_text_column_names_the_separator(tmp_path,
                                                                                capsys):
    path = tmp_path / "d.csv"
    path.write_text("body;label\nsome text;1\n")
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "m", "--data", path, "--output",
                           tmp_path / "o")
    line = _one_error_line(code, err)
    assert line == (f"pddkit: error: {path} seems separated by ';', not ',' (its header reads as "
                    "the columns 'body', 'label'), and none of them is 'text' (or 'input'): "
                    "name the text column with --text-field"), line
    # named, it is read with the separator it has
    from pddkit.data import Fields, load_table

    assert [s.text for s in load_table(path, Fields(text="body")).samples] == ["some text"]


def test_a_column_spelled_with_other_case_is_used_and_two_are_one_error(tmp_path, caplog,
                                                                        capsys):
    from pddkit.data import load_table

    path = write_jsonl(tmp_path / "d.jsonl", [{"Text": r["text"], "Label": r["label"]}
                                              for r in ROWS])
    with caplog.at_level("INFO", logger="pddkit"):
        ds = load_table(path)
    assert ds.labels == [r["label"] for r in ROWS] and ds.samples[0].text == ROWS[0]["text"]
    assert (f"{path} line 1 has no 'label' column: its column 'Label' is used as the label "
            "column (`label_field` names another)") in caplog.text
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"TEXT": ["a", "b"], "Label": [1, 0]}), tmp_path / "d.parquet")
    ds = load_table(tmp_path / "d.parquet")  # Parquet (and Arrow, hub) columns alike
    assert [s.text for s in ds.samples] == ["a", "b"] and ds.labels == [1, 0]
    csv = tmp_path / "d.csv"
    csv.write_text("text,Label,LABEL\na,1,1\nb,0,0\n")
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "m", "--data", csv, "--output",
                           tmp_path / "o")
    line = _one_error_line(code, err)
    assert line == (f"pddkit: error: {csv} has 2 columns that read as the label column 'label' "
                    "('Label', 'LABEL'): name one with --label-field"), line


@pytest.mark.slow
def test_a_label_column_with_other_case_gives_metrics(tiny, tmp_path, capsys):
    """The run the issue saw end with exit 0 and no metrics after a warning."""
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": r["text"], "Label": r["label"]}
                                              for r in ROWS])
    code, _, err = run_cli(capsys, "run", "--model", tiny, "--data", data, "--methods", "loss",
                           "--output", tmp_path / "o", "--no-blind", "--no-report",
                           "--bootstrap", "10")
    assert code == 0, err
    assert "its column 'Label' is used as the label column (--label-field names another)" in err
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    metrics = res["methods"]["loss"]["metrics"]
    assert (metrics["n_members"], metrics["n_nonmembers"]) == (4, 4)


# -- method names ---------------------------------------------------------------------------


def test_method_names_are_case_insensitive():
    from pddkit.methods.base import resolve_methods

    calls = resolve_methods("Mink:k=0.1,LOSS", set())  # neither needs more than the target
    assert [(c.label, c.params) for c in calls] == [("mink", {"k": 0.1}), ("loss", {})]
    assert {c.spec.name for c in resolve_methods("ALL", set())} >= {"loss", "mink", "zlib"}


@pytest.mark.parametrize("given, hint", [("minkk", "; did you mean mink or minkpp?"),
                                         ("zlb", "; did you mean zlib?"),
                                         ("xyz", "")])
def test_an_unknown_method_names_the_nearest_and_all(tmp_path, capsys, given, hint):
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "m", "--data", data,
                           "--methods", f"loss,{given}", "--output", tmp_path / "o")
    line = _one_error_line(code, err)
    assert line == (f"pddkit: error: unknown method '{given}'{hint} (the methods: acmia, "
                    "camia, conrecall, dcpdd, decop, emmia, fsd, gapk, infill, loss, lowercase, "
                    "maxk, mink, minkpp, neighbor, ngram, pac, probe, recall, ref, samia, surp, "
                    "zlib)"), line


def test_a_run_file_naming_method_points_at_methods(tmp_path, capsys):
    conf = tmp_path / "run.yaml"
    conf.write_text("model: m\ndata: d.jsonl\nmethod: loss\n")
    code, _, err = run_cli(capsys, "run", "--config", conf, "--output", tmp_path / "o")
    line = _one_error_line(code, err)
    assert line == (f"pddkit: error: {conf}: method is not an option of pddkit run; did you mean "
                    "methods? (method is an option of pddkit audit, pddkit compare)"), line


# -- report, output folders -----------------------------------------------------------------


def test_report_of_a_missing_folder_says_it_does_not_exist(tmp_path, capsys):
    code, _, err = run_cli(capsys, "report", tmp_path / "nothere")
    assert _one_error_line(code, err) == (
        f"pddkit: error: folder {tmp_path / 'nothere'} does not exist: give a results folder "
        "(the --output of pddkit run, sandbox, infer, audit or traps detect)")
    (tmp_path / "f.json").write_text("{}")
    code, _, err = run_cli(capsys, "report", tmp_path / "f.json")
    assert "is a file, not a results folder" in _one_error_line(code, err)
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(capsys, "report", tmp_path / "empty")
    assert "results.json is missing" in _one_error_line(code, err)


def test_a_failed_run_leaves_no_folder_it_created_and_keeps_the_users(tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)

    def fail(output):  # fails after --output is made ready (an unknown method)
        code, _, err = run_cli(capsys, "run", "--model", tmp_path / "m", "--data", data,
                               "--methods", "nope", "--output", output)
        assert "unknown method 'nope'" in _one_error_line(code, err)

    fail(tmp_path / "new" / "deeper" / "o")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]  # new/ too: pddkit made it
    (tmp_path / "mine").mkdir()  # the user's own folder, empty: it stays
    fail(tmp_path / "mine")
    assert (tmp_path / "mine").is_dir()
    fail(tmp_path / "mine" / "o")
    assert list((tmp_path / "mine").iterdir()) == []


def test_a_failed_block_keeps_a_folder_holding_a_file(tmp_path):
    from pddkit import output_dir

    with pytest.raises(RuntimeError), output_dir.removed_if_failed():
        out = output_dir.prepare(tmp_path / "a" / "o")
        (out / "scores.jsonl").write_text("{}\n")  # something written: nothing is removed
        raise RuntimeError("a stage failed")
    assert (tmp_path / "a" / "o" / "scores.jsonl").read_text() == "{}\n"
    with pytest.raises(RuntimeError), output_dir.removed_if_failed():
        out = output_dir.prepare(tmp_path / "b" / "o")
        (out / "sub" / "deeper").mkdir(parents=True)  # only empty folders pddkit made
        raise RuntimeError("a stage failed")
    assert not (tmp_path / "b").exists()
    out = output_dir.prepare(tmp_path / "c")  # outside the block: made, and left
    assert out.is_dir()


# -- pddkit list ----------------------------------------------------------------------------


def test_list_fits_100_columns_and_shows_one_method(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0 and max(map(len, out.splitlines())) <= 100
    code, out, _ = run_cli(capsys, "list", "Mink")
    assert code == 0 and max(map(len, out.splitlines())) <= 100
    lines = out.splitlines()
    assert lines[0] == "mink: Shi et al. 2024"
    assert "  defaults    k=0.2" in lines
    assert "  validation  with --val-fraction / --val-data, chosen from k in 0.05, 0.1, ..., 1.0 " \
           "(20 values)" in lines
    # its documentation page, as text: the formula, the paper and the reference code
    assert "    mink(x) = mean of the m smallest L_i" in lines
    for heading in ("Score", "Parameters and defaults", "Needs", "Cost", "Paper"):
        assert heading in lines and lines[lines.index(heading) + 1] == "-" * len(heading)
    assert "The authors' code is swj0419/detect-pretrain-code" in out


def test_every_method_page_fits_100_columns(capsys):
    from pddkit.methods import METHODS

    for name in METHODS.names():
        code, out, _ = run_cli(capsys, "list", name)
        assert code == 0 and max(map(len, out.splitlines())) <= 100, name
        assert out.startswith(f"{name}: ") and "Reference code" in out, name


def test_list_of_a_benchmark_a_study_and_a_typo(capsys):
    code, out, _ = run_cli(capsys, "list", "traps")
    steps = [line.split()[1] for line in out.splitlines() if line.startswith("traps ")]
    assert code == 0 and steps == ["generate", "inject", "detect"]
    code, out, _ = run_cli(capsys, "list", "wikimia")
    assert code == 0 and "  defaults    length=32,variant=original" in out.splitlines()
    code, _, err = run_cli(capsys, "list", "mnk")
    assert _one_error_line(code, err) == (
        "pddkit: error: `pddkit list` knows no method, benchmark, builder or study 'mnk'; did "
        "you mean mink or minkpp? (`pddkit list` without a name lists them all)")


def test_list_of_a_method_without_the_checkouts_docs_points_at_the_page(capsys, monkeypatch):
    """An install without docs/ (not a checkout): what the code says, and where the page is."""
    from pddkit.cli import listing

    monkeypatch.setattr(listing, "page_path", lambda name: None)
    code, out, _ = run_cli(capsys, "list", "surp")
    assert code == 0 and out.splitlines()[:2] == ["surp: Zhang & Wu 2024",
                                                  "  formula     mean L_i over tokens with H_i < "
                                                  "threshold and L_i < k-th percentile"]
    assert "docs/methods/surp.md of pddkit's repository" in " ".join(out.split())
