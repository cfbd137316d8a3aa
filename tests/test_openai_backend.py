"""The `openai` backend against an OpenAI-compatible server started on 127.0.0.1
(tests/openai_server.py) that serves a tiny GPT-2's prompt log-probabilities: the same L as
the `hf` backend on the same model, retries, one sentence for each failure, a fatal error
that stops every other request, texts cut to the served context, a wrong echo refused,
credentials in the URL refused, and a checkpoint swapped under the same name that the
statistics cache never serves."""

from __future__ import annotations

import logging
import socket
import time

import numpy as np
import pytest
from conftest import gutenberg_paragraphs, shared_path
from openai_server import FakeOpenAIServer
from rounding import forward_bounds

from pddkit.backends import BackendSpec, get_backend, token_stats
from pddkit.errors import PddkitError

KEY_ENV, KEY = "PDDKIT_TEST_OPENAI_KEY", "sk-test-0123456789-secret"


@pytest.fixture(scope="module")
def tok():
    from pddkit.sandbox.training import gpt2_tokenizer

    return gpt2_tokenizer(shared_path("tokenizers", "gpt2"))


@pytest.fixture(scope="module")
def model(tok):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)  # untrained, deterministic; a wide init so the log-probs vary
    m = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_layer=2, n_embd=32, n_head=2,
                                   n_positions=256, initializer_range=0.5))
    return m.eval()


@pytest.fixture(scope="module")
def server(model, tok):
    with FakeOpenAIServer(model, name="tiny", tokenizer=tok) as s:
        yield s


@pytest.fixture(scope="module")
def texts():
    return [*gutenberg_paragraphs(5, seed=11), "A short one."]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


# the capability probe's requests to a server answering every request (openai_probe.py):
# a greedy one-token completion, the echo of the same prompt (which holds the generated
# token, so no third echo is needed for the alignment check), and one with n, seed and
# logprobs=5
PROBE = 3


def api(server, tok, *, api_base=None, **options):
    from pddkit.backends.openai_api import OpenAIBackend

    options = {"api_key_env": KEY_ENV, "backoff": 0.01, **options}
    return OpenAIBackend("tiny", api_base or server.api_base, tok, **options)


def one_sentence(err: pytest.ExceptionInfo, *, contains: str) -> str:
    msg = str(err.value)
    assert contains in msg, msg
    assert "\n" not in msg and "Traceback" not in msg and ". " not in msg, msg
    assert KEY not in msg
    return msg


def _allowed(model, tok, texts) -> dict[str, np.ndarray]:
    """Per method and text, how far a score of the server's float32 log-probabilities may
    lie from the hf pass's (tests/rounding.py: float32 against float64 on these texts and
    their lower-cased copies, times 4): loss, mink and zlib (a mean over a size >= 1) by
    dL; lowercase, -(a / c), by (dL + |a / c| dL_lower) / |c|."""
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.hf_loading import LoadedModel

    hf = HFBackend(LoadedModel(model, tok, "tiny", "cpu", "float32"))

    def bounds(items):
        enc = hf.encode(items, [f"text {i}" for i in range(len(items))])
        return forward_bounds(model, hf.runner.start_id, enc.ids)

    exact, b = bounds(texts)
    lower, b_low = bounds([t.lower() for t in texts])
    n = len(texts)
    out = {k: np.full(n, b.L) for k in ("loss", "mink", "zlib")}
    out["lowercase"] = np.array([
        (b.L + abs(np.mean(e.L) / np.mean(w.L)) * b_low.L) / abs(np.mean(w.L))
        for e, w in zip(exact, lower)])
    return out


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("mode", ["ok", "vllm", "no_generated", "text_only", "hidden_start",
                                  "text_adds_start", "ok_as_text"])
