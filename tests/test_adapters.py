"""PEFT adapters (`adapter`, `ref_adapter`, an adapter folder given as the model) and
quantised models (`quantize`).

A tiny GPT-2 is built from a config and trained a little (so its next-token distributions
are peaked and minkpp's variance is well conditioned); two LoRA adapters are trained on it
for a few steps each, and one of them is also merged into a full checkpoint
(merge_and_unload). The adapter, loaded unmerged, must score as the merged model: its
statistics L, H and var, and every target method's score, within bounds derived from the
float32 rounding of these texts' arithmetic (tests/rounding.py: the merged model's plain
float32 forward against its float64 forward, times 4, propagated through each method's
formula).
Two adapters on one base
must never share cache entries. Quantisation needs a CUDA GPU: here only its refusal
without one is tested (no test depends on a GPU).
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl
from rounding import forward_bounds, score_bound
from tiny_models import save_tiny_gpt2

from pddkit.errors import PddkitError

TEXTS = ["the quick brown fox jumps over the lazy dog", "a lazy dog sleeps under the old tree",
         "the brown fox runs over the hill at dawn", "quick thinking saves the day for the fox",
         "the dog and the fox are friends now", "over the hill the quick dog jumps again",
         "a fox never jumps over a sleeping dog", "the old tree falls over the lazy fox"]
ADAPTED = ["the quick red fox sings under the moon", "a red moon rises over the sleeping hill",
           "the fox sings and the dog listens"]
METHODS = "loss,zlib,lowercase,mink,minkpp,surp"
CPU = {"device": "cpu", "dtype": "float32"}


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models on 2 shared cores: more threads are many times slower."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@dataclass(frozen=True)
class Adapters:
    base: Path  # a trained tiny GPT-2 (config, weights, tokenizer)
    a: Path  # a LoRA adapter trained on `base` (adapter_config.json + adapter_model.safetensors)
    b: Path  # another, other seed and texts
    merged: Path  # `base` with `a` merged in (merge_and_unload), a complete checkpoint
    other_base: Path  # a GPT-2 of another width, same tokenizer
    foreign: Path  # a LoRA adapter trained on `other_base`


def _train(model, tok, texts, steps, lr, seed):
    import torch

    torch.manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr)
    batch = tok(texts, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    model.train()
    for _ in range(steps):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    return model


def _lora(base: Path, out: Path, texts, seed: int) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    tok.pad_token = tok.pad_token or tok.eos_token
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base),
                           LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, fan_in_fan_out=True,
                                      target_modules=["c_attn", "c_proj"]))
    _train(model, tok, texts, steps=5, lr=3e-2, seed=seed)
    model.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def adapters(tmp_path_factory, one_thread) -> Adapters:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel

    root = tmp_path_factory.mktemp("adapters")
    base = save_tiny_gpt2(root / "base")
    tok = AutoTokenizer.from_pretrained(base)
    tok.pad_token = tok.pad_token or tok.eos_token
    model = _train(AutoModelForCausalLM.from_pretrained(base), tok, TEXTS, steps=40, lr=1e-2, seed=0)
    model.save_pretrained(base)
    a = _lora(base, root / "adapter-a", ADAPTED, seed=1)
    b = _lora(base, root / "adapter-b", ADAPTED[::-1] + TEXTS[:2], seed=2)
    merged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), a).merge_and_unload()
    merged.save_pretrained(root / "merged")
    tok.save_pretrained(root / "merged")
    torch.manual_seed(3)
    other = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=len(tok),
                                       n_positions=64, bos_token_id=0, eos_token_id=0))
    other.save_pretrained(root / "other-base")
    tok.save_pretrained(root / "other-base")
    foreign = _lora(root / "other-base", root / "foreign", ADAPTED, seed=4)
    return Adapters(base, a, b, root / "merged", root / "other-base", foreign)


def _stats(model: str, **kw):
    from pddkit.backends.hf import HFBackend

    backend = HFBackend.load(str(model), **CPU, **kw)
    enc = backend.encode(TEXTS + ADAPTED, [f"text {i}" for i in range(len(TEXTS + ADAPTED))])
    return backend.stats_for_ids(enc.ids, enc.truncated)


def _scores(model, **kw):
    import pddkit

    return pddkit.score(TEXTS + ADAPTED, str(model), METHODS, **CPU, **kw)


def _rounding(merged: Path, texts: list[str]):
    """(float64 statistics of `texts` under the merged model, the bounds two float32
    computations of them are held to: tests/rounding.py)."""
    from pddkit.backends.hf import HFBackend

    backend = HFBackend.load(str(merged), **CPU)
    enc = backend.encode(texts, [f"text {i}" for i in range(len(texts))])
    return forward_bounds(backend.lm.model, backend.runner.start_id, enc.ids)


def _score_bounds(methods, texts, exact, bounds) -> dict[str, np.ndarray]:
    """Per method, per text: how far the score may move (tests/rounding.py). Every text
    here is lower case, so `lowercase` reads the text's own statistics twice."""
    assert all(t == t.lower() for t in texts)
    return {m: np.array([score_bound(m, e, bounds, t, lower=e) for e, t in zip(exact, texts)])
            for m in methods}


