"""No silent wrong answers (issue 19, item 7): a model that is not a causal LM, a device
the machine lacks, a table whose labels are under another name, the same text with both
labels, and method fallbacks are each one sentence or a counted notice, never exit 0 with
a wrong answer and never a traceback."""

import json

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl
from tiny_models import save_tiny_gpt2, small_tokenizer

from pddkit.errors import PddkitError
from pddkit.stats import Observation, TokenStats

TEXTS = ["the quick brown fox jumps over the lazy dog", "a lazy dog sleeps all day long",
         "brown foxes are quick and clever", "the dog barks at the fox",
         "over the hills the fox runs", "quick quick the dog is lazy"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A random one-layer GPT-2 with a 300-token BPE: a complete causal LM folder."""
    return save_tiny_gpt2(tmp_path_factory.mktemp("tiny"))


def tiny_bert(vocab_size: int):
    import torch
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    return BertForMaskedLM(BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1,
                                      num_attention_heads=2, intermediate_size=32,
                                      max_position_embeddings=64))


# --- a model that is not a causal LM ---------------------------------------------------

def test_the_causal_rule_decides_by_the_config():
    """model_config.check_causal on configs alone (their attributes; no weights)."""
    from types import SimpleNamespace as Config

    from transformers import CONFIG_MAPPING

    from pddkit.backends.model_config import check_causal

    refused = {
        "BertForMaskedLM": Config(model_type="bert", architectures=["BertForMaskedLM"]),
        "model_type bert": Config(model_type="bert", is_decoder=False),  # no architectures
        "encoder-decoder": Config(model_type="t5", is_encoder_decoder=True,
                                  architectures=["T5ForConditionalGeneration"]),
        "LlamaModel": Config(model_type="llama", architectures=["LlamaModel"]),  # no LM head
        "model_type vit": Config(model_type="vit"),
    }
    for words, cfg in refused.items():
        with pytest.raises(PddkitError, match="is not a causal language model") as e:
            check_causal(cfg, "m")
        assert words in str(e.value)
    accepted = [Config(model_type="bert", is_decoder=True, architectures=["BertLMHeadModel"]),
                Config(model_type="gpt2", architectures=["GPT2LMHeadModel"]),
                Config(model_type="gpt2"), Config(model_type="llama",
                                                  architectures=["LlamaForCausalLM"]),
                Config(model_type="chatglm", architectures=["ChatGLMModel"],
                       auto_map={"AutoModelForCausalLM": "modeling_chatglm.ChatGLMForCausalLM"})]
    if "gemma3" in CONFIG_MAPPING:  # transformers 4.50 and later know Gemma 3
        accepted.append(Config(model_type="gemma3", architectures=["Gemma3ForConditionalGeneration"]))
    for cfg in accepted:
        check_causal(cfg, "m")  # accepted: no exception


@pytest.mark.slow
def test_a_masked_lm_folder_is_refused_before_scoring(tmp_path, capsys):
    """A random BertForMaskedLM folder given as --model was scored with exit 0 (loaded as
    BertLMHeadModel, whose bidirectional attention sees the token it predicts)."""
    tok = small_tokenizer()
    d = tmp_path / "bert"
    tiny_bert(len(tok)).save_pretrained(d)
    tok.save_pretrained(d)
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in TEXTS])
    code, out, err = run_cli(capsys, "run", "--model", d, "--data", data, "--methods", "loss",
                             "--output", tmp_path / "o", "--device", "cpu")
    assert code == 1, (out, err)
    assert "is not a causal language model" in err and "BertForMaskedLM" in err
    assert "model_type bert" in err and "Traceback" not in err and err.count("error:") == 1
    assert not (tmp_path / "o" / "scores.jsonl").exists()


@pytest.mark.slow
def test_a_checkpoint_without_its_lm_head_is_refused(tmp_path):
    """A base model whose config claims a causal LM: transformers fills lm_head at random."""
    import torch
    from transformers import LlamaConfig, LlamaModel

    from pddkit.backends.hf_loading import load_model

    tok = small_tokenizer()
    torch.manual_seed(0)
    d = tmp_path / "base"
    LlamaModel(LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                           num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                           max_position_embeddings=64)).save_pretrained(d)
    tok.save_pretrained(d)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(PddkitError, match=r"lacks weights for lm_head\.weight"):
        load_model(str(d), device="cpu", dtype="float32")


@pytest.mark.slow
def test_a_masked_lm_handed_over_in_memory_is_refused():
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.hf_loading import LoadedModel

    tok = small_tokenizer()
    lm = LoadedModel(tiny_bert(len(tok)), tok, "my-bert", "cpu", "float32")
    with pytest.raises(PddkitError, match=r"my-bert is not a causal language model.*BertForMaskedLM"):
        HFBackend(lm)


# --- a device this machine does not have ------------------------------------------------

@pytest.mark.slow
def test_a_device_this_machine_lacks_is_one_sentence(tiny_dir, tmp_path, capsys, monkeypatch):
    """Was a 40-line traceback from model.to('cuda')."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in TEXTS])
    for device in ("cuda", "cuda:3"):
        code, _, err = run_cli(capsys, "run", "--model", tiny_dir, "--data", data, "--methods",
                               "loss", "--output", tmp_path / device, "--device", device)
        assert code == 1 and "Traceback" not in err, err
        assert f"error: --device {device} is not available" in err and "no CUDA GPU" in err
        assert "(available: cpu" in err and err.count("error:") == 1


def test_a_device_is_checked_against_what_torch_has(monkeypatch):
    import torch

    from pddkit.backends.devices import pick_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert pick_device("cuda:1") == "cuda:1"
    with pytest.raises(PddkitError, match="cuda:3 is not available: this machine has 2 CUDA GPUs"):
        pick_device("cuda:3")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(PddkitError, match="mps is not available"):
        pick_device("mps")
    with pytest.raises(PddkitError, match="not a device torch knows"):
        pick_device("gpu0")


@pytest.mark.slow
def test_with_ray_the_actors_machines_decide_the_device(tiny_dir, monkeypatch):
    """A head node without a GPU may drive GPU actors: `--engine ray --device cuda` is not
    refused on the driver (each actor checks when it loads); the local engine refuses."""
    import torch

    from pddkit.backends.hf import HFBackend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    backend = HFBackend.load(str(tiny_dir), device="cuda", engine="ray")
    assert backend._lm is None  # nothing loaded on the driver
    with pytest.raises(PddkitError, match="cuda is not available"):
        HFBackend.load(str(tiny_dir), device="cuda")
    with pytest.raises(PddkitError, match="cuda is not available"):  # what an actor does
        HFBackend.from_spec(backend._spec)


# --- labels under another name, or none -------------------------------------------------

@pytest.mark.slow
def test_a_member_column_without_label_field_says_no_metrics(tiny_dir, tmp_path, capsys):
    """Ran unlabelled with exit 0 and no word about the labels in the `member` column."""
    data = tmp_path / "d.csv"
    data.write_text("text,member\n" + "".join(f"{t},{i % 2}\n" for i, t in enumerate(TEXTS)))
    code, _, err = run_cli(capsys, "run", "--model", tiny_dir, "--data", data, "--methods",
                           "loss", "--output", tmp_path / "o", "--device", "cpu")
    assert code == 0, err
    assert "'member' looks like membership labels" in err and "no metrics are computed" in err
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    notice = [n for n in res["notices"] if "'member' looks like membership labels" in n]
    assert len(notice) == 1 and "--label-field" in notice[0] and "'text', 'member'" in notice[0]
    assert "no metrics are computed" in notice[0] and res["methods"]["loss"]["metrics"] is None


def test_unlabelled_tables_name_their_columns(tmp_path, capsys):
    from pddkit.data import load_table

    empty = tmp_path / "e.csv"
    empty.write_text("text,label\n" + "".join(f"{t},\n" for t in TEXTS))
    assert "has a 'label' column but no row gives a label" in load_table(empty).meta["unlabelled"]
    odd = write_jsonl(tmp_path / "o.jsonl", [{"text": t, "id": str(i), "Is_Member": True}
                                             for i, t in enumerate(TEXTS)])
    note = load_table(odd).meta["unlabelled"]
    assert "'Is_Member' looks like membership labels" in note and "'text', 'id', 'Is_Member'" in note
    plain = write_jsonl(tmp_path / "p.jsonl", [{"text": t, "group": "g"} for t in TEXTS])
    note = load_table(plain).meta["unlabelled"]
    assert "has no 'label' column (its columns: 'text', 'group')" in note and "looks" not in note
    assert "unlabelled" not in load_table(write_jsonl(tmp_path / "l.jsonl", [
        {"text": t, "label": i % 2} for i, t in enumerate(TEXTS)])).meta
    # metrics asked for explicitly (a validation split): refused, naming the columns
    csv = tmp_path / "m.csv"
    csv.write_text("text,target\n" + "".join(f"{t},{i % 2}\n" for i, t in enumerate(TEXTS)))
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "no-model-needed", "--data", csv,
                           "--val-fraction", "0.5", "--output", tmp_path / "o")
    assert code == 1 and "needs labelled data" in err and "'target' looks like membership" in err


