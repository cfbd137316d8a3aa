"""Options of `pddkit run` and the Python API: checked before any model loads, the
statistics cache (a second run does no forward pass), --limit, and a loaded Hugging Face
model with its tokenizer as the API's model."""

import json
import re

import numpy as np
import pytest
from cli_helpers import run_cli
from rounding import forward_bounds

import pddkit

NO_MODEL = "/nonexistent/model/dir"  # a check that runs first must answer before this fails


@pytest.mark.parametrize("extra, sentence", [
    (["--batch-size", "0"], "--batch-size must be "),
    (["--max-length", "1"], "--max-length 1 leaves no room for a text token"),
    (["--methods", "mink:k=2"], "method mink: k must be in (0, 1], not 2"),
    (["--methods", "surp:k=150"], "method surp: k is a percentile and must be in [0, 100], not 150"),
    (["--backend", "openai"], "--backend openai needs --api-base"),
])
def test_options_are_checked_before_any_model_loads(tmp_path, capsys, extra, sentence):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": f"text number {i} here", "label": i % 2}) + "\n"
                            for i in range(6)))
    code, _, err = run_cli(capsys, "run", "--model", NO_MODEL, "--data", data, "--output",
                           tmp_path / "o", "--no-blind", *extra)
    assert code == 1 and sentence in err and NO_MODEL not in err, err


def test_cache_second_run_does_no_forward_pass(toy_world, tmp_path, capsys):
    cache = tmp_path / "cache"
    args = ["run", "--model", toy_world.target_dir, "--data", toy_world.data_path, "--no-blind",
            "--bootstrap", "20", "--cache", cache, "--no-report"]
    code, _, err = run_cli(capsys, *args, "--methods", "loss,lowercase,mink", "--output", tmp_path / "a")
    assert code == 0, err
    first = json.loads((tmp_path / "a" / "results.json").read_text())
    n = first["counts"]["samples"]
    assert first["counts"]["cache"]["target pass"] == {"hits": 0, "misses": n}
    code, _, err = run_cli(capsys, *args, "--methods", "zlib,mink:k=0.5,lowercase,surp",
                           "--output", tmp_path / "b")
    assert code == 0, err
    second = json.loads((tmp_path / "b" / "results.json").read_text())
    assert second["counts"]["cache"]["target pass"] == {"hits": n, "misses": 0}
    assert second["counts"]["cache"]["lowercase pass"] == {"hits": n, "misses": 0}
    rows = [[json.loads(x) for x in (tmp_path / d / "scores.jsonl").read_text().splitlines()]
            for d in "ab"]
    assert [r["lowercase"] for r in rows[0]] == [r["lowercase"] for r in rows[1]]  # bit for bit
    code, out, _ = run_cli(capsys, "cache", "info", cache)
    assert code == 0 and f"{2 * n} texts" in out  # target + lowercase statistics


def test_limit_takes_a_seeded_sample_with_both_classes(toy_world, tmp_path, capsys):
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data",
                           toy_world.data_path, "--methods", "loss", "--limit", "10",
                           "--no-blind", "--bootstrap", "20", "--no-report",
                           "--output", tmp_path / "o")
    assert code == 0, err
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    c = res["counts"]
    assert c["samples"] == 10 and c["members"] == 5 and c["nonmembers"] == 5
    assert c["limited_from"] == 120


def test_api_takes_a_loaded_model_with_its_tokenizer(toy_world, toy_lm):
    texts = toy_world.members[:3] + toy_world.nonmembers[:3]
    by_pair = pddkit.score(texts, (toy_lm.model, toy_lm.tokenizer), methods="loss,mink")
    by_kw = pddkit.score(texts, toy_lm.model, tokenizer=toy_lm.tokenizer, methods="loss,mink",
                         ids=[f"x{i}" for i in range(6)])
    by_path = pddkit.score(texts, str(toy_world.target_dir), methods="loss,mink", device="cpu")
    # one model loaded three ways, float32 each: means of L (mink: of the lowest), so within
    # the float32 rounding of L measured on these texts (tests/rounding.py)
    ids = [toy_lm.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    _, bound = forward_bounds(toy_lm.model, toy_lm.tokenizer.eos_token_id, ids)
    for k in ("loss", "mink"):
        assert np.all(np.abs(by_pair[k] - by_path[k]) <= bound.L)
        assert np.all(np.abs(by_kw[k] - by_path[k]) <= bound.L)
    with pytest.raises(pddkit.PddkitError, match="pass its tokenizer too"):
        pddkit.score(texts, toy_lm.model)
    with pytest.raises(pddkit.PddkitError, match="`batch_size` must be "):
        pddkit.score(texts, toy_lm, batch_size=0)


def test_unreachable_hub_is_one_sentence_within_seconds(monkeypatch, tmp_path):
    import socket
    import time

    from pddkit.backends.hf_loading import load_model

    def refuse(*args, **kwargs):
        raise OSError("no route to host")

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(socket, "create_connection", refuse)
    t0 = time.perf_counter()
    with pytest.raises(pddkit.PddkitError, match="not in the local Hugging Face cache and the hub"):
        load_model("some-org/some-model", device="cpu")
    assert time.perf_counter() - t0 < 10


def test_help_and_list_are_whole_and_aligned(capsys):
    code, out, _ = run_cli(capsys, "--help")
    commands = out.split("Commands:")[1].strip().splitlines()
    assert code == 0 and len(commands) >= 7 and not any(c.rstrip().endswith("...") for c in commands)
    code, out, _ = run_cli(capsys, "list")
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 100
    rows = [r for r in out.splitlines() if r.startswith("  ") and r.split()[0] in (
        "loss", "neighbor", "probe", "surp", "blind", "copyright-traps", "traps")]
    assert len(rows) == 9  # traps generate, inject, detect
    starts = {re.match(r"  \S+(?: \S+)?\s{2,}", r).end() for r in rows}
    assert starts == {19}, rows  # every description starts in one column, past the longest name
    assert "needs: probe (hidden states, local model)" in out and "(full distribution)" in out
    assert "defaults: entropy_threshold=2.0,k=40.0; needs: target model" in out