def _close(got: dict, want: dict, allowed: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want) == set(allowed)
    for name in want:
        diff = np.abs(np.asarray(got[name], np.float64) - np.asarray(want[name], np.float64))
        assert np.all(diff <= allowed[name]), (name, diff, allowed[name])


@pytest.mark.slow
def test_an_adapter_scores_as_the_merged_model(adapters):
    merged, base = _stats(adapters.merged), _stats(adapters.base)
    exact, bounds = _rounding(adapters.merged, TEXTS + ADAPTED)
    for stats in (_stats(adapters.base, adapter=str(adapters.a)), _stats(adapters.a)):
        for got, want, e in zip(stats, merged, exact):
            np.testing.assert_array_equal(got.ids, want.ids)
            # two float32 computations of one function (LoRA beside W, or merged into it):
            # within the bounds of tests/rounding.py
            assert np.all(np.abs(got.L - want.L) <= bounds.L)
            assert np.all(np.abs(got.H - want.H) <= bounds.H)
            assert np.all(np.abs(got.var - want.var) <= bounds.var_rel * e.var)
        # the adapter changed the model: the comparison is not between two copies of the base
        # (0.01: a thousand times the rounding bound, checked here)
        assert bounds.L < 1e-5
        assert max(np.abs(g.L - p.L).max() for g, p in zip(stats, base)) > 1e-2
    allowed = _score_bounds(METHODS.split(","), TEXTS + ADAPTED, exact, bounds)
    want = _scores(adapters.merged)
    _close(_scores(adapters.base, adapter=str(adapters.a)), want, allowed)  # --adapter
    _close(_scores(adapters.a), want, allowed)  # the adapter folder as --model: its base, with it
    # the base without the adapter scores otherwise (1e-3: a hundred times the bound on L)
    assert np.abs(_scores(adapters.base)["loss"] - want["loss"]).max() > 1e-3


@pytest.mark.slow
def test_ref_adapter_goes_onto_the_reference_model(adapters):
    import pddkit

    def ref(**kw):
        return pddkit.score(TEXTS, str(adapters.base), "ref", **CPU, **kw)["ref"]

    # ref = mean L(target) - mean L(reference): the target's statistics are one computation
    # twice (identical), the reference's two float32 computations of one function, so the
    # score moves by at most their bound on L (tests/rounding.py)
    _, bounds = _rounding(adapters.merged, TEXTS)
    got = ref(ref_model=str(adapters.base), ref_adapter=str(adapters.a))
    assert np.all(np.abs(got - ref(ref_model=str(adapters.merged))) <= bounds.L)


def _fingerprint(model, cache, **kw) -> str:
    from pddkit.backends.caching import CachingBackend
    from pddkit.backends.hf import HFBackend
    from pddkit.cache import StatsStore

    return CachingBackend(HFBackend.load(str(model), **CPU, **kw), StatsStore.open(cache)).fingerprint()


@pytest.mark.slow
def test_two_adapters_on_one_base_never_share_cache_entries(adapters, tmp_path):
    cache = tmp_path / "cache"
    keys = {"base": _fingerprint(adapters.base, cache),
            "base+a": _fingerprint(adapters.base, cache, adapter=str(adapters.a)),
            "base+b": _fingerprint(adapters.base, cache, adapter=str(adapters.b)),
            "merged": _fingerprint(adapters.merged, cache)}
    assert len(set(keys.values())) == 4, keys
    # the same model named two ways: the adapter folder as the model is base + adapter
    assert _fingerprint(adapters.a, cache) == keys["base+a"]
    # remembered in the cache's memo, keyed by the folders' files: still apart
    assert _fingerprint(adapters.base, cache, adapter=str(adapters.b)) == keys["base+b"]
    assert _fingerprint(adapters.base, cache, adapter=str(adapters.a)) == keys["base+a"]
    # a run with a shared cache: b after a computes its own statistics, equal to b's without one
    first = _scores(adapters.base, adapter=str(adapters.a), cache=str(cache))
    second = _scores(adapters.base, adapter=str(adapters.b), cache=str(cache))
    alone = _scores(adapters.base, adapter=str(adapters.b))
    # two adapters: their losses differ by far more than rounding (1e-3, a hundred times the
    # bound on L checked in test_an_adapter_scores_as_the_merged_model)
    assert np.abs(second["loss"] - first["loss"]).max() > 1e-3
    for name in alone:
        np.testing.assert_array_equal(second[name], alone[name])


