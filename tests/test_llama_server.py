"""The `openai` backend against a real OpenAI-compatible server: llama-cpp-python's,
serving a GGUF that llama.cpp's converter made from a Llama-shaped model with a
SentencePiece tokenizer, both trained here on Gutenberg paragraphs (tests/llama_server.py).

llama-cpp-python takes only text prompts (token ids get HTTP 500, a validation error),
adds the model's BOS itself, hides it from the echo and gives the first text token's
log-probability as null: pddkit sends text, checks the server's tokens against the
tokenizer's, and scores each text from its second token. Expected numbers come from a plain
transformers forward of the same weights (written here), within the float32 rounding that
forward measures (tests/rounding.py: float32 against float64 on these texts, times 4). The
server computes the same function in float32 throughout (float32 GGUF weights, float32
key/value cache: tests/llama_server.py) with its own kernels and summation order: another
float32 computation of one function, which is what that bound covers (measured here: the
two differ by at most 4e-5 nats where the bound is about 1e-4)."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest
from conftest import assert_no_shared_runs, gutenberg_paragraphs, shared_build
from llama_server import LlamaServer, convert, need_llama_cpp
from rounding import forward_bounds
from tiny_models import save_spm_tokenizer, save_tiny_llama

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Members (trained on), non-members (held out), the model folder, its GGUF, a GGUF of
    the same weights whose tokenizer adds no BOS, and another tokenizer (a smaller vocabulary
    trained on the same text)."""
    need_llama_cpp()
    texts = gutenberg_paragraphs(80, seed=3)
    members, nonmembers, other = texts[:30], texts[30:50], texts[50:80]
    assert_no_shared_runs(members, nonmembers, other)  # ground truth, checked

    def build(root):
        model = save_tiny_llama(root / "model", members)
        convert(model, root / "model.gguf")
        nobos = root / "nobos"
        nobos.mkdir()
        for f in model.iterdir():
            (nobos / f.name).write_bytes(f.read_bytes())
        config = json.loads((nobos / "tokenizer_config.json").read_text())
        (nobos / "tokenizer_config.json").write_text(json.dumps({**config, "add_bos_token": False}))
        convert(nobos, root / "nobos.gguf")
        save_spm_tokenizer(root / "other-tokenizer", members + other, 400)

    root = shared_build(tmp_path_factory, "llama-world", build)
    return {"root": root, "members": members, "nonmembers": nonmembers}


@pytest.fixture(scope="module")
def server(world, tmp_path_factory):
    with LlamaServer(world["root"] / "model.gguf", tmp_path_factory.mktemp("llama") / "log") as s:
        yield s


