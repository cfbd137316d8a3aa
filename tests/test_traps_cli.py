"""`pddkit traps generate | inject | detect` from the command line (Meeus et al. 2024,
copyright traps): flags parsed with the flag named in errors, refusals before any model
loads, `pddkit list` naming the three steps, and end to end on tiny models."""

from __future__ import annotations

import json
import math

import pytest
from cli_helpers import run_cli
from test_traps_detect import build_folder, hand_auc, save_tiny_pair

from pddkit.cli.flag_values import whole_numbers
from pddkit.cli.traps import number_range
from pddkit.errors import PddkitError

NO_MODEL = "/nonexistent/model/dir"


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    return save_tiny_pair(tmp_path_factory.mktemp("traps-cli-models"))


def one_line(err: str) -> str:
    return " ".join(err.split())


def test_list_names_the_three_trap_steps(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    for step in ("traps generate", "traps inject", "traps detect"):
        assert f"  {step} " in out, step


def test_parsers_name_the_flag():
    assert whole_numbers("25, 50,100", "--lengths") == (25, 50, 100)
    assert number_range("0.5:4:0.25", "--temperatures") == tuple(0.5 + 0.25 * i for i in range(15))
    assert number_range("0.5:1.9:0.5", "--temperatures") == (0.5, 1.0, 1.5)
    assert number_range("0.7,1.5", "--temperatures") == (0.7, 1.5)
    for text, sentence in (("25,x", "--lengths '25,x' must be whole numbers"),
                           ("0", "--lengths '0' must be whole numbers of at least 1")):
        with pytest.raises(PddkitError, match=sentence):
            whole_numbers(text, "--lengths")
    for text, sentence in (("1:2", "must be start:stop:step"), ("2:1:0.5", "positive step"),
                           ("1:2:0", "positive step"), ("a,b", "numbers separated by commas")):
        with pytest.raises(PddkitError, match=sentence):
            number_range(text, "--temperatures")


@pytest.mark.parametrize("extra, sentence", [
    (["--count", "7", "--buckets", "2"], "--count 7 is not a positive multiple of --buckets 2"),
    (["--count", "4", "--ppl-range", "1"], "--ppl-range '1' must be two numbers"),
    (["--count", "4", "--temperatures", "1:x:2"], "--temperatures '1:x:2' must be start:stop:step"),
    (["--count", "4", "--lengths", "4,a"], "--lengths '4,a' must be whole numbers"),
])
def test_generate_refuses_bad_options_before_the_model_loads(tmp_path, capsys, extra, sentence):
    args = ["traps", "generate", "--model", NO_MODEL, "--lengths", "4", "--buckets", "2",
            "--output", tmp_path / "gen", *extra]
    code, _, err = run_cli(capsys, *args)
    assert code == 1 and sentence in one_line(err), err
    assert "Traceback" not in err


def test_detect_refuses_epochs_below_one_before_any_model_loads(tmp_path, capsys):
    folder = build_folder(None).write(tmp_path / "inj")
    code, _, err = run_cli(capsys, "traps", "detect", "--model", NO_MODEL, "--traps", folder,
                           "--epochs", "0", "--output", tmp_path / "out")
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "--epochs is the number of passes the model made over the injected documents" in err
    assert not (tmp_path / "out").exists()


def test_detect_refuses_a_folder_never_injected(tmp_path, capsys):
    folder = build_folder(None, inject=False).write(tmp_path / "gen")
    code, _, err = run_cli(capsys, "traps", "detect", "--model", NO_MODEL, "--traps", folder,
                           "--output", tmp_path / "out")
    assert code == 1 and "inject them first" in err and len(err.strip().splitlines()) == 1


def test_undefined_scores_are_null_in_strict_json_and_the_report_rebuilds(tmp_path, capsys):
    """A trap whose score is undefined (NaN) is written as null, results.json and
    scores.jsonl are strict JSON (no NaN token), its method's cell has no AUC and says why,
    and `pddkit report` rebuilds the page from the folder alone, showing that cell as
    missing beside the other method's AUC (by hand: every member above every non-member)."""
    from pddkit.studies.traps.detect import TrapScore, TrapsResult, table_cells

    def strict(text):
        def refuse(token):
            raise AssertionError(f"non-standard JSON token {token}")
        return json.loads(text, parse_constant=refuse)

    traps = [TrapScore(f"t{k}", 25, 4 if k < 5 else 0, 0, 10.0, int(k < 5), None, 25,
                       {"a": float(10 - k), "b": math.nan if k == 7 else float(k)}, None)
             for k in range(10)]
    table, by_bucket = table_cells(traps, ("a", "b"), n_bootstrap=0, seed=0)
    result = TrapsResult(tuple(traps), ("a", "b"), table, by_bucket,
                         config={"traps": "hand", "model": "m", "ref_model": None},
                         models={}, counts={"inserted": 5, "held_out": 5},
                         notices=("hand-made",))
    out = result.write(tmp_path / "out", report=False)
    saved = strict((out / "results.json").read_text())
    rows = [strict(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert rows[7]["b"] is None and rows[7]["a"] == 3.0
    [cell] = saved["table"]
    assert cell["metrics"]["a"]["auc"] == 1.0  # scores 10..6 against 5..1
    assert cell["metrics"]["b"] is None and cell["reasons"]["b"] == "1 trap has no finite b score"
    assert saved["epochs"] is None and cell["exposures"] is None
    code, _, err = run_cli(capsys, "report", out)
    assert code == 0, err
    html = (out / "report.html").read_text()
    assert "4 repeats, exposures unknown" in html and "1.000" in html


def hand_inject_inputs(tmp_path, rows_without_text=()):
    """(trap folder, documents.jsonl): test_traps_inject's hand-made traps and 12 documents,
    plus `rows_without_text`."""
    from test_traps_generate import word_tokenizer
    from test_traps_inject import WORDS, hand_documents, hand_folder

    folder = hand_folder(word_tokenizer(WORDS)).write(tmp_path / "gen")
    docs = tmp_path / "docs" / "docs.jsonl"
    docs.parent.mkdir()
    rows = [{"id": d, "text": t} for d, t in hand_documents(12)] + list(rows_without_text)
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder, docs


def test_inject_refuses_an_output_holding_the_documents_before_reading_them(tmp_path, capsys,
                                                                             monkeypatch):
    from pddkit.studies.traps import documents

    def never(*a, **k):
        raise AssertionError("the documents were read")

    folder, docs = hand_inject_inputs(tmp_path)
    monkeypatch.setattr(documents, "read_documents", never)
    code, _, err = run_cli(capsys, "traps", "inject", "--traps", folder, "--documents", docs,
                           "--repeats", "1,2", "--min-tokens", "0", "--output", docs.parent)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert f"--output {docs.parent} holds the --documents file" in err and "replace" in err
    assert sorted(p.name for p in docs.parent.iterdir()) == ["docs.jsonl"]


def test_inject_counts_rows_without_text_and_refuses_a_file_with_none(tmp_path, capsys):
    folder, docs = hand_inject_inputs(tmp_path, [{"id": "x1"}, {"id": "x2", "text": None}])
    code, out, err = run_cli(capsys, "traps", "inject", "--traps", folder, "--documents", docs,
                             "--repeats", "1,2", "--min-tokens", "0", "--output",
                             tmp_path / "inj")
    assert code == 0, err
    assert "into 8 of 14 documents (0 under 0 tokens, 2 rows without text skipped)" in out
    saved = json.loads((tmp_path / "inj" / "injection.json").read_text())
    assert saved["counts"]["without_text"] == 2
    written = [json.loads(x) for x in (tmp_path / "inj" / "docs.jsonl").read_text().splitlines()]
    assert written[-2:] == [{"id": "x1"}, {"id": "x2", "text": None}]
    code, _, err = run_cli(capsys, "traps", "inject", "--traps", folder, "--documents", docs,
                           "--text-field", "body", "--repeats", "1", "--min-tokens", "0",
                           "--output", tmp_path / "inj2")
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert f"no line of {docs} has the text field 'body'" in one_line(err)
    assert "with --text-field" in err and not (tmp_path / "inj2").exists()


@pytest.mark.slow
def test_detect_end_to_end(tiny_pair, tmp_path, capsys):
    tok, target, ref = tiny_pair
    folder = build_folder(tok).write(tmp_path / "injected")
    args = ["traps", "detect", "--model", target, "--ref-model", ref, "--traps", folder,
            "--device", "cpu", "--bootstrap", "50", "--output", tmp_path / "out"]
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    assert "AUC [95% CI] of ref, inserted vs held-out traps (Table 2 layout)" in out
    assert "Figure 3 layout" in out and "L8 x4" in out
    # no --epochs: the exposures are unknown, said in the table and in a note
    assert "4 repeats, exposures unknown" in out
    assert "exposures: unknown: the epochs were not given" in out
    assert "note: the epochs the model was trained on the injected documents are not given " \
           "(--epochs), so the exposures are unknown" in one_line(out)
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = [json.loads(x) for x in (tmp_path / "out" / "scores.jsonl").read_text().splitlines()]
    cell = next(c for c in saved["table"] if (c["length"], c["repeats"]) == (8, 4))
    pos = [r["ref"] for r in rows if r["label"] == 1 and r["length"] == 8 and r["repeats"] == 4]
    neg = [r["ref"] for r in rows if r["label"] == 0 and r["length"] == 8]
    # pairs ranked right over 6 x 12 pairs against pddkit's trapezoid sum: < 100 roundings
    assert cell["metrics"]["ref"]["auc"] == pytest.approx(hand_auc(pos, neg), abs=1e-13)
    assert saved["configuration"]["n_bootstrap"] == 50
    # the report rebuilds from results.json alone
    (tmp_path / "out" / "report.html").unlink()
    code, out, err = run_cli(capsys, "report", tmp_path / "out")
    assert code == 0 and "Table 2 layout" in (tmp_path / "out" / "report.html").read_text()
    # the same --output again: refused, one sentence naming --overwrite
    code, _, err = run_cli(capsys, *args)
    assert code == 1 and "--overwrite" in err
    # --epochs 12 stated: a trap inserted 1 or 4 times was seen 12 or 48 times
    code, out, err = run_cli(capsys, *args[:-1], tmp_path / "out12", "--epochs", "12")
    assert code == 0, err
    assert "1 repeat = 12 exposures" in out and "4 repeats = 48 exposures" in out
    assert "exposures: 12, 48 (repeats x 12 epochs" in out and "L8 x4 (48 exp.)" in out
    assert "exposures are unknown" not in out
    saved = json.loads((tmp_path / "out12" / "results.json").read_text())
    assert saved["epochs"] == 12 and saved["exposures"] == [12, 48]
    assert saved["configuration"]["epochs"] == 12


@pytest.mark.slow
def test_generate_inject_detect_end_to_end(tiny_pair, tmp_path, capsys):
    """The three steps on a random tiny model (its perplexities lie near its vocabulary
    size, hence --ppl-range 150,450): exact lengths, each inserted trap R times in the
    written documents, no held-out trap in any, and detect's cells over them."""
    from pddkit.studies.traps.folder import read_folder

    tok, target, ref = tiny_pair
    code, out, err = run_cli(capsys, "traps", "generate", "--model", target, "--lengths", "3,5",
                             "--count", "8", "--ppl-range", "150,450", "--buckets", "2",
                             "--temperatures", "0.5:2:0.5", "--no-retokenize", "--batch-size",
                             "64", "--max-tries", "4000", "--device", "cpu", "--output",
                             tmp_path / "gen")
    assert code == 0, err
    generated = read_folder(tmp_path / "gen")
    assert len(generated.traps) == 16 and not generated.insertions
    for t in generated.traps:
        assert len(tok(t.text, add_special_tokens=False)["input_ids"]) == t.length
    sentences = ["The fox ran.", "A dog slept!", "Was it lazy?", "Brown leaves fell.",
                 "The quick one jumps."]
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": " ".join(sentences * 2), "n": i})
                            + "\n" for i in range(20)))
    code, out, err = run_cli(capsys, "traps", "inject", "--traps", tmp_path / "gen", "--documents",
                             docs, "--repeats", "1,4", "--min-tokens", "10", "--output",
                             tmp_path / "inj")
    assert code == 0, err
    assert "inserted 8 of 8 member traps (4 traps x1, 4 traps x4; 20 copies)" in out
    assert "sees a trap inserted R times R x E times (its exposures)" in out
    injected = read_folder(tmp_path / "inj")
    written = {json.loads(x)["id"]: json.loads(x)["text"]
               for x in (tmp_path / "inj" / "docs.jsonl").read_text().splitlines()}
    assert sorted(i.repeats for i in injected.insertions) == [1] * 4 + [4] * 4
    by_id = {t.id: t for t in injected.traps}
    for ins in injected.insertions:
        assert written[ins.document_id].count(by_id[ins.trap_id].text) == ins.repeats
    inserted = {i.trap_id for i in injected.insertions}
    for t in injected.traps:
        if t.id not in inserted:
            assert all(t.text not in text for text in written.values())
    code, _, err = run_cli(capsys, "traps", "detect", "--model", target, "--ref-model", ref,
                           "--traps", tmp_path / "inj", "--device", "cpu", "--output",
                             tmp_path / "det")
    assert code == 0, err
    saved = json.loads((tmp_path / "det" / "results.json").read_text())
    assert saved["counts"]["inserted"] == 8 and saved["counts"]["held_out"] == 8
    assert [(c["length"], c["repeats"]) for c in saved["table"]] == [(3, 1), (3, 4), (5, 1), (5, 4)]
    assert all(c["n_members"] == 2 and c["n_nonmembers"] == 4 for c in saved["table"])