@pytest.mark.slow
def test_the_weight_files_alone_do_not_tell_two_adapters_apart(adapters):
    """What the fingerprint covered before adapters joined it: transformers loads an adapter
    folder as its base plus the adapter, and the model's files are the base's, so the
    weight files (all a model loaded by name was named by) are the same for both."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pddkit.cache.fingerprint import adapter_digest, hf_fingerprint, weight_files, weights_digest

    tok = AutoTokenizer.from_pretrained(adapters.base)
    a, b = (AutoModelForCausalLM.from_pretrained(d) for d in (adapters.a, adapters.b))
    assert weight_files(a) == weight_files(b) == [adapters.base.resolve() / "model.safetensors"]
    assert weights_digest(a) == weights_digest(b)  # before: one key for both
    assert adapter_digest(a) != adapter_digest(b)
    assert hf_fingerprint(a, tok, start_id=0, dtype="float32") != \
        hf_fingerprint(b, tok, start_id=0, dtype="float32")
    plain = AutoModelForCausalLM.from_pretrained(adapters.base)
    assert adapter_digest(plain) is None  # a model without adapters keeps its old key


def test_quantize_without_a_gpu_is_one_sentence(tmp_path, monkeypatch, capsys):
    import pddkit
    from pddkit.backends import devices

    # this machine as one without a GPU, whatever it has (no test depends on a GPU)
    monkeypatch.setattr(devices, "pick_device", lambda device: "cpu")
    monkeypatch.setattr(devices, "available_devices", lambda: "cpu")
    with pytest.raises(PddkitError, match=r"^`quantize` 8bit needs a CUDA GPU \(bitsandbytes\) "
                                          r"and this machine has none \(available: cpu"):
        pddkit.score(TEXTS, str(tmp_path / "never-loaded"), "loss", quantize="8bit")
    with pytest.raises(PddkitError, match=r"^`quantize` 4bit needs a CUDA GPU \(bitsandbytes\), "
                                          r"not `device` cpu$"):
        pddkit.score(TEXTS, str(tmp_path / "never-loaded"), "loss", quantize="4bit", device="cpu")
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t, "label": i % 2} for i, t in enumerate(TEXTS)])
    code, out, err = run_cli(capsys, "run", "--model", tmp_path / "never-loaded", "--data", data,
                             "--output", tmp_path / "out", "--quantize", "4bit")
    assert code == 1 and out == ""
    assert err.startswith("pddkit: error: --quantize 4bit needs a CUDA GPU (bitsandbytes) and "
                          "this machine has none") and err.count("\n") == 1, err


def test_an_adapter_that_is_not_one_is_one_sentence(tmp_path, capsys):
    import pddkit

    (tmp_path / "base").mkdir()  # never loaded: the adapter is refused first
    (tmp_path / "plain").mkdir()
    with pytest.raises(PddkitError, match=r"^`adapter` \S+plain is not a PEFT adapter: it has "
                                          r"no adapter_config.json \("):
        pddkit.score(TEXTS, str(tmp_path / "base"), "loss", adapter=str(tmp_path / "plain"), **CPU)
    with pytest.raises(PddkitError, match=r"^`adapter` path \S+missing does not exist$"):
        pddkit.score(TEXTS, str(tmp_path / "base"), "loss", adapter=str(tmp_path / "missing"), **CPU)
    with pytest.raises(PddkitError, match=r"^`ref_adapter` goes onto the reference model"):
        pddkit.score(TEXTS, str(tmp_path / "base"), "loss", ref_adapter=str(tmp_path / "plain"))
    with pytest.raises(PddkitError, match=r"^`adapter` loads a PEFT adapter onto a model loaded "
                                          r"here \(backend hf\), not onto a openai model"):
        pddkit.score(TEXTS, "served", "loss", backend="openai", api_base="http://127.0.0.1:9/v1",
                     adapter=str(tmp_path / "plain"))
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t, "label": i % 2} for i, t in enumerate(TEXTS)])
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "base", "--data", data, "--output",
                             tmp_path / "out", "--adapter", tmp_path / "plain", "--device", "cpu",
                             "--no-blind", "--methods", "loss")
    assert code == 1
    assert err == (f"pddkit: error: --adapter {tmp_path / 'plain'} is not a PEFT adapter: it has "
                   "no adapter_config.json (give the folder or hub id that save_pretrained of a "
                   "PEFT model wrote)\n")


def test_an_adapter_folder_naming_a_missing_base_is_one_sentence(tmp_path):
    import pddkit

    (tmp_path / "lonely").mkdir()
    (tmp_path / "lonely" / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "base_model_name_or_path": str(tmp_path / "gone")}))
    with pytest.raises(PddkitError, match=r"^model \S+lonely is a PEFT adapter on \S+gone "
                                          r"\(base_model_name_or_path in its adapter_config.json\), "
                                          r"which does not exist here: give the base model as the "
                                          r"model and this adapter as `adapter`$"):
        pddkit.score(TEXTS, str(tmp_path / "lonely"), "loss", **CPU)


@pytest.mark.slow
def test_an_adapter_for_another_base(adapters, tmp_path, caplog):
    """The base an adapter names differs from the model: loaded with a warning when its
    weights fit (the same model under another name), refused in one sentence when not."""
    copy = tmp_path / "copy-of-base"
    shutil.copytree(adapters.base, copy)
    with caplog.at_level(logging.WARNING, logger="pddkit"):
        got = _scores(copy, adapter=str(adapters.a))
    said = [r.getMessage() for r in caplog.records if "was trained on" in r.getMessage()]
    assert said == [f"`adapter` {adapters.a} was trained on {adapters.base}, not on {copy} "
                    "(model): loading it anyway; weights that do not fit the model are refused"]
    exact, bounds = _rounding(adapters.merged, TEXTS + ADAPTED)
    _close(got, _scores(adapters.merged),
           _score_bounds(METHODS.split(","), TEXTS + ADAPTED, exact, bounds))
    with pytest.raises(PddkitError) as e:
        _scores(adapters.base, adapter=str(adapters.foreign))
    assert str(e.value).startswith(f"`adapter` {adapters.foreign} does not fit model "
                                   f"{adapters.base}: ")
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_the_command_line_scores_an_adapter_as_the_merged_model(adapters, tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl",
                       [{"id": f"t{i}", "text": t, "label": i % 2} for i, t in enumerate(TEXTS + ADAPTED)])
    common = ["--data", data, "--methods", METHODS, "--device", "cpu", "--dtype", "float32",
              "--no-blind", "--no-report", "--bootstrap", "0"]
    runs = {"merged": ["--model", adapters.merged],
            "adapter": ["--model", adapters.base, "--adapter", adapters.a, "--local-files-only"],
            "folder": ["--model", adapters.a]}
    scores, models = {}, {}
    for name, args in runs.items():
        code, _, err = run_cli(capsys, "run", *args, *common, "--output", tmp_path / name)
        assert code == 0, err
        rows = [json.loads(line) for line in (tmp_path / name / "scores.jsonl").read_text().splitlines()]
        scores[name] = {m: np.array([r[m] for r in rows]) for m in METHODS.split(",")}
        models[name] = json.loads((tmp_path / name / "results.json").read_text())["models"]["target"]
    exact, bounds = _rounding(adapters.merged, TEXTS + ADAPTED)
    allowed = _score_bounds(METHODS.split(","), TEXTS + ADAPTED, exact, bounds)
    for name in ("adapter", "folder"):
        _close(scores[name], scores["merged"], allowed)
        assert models[name]["adapter"] == str(adapters.a)
        assert models[name]["base_model"] == str(adapters.base)
    assert "adapter" not in models["merged"]


REFERENCE = ["a green frog hops across the quiet pond", "the red kite circles above the field",
             "old boats rest on the grey harbour sand", "a small bird sings in the cold morning",
             "the river bends around the stone bridge", "warm bread cools on the kitchen table",
             "the night train rolls past the sleeping town", "a tall ship sails into the harbour"]


@pytest.mark.slow
def test_the_studies_take_an_adapter(adapters, tmp_path, capsys):
    """`pddkit infer` (as audit and traps detect, whose loading goes the same way) with
    --adapter gives the merged model's features and p-value."""
    from pddkit.studies.infer import infer_dataset

    def infer(model, **kw):
        return infer_dataset(str(model), TEXTS, REFERENCE, false_positive_check=False, **CPU, **kw)

    got, want = infer(adapters.base, adapter=str(adapters.a)), infer(adapters.merged)
    # each feature within the float32 rounding of its arithmetic (tests/rounding.py): the
    # statistics' measured bounds propagated through the feature's formula, per text (minkpp
    # divides by the standard deviation, so its bound is the largest; var is computed without
    # cancellation, TokenStats.var)
    exact, bounds = _rounding(adapters.merged, TEXTS + REFERENCE)
    names = list(want.features.names)
    assert names == list(got.features.names)
    allowed = _score_bounds(names, TEXTS + REFERENCE, exact, bounds)
    g = np.vstack([got.features.suspect, got.features.reference])
    w = np.vstack([want.features.suspect, want.features.reference])
    _close({n: g[:, j] for j, n in enumerate(names)}, {n: w[:, j] for j, n in enumerate(names)},
           allowed)
    assert got.config["adapter"] == str(adapters.a) and "adapter" not in want.config
    suspect = write_jsonl(tmp_path / "s.jsonl", [{"text": t} for t in TEXTS])
    reference = write_jsonl(tmp_path / "r.jsonl", [{"text": t} for t in REFERENCE])
    code, _, err = run_cli(capsys, "infer", "--model", adapters.base, "--adapter", adapters.a,
                           "--suspect", suspect, "--reference", reference,
                           "--no-false-positive-check", "--device", "cpu", "--dtype", "float32",
                           "--output", tmp_path / "infer")
    assert code == 0, err
    saved = json.loads((tmp_path / "infer" / "results.json").read_text())
    assert saved["models"]["target"]["adapter"] == str(adapters.a)
    # the same features and classifier as `got` (one computation twice): equal but for the
    # JSON round trip, exact for float64 (repr), and a thread count changing BLAS's summation
    # order in the classifier's fit (float64, relative 1e-15 per operation: 1e-9 is generous)
    assert saved["test"]["p_value"] == pytest.approx(got.decision.test.p_value, rel=0, abs=1e-9)


