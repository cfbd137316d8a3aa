"""`pddkit run`, `pddkit freq build` and `pddkit list` end to end, and every bad input."""

import json
import math
import subprocess
import sys
import zlib

import numpy as np
import pytest
import torch
from cli_helpers import run_cli
from conftest import shared_path
from rounding import forward_bounds, score_bound


def read_scores(path):
    return [json.loads(line) for line in (path / "scores.jsonl").read_text().splitlines()]


def independent_scores(world, texts):
    """SPEC section 3 written out again from scratch: float64 full softmax per text."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def per_token(model_dir, text):
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        ids = tok(text, add_special_tokens=False)["input_ids"]
        start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([[start, *ids]])).logits[0, :-1].double(), -1)
        p = logp.exp()
        return (np.array(ids), logp[torch.arange(len(ids)), torch.tensor(ids)].numpy(),
                (-(p * logp).sum(-1)).numpy(), (p * logp * logp).sum(-1).numpy(), len(tok))

    tok = __import__("transformers").AutoTokenizer.from_pretrained(world.target_dir)
    counts = np.zeros(len(tok))
    for doc in world.pool:
        for i in tok(doc, add_special_tokens=False)["input_ids"]:
            counts[i] += 1
    log_f = np.log((counts + 1) / (counts.sum() + len(counts)))
    rows = []
    for text in texts:
        ids, L, H, M2, _ = per_token(world.target_dir, text)
        _, Llow, _, _, _ = per_token(world.target_dir, text.lower())
        _, Lref, _, _, _ = per_token(world.ref_dir, text)
        n = len(L)
        m = max(1, math.floor(0.2 * n))
        z = (L + H) / np.sqrt(np.maximum(M2 - H ** 2, 1e-12))
        t = np.percentile(L, 40)
        S = (H < 2.0) & (L < t)
        S = S if S.any() else (L < t)
        S = S if S.any() else np.ones(n, bool)
        first = sorted({int(i): pos for pos, i in reversed(list(enumerate(ids)))}.values())
        alpha = np.minimum(-np.exp(L[first]) * log_f[ids[first]], 0.01)
        rows.append({
            "loss": L.mean(), "zlib": L.mean() / len(zlib.compress(text.encode("utf-8"))),
            "lowercase": -(L.mean() / Llow.mean()), "ref": L.mean() - Lref.mean(),
            "mink": np.sort(L)[:m].mean(), "maxk": np.sort(L)[::-1][:m].mean(),
            "minkpp": np.sort(z)[:m].mean(),
            "surp": L[S].mean(), "dcpdd": alpha.mean(),
        })
    return rows


def score_bounds(world, texts):
    """Per text, how far each method's score may move between two float32 computations
    (tests/rounding.py: each model's float32 forward against float64 on these texts, times
    4, propagated through each formula); dcpdd's alpha_i = min(-exp(L_i) log f(x_i), 0.01)
    moves by at most exp(L_i) |log f(x_i)| dL, ref's difference of means by dL + dL_ref."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def bounds(model_dir, seqs_of):
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        seqs = [tok(t, add_special_tokens=False)["input_ids"] for t in seqs_of]
        return (*forward_bounds(model, start, seqs), seqs)

    exact, b, seqs = bounds(world.target_dir, texts)
    lower, b_low, _ = bounds(world.target_dir, [t.lower() for t in texts])
    _, b_ref, _ = bounds(world.ref_dir, texts)
    tok = AutoTokenizer.from_pretrained(world.target_dir)
    counts = np.zeros(len(tok))
    for doc in world.pool:
        for i in tok(doc, add_special_tokens=False)["input_ids"]:
            counts[i] += 1
    log_f = np.log((counts + 1) / (counts.sum() + len(counts)))
    out = []
    for text, e, low, ids in zip(texts, exact, lower, seqs):
        row = {m: score_bound(m, e, b, text) for m in ("loss", "zlib", "mink", "maxk", "minkpp",
                                                        "surp")}
        a, c = float(np.mean(e.L)), float(np.mean(low.L))
        row["lowercase"] = (b.L + abs(a / c) * b_low.L) / abs(c)
        row["ref"] = b.L + b_ref.L
        first = sorted({int(i): pos for pos, i in reversed(list(enumerate(ids)))}.values())
        row["dcpdd"] = float(np.max(np.exp(e.L[first]) * np.abs(log_f[np.array(ids)[first]]))) * b.L
        out.append(row)
    return out