# --- the same text with both labels ------------------------------------------------------

def test_a_text_with_both_labels_is_one_sentence_or_left_out(tmp_path, capsys):
    rows = [{"id": f"r{i}", "text": t, "label": i % 2} for i, t in enumerate(TEXTS)]
    rows += [{"id": "dup0", "text": TEXTS[0] + "\n", "label": 1},  # r0 is labelled 0
             {"id": "dup1", "text": "  " + TEXTS[1], "label": 0},  # r1 is labelled 1
             {"id": "same", "text": TEXTS[2], "label": 0}]  # r2 is labelled 0 too: no conflict
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "no-model-needed", "--data", data,
                           "--output", tmp_path / "o")
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "2 texts occur with both labels" in err and "contradicts itself" in err
    assert "id dup0" in err and "id r0" in err and "r1/dup1" in err
    from pddkit.data import load_table

    kept = load_table(data, on_invalid="skip")
    assert [s.id for s in kept.samples] == ["r2", "r3", "r4", "r5", "same"]
    assert kept.counts()["contradicting_labels_left_out"] == 4
    assert sorted(s.source.rsplit(" ", 1)[1] for s in kept.skipped) == ["1", "2", "7", "8"]
    assert all("both labels" in s.reason for s in kept.skipped)
    # the Python API builds its data set itself: the same rule, before any model loads
    import pddkit

    with pytest.raises(PddkitError, match="1 text occurs with both labels"):
        pddkit.evaluate([TEXTS[0], TEXTS[1], TEXTS[0] + " "], [0, 1, 1],
                        model=str(tmp_path / "no-model-needed"))


