"""Polish a new user notices (issue 22, item 6): progress and timings of `compare
--continue`, conflicting or ignored options said in one sentence or a notice, errors in
pddkit's words, short reprs and headers that count what they mean."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli, write_jsonl
from tiny_models import save_tiny_gpt2

from pddkit.reporting.run_files import write_run
from pddkit.reporting.terminal import summary

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random one-layer GPT-2 saved as a folder (seconds; nothing trained)."""
    return str(save_tiny_gpt2(tmp_path_factory.mktemp("tiny") / "model"))


def _chunks(path, n: int, words: int = 12):
    rows = [{"id": f"c{i}", "text": " ".join(WORDS[(i + j) % len(WORDS)] for j in range(words))}
            for i in range(n)]
    return write_jsonl(path, rows)


# -- compare --continue: batched, with progress and timings --------------------------------


def test_compare_continuations_are_batched_timed_and_show_progress(tiny, tmp_path, capsys,
                                                                   monkeypatch):
    """5 flagged chunks x 2 continuations, --batch-size 8: two `generate` calls (4 chunks
    of 2 rows, then 1), not five; a progress bar with its ETA; timings in results.json."""
    from transformers import GPT2LMHeadModel

    calls = []
    real = GPT2LMHeadModel.generate

    def counted(self, *args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0] if "input_ids" in kwargs else args[0].shape[0])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(GPT2LMHeadModel, "generate", counted)
    monkeypatch.setenv("PDDKIT_PROGRESS", "1")
    data = _chunks(tmp_path / "c.jsonl", 5)
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "compare", "--model", tiny, "--model-b", tiny, "--data",
                           data, "--continue", 2, "--prompt-words", 3, "--batch-size", 8,
                           "--device", "cpu", "--output", out)
    assert code == 0, err
    assert calls == [4, 1]  # chunks per call (each of them 2 rows)
    assert "sampling continuations" in err and "<" in err  # tqdm: elapsed<remaining (the ETA)
    saved = json.loads((out / "results.json").read_text())
    timings = saved["timings_s"]
    for key in ("score_original", "score_unlearned", "continuations", "total"):
        assert timings[key] >= 0, key
    assert timings["total"] >= timings["continuations"]
    lines = [json.loads(x) for x in (out / "continuations.jsonl").read_text().splitlines()]
    assert len(lines) == 10 and {x["id"] for x in lines} == {f"c{i}" for i in range(5)}


def test_compare_batches_give_each_chunk_its_own_continuations(tiny, tmp_path):
    """Batched sampling keeps chunks apart: each continuation is as long as its chunk's
    rest, and the same command gives the same texts."""
    from pddkit.studies.compare import compare_models

    data = _chunks(tmp_path / "c.jsonl", 3)
    runs = [compare_models(tiny, tiny, chunks=data, continuations=2, prompt_words=3,
                           batch_size=4, device="cpu") for _ in range(2)]
    assert [c.continuations for c in runs[0].chunks] == [c.continuations for c in runs[1].chunks]
    assert all(len(c.continuations) == 2 and len(c.rouge_l) == 2 for c in runs[0].chunks)


def test_compare_with_the_same_model_twice_says_so(tiny, tmp_path, capsys):
    data = _chunks(tmp_path / "c.jsonl", 2)
    code, _, err = run_cli(capsys, "compare", "--model", tiny, "--model-b", tiny + "/",
                           "--data", data, "--device", "cpu", "--output", tmp_path / "o")
    assert code == 0, err
    assert "--model and --model-b are the same model" in err
    saved = json.loads((tmp_path / "o" / "results.json").read_text())
    assert any("same model" in n for n in saved["notices"])


# -- conflicting or ignored options: one sentence ------------------------------------------


@pytest.mark.parametrize(("knob", "flag", "value"), [("repeats", "--repeats", "3"),
                                                     ("lr", "--lr", "0.01")])
