"""FSD (`fsd`, SPEC 3e): the score by hand on hand-made statistics; the cosine schedule by
hand; bad input as one sentence; the LoRA training deterministic with the seed (and the
target left untouched); on a tiny model, the scores of a run against two plain transformers
forwards (the target, and the target with the run folder's adapter merged by peft) and
numpy; batch 1 against 16; the cache rerun training nothing and computing no forward;
`--calibration FILE`; the 13-word rule on the fine-tuning texts; the openai backend
skipping fsd."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl
from rounding import forward_bounds

import pddkit
from pddkit.engine.plan import Resources, make_plan
from pddkit.errors import PddkitError
from pddkit.methods import METHODS
from pddkit.stats import Observation, TokenStats

# a quick recipe for the tiny models: 3 calibration non-members, batches of 2 (one step an
# epoch), a learning rate that moves a random 64-wide model's adapter visibly in 3 steps
QUICK = "batch=2,lr=0.01,warmup=0"

# ---------------------------------------------------------------- by hand


def _fsd(obs, **params):
    spec = METHODS.get("fsd")
    return spec.fn(obs, **{**spec.defaults, **params})


def test_the_score_is_the_base_score_minus_the_tuned_one_by_hand():
    target = TokenStats.from_lists([3, 4, 5, 6], [-2.0, -4.0, -1.0, -5.0])
    tuned = TokenStats.from_lists([3, 4, 5, 6], [-1.0, -2.0, -1.0, -4.0])
    obs = Observation(text="a b c d", target=target, finetuned=tuned)
    # loss: mean L = -3.0 before, -2.0 after
    assert _fsd(obs) == pytest.approx(-3.0 - -2.0, abs=0)
    # mink k=0.5: the 2 lowest, (-4 - 5) / 2 = -4.5 before, (-2 - 4) / 2 = -3.0 after
    assert _fsd(obs, base="mink:k=0.5") == pytest.approx(-1.5, abs=0)
    # space=ppl: perplexities exp(3) before, exp(2) after: ppl_ft - ppl_base (eval.py:48,113)
    want = math.exp(2.0) - math.exp(3.0)
    assert _fsd(obs, space="ppl") == pytest.approx(want, rel=4 * np.finfo(float).eps)
    # zlib (mean L / zlib bytes of the text): the text is the same before and after
    import zlib

    z = len(zlib.compress(b"a b c d"))
    assert _fsd(obs, base="zlib") == pytest.approx(-3.0 / z - -2.0 / z, rel=1e-15)
    # the tuned statistics are found under the tuning settings of the call
    from pddkit.resources.fsd_tuning import TuningSettings

    keyed = Observation(text="a b c d", target=target,
                        finetuned={TuningSettings(batch=2).key(): tuned,
                                   TuningSettings().key(): target})
    assert _fsd(keyed, batch=2) == -1.0 and _fsd(keyed) == 0.0


def test_a_non_member_lowered_more_than_a_member_scores_lower():
    """The direction (SPEC section 1): tuning on non-members raises their log-probabilities
    most, so their fsd is the more negative, and higher = member."""
    member = Observation("m", TokenStats.from_lists([1, 2], [-1.0, -1.0]),
                         finetuned=TokenStats.from_lists([1, 2], [-0.9, -0.9]))
    nonmember = Observation("n", TokenStats.from_lists([1, 2], [-3.0, -3.0]),
                            finetuned=TokenStats.from_lists([1, 2], [-2.0, -2.0]))
    for space in ("score", "ppl"):
        assert _fsd(member, space=space) > _fsd(nonmember, space=space)


def test_the_cosine_schedule_with_warmup_by_hand():
    from pddkit.resources.fsd_tuning import cosine_factor

    # transformers' get_cosine_schedule_with_warmup: step/warmup, then 0.5 (1 + cos(pi p))
    assert [cosine_factor(s, 10, 30) for s in (0, 5, 10)] == [0.0, 0.5, 1.0]
    assert cosine_factor(20, 10, 30) == pytest.approx(0.5, abs=1e-15)  # p = 1/2
    assert cosine_factor(30, 10, 30) == pytest.approx(0.0, abs=1e-15)
    assert cosine_factor(0, 0, 4) == 1.0


def test_bad_input_is_one_sentence():
    cal = Resources(calibration=True)
    with pytest.raises(PddkitError) as e:
        make_plan("fsd", Resources())
    assert str(e.value) == ("method fsd needs labelled calibration data: pass `calibration` (a "
                            "labelled table; or labelled data to hold 30% out of)")
    for methods, want in [
        ("fsd:base=nope", "method fsd: base='nope' is not a method: fsd's base is a single-pass "
                          "method (acmia, gapk, loss, maxk, mink, minkpp, surp, zlib)"),
        ("fsd:base=recall", "method fsd: base=recall is not a single-pass method (it needs "
                            "labelled shots): fsd's base is one of"),
        ("fsd:base=fsd", "method fsd: base=fsd is not a single-pass method (it needs a "
                         "fine-tuned model itself)"),
        ("fsd:base=acmia", "method fsd: base=acmia chooses a hyperparameter on calibration "
                           "data, which fsd's base cannot: give it (fsd:base=acmia:beta=0.5)"),
        ("fsd:base=mink:q=1", "method fsd: fsd's base mink has no parameter 'q' (parameters: k)"),
        ("fsd:base=minkpp,space=ppl", "method fsd: space=ppl takes perplexities of mean "
                                      "log-probabilities: its base is one of loss, mink, not "
                                      "minkpp"),
        ("fsd:space=logit", "method fsd: space must be one of score, ppl, not 'logit'"),
        ("fsd:r=0", "method fsd: r must be at least 1, not 0"),
    ]:
        with pytest.raises(PddkitError) as e:
            make_plan(methods, cal)
        assert str(e.value).startswith(want), methods
        assert "\n" not in str(e.value)
    # a base with its own hyperparameters, and one reading an optional field (gapk: Lmax)
    plan = make_plan("fsd:base=surp:entropy_threshold=2.5;k=30,fsd:base=gapk", cal)
    assert [c.reads for c in plan.calls] == [frozenset(), frozenset({"Lmax"})]
    assert plan.calls[0].params["base"] == "surp:entropy_threshold=2.5;k=30"


# ---------------------------------------------------------------- training, on a tiny model


@pytest.fixture(scope="module")
def tiny():
    """A random one-layer GPT-2 (16 wide) and 5 short texts' ids: trains in milliseconds."""
    import torch
    from tiny_models import small_tokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = small_tokenizer()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(tok),
                                       n_positions=64, bos_token_id=0, eos_token_id=0)).eval()
    texts = ["the quick brown fox", "jumps over the lazy dog", "the lazy dog sleeps",
             "a quick brown dog", "over the fox"]
    return model, [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


@pytest.mark.slow  # three trainings: about 2 s
def test_training_is_deterministic_with_the_seed_and_leaves_the_target_alone(tiny):
    from pddkit.resources.fsd_tuning import TuningSettings, train_adapter

    model, ids = tiny
    before = {k: v.clone() for k, v in model.state_dict().items()}
    settings = TuningSettings(batch=2, epochs=2, lr=0.01, warmup=1)
    a = train_adapter(model, 0, ids, settings, seed=5)
    b = train_adapter(model, 0, ids, settings, seed=5)
    c = train_adapter(model, 0, ids, settings, seed=6)
    assert a.weights == b.weights and a.digest == b.digest
    assert a.weights != c.weights
    assert a.record["steps"] == 4  # 5 texts, batches of 2, the last one dropped: 2 x 2 epochs
    assert a.record["precision"] == "float32 base, float32 adapters"
    assert all(torch_equal(before[k], v) for k, v in model.state_dict().items())
    assert not hasattr(model, "peft_config")
    from safetensors.torch import load

    tensors = load(a.weights)  # LoRA A and B of GPT-2's c_attn (peft's default there), r=16
    shapes = {k.split(".")[-2]: tuple(v.shape) for k, v in tensors.items()}
    assert shapes == {"lora_A": (16, 16), "lora_B": (48, 16)}
    assert any(float(v.abs().max()) > 0 for k, v in tensors.items() if "lora_B" in k)  # B moved
    # `length` counts the start token: texts of more than 3 ids are cut to [start] + 3
    short = train_adapter(model, 0, ids, TuningSettings(batch=2, epochs=1, length=4), seed=5)
    assert short.record["cut_to_length"] == sum(len(s) > 3 for s in ids) > 0
    assert short.weights != train_adapter(model, 0, ids, TuningSettings(batch=2, epochs=1),
                                          seed=5).weights


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b))