# --- method fallbacks --------------------------------------------------------------------

def obs_of(L, H, neighbors=None) -> Observation:
    return Observation(text="t", target=TokenStats.from_lists(list(range(len(L))), L, H),
                       neighbors=neighbors)


def test_surp_and_neighbor_say_which_texts_a_fallback_scored():
    from pddkit.engine.score import fallback_counts, method_scores
    from pddkit.methods.base import METHODS, MethodCall

    surp = MethodCall(METHODS.get("surp"), {"entropy_threshold": 2.0, "k": 50.0}, "surp")
    paper = obs_of([-1.0, -5.0, -3.0, -0.5], [1.0, 1.0, 3.0, 3.0])  # -5 and -3 low; -5 calm
    high = obs_of([-1.0, -5.0, -3.0, -0.5], [3.0, 3.0, 3.0, 3.0])  # low tokens, none calm
    one = obs_of([-2.0], [0.5])  # one token: nothing below its own percentile
    assert [surp.fallback(o) for o in (paper,)] == [None]
    counts = fallback_counts(surp, [paper, high, high, one])
    assert list(counts.values()) == [2, 1]
    low_set, all_tokens = counts
    assert "no token with entropy below 2" in low_set and "below the 50th percentile" in low_set
    assert "mean log-probability of all tokens" in all_tokens
    assert method_scores(surp, [paper, high, one]).tolist() == [-5.0, -4.0, -2.0]

    nb = MethodCall(METHODS.get("neighbor"), {**METHODS.get("neighbor").defaults,
                                              "n_neighbors": 3}, "neighbor")
    st = TokenStats.from_lists([1, 2], [-1.0, -1.0])
    full, short = obs_of([-1.0], [0.0], (st, st, st, st)), obs_of([-1.0], [0.0], (st,))
    assert fallback_counts(nb, [full, short, full]) == {
        "have fewer than n_neighbors=3 neighbours (too few replaceable words, or fewer given): "
        "scored against the neighbours they have": 1}
    loss = MethodCall(METHODS.get("loss"), {}, "loss")
    assert fallback_counts(loss, [paper, one]) == {}