def test_l_equals_the_hf_backend_on_the_same_model(server, model, tok, texts, key, mode):
    """Token ids where the server takes them, text where it refuses them or where asked
    (`api_prompt` text; its tokens then checked against the tokenizer's); a server hiding
    the start token and nulling the first text token's entry (llama-cpp-python) scores each
    text from its second token; a server adding its own start token to a text that already
    has pddkit's is seen in the echo and gets none from pddkit."""
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.hf_loading import LoadedModel

    hf = HFBackend(LoadedModel(model, tok, "tiny", "cpu", "float32"), batch_size=4,
                   max_length=100)
    want = token_stats(hf, texts)
    texted = mode in ("text_only", "text_adds_start", "ok_as_text")
    b = server.reset("ok" if mode == "ok_as_text" else mode)
    backend = api(server, tok, max_length=100, concurrency=3,
                  prompt_form="text" if mode == "ok_as_text" else "auto")
    found = backend.server
    probed = len(b.requests)
    assert probed <= 7, b.requests  # the probe: a few short requests
    assert found.prompt_form == ("text" if texted else "ids")
    assert found.start == ("server" if mode == "text_adds_start" else "sent")
    assert found.first_token == (mode != "hidden_start")
    got = token_stats(backend, texts)
    skip = 1 if mode == "hidden_start" else 0  # the first token is context there
    assert [s.truncated for s in got] == [s.truncated for s in want]
    assert any(s.truncated for s in got) and not all(s.truncated for s in got)
    assert len({len(s) for s in got}) >= 3  # different lengths
    # the server's plain float32 forward against the hf pass: two float32 computations of
    # one function, within the float32 rounding measured on these texts (tests/rounding.py)
    _, bound = forward_bounds(model, hf.runner.start_id, [w.ids.tolist() for w in want])
    kept = []
    for g, w in zip(got, want):
        ids = w.ids.tolist()
        if texted and w.truncated:  # the cut text's last tokens, if its text encodes otherwise
            while tok(tok.decode(ids), add_special_tokens=False)["input_ids"] != ids:
                ids = ids[:-1]
        kept.append(ids)
        n = len(ids)
        np.testing.assert_array_equal(g.ids, w.ids[skip:n])
        assert g.L.dtype == np.float32 and np.isfinite(g.L).all()
        assert np.all(np.abs(g.L - w.L[skip:n]) <= bound.L)
        assert np.isnan(g.H).all() and np.isnan(g.M2).all()
    assert np.std(np.concatenate([s.L for s in got])) > 0.5  # the comparison means something
    # what went over the wire: token ids after the start token (or their text), the key as
    # a Bearer header
    scored = b.requests[probed:]
    assert len(scored) == len(texts)
    start = tok.eos_token_id if tok.bos_token_id is None else tok.bos_token_id
    sent = sorted(str(r["body"]["prompt"]) for r in scored)
    if mode == "text_adds_start":  # the server adds the start token: none sent
        assert sent == sorted(tok.decode(ids) for ids in kept)
    elif texted:
        assert sent == sorted(tok.decode([start]) + tok.decode(ids) for ids in kept)
    else:
        assert sent == sorted(str([start, *map(int, s.ids)]) for s in want)
    for r in scored:
        assert r["path"] == "/v1/completions"
        assert {k: r["body"][k] for k in ("model", "echo", "logprobs", "max_tokens", "temperature")} \
            == {"model": "tiny", "echo": True, "logprobs": 1, "max_tokens": 1, "temperature": 0}
        assert r["headers"]["Authorization"] == f"Bearer {KEY}"


def test_two_server_errors_then_success_is_retried(server, tok, texts, key, caplog):
    server.reset("ok")
    backend = api(server, tok, max_retries=3)
    _ = backend.server  # probed while the server answers
    b = server.reset("fail503", failures=2)
    with caplog.at_level(logging.DEBUG):
        [stats] = token_stats(backend, texts[-1:])
    assert len(b.requests) == 3 and len(stats) == len(tok(texts[-1])["input_ids"])
    assert "HTTP 503; retrying" in caplog.text and KEY not in caplog.text


@pytest.mark.slow
def test_a_server_that_never_answers_is_one_sentence(server, tok, texts, key, caplog):
    b = server.reset("hang", hang_s=3.0)
    with caplog.at_level(logging.DEBUG), pytest.raises(PddkitError) as err:
        token_stats(api(server, tok, timeout=0.5, max_retries=1), texts[-1:])
    one_sentence(err, contains=f"the server at {server.api_base}/completions did not answer "
                               "within 0.5 s (2 attempts)")
    assert len(b.requests) == 2 and KEY not in caplog.text