def test_a_sweep_and_the_option_it_sweeps_are_refused_together(tmp_path, capsys, knob, flag,
                                                               value):
    code, _, err = run_cli(capsys, "sandbox", "--sweep", f"{knob}=1,2", flag, value,
                           "--output", tmp_path / "o")
    assert code == 1, err
    assert err.count("\n") == 1 and f"--sweep sets {flag} for each model (1" in err, err
    assert f"so {flag} {value} would be ignored" in err, err
    assert not (tmp_path / "o" / "split.json").exists()  # refused before any work


def test_api_base_with_the_hf_backend_is_one_sentence(tmp_path, capsys):
    from pddkit.engine.config import RunConfig
    from pddkit.errors import PddkitError

    data = write_jsonl(tmp_path / "d.jsonl", [{"text": f"text {i}", "label": i % 2}
                                              for i in range(4)])
    code, _, err = run_cli(capsys, "run", "--model", "/nonexistent/model", "--data", data,
                           "--api-base", "http://127.0.0.1:9/v1", "--output", tmp_path / "o")
    assert code == 1 and err.count("\n") == 1, err
    assert "--api-base is the address of a served model (--backend openai)" in err, err
    with pytest.raises(PddkitError, match="`api_base` is the address of a served model"):
        RunConfig(model="m", api_base="http://127.0.0.1:9/v1").check()
    RunConfig(model="m", backend="openai", api_base="http://127.0.0.1:9/v1").check()


# -- a sandbox folder given as a model ------------------------------------------------------


def _sandbox_folder(root, tiny, runs=("run",)):
    import shutil

    root.mkdir()
    (root / "summary.json").write_text("{}")
    for run in runs:
        shutil.copytree(tiny, root / run / "target-model")
    shutil.copytree(tiny, root / "reference-model")
    return root


def test_a_sandbox_folder_given_as_model_says_where_its_target_model_is(tiny, tmp_path, capsys):
    root = _sandbox_folder(tmp_path / "sb", tiny)
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": f"the lazy dog {i}", "label": i % 2}
                                              for i in range(4)])
    code, _, err = run_cli(capsys, "run", "--model", root, "--data", data, "--methods", "loss",
                           "--output", tmp_path / "o")
    assert code == 1 and err.count("\n") == 1, err
    assert (f"model {root} is a sandbox folder, not a model: its target model is "
            f"{root / 'run' / 'target-model'}, and its reference model is "
            f"{root / 'reference-model'}") in err, err
    code, _, err = run_cli(capsys, "run", "--model", root / "run", "--data", data, "--output",
                           tmp_path / "o")
    assert code == 1 and f"its target model is {root / 'run' / 'target-model'}" in err, err


def test_a_swept_sandbox_folder_names_each_target_model(tiny, tmp_path):
    from pddkit.backends.sandbox_folders import not_a_model

    root = _sandbox_folder(tmp_path / "sb", tiny, runs=("repeats=1", "repeats=2"))
    said = not_a_model(str(root))
    assert f"target models are {root}/repeats=1/target-model, {root}/repeats=2/target-model" in said
    assert not_a_model(tiny) is None and not_a_model(str(tmp_path)) is None


# -- --freq on a file that is not a table -----------------------------------------------------


def test_freq_that_is_not_a_table_is_refused_before_the_model_loads(tmp_path, capsys):
    import numpy as np

    data = write_jsonl(tmp_path / "d.jsonl", [{"text": f"the lazy dog {i}", "label": i % 2}
                                              for i in range(4)])
    other = tmp_path / "other.npz"
    np.savez(other, a=np.arange(3))
    for freq, said in ((data, "is not a pddkit frequency table (an .npz file of token counts)"),
                       (other, "is an .npz archive without counts and meta"),
                       (tmp_path / "none.npz", "does not exist")):
        # the model does not exist: an answer about --freq came before any model loaded
        code, _, err = run_cli(capsys, "run", "--model", "/nonexistent/model", "--data", data,
                               "--freq", freq, "--methods", "dcpdd", "--output", tmp_path / "o")
        assert code == 1 and err.count("\n") == 1, err
        assert f"--freq {freq} {said}" in err and "pickle" not in err, err


