"""CAMIA in runs (SPEC 3e): the repeated-text pass against a plain transformers forward,
batch 1 against 16, the statistics cache, the openai backend, the Ray engine against the
local one, and `pddkit run` with the
calibration texts held out or given by `--calibration`, whose scores no label of a text
under test can change; camia without labelled calibration data is one sentence."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from cli_helpers import run_cli, write_jsonl
from rounding import EPS32, ROUNDING_FACTOR

import pddkit

SEP = " "


def rep(text: str) -> str:
    """x + (" " + x) x 5, written here (run_ours_construct_mia_data.py:79-81)."""
    out = text
    for _ in range(5):
        out = out + SEP + text
    return out


def plain_logprobs(model, start: int, ids) -> tuple[np.ndarray, np.ndarray]:
    """(float32, float64) L of ids under the model's own forward on [start] + ids."""
    import copy

    x = torch.tensor([[start, *ids]])
    out = []
    for m in (model, copy.deepcopy(model).double()):
        with torch.no_grad():
            logits = m(input_ids=x.to(torch.long)).logits[0, :-1].double()
        out.append(torch.log_softmax(logits, -1)[torch.arange(len(ids)), torch.tensor(ids)]
                   .numpy())
    return out[0], out[1]


def short_texts(toy_world, k):
    """Texts whose repeated text fits the toy model's 512 positions (<= 80 tokens)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(toy_world.target_dir))
    pick = [t for t in toy_world.members + toy_world.nonmembers
            if 6 * len(tok(t, add_special_tokens=False)["input_ids"]) + 5 <= 500]
    return pick[:k]


@pytest.mark.slow
def test_the_repeated_pass_equals_a_plain_forward_and_batch_1_equals_16(toy_lm, toy_world):
    from pddkit.backends.stats_pass import StatsRunner

    texts = [rep(t) for t in short_texts(toy_world, 6)] + [rep("a a a")]
    enc = [list(toy_lm.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    one = StatsRunner(toy_lm, batch_size=1).run_ids(enc)
    many = StatsRunner(toy_lm, batch_size=16).run_ids(enc)
    start = toy_lm.tokenizer.eos_token_id  # GPT-2 shape: EOS is the start token
    for a, b, ids in zip(one, many, enc):
        L32, L64 = plain_logprobs(toy_lm.model, start, ids)
        # tests/rounding.py's rule: 4 x the plain float32-vs-float64 distance on this text,
        # at least 4 float32 spacings of its largest |L|
        bound = ROUNDING_FACTOR * max(float(np.abs(L32 - L64).max()),
                                      EPS32 * float(np.abs(L64).max()))
        assert np.all(np.abs(a.L - L64) <= bound) and np.all(np.abs(a.L - b.L) <= bound)


def _data(tmp_path, toy_world, name="d.jsonl", flip=False):
    rows = [{"id": f"t{i}", "text": t, "label": int((i < 10) != flip)}
            for i, t in enumerate(toy_world.members[:10] + toy_world.nonmembers[:10])]
    return write_jsonl(tmp_path / name, rows)


def _cal(tmp_path, toy_world):
    return write_jsonl(tmp_path / "cal.jsonl", [
        {"id": f"c{i}", "text": t, "label": int(i < 8)}
        for i, t in enumerate(toy_world.members[20:28] + toy_world.nonmembers[20:28])])


def _scores(out):
    return {r["id"]: r for r in map(json.loads, (out / "scores.jsonl").read_text().splitlines())}


@pytest.mark.slow
def test_a_run_holds_out_calibration_texts_and_fits_on_them_only(toy_world, tmp_path, capsys):
    data = _data(tmp_path, toy_world)
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", "camia,camia:combine=fisher,camia:combine=lr,loss",
                           "--output", out, "--no-blind", "--no-report", "--bootstrap", "10",
                           "--seed", "3")
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    cal = [json.loads(x) for x in (out / "calibration.jsonl").read_text().splitlines()]
    scored = _scores(out)
    assert len(cal) == 6 and sum(r["label"] for r in cal) == 3
    assert not {r["id"] for r in cal} & set(scored) and len(scored) == 14
    fitted = res["counts"]["calibration"]["fitted"]
    for label, combine in (("camia:combine=mean", "mean"), ("camia:combine=fisher", "fisher"),
                           ("camia:combine=lr", "lr")):
        rec = fitted[label]
        assert (rec["texts"], rec["members"], rec["nonmembers"]) == (6, 3, 3)
        assert rec["combine"] == combine and rec["features"] == 75
        assert res["methods"][label]["params"]["fitted"] == (
            "fitted on 6 calibration texts (3 members, 3 non-members)")
        assert all(np.isfinite(r[label]) for r in scored.values())
    # the repeated texts went through the pass, for the texts under test and the calibration
    # six copies, cut to the toy model's 511 text positions where longer
    assert res["counts"]["tokens"]["repeated"] > 2 * res["counts"]["tokens"]["target"]
    assert "repeated" in res["counts"]["calibration"]["tokens"]
    assert "repeated_pass" in res["timings_s"]
    # counted here from the tokenizer: repeated texts past the toy model's 511 text
    # positions, and texts with fewer than three occurrences of x_3..x_n in what is kept
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(toy_world.target_dir))
    rows = {r["id"]: r["text"] for r in map(json.loads, data.read_text().splitlines())}
    cut = few = 0
    for i in scored:
        ids = tok(rows[i], add_special_tokens=False)["input_ids"]
        kept = tok(rep(rows[i]), add_special_tokens=False)["input_ids"]
        cut += len(kept) > 511
        kept, k = kept[:511], len(ids) - 2
        few += sum(kept[s:s + k] == ids[2:] for s in range(len(kept) - k + 1)) < 3
    assert res["counts"]["truncated"]["repeated"] == cut > 0
    assert res["counts"]["fallback_texts"]["camia:combine=mean"] == {"fell_back": few,
                                                                     "scored": 14}
    assert any(n.startswith(f"camia: the repeated text (six copies) of {cut} of 14 texts ")
               for n in res["notices"])


@pytest.mark.slow
def test_labels_of_texts_under_test_cannot_change_the_scores(toy_world, tmp_path, capsys):
    cal = _cal(tmp_path, toy_world)
    runs = []
    for flip in (False, True):
        data = _data(tmp_path, toy_world, f"d{flip}.jsonl", flip=flip)
        out = tmp_path / f"out{flip}"
        code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                               "--methods", "camia,camia:combine=lr", "--calibration", cal,
                               "--output", out, "--no-blind", "--no-report", "--bootstrap", "10")
        assert code == 0, err
        res = json.loads((out / "results.json").read_text())
        assert res["counts"]["samples"] == 20  # the file is used whole: nothing held out
        assert res["counts"]["calibration"]["source"] == str(cal)
        runs.append(_scores(out))
    for i, row in runs[0].items():
        assert row["label"] != runs[1][i]["label"]
        for label in ("camia:combine=mean", "camia:combine=lr"):
            assert row[label] == runs[1][i][label]


@pytest.mark.slow
def test_a_rerun_computes_nothing_new(toy_lm, toy_world, tmp_path):
    cal = _cal(tmp_path, toy_world)
    texts = toy_world.members[:5] + toy_world.nonmembers[:5]
    cache = str(tmp_path / "cache")

    def run():
        res = pddkit.evaluate(texts, [1] * 5 + [0] * 5, toy_lm, "camia", cache=cache,
                              calibration=str(cal), blind=False, n_bootstrap=10)
        return res.scores()["camia"], res.counts["cache"]

    first, counts = run()
    assert counts["repeated-text pass"]["misses"] == 26  # 10 under test, 16 calibration
    again, counts = run()
    assert {k: v["misses"] for k, v in counts.items()} == {k: 0 for k in counts}
    assert counts["repeated-text pass"]["hits"] == 26
    np.testing.assert_array_equal(first, again)


@pytest.mark.slow
def test_the_openai_backend_runs_camia_from_token_log_probabilities(toy_lm, toy_world, tmp_path):
    from openai_server import FakeOpenAIServer

    # the first 30 words: the repeated text fits the context whole on both backends (the
    # server's context leaves one position fewer for the text than hf's: a cut repeated
    # text would end one token earlier there)
    def head(t):
        return " ".join(t.split()[:30])

    cal = write_jsonl(tmp_path / "cal.jsonl", [
        {"id": f"c{i}", "text": head(t), "label": int(i < 8)}
        for i, t in enumerate(toy_world.members[20:28] + toy_world.nonmembers[20:28])])
    texts = [head(t) for t in toy_world.members[:4] + toy_world.nonmembers[:4]]
    hf = pddkit.evaluate(texts, [1] * 4 + [0] * 4, toy_lm, "camia", calibration=str(cal),
                         blind=False, n_bootstrap=10)
    with FakeOpenAIServer(toy_lm.model, name="tiny", tokenizer=toy_lm.tokenizer,
                          max_model_len=512) as server:
        res = pddkit.evaluate(texts, [1] * 4 + [0] * 4, "tiny", "camia", backend="openai",
                              api_base=server.api_base, api_key_env=None,
                              tokenizer=str(toy_world.target_dir), calibration=str(cal),
                              blind=False, n_bootstrap=10)
    assert set(res.scores()) == {"camia"}
    assert res.counts["truncated"]["repeated"] == 0 and hf.counts["truncated"]["repeated"] == 0
    # the same model's L, one text at a time on the server, batched on hf: they differ by
    # float32 rounding, which moves a p-value only where a feature of the text lies within
    # that rounding of a calibration value or of a threshold; one such feature per text
    # moves -mean p by at most 1/75
    got, want = res.scores()["camia"], hf.scores()["camia"]
    assert np.all(np.isfinite(got)) and np.abs(got - want).max() <= 1 / 75


@pytest.mark.slow
def test_camia_without_labelled_calibration_data_is_one_sentence(toy_world, tmp_path, capsys):
    unlabelled = write_jsonl(tmp_path / "u.jsonl", [{"text": t} for t in toy_world.members[:4]])
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", unlabelled,
                           "--methods", "camia", "--output", tmp_path / "o")
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        "pddkit: error: method camia needs labelled calibration data: pass --calibration (a "
        "labelled table; or labelled data to hold 30% out of)")
    assert "Traceback" not in err
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data",
                           _data(tmp_path, toy_world), "--methods", "camia:combine=median",
                           "--output", tmp_path / "o")
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "pddkit: error: method camia: combine must be one of mean, pearson, fisher, "
        "mudholkar_george, lr, not 'median'")


@pytest.mark.slow
def test_the_ray_engine_scores_camia_as_the_local_engine(toy_world, tmp_path, local_ray):

    cal = _cal(tmp_path, toy_world)
    texts = toy_world.members[:4] + toy_world.nonmembers[:4]

    def run(**engine):
        return pddkit.evaluate(texts, [1] * 4 + [0] * 4, str(toy_world.target_dir), "camia",
                               calibration=str(cal), blind=False, n_bootstrap=10, device="cpu",
                               dtype="float32", batch_size=4, **engine)

    local = run()
    remote = run(engine="ray", actors=1)
    # the same batches on the actor: statistics equal bit for bit (tests/test_ray_engine.py),
    # so the features and scores are equal too
    np.testing.assert_array_equal(remote.scores()["camia"], local.scores()["camia"])
    assert remote.counts["truncated"]["repeated"] == local.counts["truncated"]["repeated"]