def test_a_server_without_prompt_logprobs_is_one_sentence(server, tok, texts, key):
    server.reset("no_logprobs")
    with pytest.raises(PddkitError) as err:
        token_stats(api(server, tok), texts[:3])
    one_sentence(err, contains="returns no log-probabilities of the prompt's tokens (its answer "
                               "to echo with logprobs holds none): only methods reading sampled "
                               "continuations (samia) can run on it")


def test_a_rejected_key_is_one_sentence_naming_the_variable(server, tok, texts, key, caplog):
    b = server.reset("401")
    with caplog.at_level(logging.DEBUG), pytest.raises(PddkitError) as err:
        token_stats(api(server, tok), texts[:2])
    one_sentence(err, contains=f"rejected the API key from {KEY_ENV} (HTTP 401)")
    assert len(b.requests) <= 2 and KEY not in caplog.text  # never retried


def test_no_key_set_sends_no_header_and_401_says_to_set_it(server, tok, texts, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    b = server.reset("401")
    with pytest.raises(PddkitError) as err:
        token_stats(api(server, tok), texts[-1:])
    one_sentence(err, contains=f"needs an API key (HTTP 401): set {KEY_ENV}")
    assert "Authorization" not in b.requests[0]["headers"]


def test_an_unknown_model_is_one_sentence(server, tok, texts, key):
    from pddkit.backends.openai_api import OpenAIBackend

    server.reset("ok")
    backend = OpenAIBackend("nope", server.api_base, tok, api_key_env=KEY_ENV)
    with pytest.raises(PddkitError) as err:
        token_stats(backend, texts[-1:])
    one_sentence(err, contains="model nope or the completions endpoint was not found at "
                               f"{server.api_base}/completions (HTTP 404: The model `nope` does "
                               "not exist.): is `api_base` the server's /v1 address, and the model "
                               "the name it serves?")


def test_an_unreachable_server_is_one_sentence_naming_the_url(tok, texts, key, caplog):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with caplog.at_level(logging.DEBUG), pytest.raises(PddkitError) as err:
        token_stats(api(None, tok, api_base=url, max_retries=2), texts[-1:])
    one_sentence(err, contains=f"could not reach the server at {url}/completions after 3 attempts")
    assert KEY not in caplog.text


def test_a_fatal_error_stops_every_other_request_at_once(server, tok, texts, key):
    """Four requests retrying HTTP 503s when a fifth is refused (HTTP 400): the error is
    raised and nobody sends another request (before: the others kept retrying for up to
    max_retries backoffs after the error was printed)."""
    server.reset("ok")
    backend = api(server, tok, concurrency=4, max_retries=40, backoff=0.01)
    _ = backend.server  # probed while the server answers
    b = server.reset("fail503", failures=10**6, fatal_at=6)
    t0 = time.perf_counter()
    with pytest.raises(PddkitError) as err:
        token_stats(backend, texts + texts)
    assert time.perf_counter() - t0 < 5.0
    one_sentence(err, contains="refused the request (HTTP 400: this request is malformed)")
    sent = len(b.requests)
    time.sleep(0.5)  # the old retry loops sent about five requests per thread in this time
    assert len(b.requests) <= sent + 3, (sent, len(b.requests))  # at most the ones in flight


@pytest.mark.parametrize("mode", ["misecho", "shifted", "vllm_shifted"])
def test_an_echo_that_is_not_the_prompt_sent_is_refused(server, tok, texts, key, mode):
    """A server scoring other tokens than the ids sent (another tokenizer behind the name)
    or dropping the start token is refused, never read off by position."""
    server.reset(mode)
    with pytest.raises(PddkitError) as err:  # "A short one.": no token is part of a character
        token_stats(api(server, tok), texts[-1:])
    msg = one_sentence(err, contains="it does not score the prompt pddkit sent")
    want = {"misecho": "at position 2 of", "shifted": "for the first echoed token",
            "vllm_shifted": "for the first prompt token"}[mode]
    assert want in msg, msg


def test_the_echo_check_takes_the_forms_servers_show_tokens_in(tok):
    """Raw ("Ġshort"), decoded (" short"), bare ("short") and vLLM's "token_id:N" echoes of
    the prompt sent are read; one wrong id is refused, naming its position."""
    from pddkit.backends.openai_api import prompt_logprobs

    ids = [tok.eos_token_id, *tok("A short one.", add_special_tokens=False)["input_ids"]]
    forms = {"raw": tok.convert_ids_to_tokens(ids), "decoded": [tok.decode([i]) for i in ids],
             "bare": [tok.decode([i]).strip() for i in ids], "ids": [f"token_id:{i}" for i in ids]}

    def answer(tokens):
        logprobs = {"token_logprobs": [None, -1.0, -2.0, -3.0, -4.0], "tokens": tokens}
        return {"choices": [{"logprobs": logprobs}]}

    for tokens in forms.values():
        got = prompt_logprobs(answer(tokens), ids, "http://x/v1/completions", tok)
        np.testing.assert_array_equal(got, [-1.0, -2.0, -3.0, -4.0])
    wrong = [*forms["ids"]]
    wrong[3] = f"token_id:{ids[3] + 1}"
    with pytest.raises(PddkitError, match=r"echoed 'token_id:\d+' at position 3 of 5 where id"):
        prompt_logprobs(answer(wrong), ids, "http://x/v1/completions", tok)


def test_credentials_in_the_url_are_refused(tok, key):
    from pddkit.backends.openai_api import OpenAIBackend

    with pytest.raises(PddkitError) as err:
        OpenAIBackend("tiny", "http://alice:hunter2@127.0.0.1:8000/v1", tok)
    msg = one_sentence(err, contains="must not carry credentials")
    assert "`api_key_env`" in msg and "hunter2" not in msg and "alice" not in msg


def test_texts_are_cut_to_the_context_the_server_reports(server, tok, texts, key, caplog):
    """/v1/models says max_model_len 40 (and longer prompts get HTTP 400, as from vLLM):
    texts keep 38 tokens (start token + 38 + the generated one = 40), flagged and counted."""
    server.reset("ok")
    server.max_model_len = 40
    try:
        with caplog.at_level(logging.WARNING):
            got = token_stats(api(server, tok, concurrency=3), texts)
    finally:
        server.max_model_len = None
    full = [len(tok(t)["input_ids"]) for t in texts]
    assert [s.truncated for s in got] == [n > 38 for n in full] and sum(n > 38 for n in full) >= 3
    assert [len(s) for s in got] == [min(n, 38) for n in full]
    assert max(len(r["body"]["prompt"]) for r in server.behaviour.requests) == 39
    assert f"{sum(n > 38 for n in full)} of {len(texts)} texts were longer than 38 tokens" \
        in caplog.text


@pytest.mark.slow
def test_a_checkpoint_swapped_under_the_same_name_is_not_served_from_the_cache(server, model, tok,
                                                                              texts, key, tmp_path):
    """The canary (the rounded log-probabilities of a fixed text) is in the fingerprint: a
    server now serving another checkpoint as "tiny" gets new statistics, the first one
    again finds its own, and each backend asks for the canary once."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from pddkit.backends.caching import CachingBackend
    from pddkit.cache import StatsStore

    torch.manual_seed(1)
    other = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_layer=2, n_embd=32, n_head=2,
                                       n_positions=256, initializer_range=0.5)).eval()

    def run():
        cached = CachingBackend(api(server, tok), StatsStore.open(tmp_path / "cache"))
        b = server.reset("ok")
        with cached:
            stats = token_stats(cached, texts[:3])
        return stats, cached.counts()["statistics"], len(b.requests)

    first, counts, sent = run()
    assert counts == (0, 3) and sent == PROBE + 3  # the probe (and canary), then the texts
    server.model = other
    try:
        swapped, counts, sent = run()
    finally:
        server.model = model
    assert counts == (0, 3) and sent == PROBE + 3
    for a, b in zip(first, swapped):
        assert np.abs(a.L - b.L).max() > 0.1  # the other checkpoint's statistics
    again, counts, sent = run()
    assert counts == (3, 0) and sent == PROBE  # the probe only
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.L, b.L)


@pytest.mark.slow
def test_python_api_scores_with_the_openai_backend_and_a_named_tokenizer(server, model, tok, texts,
                                                                         key, tmp_path):
    import pddkit
    from pddkit.backends.hf_loading import LoadedModel

    tok.save_pretrained(tmp_path / "tok")
    server.reset("ok")
    got = pddkit.score(texts, "tiny", methods="loss,mink:k=0.2", backend="openai",
                       api_base=server.api_base, api_key_env=KEY_ENV, tokenizer=str(tmp_path / "tok"))
    want = pddkit.score(texts, LoadedModel(model, tok, "tiny", "cpu", "float32"),
                        methods="loss,mink:k=0.2")
    allowed = _allowed(model, tok, texts)  # loss and mink: means of L, within dL
    for k in want:
        assert np.all(np.abs(got[k] - want[k]) <= allowed[k]), k
    assert len(server.behaviour.requests) == PROBE + len(texts)
    with pytest.raises(PddkitError, match="names the served model's tokenizer"):
        pddkit.score(texts, "tiny", backend="openai", api_base=server.api_base, tokenizer=tok)


@pytest.mark.slow
def test_load_spec_and_fingerprint_hold_no_secret(server, tok, texts, key, tmp_path):
    from pddkit.backends.openai_api import OpenAIBackend

    tok.save_pretrained(tmp_path / "tok")
    server.reset("ok")
    backend = OpenAIBackend.load("tiny", api_base=server.api_base + "/", tokenizer=str(tmp_path / "tok"),
                                 api_key_env=KEY_ENV, api_concurrency=2, max_length=20)
    assert get_backend("openai") is OpenAIBackend and backend.kind == "openai"
    caps = backend.capabilities
    assert not (caps.full_distribution or caps.hidden_states or caps.local_model)
    spec = backend.spec
    assert spec.kind == "openai" and spec.model == "tiny" and spec.option("api_key_env") == KEY_ENV
    assert KEY not in repr(spec) and KEY not in repr(backend) and KEY not in backend.fingerprint()
    again = BackendSpec(spec.kind, spec.model, spec.options).build()
    assert again.fingerprint() == backend.fingerprint()
    other = OpenAIBackend("tiny", "http://127.0.0.1:1/v1", tok)
    other.canary = backend.canary  # nothing serves that URL: the same canary, another URL
    assert backend.canary()[:3] == ["ids", "sent", "full"]  # the probe's findings are in it
    assert other.fingerprint() != backend.fingerprint()
    [stats] = token_stats(backend, texts[:1])
    assert len(stats) == 19 and stats.truncated
    assert backend.decode(stats.ids.tolist()) == tok.decode(tok(texts[0])["input_ids"][:19])
    with pytest.raises(PddkitError, match="needs `api_base`"):
        OpenAIBackend.load("tiny", tokenizer=str(tmp_path / "tok"))
    with pytest.raises(PddkitError, match="must be an http"):
        OpenAIBackend("tiny", "127.0.0.1:8000", tok)


@pytest.mark.slow
def test_pddkit_run_through_the_api_equals_the_hf_backend(server, model, tok, texts, key, tmp_path,
                                                         capsys):
    """End to end: `pddkit run --backend openai` scores what `--model DIR` scores, skips the
    methods that need the full distribution with a notice, and a rerun with the cache sends
    no request."""
    import json

    from cli_helpers import run_cli, write_jsonl

    model_dir = tmp_path / "tiny"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t, "label": i % 2} for i, t in enumerate(texts)])
    server.reset("ok")
    common = ["run", "--data", data, "--no-blind", "--no-report", "--bootstrap", "20"]
    api_run = [*common, "--backend", "openai", "--model", "tiny", "--api-base", server.api_base,
               "--api-key-env", KEY_ENV, "--tokenizer", model_dir, "--cache", tmp_path / "cache"]
    code, _, err = run_cli(capsys, *api_run, "--methods", "all", "--output", tmp_path / "api")
    assert code == 0, err
    assert "skipping minkpp" in err and "skipping surp" in err and KEY not in err
    code, _, err = run_cli(capsys, *common, "--model", model_dir, "--device", "cpu", "--dtype",
                           "float32", "--methods", "loss,zlib,lowercase,mink", "--output", tmp_path / "hf")
    assert code == 0, err

    def scores(d):
        rows = [json.loads(x) for x in (tmp_path / d / "scores.jsonl").read_text().splitlines()]
        return {k: np.array([r[k] for r in rows]) for k in ("loss", "zlib", "lowercase", "mink")}

    a, h = scores("api"), scores("hf")
    allowed = _allowed(model, tok, texts)
    for k in a:
        assert np.all(np.abs(a[k] - h[k]) <= allowed[k]), k
    res = json.loads((tmp_path / "api" / "results.json").read_text())
    assert res["models"]["target"]["backend"] == "openai" and KEY not in json.dumps(res)
    # saved notices speak the command line's language, as its log lines do
    ref = next(n for n in res["notices"] if n.startswith("skipping ref"))
    assert "--ref-model" in ref and "`ref_model`" not in ref, res["notices"]
    sent = len(server.behaviour.requests)
    assert sent == PROBE + 2 * len(texts)  # the probe (the canary), the target and lowercase passes
    code, _, err = run_cli(capsys, *api_run, "--methods", "loss,mink:k=0.5", "--output", tmp_path / "again")
    assert code == 0, err
    assert len(server.behaviour.requests) == sent + PROBE  # the probe; the texts from the cache


@pytest.mark.slow
def test_api_timeout_and_retries_reach_the_backend_from_the_cli(server, tok, texts, key, tmp_path,
                                                                 capsys):
    """`--api-timeout 0.5 --api-retries 1`: a server that never answers is given up after
    two attempts of half a second, as one sentence naming the timeout."""
    from cli_helpers import run_cli, write_jsonl

    tok.save_pretrained(tmp_path / "tok")
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in texts[:1]])
    b = server.reset("hang", hang_s=3.0)
    code, _, err = run_cli(capsys, "run", "--data", data, "--backend", "openai", "--model", "tiny",
                           "--api-base", server.api_base, "--api-key-env", KEY_ENV, "--tokenizer",
                           tmp_path / "tok", "--methods", "loss", "--api-timeout", "0.5",
                           "--api-retries", "1", "--api-concurrency", "1",
                           "--output", tmp_path / "out")
    assert code == 1
    assert "did not answer within 0.5 s (2 attempts)" in err and "Traceback" not in err, err
    assert len(b.requests) == 2 and KEY not in err


# -- the capability probe and servers that differ --------------------------------------


def test_the_probe_catches_an_echo_paired_with_the_wrong_positions(toy_world, texts, key):
    """A server echoing each token's log-probability from the position after it (as
    llama-cpp-python does for a prompt not starting with BOS) answers well-formed numbers:
    the probe compares the echo of the token it generated with its generation, finds them
    apart, and no text is scored with them (a trained model: a near-uniform one's positions
    differ too little to tell)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pddkit.backends.openai_api import OpenAIBackend

    model = AutoModelForCausalLM.from_pretrained(toy_world.target_dir).eval()
    tok = AutoTokenizer.from_pretrained(toy_world.target_dir)
    with FakeOpenAIServer(model, tokenizer=tok) as server:
        server.reset("ok")
        good = OpenAIBackend("tiny", server.api_base, tok, api_key_env=KEY_ENV).server
        assert good.echo == "full" and good.alignment_gap is not None
        assert good.alignment_gap <= 1e-5  # one float32 forward read twice
        server.reset("misaligned")
        backend = OpenAIBackend("tiny", server.api_base, tok, api_key_env=KEY_ENV)
        found = backend.server
        assert found.echo is None and found.alignment_gap > 0.05
        assert "its echoed log-probabilities are not the model's" in found.no_echo_reason
        assert not backend.capabilities.prompt_logprobs
        with pytest.raises(PddkitError) as err:
            token_stats(backend, texts[:2])
        one_sentence(err, contains="only methods reading sampled continuations (samia) can run on it")