def test_resources_no_method_needs_are_said_not_silently_ignored(tiny, tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": " ".join(WORDS[i:] + WORDS[:i]),
                                               "label": i % 2} for i in range(8)])
    freq = tmp_path / "f.npz"
    freq.write_bytes(b"never read: no method of the run needs a frequency table")
    code, _, err = run_cli(capsys, "run", "--model", tiny, "--data", data, "--methods", "loss",
                           "--freq", freq, "--ref-model", tiny, "--mask-model", tiny,
                           "--no-blind", "--no-report", "--output", tmp_path / "o")
    assert code == 0, err
    notices = json.loads((tmp_path / "o" / "results.json").read_text())["notices"]
    for flag, need in (("--ref-model", "a reference model"), ("--freq", "a frequency table"),
                       ("--mask-model", "a masked LM for neighbours")):
        line = f"{flag} is given but no method of this run (loss) needs {need}: it is not used"
        assert line in notices and line in err, (line, notices)
    code, _, err = run_cli(capsys, "run", "--model", tiny, "--data", data, "--methods", "loss,ref",
                           "--ref-model", tiny, "--no-blind", "--no-report",
                           "--output", tmp_path / "o2")
    assert code == 0 and "is not used" not in err, err  # used: nothing said


# -- builders: a missing date or text field, and --date-field / --text-field ------------------


def test_build_names_a_missing_date_field_and_takes_date_and_text_fields(tmp_path, capsys):
    docs = write_jsonl(tmp_path / "docs.jsonl", [
        {"body": "one two three four five six", "published": "2019-01-01"},
        {"body": "seven eight nine ten eleven twelve", "published": "2024-01-01"}])
    args = ["build", "cutoff", "--input", docs, "--member-before", "2021-01-01",
            "--nonmember-after", "2022-01-01", "--words", "4"]
    code, _, err = run_cli(capsys, *args, "--output", tmp_path / "a")
    assert code == 1 and err.count("\n") == 1, err
    assert ("docs.jsonl line 1 is missing the text field 'text' (or 'input'); its fields are "
            "'body', 'published' (name the text field with --text-field)") in err, err
    code, _, err = run_cli(capsys, *args, "--text-field", "body", "--output", tmp_path / "a")
    assert code == 1 and ("line 1 is missing the date field 'date'; its fields are 'body', "
                          "'published' (name the documents' date field with --date-field)") in err
    code, _, err = run_cli(capsys, *args, "--text-field", "body", "--date-field", "published",
                           "--output", tmp_path / "a")
    assert code == 0, err
    rows = [json.loads(x) for x in (tmp_path / "a" / "data.jsonl").read_text().splitlines()]
    assert sorted(r["label"] for r in rows) == [0, 1]
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["parameters"]["date_field"] == "published"
    assert manifest["parameters"]["text_field"] == "body"
    code, _, err = run_cli(capsys, "build", "patentmia", "--input", docs, "--text-field", "body",
                           "--output", tmp_path / "b")
    assert code == 1 and "missing both date fields, 'publication_date' and 'priority_date'" in err


# -- the openai backend with the server down ---------------------------------------------------


def test_a_server_that_is_down_gives_a_retry_line_every_few_seconds_at_most(caplog):
    """8 requests in flight, each retrying 3 times: one warning line (the others at debug
    level, counted in the next line), not one per attempt."""
    import logging
    import random
    import socket

    from pddkit.backends.openai_client import SAY_EVERY, CompletionsClient, run_concurrently
    from pddkit.errors import PddkitError

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = CompletionsClient(f"http://127.0.0.1:{port}/v1", "m", max_retries=3, backoff=0.01,
                               timeout=2.0)
    with caplog.at_level(logging.DEBUG, logger="pddkit"), \
            pytest.raises(PddkitError, match="could not reach the server"):
        run_concurrently(8, lambda i, stop: client.post({}, random.Random(i), stop), 8)
    said = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert len(said) >= 8  # every retry is still logged (at debug level)
    loud = [r for r in said if r.levelno >= logging.WARNING]
    assert len(loud) == 1 and SAY_EVERY >= 3, [r.getMessage() for r in loud]
    assert "(attempt 2 of 4)" in loud[0].getMessage()