def test_run_end_to_end_agrees_with_independent_spec(toy_world, tmp_path, capsys):
    out1, out32 = tmp_path / "bs1", tmp_path / "bs32"
    common = ["run", "--model", toy_world.target_dir, "--ref-model", toy_world.ref_dir,
              "--freq", toy_world.freq_path, "--data", toy_world.data_path, "--device", "cpu",
              "--bootstrap", "200"]
    code, out, err = run_cli(capsys, *common, "--output", out1, "--batch-size", "1")
    assert code == 0, err
    assert "AUC [95% CI]" in out and "loss" in out  # the table is printed
    code, _, err = run_cli(capsys, *common, "--output", out32, "--batch-size", "32")
    assert code == 0, err
    s1, s32 = read_scores(out1), read_scores(out32)
    methods = ["loss", "zlib", "lowercase", "ref", "mink", "maxk", "minkpp", "surp", "dcpdd"]
    # + the model-free baseline, and gapk (its own rounding bounds: tests/test_gapk.py)
    assert set(s1[0]) == {"id", "label", "blind", "gapk", *methods}
    texts = [json.loads(line)["text"] for line in toy_world.data_path.read_text().splitlines()]
    idx = [0, 1, 2, len(s1) - 1, len(s1) - 2]
    allowed = score_bounds(toy_world, [texts[i] for i in idx])
    # batch size: two float32 computations of one function (BLAS blocking by shape), held
    # to the rounding bounds of score_bounds on five of the texts
    for i, bound in zip(idx, allowed):
        assert s1[i]["id"] == s32[i]["id"]
        for m in methods:
            assert abs(s32[i][m] - s1[i][m]) <= bound[m], m
    want = independent_scores(toy_world, [texts[i] for i in idx])
    for i, w, bound in zip(idx, want, allowed):
        for m in methods:
            assert abs(s1[i][m] - w[m]) <= bound[m], (m, s1[i][m], w[m], bound[m])
    assert all(a["id"] == b["id"] for a, b in zip(s1, s32))
    res = json.loads((out1 / "results.json").read_text())
    assert res["counts"]["samples"] == 120 and res["counts"]["truncated"]["target"] == 0
    assert res["models"]["target"]["vocab_size"] == 1024
    assert res["methods"]["loss"]["metrics"]["auc"] > 0.8
    assert {"auc_ci", "tpr@0.01", "tpr@0.05", "tpr@0.1"} <= set(res["methods"]["loss"]["metrics"])
    assert res["timings_s"]["target_pass"] > 0 and res["pddkit_version"]


def test_unlabelled_input_gives_scores_only(toy_world, tmp_path, capsys):
    data = tmp_path / "u.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in toy_world.members[:5]))
    code, out, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                             "--methods", "loss,surp:entropy_threshold=2.5,k=30",
                             "--output", tmp_path / "o")
    assert code == 0, err
    assert "AUC" not in out
    rows = read_scores(tmp_path / "o")
    assert len(rows) == 5 and rows[0]["label"] is None and set(rows[0]) == {"id", "label",
                                                                           "loss", "surp"}
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["methods"]["surp"]["params"] == {"entropy_threshold": 2.5, "k": 30.0}
    assert res["methods"]["loss"]["metrics"] is None