def test_a_validation_error_is_not_retried_and_quotes_the_reason(server, tok, key):
    """HTTP 500 whose body is a request-validation error (llama-cpp-python's answer to token
    ids) is sent once, and its reason is the sentence; asked for ids only, pddkit says how
    to let it send text."""
    from pddkit.backends.openai_api import OpenAIBackend

    b = server.reset("validation500")
    backend = OpenAIBackend("tiny", server.api_base, tok, api_key_env=KEY_ENV, max_retries=5,
                            prompt_form="ids")
    with pytest.raises(PddkitError) as err:
        _ = backend.server
    one_sentence(err, contains="refused a prompt of token ids (HTTP 500: 82 validation errors for "
                               "CreateCompletionRequest: prompt.str: Input should be a valid "
                               "string): let pddkit send text (`api_prompt` auto or text)")
    assert len(b.requests) == 2  # ids with logprobs, then without: each sent once
    assert all("echo" not in r["body"] for r in b.requests)


def test_a_url_that_is_not_a_completions_server_is_one_sentence(tok, key):
    """A web page (HTML, HTTP 200) where the API should be: one sentence within seconds."""
    import http.server
    import threading

    from pddkit.backends.openai_api import OpenAIBackend

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>a blog</html>")

        do_POST = do_GET  # noqa: N815 (http.server names it)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        t0 = time.perf_counter()
        backend = OpenAIBackend("tiny", f"http://127.0.0.1:{httpd.server_address[1]}", tok,
                                api_key_env=KEY_ENV)
        with pytest.raises(PddkitError) as err:
            _ = backend.server
        assert time.perf_counter() - t0 < 5
        one_sentence(err, contains="answered with something that is not JSON: is it an "
                                   "OpenAI-compatible server, and does `api_base` end in /v1?")
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.slow
def test_a_server_without_prompt_logprobs_runs_only_samia(server, model, tok, texts, key, tmp_path,
                                                          capsys):
    """`pddkit run --methods loss` on a server that only samples: one sentence naming what
    can run, before any text is sent; `--methods samia` runs on it."""
    import json

    from cli_helpers import run_cli, write_jsonl

    tok.save_pretrained(tmp_path / "tok")
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t, "label": i % 2} for i, t in enumerate(texts)])
    common = ["run", "--data", data, "--backend", "openai", "--model", "tiny", "--api-base",
              server.api_base, "--api-key-env", KEY_ENV, "--tokenizer", tmp_path / "tok",
              "--no-blind", "--no-report", "--bootstrap", "10"]
    b = server.reset("no_logprobs")
    code, _, err = run_cli(capsys, *common, "--methods", "loss,zlib", "--output", tmp_path / "a")
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        "pddkit: error: --methods 'loss,zlib' selects no method this server can run: it returns "
        "no log-probabilities of the text's tokens, so only decop, ngram, samia can run on it"), err
    assert len(b.requests) <= PROBE + 1  # the probe's, no text's
    code, _, err = run_cli(capsys, *common, "--methods", "samia:samples=2,max_new_tokens=4",
                           "--output", tmp_path / "b")
    assert code == 0, err
    res = json.loads((tmp_path / "b" / "results.json").read_text())
    assert res["models"]["target"]["server"]["echo"] is None
    assert "server at" in err and "prompt log-probabilities: none" in err


def test_recall_is_skipped_where_a_texts_first_token_has_no_log_probability():
    """On a server that gives no log-probability for a text's first token (the probe's
    `first_token`), LL(x | P) and LL(x) would not cover the same tokens: recall and
    conrecall are skipped with a notice; loss runs."""
    from pddkit.backends.base import Capabilities
    from pddkit.methods.base import Need, resolve_methods

    caps = Capabilities(full_distribution=False, hidden_states=False, local_model=False,
                        first_token=False)
    notices: list[str] = []
    calls = resolve_methods("loss,recall,conrecall", set(Need), notices, capabilities=caps)
    assert [c.spec.name for c in calls] == ["loss"]
    assert notices == [f"skipping {m}: it needs the log-probability of a text's first token, "
                       "which this backend does not give" for m in ("recall", "conrecall")]