# -- the Python API reads labels as the command line does ---------------------------------------


def test_the_api_reads_labels_as_the_cli_and_refuses_yes_in_one_sentence(tmp_path, capsys):
    import numpy as np

    from pddkit import evaluate
    from pddkit.api import _dataset
    from pddkit.errors import PddkitError

    texts = [f"the lazy dog {i}" for i in range(4)]
    got = _dataset(texts, ["member", "nonmember", True, np.int64(0)], None, None)
    assert [s.label for s in got.samples] == [1, 0, 1, 0]
    said = ("has label 'yes'; labels must be 0 (non-member) or 1 (member), or the strings "
            "member/nonmember, true/false")
    with pytest.raises(PddkitError) as err:
        evaluate(texts, ["yes", "no", "yes", "no"], model="/nonexistent/model")
    assert str(err.value) == f"text 0 {said}"
    with pytest.raises(PddkitError, match=r"text 1 has label 0\.5; labels must be 0"):
        evaluate(texts, [1, 0.5, 0, 1], model="/nonexistent/model")
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t, "label": "yes"} for t in texts])
    code, _, err = run_cli(capsys, "run", "--model", "/nonexistent/model", "--data", data,
                           "--output", tmp_path / "o")
    assert code == 1 and f"line 1 {said}" in err, err  # the same words


# -- "at at" in the JSONL error ---------------------------------------------------------------


def test_a_json_error_says_where_once(tmp_path, capsys):
    from pddkit.errors import PddkitError
    from pddkit.reporting.report import load_results

    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a b", "label": 1}\n{"text": "tab\there", "label": 0}\n'
                    '{"text": "c d" "label": 0}\n')
    code, _, err = run_cli(capsys, "run", "--model", "/nonexistent/model", "--data", data,
                           "--output", tmp_path / "o")
    assert code == 1 and "line 2 is not valid JSON (Invalid control character at column 14)" \
        in err, err
    assert "at at" not in err
    out = tmp_path / "results"
    out.mkdir()
    (out / "results.json").write_text('{"a": "unterminated')
    (out / "scores.jsonl").write_text("")
    with pytest.raises(PddkitError) as e:
        load_results(out)
    assert "(Unterminated string starting at line 1)" in str(e.value) and "at at" not in str(e.value)


# -- audit: lengths, book names, the terminal table -------------------------------------------


def test_audit_warns_on_lengths_cleans_book_names_and_fits_100_columns(tiny, tmp_path, capsys):
    import random

    rng = random.Random(0)
    books = tmp_path / "books"
    books.mkdir()
    long_name = "a-very-long-book-name-that-goes-on-and-on-for-many-characters-volume-one"
    for name in ("short", long_name, "esc\x1b[31mred\x1b[0m\x07"):
        (books / f"{name}.txt").write_text(" ".join(rng.choice(WORDS) for _ in range(300)))
    val = write_jsonl(tmp_path / "val.jsonl", [
        {"text": " ".join(rng.choice(WORDS) for _ in range(8)), "label": i % 2}
        for i in range(40)])
    out = tmp_path / "audit"
    code, stdout, err = run_cli(capsys, "audit", "--model", tiny, "--books", books,
                                "--val-data", val, "--words", 50, "--snippets", 4,
                                "--device", "cpu", "--output", out)
    assert code == 0, err
    said = ("the validation texts are 8 words long (median) and the snippets 50: scores such as "
            "Min-K% Prob change with a text's length")
    assert said in stdout and "set --words to their length" in stdout
    saved = json.loads((out / "results.json").read_text())
    assert any(said in n for n in saved["notices"])
    assert saved["counts"]["validation_median_words"] == 8
    names = {b["book"] for b in saved["books"]}
    assert names == {"short", long_name, "escred"}  # escapes and control characters removed
    assert "\x1b" not in stdout and "\x07" not in stdout
    table = stdout[stdout.index("Books ranked"):stdout.index(said)].splitlines()
    assert len(table) >= 7 and all(len(line) <= 100 for line in table), table
    assert any("…" in line and line.split()[1].startswith("a-very-long") for line in table)


