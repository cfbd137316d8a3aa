"""What the user gives is never lost or mismatched: the scored span of a truncated text,
label leaks between auxiliary data and the texts under test, output folders checked
before any model loads, and repeated method parameters."""

import json
import zlib

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl
from rounding import forward_bounds


def test_zlib_and_lowercase_use_the_scored_span_of_a_truncated_text(toy_world, toy_lm, tmp_path,
                                                                    capsys):
    """SPEC section 3, truncation: with --max-length 17 a long text is scored on its first
    16 tokens, and zlib divides by the compressed size of those tokens' text, not of the
    whole text; lowercase runs on that span lowercased."""
    from pddkit.backends.stats_pass import StatsRunner
    from pddkit.methods.zlib_ratio import zlib_size

    long_text = " ".join(toy_world.members[:3])
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "long", "text": long_text}])
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", "loss,zlib,lowercase", "--max-length", "17",
                           "--output", tmp_path / "o")
    assert code == 0, err
    row = json.loads((tmp_path / "o" / "scores.jsonl").read_text())
    runner = StatsRunner(toy_lm, max_length=17)
    st = runner.run([long_text])[0]
    assert st.truncated and len(st) == 16
    span = toy_lm.tokenizer.decode(st.ids.tolist())
    assert long_text.startswith(span) and len(span) < len(long_text) / 5
    mean_l = float(np.mean(st.L, dtype=np.float64))
    # the run's pass and this one: two float32 computations of the span's L, within the
    # rounding measured on it (tests/rounding.py), divided by the zlib size for zlib
    low = runner.run([span.lower()])[0]
    start = toy_lm.tokenizer.eos_token_id
    (_, bound), (_, bound_low) = (forward_bounds(toy_lm.model, start, [s.ids.tolist()])
                                  for s in (st, low))
    assert abs(row["zlib"] - mean_l / zlib_size(span)) <= bound.L / zlib_size(span)
    # scored on the whole text instead, the size would be over 5 times larger: 1e-3 relative
    # is far below that difference and far above rounding
    assert row["zlib"] != pytest.approx(mean_l / len(zlib.compress(long_text.encode())), rel=1e-3)
    c = float(np.mean(low.L, dtype=np.float64))
    assert abs(row["lowercase"] - (-mean_l / c)) <= (bound.L + abs(mean_l / c) * bound_low.L) / abs(c)


def test_val_data_overlapping_data_is_refused_or_left_out(toy_world, tmp_path, capsys):
    lines = [json.loads(x) for x in toy_world.data_path.read_text().splitlines()]
    test_rows, val_rows = lines[10:-10], lines[:10] + lines[-10:]
    data = write_jsonl(tmp_path / "test.jsonl", test_rows)
    # three validation texts are texts under test, one with its whitespace changed
    leaked = [dict(test_rows[0], id="v1"), dict(test_rows[1], id="v2"),
              dict(test_rows[-1], id="v3", text="  " + test_rows[-1]["text"].replace(" ", "\n", 3))]
    val = write_jsonl(tmp_path / "val.jsonl", val_rows + leaked)
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "no-model-needed", "--data", data,
                           "--val-data", val, "--methods", "mink", "--output", tmp_path / "o")
    assert code == 1 and "Traceback" not in err
    assert "3 of the 23 texts of --val-data" in err and "also occur in the texts under test" in err
    assert "val.jsonl line 21" in err and "val.jsonl line 22" in err  # two examples
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--val-data", val, "--methods", "mink", "--output", tmp_path / "o",
                           "--on-invalid", "skip", "--bootstrap", "20")
    assert code == 0, err
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["counts"]["label_leaks_left_out"] == {"val_data": 3, "probe_data": 0}
    assert res["methods"]["mink"]["metrics"]["n_members"] == 50  # the texts under test, all kept
    assert sum("a label leak" in s["reason"] for s in res["skipped"]) == 3
    rows = [json.loads(x) for x in (tmp_path / "o" / "scores.jsonl").read_text().splitlines()]
    assert sum(r["split"] == "val" for r in rows) == 20


def test_probe_data_overlapping_data_is_refused_before_any_model_loads(toy_world, tmp_path,
                                                                       capsys):
    aux = write_jsonl(tmp_path / "aux.jsonl", [{"text": t} for t in toy_world.pool[:20]]
                      + [{"text": toy_world.members[4]}])
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "no-such-model", "--data",
                           toy_world.data_path, "--methods", "probe", "--probe-data", aux,
                           "--output", tmp_path / "o")
    assert code == 1 and "1 of the 21 texts of --probe-data" in err and "aux.jsonl line 21" in err
    from pddkit.data import load_jsonl
    from pddkit.data.overlap import without_overlap

    kept = without_overlap(load_jsonl(aux), load_jsonl(toy_world.data_path), "`probe_data`",
                           "skip")
    assert len(kept.samples) == 20 and kept.meta["left_out_overlapping"] == 1
    assert kept.skipped[0].source.endswith("aux.jsonl line 21")


def test_output_folder_is_checked_before_any_model_loads(toy_world, tmp_path, capsys):
    plain = tmp_path / "plain"
    plain.write_text("not a folder")
    for out, sentence in [(plain, "is a file, not a folder"),
                          (plain / "sub", "cannot write to --output")]:
        code, _, err = run_cli(capsys, "run", "--model", tmp_path / "no-such-model", "--data",
                               toy_world.data_path, "--output", out)
        assert code == 1 and sentence in err and "Traceback" not in err, err
        code, _, err = run_cli(capsys, "sandbox", "--output", out)
        assert code == 1 and sentence in err, err


def test_a_folder_with_results_is_refused_unless_overwrite(toy_world, tmp_path, capsys):
    out = tmp_path / "o"
    args = ["run", "--model", toy_world.target_dir, "--data", toy_world.data_path,
            "--bootstrap", "10", "--output", out]
    code, _, err = run_cli(capsys, *args, "--methods", "loss,mink")
    assert code == 0, err
    assert (out / "report.html").is_file()
    (out / "notes.txt").write_text("the user's own file")
    code, _, err = run_cli(capsys, *args, "--methods", "zlib", "--no-report")
    assert code == 1 and "already holds pddkit results" in err and "--overwrite" in err
    assert json.loads((out / "results.json").read_text())["config"]["methods"] == "loss,mink"
    code, _, err = run_cli(capsys, *args, "--methods", "zlib", "--no-report", "--overwrite")
    assert code == 0, err
    assert json.loads((out / "results.json").read_text())["config"]["methods"] == "zlib"
    assert not (out / "report.html").exists() and not list(out.glob("*.png"))  # nothing stale
    assert (out / "notes.txt").read_text() == "the user's own file"  # and nothing else lost


def test_a_repeated_method_parameter_is_one_sentence(toy_world, tmp_path, capsys):
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data",
                           toy_world.data_path, "--methods", "mink:k=0.1,k=0.2", "--output",
                           tmp_path / "o")
    assert code == 1 and "k is given twice" in err and "mink:k=0.1,mink:k=0.2" in err