@pytest.mark.slow
def test_the_fingerprint_covers_the_quantisation(adapters):
    """Measured without a GPU: a model whose config records a bitsandbytes quantisation (as
    from_pretrained leaves it) gets another key than the same model without, 8 and 4 bits
    apart; the GPU path itself is not exercised here."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

    from pddkit.cache.fingerprint import hf_fingerprint, quantization_digest

    def bnb(**bits):
        """The config object; as config.json holds it (a dict) where transformers (4.x)
        refuses to make the object without bitsandbytes installed."""
        from importlib.metadata import PackageNotFoundError

        try:
            return BitsAndBytesConfig(**bits)
        except PackageNotFoundError:
            return {"quant_method": "bitsandbytes", **bits}

    tok = AutoTokenizer.from_pretrained(adapters.base)
    keys = []
    for q in (None, bnb(load_in_8bit=True), bnb(load_in_4bit=True)):
        model = AutoModelForCausalLM.from_pretrained(adapters.base)
        if q is not None:
            model.config.quantization_config = q
        assert (quantization_digest(model) is None) == (q is None)
        keys.append(hf_fingerprint(model, tok, start_id=0, dtype="float32"))
    assert len(set(keys)) == 3


def test_the_load_key_covers_the_quantisation_and_the_adapter(tmp_path):
    """What the cache's memo remembers a model by, named without loading it (engine ray:
    nothing loads here, and the GPU check is the actors')."""
    from pddkit.backends.hf import HFBackend

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 1}))
        (tmp_path / name / "adapter_model.safetensors").write_bytes(name.encode())

    def key(**kw):
        return HFBackend.load(str(tmp_path / "m"), engine="ray", **CPU, **kw).load_key()

    keys = [key(), key(quantize="8bit"), key(quantize="4bit"), key(adapter=str(tmp_path / "a")),
            key(adapter=str(tmp_path / "b"))]
    assert None not in keys and len(set(keys)) == 5
    # the adapter folder given as the model: its base and it, as with `adapter`
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "base_model_name_or_path": str(tmp_path / "m")}))
    assert HFBackend.load(str(tmp_path / "c"), engine="ray", **CPU).load_key() == \
        key(adapter=str(tmp_path / "c")) not in keys