# -- the sandbox says its ground-truth line once ----------------------------------------------


def test_the_ground_truth_line_is_said_once(tmp_path, caplog):
    """verify_sandbox no longer logs the line that `pddkit sandbox` prints in its summary."""
    import logging

    from test_ground_truth import _paired_corpus, _write_sandbox_files

    from pddkit.reporting.sandbox_summary import ground_truth_line
    from pddkit.sandbox import ground_truth
    from pddkit.sandbox.split import split_documents

    split = split_documents(_paired_corpus(13), 20, 20, 10, min_words=64, seed=0)
    run, _ = _write_sandbox_files(tmp_path, split)
    with caplog.at_level(logging.INFO, logger="pddkit"):
        truth = ground_truth.verify_sandbox(tmp_path, [run], None, None)
    assert truth["line"].startswith("ground truth verified")
    assert not [r for r in caplog.records if r.levelno >= logging.INFO
                and "ground truth verified" in r.getMessage()]
    # `pddkit sandbox` prints it once, first in its summary
    assert ground_truth_line({"ground_truth": truth}) == truth["line"]


# -- blind --help says what blind does ----------------------------------------------------------


def test_blind_help_describes_only_the_blind_baseline(capsys):
    code, help_text, _ = run_cli(capsys, "blind", "--help")
    assert code == 0
    flat = " ".join(help_text.split())
    assert "methods" not in flat and "--language" not in flat  # nothing blind does not do
    assert "its texts stay in one cross-validation fold" in flat
    assert "the baseline is also fitted within each part" in flat
    assert "Seed of the cross-validation folds and the bootstrap" in flat
    assert "tells them apart from the texts alone" in flat
    code, run_help, _ = run_cli(capsys, "run", "--help")
    flat = " ".join(run_help.split())
    assert "methods meaningless for it are skipped" in flat  # run's own words stay
    assert "kept on one side of every split" in flat


# -- RunResult: a short repr and a summary(); inverted methods; the header's counts ----------


def _result(splits=None):
    import numpy as np

    from pddkit.evaluation.metrics import compute_metrics
    from pddkit.evaluation.results import MethodResult, RunResult

    labels = np.array([1] * 30 + [0] * 30)
    rng = np.random.default_rng(0)
    test = np.arange(60) if splits is None else np.flatnonzero(np.array(splits) == "test")
    scores = {"loss": rng.standard_normal(60) + 2.0 * labels,     # clearly right
              "zlib": rng.standard_normal(60) - 2.0 * labels,     # clearly inverted
              "mink": rng.standard_normal(60)}                    # chance
    methods = tuple(MethodResult(k, k, {}, s, compute_metrics(s[test], labels[test], 200))
                    for k, s in scores.items())
    return RunResult(ids=tuple(f"t{i}" for i in range(60)), labels=tuple(labels.tolist()),
                     methods=methods, config={"dataset": "hand-made"},
                     counts={"samples": 60, "members": 30, "nonmembers": 30, "skipped": 0},
                     timings={}, models={}, splits=splits)


def test_run_result_has_a_short_repr_and_a_summary():
    r = _result()
    assert repr(r) == ("<RunResult: 60 texts (30 members, 30 non-members); methods loss, zlib, "
                       "mink; pddkit.summary(result) for the table>")
    text = summary(r)
    assert text.splitlines()[0].startswith("scored 60 texts with 3 methods")
    assert "AUC [95% CI]" in text and all(k in text for k in ("loss", "zlib", "mink"))