def test_all_skips_methods_whose_needs_are_missing(toy_world, tmp_path, capsys):
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data",
                           toy_world.data_path, "--output", tmp_path / "o", "--bootstrap", "10")
    assert code == 0
    assert "skipping ref: it needs a reference model (--ref-model)" in err
    assert "skipping dcpdd: it needs a frequency table (--freq)" in err
    assert set(read_scores(tmp_path / "o")[0]) == {"id", "label", "loss", "zlib", "lowercase",
                                                    "mink", "maxk", "minkpp", "gapk", "surp",
                                                    "blind"}
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    skips = [n for n in res["notices"] if n.startswith("skipping ")]
    assert [n.split(":")[0] for n in skips] == ["skipping dcpdd", "skipping neighbor",
                                                "skipping probe", "skipping ref"]
    # the toy model's entropies are high: surp's fallback is counted, never silent
    others = [n for n in res["notices"] if n not in skips]
    fell_back = sum(res["counts"].get("fallbacks", {}).get("surp", {}).values())
    assert (fell_back > 0) == any(n.startswith("surp: ") for n in others)
    assert all(n.startswith("surp: ") for n in others)
    assert "needs a masked LM for neighbours (--mask-model)" in err


def test_long_text_is_truncated_and_counted(toy_world, tmp_path, capsys):
    data = tmp_path / "long.jsonl"
    rows = [{"text": " ".join(toy_world.members), "label": 1}, {"text": "short", "label": 0},
            {"text": "a", "label": 0}]  # "a" is one token
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", "loss,mink,minkpp,surp", "--output", tmp_path / "o",
                           "--bootstrap", "10")
    assert code == 0, err
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["counts"]["truncated"]["target"] == 1
    assert all(math.isfinite(v) for r in read_scores(tmp_path / "o") for k, v in r.items()
               if k not in ("id", "label"))


@pytest.fixture(scope="module")
def gpt2_tok_dir(tmp_path_factory):
    from pddkit.sandbox.training import gpt2_tokenizer

    d = tmp_path_factory.mktemp("gpt2tok")
    gpt2_tokenizer(shared_path("tokenizers", "gpt2")).save_pretrained(d)
    return d


def test_freq_build_counts_like_whole_document_encoding(gpt2_tok_dir, tmp_path, capsys):
    from transformers import AutoTokenizer

    from pddkit.resources.frequency import FrequencyTable

    book = shared_path("corpora", "gutenberg", "Carroll, Lewis", "Alice's Adventures in Wonderland.txt")
    extra = tmp_path / "docs.jsonl"
    extra.write_text(json.dumps({"text": "Hello world"}) + "\n" + "not json\n"
                     + json.dumps({"input": "Hello again"}) + "\n")
    code, out, err = run_cli(capsys, "freq", "build", "--tokenizer", gpt2_tok_dir, "--output",
                             tmp_path / "t.npz", book, extra)
    assert code == 0, err
    assert "1 JSONL lines without text left out" in out
    table = FrequencyTable.load(tmp_path / "t.npz")
    tok = AutoTokenizer.from_pretrained(gpt2_tok_dir)
    raw = book.read_bytes().decode("utf-8")  # no newline translation: the file is CRLF
    want = np.bincount(tok(raw, add_special_tokens=False)["input_ids"]
                       + tok(["Hello world", "Hello again"], add_special_tokens=False)["input_ids"][0]
                       + tok("Hello again", add_special_tokens=False)["input_ids"], minlength=len(tok))
    assert table.vocab_size == 50257 and table.documents == 3
    np.testing.assert_array_equal(table.counts, want)
    meta = table.meta()
    assert meta["total_tokens"] == want.sum() and len(meta["sources"]) == 2


def test_freq_build_counts_undecodable_lines(gpt2_tok_dir, tmp_path, capsys):
    f = tmp_path / "latin1.txt"
    f.write_bytes("caf\xe9 au lait\n".encode("latin-1") + b"plain line\n")
    code, out, _ = run_cli(capsys, "freq", "build", "--tokenizer", gpt2_tok_dir, "--output",
                           tmp_path / "t.npz", f)
    assert code == 0 and "1 lines not UTF-8, decoded with replacement" in out