def plain_logprobs(model_dir, texts):
    """log P(x_i | <s> x_<i) per text from transformers' own forward (no pddkit), and the
    float32 rounding bound of that forward."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    seqs = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    out = []
    with torch.no_grad():
        for ids in seqs:
            logp = torch.log_softmax(model(torch.tensor([[1, *ids]])).logits[0].float(), -1)
            out.append(np.array([float(logp[i, ids[i]]) for i in range(len(ids))]))
    _, bound = forward_bounds(model, 1, seqs)
    return out, bound.L


def test_the_probe_reads_llama_cpp_python(server, world):
    from pddkit.backends.openai_api import OpenAIBackend

    backend = OpenAIBackend.load("tiny", api_base=server.api_base,
                                 tokenizer=str(world["root"] / "model"), api_key_env=None)
    before = server.requests(500)
    found = backend.server
    assert found.prompt_form == "text" and "Input should be a valid string" in found.ids_refused
    assert found.start == "server" and found.echo == "start_hidden" and not found.first_token
    assert found.alignment_gap is not None and found.alignment_gap <= 1e-4
    # n ignored (one choice), seed taken; 5 top log-probabilities asked: 5, and the sampled
    # token beside them when it is not among them
    assert found.n is False and found.seed is True and found.top_logprobs in (5, 6)
    # token ids, with logprobs and then without (logprobs might have been the refusal's
    # reason): each refused once, not retried
    assert server.requests(500) == before + 2
    # the probe's echo: the canary text's log-probabilities, the first token's not given
    [L], bound = plain_logprobs(world["root"] / "model", [backend.decode(backend.tokenize(
        backend.canary_text)[:len(found.echoed)])])
    assert np.isnan(found.echoed[0])
    assert np.all(np.abs(np.array(found.echoed[1:]) - L[1:len(found.echoed)]) <= bound)


def test_scores_through_the_server_equal_a_plain_forward(server, world, tmp_path, capsys):
    """loss, zlib and mink through `pddkit run --backend openai` are the formulas of SPEC
    applied by hand to a plain transformers forward, each text from its second token; samia
    runs through the server's sampling (seeded: the same scores twice)."""
    from cli_helpers import run_cli, write_jsonl

    texts = world["members"][:10] + world["nonmembers"][:10]
    rows = [{"id": f"t{i}", "text": t, "label": int(i < 10)} for i, t in enumerate(texts)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    cmd = ["run", "--data", data, "--backend", "openai", "--model", "tiny", "--api-base",
           server.api_base, "--tokenizer", world["root"] / "model", "--api-key-env", "NO_KEY_HERE",
           "--methods", "loss,zlib,mink:k=0.2,samia:samples=3,max_new_tokens=8",
           "--no-blind", "--no-report", "--bootstrap", "10"]
    code, _, err = run_cli(capsys, *cmd, "--output", tmp_path / "a")
    assert code == 0, err
    assert "prompts: text" in err and "each text is scored from its second token" in err
    got = [json.loads(x) for x in (tmp_path / "a" / "scores.jsonl").read_text().splitlines()]
    Ls, bound = plain_logprobs(world["root"] / "model", texts)
    for row, text, L in zip(got, texts, Ls):
        L = L[1:]  # the first token is context: the server gives it no log-probability
        m = max(1, int(np.floor(0.2 * len(L))))
        want = {"loss": L.mean(), "zlib": L.mean() / len(zlib.compress(text.encode())),
                "mink": np.sort(L)[:m].mean()}
        allowed = {"loss": bound, "zlib": bound / len(zlib.compress(text.encode())),
                   "mink": bound}
        for k in want:
            assert abs(row[k] - want[k]) <= allowed[k], (k, row[k], want[k])
    # samia from the continuations the server sampled, by SPEC 3b written out in test_samia
    from test_samia import words_score

    samples = [json.loads(x) for x in (tmp_path / "a" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == len(texts)
    for s in samples:
        i = int(s["id"][1:])
        assert len(s["continuations"]) == 3
        # the same arithmetic in another order: an ulp or so (approx's 1e-6 is far above)
        assert got[i]["samia"] == pytest.approx(words_score(texts[i], s["continuations"]))
    res = json.loads((tmp_path / "a" / "results.json").read_text())
    probe = res["models"]["target"]["server"]
    assert probe["prompt_form"] == "text" and probe["echo"] == "start_hidden"
    assert any("scored from its second token" in n for n in res["notices"])
    code, _, err = run_cli(capsys, *cmd, "--output", tmp_path / "b")
    assert code == 0, err
    again = [json.loads(x) for x in (tmp_path / "b" / "scores.jsonl").read_text().splitlines()]
    assert [r["samia"] for r in again] \
        == [r["samia"] for r in got]


def test_a_text_longer_than_the_served_context_is_one_sentence(server, world, tmp_path, capsys):
    """llama-cpp-python reports no context: a text beyond its n_ctx (512 here) is refused
    with HTTP 400; pddkit says which --max-length cuts texts to it, and with it the run
    passes."""
    from cli_helpers import run_cli, write_jsonl

    long = " ".join(world["nonmembers"])  # about 2,000 tokens
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": long}, {"text": world["nonmembers"][0]}])
    cmd = ["run", "--data", data, "--backend", "openai", "--model", "tiny", "--api-base",
           server.api_base, "--tokenizer", world["root"] / "model", "--methods", "loss"]
    code, _, err = run_cli(capsys, *cmd, "--output", tmp_path / "a")
    assert code == 1
    line = err.strip().splitlines()[-1]
    assert "as longer than its context (HTTP 400: This model's maximum context length is 512 " \
           "tokens, however you requested" in line and "pass --max-length 510" in line, err
    code, _, err = run_cli(capsys, *cmd, "--max-length", "510", "--output", tmp_path / "b")
    assert code == 0, err


def test_a_tokenizer_other_than_the_servers_is_one_sentence(server, world, tmp_path, capsys):
    from cli_helpers import run_cli, write_jsonl

    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in world["nonmembers"][:3]])
    code, _, err = run_cli(capsys, "run", "--data", data, "--backend", "openai", "--model", "tiny",
                           "--api-base", server.api_base, "--tokenizer",
                           world["root"] / "other-tokenizer", "--methods", "loss",
                           "--output", tmp_path / "out")
    assert code == 1, err
    line = err.strip().splitlines()[-1]
    assert "tokenises the text otherwise than the local tokenizer" in line, err
    assert "where the tokenizer has" in line and "give `tokenizer`" not in line  # CLI wording
    assert "Traceback" not in err


def test_token_ids_asked_for_are_refused_once_with_the_servers_reason(server, world, tmp_path,
                                                                      capsys):
    from cli_helpers import run_cli, write_jsonl

    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in world["nonmembers"][:3]])
    before = server.requests(500)
    code, _, err = run_cli(capsys, "run", "--data", data, "--backend", "openai", "--model", "tiny",
                           "--api-base", server.api_base, "--tokenizer", world["root"] / "model",
                           "--api-prompt", "ids", "--methods", "loss", "--output", tmp_path / "out")
    assert code == 1, err
    line = err.strip().splitlines()[-1]
    assert "refused a prompt of token ids (HTTP 500: 14 validation errors, the first: " \
           "body.prompt.str: Input should be a valid string)" in line, err
    assert "--api-prompt" in line and "retrying" not in err
    assert server.requests(500) == before + 2  # with logprobs and without; neither retried


def test_a_server_adding_no_start_token_is_sent_one(world, tmp_path):
    """A GGUF whose tokenizer adds no BOS, with a local tokenizer that says it does: the
    server echoes each token beside the next position's distribution (no BOS at position 0);
    the probe finds the echo and the generation apart, sends the start token itself, and the
    log-probabilities are the model's."""
    from pddkit.backends.base import token_stats
    from pddkit.backends.openai_api import OpenAIBackend

    with LlamaServer(world["root"] / "nobos.gguf", tmp_path / "log") as s:
        backend = OpenAIBackend.load("tiny", api_base=s.api_base,
                                     tokenizer=str(world["root"] / "model"), api_key_env=None)
        assert backend.server.start == "sent" and backend.server.echo == "start_hidden"
        texts = world["nonmembers"][:4]
        got = token_stats(backend, texts)
    Ls, bound = plain_logprobs(world["root"] / "model", texts)
    for g, L in zip(got, Ls):
        assert len(g) == len(L) - 1 and np.all(np.abs(g.L - L[1:]) <= bound)