def test_a_method_significantly_below_chance_is_pointed_out(tmp_path):
    from pddkit.reporting.report import write_report

    r = _result()
    assert r.metrics()["zlib"].auc_ci.high < 0.5 and r.metrics()["mink"].auc_ci.high > 0.5
    text = summary(r)
    notes = [line for line in text.splitlines() if "significantly below 0.5" in line]
    assert len(notes) == 1 and notes[0].startswith("zlib: AUC ")  # not mink (chance), not loss
    write_run(r, tmp_path / "out")
    html, _ = write_report(tmp_path / "out")
    assert "zlib: AUC" in html.read_text() and "significantly below 0.5" in html.read_text()


def test_the_report_header_counts_the_texts_the_metrics_use():
    from pddkit.reporting.report import run_summary

    splits = tuple(["val"] * 10 + ["test"] * 20 + ["val"] * 10 + ["test"] * 20)
    r = _result(splits)
    lines = dict(run_summary(r.to_dict()).items)
    assert lines["texts"].startswith("60 texts (30 members, 30 non-members)")
    assert lines["metrics on"] == "test part: 40 texts (20 members, 20 non-members)"
    assert "; metrics on the test part;" in repr(r)


def test_the_sandbox_summary_points_out_a_method_below_chance():
    from pddkit.reporting.sandbox_summary import _inverted_notes

    window = {"auc": {"loss": 0.9, "probe": 0.416, "blind": 0.3},
              "auc_ci": {"loss": [0.85, 0.95], "probe": [0.359, 0.468], "blind": [0.2, 0.4]}}
    summary = {"sweep": None, "runs": [{"name": "run", "windows": {"128": window}}]}
    notes = _inverted_notes(summary)
    assert len(notes) == 1 and notes[0].startswith(  # the blind baseline is no detector
        "128-word windows: probe: AUC 0.416 [0.359, 0.468] is significantly below 0.5")
    window["auc_ci"]["probe"] = [None, None]  # no bootstrap: no interval, nothing to say
    assert _inverted_notes(summary) == []
    window["auc_ci"]["probe"] = [0.359, 0.468]
    summary["sweep"] = {"knob": "repeats"}
    assert _inverted_notes(summary)[0].startswith("run, 128-word windows: probe: AUC 0.416")


def test_with_bars_off_a_long_job_logs_where_it_is(monkeypatch, caplog):
    from pddkit import progress

    monkeypatch.setenv("PDDKIT_PROGRESS", "0")
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)  # a minute, in a test: at once
    with caplog.at_level("INFO", logger="pddkit.progress"), \
            progress.bar(230, "sampling continuations", unit="chunk") as b:
        b.update(23)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("sampling continuations: 23/230 chunk (10%), about ")
    assert line.endswith(" so far") and " left, " in line
    monkeypatch.setattr(progress, "LOG_EVERY_S", 60.0)
    caplog.clear()
    with caplog.at_level("INFO", logger="pddkit.progress"), \
            progress.bar(230, "sampling continuations", unit="chunk") as b:
        b.update(23)  # within the first minute: nothing said
    assert caplog.records == []


def test_a_reference_model_that_cannot_load_is_said_before_the_target_loads(tiny, tmp_path,
                                                                             capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": " ".join(WORDS[i:] + WORDS[:i]),
                                               "label": i % 2} for i in range(8)])
    code, _, err = run_cli(capsys, "run", "--model", tiny, "--data", data, "--methods",
                           "loss,ref", "--ref-model", tmp_path / "no-such-model", "--no-blind",
                           "--output", tmp_path / "o")
    assert code == 1 and f"reference model path {tmp_path / 'no-such-model'} does not exist" in err
    assert "loaded model" not in err and "target pass" not in err, err  # nothing loaded first