def one_line(err):
    lines = [x for x in err.strip().splitlines() if x.startswith("pddkit: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def write_jsonl(path, lines):
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines))
    return path


@pytest.mark.parametrize("bad,sentence", [
    (json.dumps({"text": "  ", "label": 1}), "line 2 has an empty or whitespace-only text"),
    ("{oops", "line 2 is not valid JSON"),
    (b"\xc3\x28 bad", "line 2 is not valid UTF-8"),
    (json.dumps({"body": "x", "label": 1}), "line 2 has no 'text' (or 'input') field"),
    (json.dumps({"text": "x", "label": 3}), "line 2 has label 3"),
])
def test_bad_lines_get_one_sentence_and_nonzero_exit(toy_world, tmp_path, capsys, bad, sentence):
    data = write_jsonl(tmp_path / "d.jsonl", [json.dumps({"text": "good one", "label": 1}), bad,
                                              json.dumps({"text": "good two", "label": 0})])
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--output", tmp_path / "o")
    assert code == 1
    assert f"{data} {sentence}" in one_line(err)
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--output", tmp_path / "o", "--on-invalid", "skip", "--bootstrap", "10",
                           "--methods", "loss")
    assert code == 0, err
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["counts"]["skipped"] == 1 and res["skipped"][0]["source"].endswith("line 2")
    assert len(read_scores(tmp_path / "o")) == 2


def test_other_bad_inputs(toy_world, gpt2_tok_dir, tmp_path, capsys):
    one_class = write_jsonl(tmp_path / "one.jsonl", [json.dumps({"text": "a b", "label": 1})] * 2)
    base = ["run", "--data", toy_world.data_path, "--output", tmp_path / "o"]
    cases = [
        (["run", "--model", toy_world.target_dir, "--data", one_class, "--output", tmp_path / "o"],
         "has only members (label 1)"),
        (["--model", tmp_path / "no-such-model", *base[1:]], "no-such-model does not exist"),
        (["--model", toy_world.target_dir, "--methods", "ref", *base[1:]],
         "method ref needs a reference model: pass --ref-model"),
        (["--model", toy_world.target_dir, "--methods", "mink:k=2", *base[1:]],
         "k must be in (0, 1]"),
        (["--model", toy_world.target_dir, "--data", tmp_path / "missing.jsonl",
          "--output", tmp_path / "o"], "missing.jsonl does not exist"),
    ]
    for args, sentence in cases:
        args = args if args[0] == "run" else ["run", *args]
        code, _, err = run_cli(capsys, *args)
        assert code == 1 and sentence in one_line(err), (args, err)
    # a frequency table built with another vocabulary
    code, _, _ = run_cli(capsys, "freq", "build", "--tokenizer", gpt2_tok_dir, "--output",
                         tmp_path / "gpt2.npz", toy_world.data_path)
    assert code == 0
    code, _, err = run_cli(capsys, *base, "--model", toy_world.target_dir, "--freq",
                           tmp_path / "gpt2.npz", "--methods", "dcpdd")
    assert code == 1
    assert "was built with tokenizer" in one_line(err) and "(vocabulary 50257)" in err
    assert "(vocabulary 1024)" in err


def test_console_script_and_list(tmp_path):
    exe = [sys.executable, "-m", "pddkit"]
    r = subprocess.run([*exe, "list"], capture_output=True, text=True, check=True)
    for name in ("loss", "zlib", "lowercase", "ref", "mink", "minkpp", "surp", "dcpdd", "neighbor",
                 "probe", "wikimia"):
        assert f"  {name} " in r.stdout
    assert "defaults: entropy_threshold=2.0,k=40.0;" in r.stdout
    r = subprocess.run([*exe, "run", "--model", str(tmp_path / "x"), "--data", str(tmp_path / "d"),
                        "--output", str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "does not exist" in r.stderr


def test_importing_pddkit_does_not_import_torch():
    code = "import sys, pddkit; pddkit.__version__; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"