def _results(fell_back: int, scored: int) -> dict:
    metrics = {"auc": 0.6, "auc_ci": [0.5, 0.7], "n_members": 3, "n_nonmembers": 3,
               "n_bootstrap": 10, **{f"tpr@{t:g}": 0.0 for t in (0.01, 0.05, 0.1)},
               **{f"tpr@{t:g}_ci": [0.0, 0.0] for t in (0.01, 0.05, 0.1)}}
    why = "have no token below the 40th percentile (...): scored by all tokens"
    return {"methods": {"loss": {"metrics": metrics}, "surp": {"metrics": metrics}},
            "counts": {"fallbacks": {"surp": {why: fell_back}} if fell_back else {},
                       "fallback_texts": {"surp": {"fell_back": fell_back, "scored": scored}}}}


@pytest.mark.parametrize("fell_back, marked", [(0, False), (5, False), (6, True)])
def test_only_a_method_that_fell_back_on_every_text_has_its_row_marked(fell_back, marked):
    from pddkit.reporting.run_tables import metrics_table

    for terminal in (True, False):
        table = metrics_table(_results(fell_back, 6), terminal=terminal)
        names = [r[0] for r in table.rows]
        assert names == ["loss", "surp (fallback on every text)" if marked else "surp"]
        notes = [n for n in table.notes if "formula as written" in n]
        assert notes == (["surp (fallback on every text): none of its 6 texts was scored by "
                          "surp's formula as written, so this row measures the fallback: 6 have "
                          "no token below the 40th percentile (...): scored by all tokens"]
                         if marked else [])


def test_minkpp_and_lowercase_count_their_floors():
    from pddkit.methods.base import METHODS, MethodCall

    minkpp = MethodCall(METHODS.get("minkpp"), {"k": 0.5}, "minkpp")
    # token 0: a one-point distribution (M2 = H^2 = 0) with the lowest L
    flat = Observation(text="t", target=TokenStats.from_lists([1, 2], [-3.0, -1.0], [0.0, 1.0],
                                                              [0.0, 2.0]))
    assert "variance below 1e-12" in minkpp.fallback(flat)
    fine = Observation(text="t", target=TokenStats.from_lists([1, 2], [-3.0, -1.0], [1.0, 1.0],
                                                              [2.0, 2.0]))
    assert minkpp.fallback(fine) is None
    lower = MethodCall(METHODS.get("lowercase"), {}, "lowercase")
    certain = Observation(text="T", target=fine.target,
                          lower=TokenStats.from_lists([1], [0.0]))
    assert "floored" in lower.fallback(certain)
    assert lower.fallback(Observation(text="T", target=fine.target, lower=fine.target)) is None


@pytest.mark.slow
def test_a_fallback_reaches_the_terminal_results_and_report(tiny_dir, tmp_path, capsys):
    """surp with no token below entropy 0 fell back for every text without a word."""
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t, "label": i % 2}
                                             for i, t in enumerate(TEXTS)])
    code, out, err = run_cli(capsys, "run", "--model", tiny_dir, "--data", data, "--methods",
                             "loss,surp:entropy_threshold=0", "--output", tmp_path / "o",
                             "--no-blind", "--bootstrap", "10", "--device", "cpu")
    assert code == 0, err
    line = ("surp: 6 of 6 texts (100%) have no token with entropy below 0 among their tokens "
            "below the 40th percentile of log-probability")
    assert line in err
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert sum(line in n for n in res["notices"]) == 1
    assert list(res["counts"]["fallbacks"]) == ["surp"]  # loss has no fallback
    assert list(res["counts"]["fallbacks"]["surp"].values()) == [6]
    assert line in (tmp_path / "o" / "report.md").read_text()
    # every text fell back: counted per method, said once, and the row says so
    assert res["counts"]["fallback_texts"] == {"surp": {"fell_back": 6, "scored": 6}}
    every = "surp: all 6 texts were scored by a fallback"
    assert every in err and sum(n.startswith(every) for n in res["notices"]) == 1
    table = out[out.index("method"):]
    assert "surp (fallback on every text)" in table and "loss (fallback" not in table
    assert ("none of its 6 texts was scored by surp's formula as written, so this row measures "
            "the fallback: 6 have no token with entropy below 0") in table
    assert "| surp (fallback on every text) |" in (tmp_path / "o" / "report.md").read_text()
    rows = [json.loads(x) for x in (tmp_path / "o" / "scores.jsonl").read_text().splitlines()]
    assert all(np.isfinite(r["surp"]) for r in rows)