def test_too_few_non_members_for_one_batch_is_one_sentence(tiny):
    from pddkit.resources.fsd_tuning import TuningSettings, train_adapter

    model, ids = tiny
    with pytest.raises(PddkitError) as e:
        train_adapter(model, 0, ids, TuningSettings(), seed=0)
    assert str(e.value) == ("fsd fine-tunes on batches of 8 calibration non-members and has 5: "
                            "give more non-members, or a smaller batch (fsd:batch=5)")


# ---------------------------------------------------------------- runs on the toy model


def _data(tmp_path, toy_world, n=10, name="d.jsonl"):
    return write_jsonl(tmp_path / name, [
        {"id": f"t{i}", "text": t, "label": int(i < n)}
        for i, t in enumerate(toy_world.members[:n] + toy_world.nonmembers[:n])])


def _rows(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _merged(toy_world, adapter_dir):
    """The target and, independently, the target with the saved adapter merged by peft."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(toy_world.target_dir).eval()
    tuned = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(toy_world.target_dir), adapter_dir)
    return base, tuned.merge_and_unload().eval()


def test_a_run_scores_the_plain_forwards_difference_and_writes_its_adapter(toy_world, tmp_path,
                                                                           capsys):
    from transformers import AutoTokenizer

    data = _data(tmp_path, toy_world)
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", f"loss,fsd:{QUICK},fsd:base=mink:k=0.5,{QUICK},"
                           f"fsd:space=ppl,{QUICK}", "--output", out, "--no-blind",
                           "--no-report", "--bootstrap", "10", "--seed", "3")
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    cal, scored = _rows(out / "calibration.jsonl"), _rows(out / "scores.jsonl")
    assert len(cal) == 6 and sum(r["label"] for r in cal) == 3
    assert not {r["id"] for r in cal} & {r["id"] for r in scored} and len(scored) == 14
    rec = res["counts"]["fsd"]["fsd-adapter"]  # one adapter: the three calls' settings agree
    assert list(res["counts"]["fsd"]) == ["fsd-adapter"]
    assert rec["trained"] and rec["texts"] == 3 and rec["steps"] == 3 and rec["seed"] == 3
    assert (out / "fsd-adapter" / "adapter_model.safetensors").is_file()
    # the scores against two plain forwards: the target, and the target with the run's
    # adapter merged into its weights by peft (not pddkit), statistics in float64 numpy
    tok = AutoTokenizer.from_pretrained(toy_world.target_dir)
    base, merged = _merged(toy_world, out / "fsd-adapter")
    texts = {r["id"]: r["text"] for r in _rows(data)}
    seqs = [tok(texts[r["id"]], add_special_tokens=False)["input_ids"] for r in scored]
    start = tok.eos_token_id  # GPT-2: no BOS, EOS is the start token (SPEC section 2)
    e0, b0 = forward_bounds(base, start, seqs)
    e1, b1 = forward_bounds(merged, start, seqs)
    # each score is a difference of two means (or order statistics) of L, each within its
    # model's float32 bound bL of the float64 value; ppl: exp(-m) moves by exp(-m) bL
    labels = [c for c in res["methods"] if c.startswith("fsd")]
    loss_l, mink_l, ppl_l = labels
    moved = 0
    for row, x0, x1 in zip(scored, e0, e1):
        m0, m1 = float(np.mean(x0.L)), float(np.mean(x1.L))
        assert abs(row[loss_l] - (m0 - m1)) <= b0.L + b1.L
        half = max(1, len(x0.L) // 2)
        k0, k1 = np.sort(x0.L)[:half].mean(), np.sort(x1.L)[:half].mean()
        assert abs(row[mink_l] - (k0 - k1)) <= b0.L + b1.L
        assert abs(row[ppl_l] - (math.exp(-m1) - math.exp(-m0))) <= (
            math.exp(-m0) * b0.L + math.exp(-m1) * b1.L)
        moved += abs(m0 - m1) > 100 * (b0.L + b1.L)
    assert moved > len(scored) // 2  # the adapter moved most texts' loss: not a zero test
    assert res["models"]["fsd_adapter"]["fsd-adapter"]["trained"] is True


@pytest.mark.slow
def test_batch_1_equals_16_and_a_cache_rerun_trains_and_computes_nothing(toy_lm, toy_world,
                                                                         tmp_path, monkeypatch):
    import pddkit.resources.fsd_tuning as tuning

    texts = toy_world.members[:10] + toy_world.nonmembers[:10]
    labels = [1] * 10 + [0] * 10
    cache = str(tmp_path / "cache")

    def run(batch_size, **kw):
        return pddkit.evaluate(texts, labels, toy_lm, f"fsd:{QUICK}", batch_size=batch_size,
                               blind=False, n_bootstrap=10, **kw)

    one, many = run(1), run(16)
    assert one.ids == many.ids and len(one.ids) == 14  # the same held-out split
    assert one.counts["fsd"]["fsd-adapter"]["digest"] == many.counts["fsd"]["fsd-adapter"]["digest"]
    # two float32 computations of the same differences of means: within the bounds of the
    # target's and of the tuned model's L (rounding.py: its factor covers two computations)
    base, merged = _merged(toy_world, one.folders["fsd-adapter"].save(tmp_path / "adapter"))
    by_id = dict(zip([str(i) for i in range(20)], texts))
    tok = toy_lm.tokenizer
    seqs = [tok(by_id[i], add_special_tokens=False)["input_ids"] for i in one.ids]
    b0 = forward_bounds(base, tok.eos_token_id, seqs)[1]
    b1 = forward_bounds(merged, tok.eos_token_id, seqs)[1]
    diff = np.abs(one.scores()["fsd"] - many.scores()["fsd"])
    assert float(diff.max()) <= b0.L + b1.L

    first = run(8, cache=cache)
    assert first.counts["fsd"]["fsd-adapter"]["trained"] is True
    assert first.counts["cache"]["fine-tuned pass"] == {"hits": 0, "misses": 14}

    def refuse(*a, **k):
        raise AssertionError("the rerun trained or built the tuned model")

    monkeypatch.setattr(tuning, "train_adapter", refuse)
    monkeypatch.setattr(tuning, "with_adapter", refuse)
    again = run(8, cache=cache)
    assert again.counts["fsd"]["fsd-adapter"]["trained"] is False
    assert again.counts["cache"]["fine-tuned pass"] == {"hits": 14, "misses": 0}
    assert again.counts["cache"]["target pass"] == {"hits": 14, "misses": 0}
    np.testing.assert_array_equal(again.scores()["fsd"], first.scores()["fsd"])


def _shares_a_13_word_run(a: str, b: str) -> bool:
    """Written here: any 13 consecutive lower-cased whitespace words of `a` in `b`."""
    def grams(t):
        w = t.lower().split()
        return {tuple(w[i:i + 13]) for i in range(len(w) - 12)}

    return bool(grams(a) & grams(b))


@pytest.mark.slow
def test_held_out_fine_tuning_texts_share_no_13_word_run_with_an_evaluated_text(toy_world,
                                                                                tmp_path, capsys):
    """The authors' WikiMIA leak (SPEC 3e), built here: every non-member has a twin quoting
    14 of its words; the twin of each held-out fine-tuning text leaves the evaluation."""
    rows = [{"id": f"m{i}", "text": t, "label": 1} for i, t in enumerate(toy_world.members[:10])]
    for i, t in enumerate(toy_world.nonmembers[:10]):
        w = t.split()
        rows += [{"id": f"n{i}", "text": t, "label": 0},
                 {"id": f"q{i}", "text": "As written: " + " ".join(w[5:19]) + ".", "label": 0}]
    data = write_jsonl(tmp_path / "twins.jsonl", rows)
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", f"fsd:{QUICK}", "--output", out, "--no-blind",
                           "--no-report", "--bootstrap", "10")
    assert code == 0, err
    cal, scored = _rows(out / "calibration.jsonl"), _rows(out / "scores.jsonl")
    tuning = [r["text"] for r in cal if r["label"] == 0]
    texts = {r["id"]: r["text"] for r in rows}
    assert not any(_shares_a_13_word_run(t, texts[r["id"]]) for t in tuning for r in scored)
    left = json.loads((out / "results.json").read_text())["counts"]["calibration"]["left_out"]
    twins = sum(_shares_a_13_word_run(t, texts[i]) for t in tuning for i in texts
                if texts[i] != t and i not in {r["id"] for r in cal})
    assert left["sharing_a_13_word_run_with_a_calibration_text"] == twins > 0


@pytest.mark.slow
def test_a_calibration_file_of_non_members_serves_fsd_and_bad_files_are_one_sentence(
        toy_world, tmp_path, capsys):
    data = _data(tmp_path, toy_world, n=6)
    nonmembers = write_jsonl(tmp_path / "cal.jsonl", [
        {"id": f"c{i}", "text": t, "label": 0} for i, t in enumerate(toy_world.nonmembers[20:24])])
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", f"fsd:{QUICK}", "--calibration", nonmembers,
                           "--output", out, "--no-blind", "--no-report", "--bootstrap", "10")
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    assert res["counts"]["samples"] == 12  # the data whole: nothing held out
    assert res["counts"]["calibration"]["nonmembers"] == 4
    assert res["counts"]["fsd"]["fsd-adapter"]["texts"] == 4
    assert res["counts"]["fsd"]["fsd-adapter"]["steps"] == 6  # 2 batches x 3 epochs
    assert res["timings_s"]["calibration_passes"] < res["timings_s"]["fsd_training"] \
        < res["timings_s"]["fsd"]  # no statistics of the calibration texts: none needed
    # acmia beside fsd fits on both classes: the same file is refused then
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", f"fsd:{QUICK},acmia", "--calibration", nonmembers,
                           "--output", tmp_path / "o1", "--no-blind", "--no-report")
    assert code == 1 and "holds only non-members: a calibration AUC needs members" in err
    members = write_jsonl(tmp_path / "m.jsonl", [
        {"text": t, "label": 1} for t in toy_world.members[20:24]])
    words = toy_world.members[2].split()
    leak = write_jsonl(tmp_path / "leak.jsonl", [
        {"text": toy_world.nonmembers[30], "label": 0},
        {"text": "Then " + " ".join(words[3:17]) + " again.", "label": 0}])
    for cal, want in [
        (members, f"pddkit: error: --calibration {members} holds only members, and fsd "
                  "fine-tunes on the calibration non-members: give a table with non-members "
                  "(label 0)"),
        (leak, f"pddkit: error: --calibration {leak}: the text at {leak} line 2 shares a "
               f"13-word run with {data} line 3 under test")]:
        code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                               "--methods", f"fsd:{QUICK}", "--calibration", cal, "--output",
                               tmp_path / "o2", "--no-blind", "--no-report")
        assert code == 1 and err.startswith(want), err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    unlabelled = write_jsonl(tmp_path / "u.jsonl", [{"text": t} for t in toy_world.members[:4]])
    for args, want in [
        ((unlabelled, "fsd"), "pddkit: error: method fsd needs labelled calibration data: pass "
                              "--calibration (a labelled table; or labelled data to hold 30% "
                              "out of)"),
        ((data, "fsd:base=recall"), "pddkit: error: method fsd: base=recall is not a "
                                    "single-pass method")]:
        code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", args[0],
                               "--methods", args[1], "--output", tmp_path / "o3")
        assert code == 1 and err.startswith(want), err
        assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_openai_backend_skips_fsd_with_the_notice(toy_lm, toy_world):
    from openai_server import FakeOpenAIServer

    texts = toy_world.members[:10] + toy_world.nonmembers[:10]
    with FakeOpenAIServer(toy_lm.model, name="tiny", tokenizer=toy_lm.tokenizer) as server:
        res = pddkit.evaluate(texts, [1] * 10 + [0] * 10, "tiny", f"loss,fsd:{QUICK}",
                              backend="openai", api_base=server.api_base, api_key_env=None,
                              tokenizer=str(toy_world.target_dir), blind=False, n_bootstrap=20)
    assert set(res.scores()) == {"loss"}
    assert ("skipping fsd: it needs a local model, which this backend does not give"
            in res.notices)
    assert len(res.ids) == 20  # fsd skipped: nothing is held out for it
