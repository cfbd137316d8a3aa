"""An OpenAI-compatible /v1/completions server on 127.0.0.1 for tests: it answers with the
prompt log-probabilities of a local causal LM (token ids in, echo + logprobs out, the echoed
tokens as strings when it has the tokenizer), reports its context on GET /v1/models (vLLM's
`max_model_len`, refusing longer prompts with HTTP 400 as vLLM does), can swap the model it
serves under the same name (`model`), and can be told to misbehave the way real servers do
(503s, no answer, no log-probabilities, 401, a fatal 400 amid 503s, a wrong or shifted echo).

Prompts are token ids or text (tokenised with its tokenizer, special tokens parsed, no
start token added). The mode "text_only" refuses token ids as llama-cpp-python does (HTTP
500, a pydantic validation error); "hidden_start" echoes as llama-cpp-python does when the
model adds a BOS itself (the start token left out, the first text token's entry null);
"misaligned" pairs each echoed token with the next position's distribution, as
llama-cpp-python does for a prompt not starting with BOS (its generated token left out);
"validation500" answers every request with llama-cpp-python's validation error;
"text_adds_start" refuses token ids and puts its own start token before every text prompt
(its tokenizer's BOS, or end token without one) and echoes it.

A request without `echo` is a sampling request (samia): `n` continuations drawn with the
request's `seed`, `temperature`, `top_k` and `max_tokens`, ending at the end token. The
modes "ignore_n" (one choice whatever `n`) and "reject_top_k" (HTTP 400 naming top_k, as
OpenAI's API answers an unknown argument) give, like "no_logprobs", no log-probabilities.

A request with `logit_bias` (decop) gets one greedy token of the biased logits and its top
`logprobs` entries keyed by decoded text; "no_logprobs" gives the token's text alone, and
"reject_logit_bias" refuses the argument with HTTP 400."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("ok", "vllm", "no_generated", "fail503", "hang", "no_logprobs", "401", "404",
         "misecho", "shifted", "vllm_shifted", "ignore_n", "reject_top_k", "text_only",
         "hidden_start", "misaligned", "validation500", "text_adds_start", "reject_logit_bias")
VALIDATION_500 = ("82 validation errors for CreateCompletionRequest\nprompt.str\n  Input should be "
                  "a valid string [type=string_type, input_value=[50256, 464], input_type=list]\n"
                  "prompt.list[str].0\n  Input should be a valid string [type=string_type]")
NO_LOGPROBS = ("no_logprobs", "ignore_n", "reject_top_k")  # servers that only sample


@dataclass
class Behaviour:
    """What the server does with the next requests (tests set it; `requests` records them)."""

    mode: str = "ok"
    failures: int = 2  # fail503: this many HTTP 503 answers, then normal ones
    fatal_at: int | None = None  # fail503: the request with this number gets HTTP 400
    hang_s: float = 5.0  # hang: wait this long (or until the server stops) before answering
    requests: list[dict] = field(default_factory=list)  # {"path", "headers", "body"}


class FakeOpenAIServer:
    """Serves `model` (a transformers causal LM on CPU) as `name`; `with` starts and stops it."""

    def __init__(self, model, name: str = "tiny", tokenizer=None,
                 max_model_len: int | None = None) -> None:
        self.model, self.name, self.tokenizer = model, name, tokenizer
        self.max_model_len = max_model_len
        self.behaviour = Behaviour()
        self._lock = threading.Lock()  # one forward at a time, counters updated atomically
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                status, answer = server.answer(self.path, dict(self.headers), body)
                if status is None:  # hang: the client has given up by now
                    return
                data = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:
                if self.path != "/v1/models":
                    self.send_error(404)
                    return
                entry = {"id": server.name, "object": "model", "owned_by": "pddkit-tests"}
                if server.max_model_len is not None:
                    entry["max_model_len"] = server.max_model_len
                data = json.dumps({"object": "list", "data": [entry]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.api_base = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self, mode: str = "ok", **settings) -> Behaviour:
        assert mode in MODES, mode
        self.behaviour = Behaviour(mode=mode, **settings)
        return self.behaviour

    def answer(self, path: str, headers: dict, body: dict):
        b = self.behaviour
        with self._lock:
            b.requests.append({"path": path, "headers": headers, "body": body})
            count = len(b.requests)
        if path != "/v1/completions" or body.get("model") != self.name or b.mode == "404":
            return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}}
        if b.mode == "401":
            return 401, {"error": {"message": "Incorrect API key provided."}}
        if b.mode == "fail503" and count == b.fatal_at:
            return 400, {"error": {"message": "this request is malformed"}}
        if b.mode == "fail503" and count <= b.failures:
            return 503, {"error": {"message": "the server is busy"}}
        if b.mode == "hang":
            self._stop.wait(b.hang_s)
            return None, None
        if b.mode == "validation500" or (b.mode in ("text_only", "text_adds_start")
                                         and not isinstance(body["prompt"], str)):
            return 500, {"error": {"message": VALIDATION_500}}
        if isinstance(body["prompt"], str):
            prompt = list(self.tokenizer(body["prompt"], add_special_tokens=False)["input_ids"])
            if b.mode == "text_adds_start":
                own = self.tokenizer.bos_token_id
                prompt = [self.tokenizer.eos_token_id if own is None else own, *prompt]
        else:
            prompt = [int(t) for t in body["prompt"]]
        limit = self.max_model_len
        if limit is not None and len(prompt) + int(body.get("max_tokens", 16)) > limit:
            return 400, {"error": {"message": f"This model's maximum context length is {limit} "
                                              f"tokens. However, you requested "
                                              f"{len(prompt) + body.get('max_tokens', 16)} tokens"}}
        if not body.get("echo") and "logit_bias" in body:  # decop's one-token answer
            if b.mode == "reject_logit_bias":
                return 400, {"error": {"message": "Unrecognized request argument supplied: logit_bias"}}
            return 200, self.biased(prompt, body, count)
        if not body.get("echo"):
            if b.mode == "reject_top_k" and "top_k" in body:
                return 400, {"error": {"message": "Unrecognized request argument supplied: top_k"}}
            n = 1 if b.mode == "ignore_n" else int(body.get("n", 1))
            texts = self.sample(prompt, n, int(body.get("max_tokens", 16)),
                                float(body.get("temperature", 1.0)), body.get("top_k"),
                                int(body.get("seed", 0)))
            greedy = None
            if body.get("logprobs") and b.mode not in NO_LOGPROBS and float(body.get("temperature", 1)) == 0:
                _, gen_lp, gen_id = self.score(prompt)  # the generated token's own log-probability
                # the token raw, as a vocabulary entry ("Ġthe"; some servers show it so)
                greedy = {"tokens": self.tokenizer.convert_ids_to_tokens([gen_id]),
                          "token_logprobs": [gen_lp],
                          "top_logprobs": [], "text_offset": []}
            return 200, {"id": f"cmpl-{count}", "object": "text_completion", "model": self.name,
                         "choices": [{"index": i, "text": t, "logprobs": greedy,
                                      "finish_reason": "stop"} for i, t in enumerate(texts)]}
        logprobs, gen_lp, gen_id = self.score(prompt)
        text = {"index": 0, "text": "", "finish_reason": "length"}
        if b.mode in NO_LOGPROBS:
            choice = {**text, "logprobs": None}
        elif b.mode in ("vllm", "vllm_shifted"):  # vLLM's extra field, next to a null `logprobs`
            entries = [None] + [{str(t): {"logprob": lp, "rank": 1, "decoded_token": "?"}}
                                for t, lp in zip(prompt[1:], logprobs)]
            if b.mode == "vllm_shifted":  # the start token dropped, the generated one added
                entries = [{str(t): {"logprob": lp, "rank": 1}}
                           for t, lp in zip(prompt[1:], logprobs)] + [{str(gen_id): {"logprob": gen_lp}}]
            choice = {**text, "logprobs": None, "prompt_logprobs": entries}
        else:
            shown = [*prompt, gen_id]
            values = [None, *logprobs, gen_lp]
            if b.mode == "shifted":  # echoes the text without the start token: one entry short
                shown, values = shown[1:], values[1:]
            if b.mode == "no_generated":
                shown, values = shown[:-1], values[:-1]
            if b.mode == "hidden_start":  # llama-cpp-python, BOS added by the server
                shown, values = shown[1:], [None, *values[2:]]
            if b.mode == "misaligned":  # token t paired with the distribution after it
                shown, values = prompt, [None, *self.score(prompt, shift=1)[0]]
            tokens = [] if self.tokenizer is None else [self.tokenizer.decode([t]) for t in shown]
            if b.mode == "misecho" and tokens:  # the third token is not the one sent
                tokens[2] = self.tokenizer.decode([(shown[2] + 1) % len(self.tokenizer)])
            choice = {**text, "logprobs": {"token_logprobs": values, "tokens": tokens,
                                           "top_logprobs": [], "text_offset": []}}
        return 200, {"id": f"cmpl-{count}", "object": "text_completion", "model": self.name,
                     "choices": [choice]}

    def biased(self, prompt: list[int], body: dict, count: int) -> dict:
        """One greedy token after `logit_bias` is added to the logits (decop), with the top
        `logprobs` log-probabilities of the biased distribution keyed by their decoded text
        (as OpenAI's API); a mode without log-probabilities gives the token's text only."""
        import torch

        with self._lock, torch.inference_mode():
            logits = self.model(input_ids=torch.tensor([prompt])).logits[0, -1].float()
            for token, bias in body["logit_bias"].items():
                logits[int(token)] += float(bias)
            logp = torch.log_softmax(logits, dim=-1)
        gen = int(logp.argmax())
        k = int(body.get("logprobs") or 0)
        lp = None
        if k and self.behaviour.mode not in NO_LOGPROBS:
            top = torch.topk(logp, k)
            lp = {"tokens": [self.tokenizer.decode([gen])], "token_logprobs": [float(logp[gen])],
                  "top_logprobs": [{self.tokenizer.decode([int(i)]): float(v)
                                    for v, i in zip(top.values, top.indices)}],
                  "text_offset": [0]}
        return {"id": f"cmpl-{count}", "object": "text_completion", "model": self.name,
                "choices": [{"index": 0, "text": self.tokenizer.decode([gen]), "logprobs": lp,
                             "finish_reason": "length"}]}

    def score(self, prompt: list[int], shift: int = 0):
        """log P(prompt[t] | prompt[:t]) for t >= 1 (shift=1: read off the distribution at
        t instead, a misaligned echo), and log P and id of the greedy next token."""
        import torch

        with self._lock, torch.inference_mode():
            logits = self.model(input_ids=torch.tensor([prompt])).logits[0].float()
            logp = torch.log_softmax(logits, dim=-1)  # [T, V]
            rows = logp[shift:len(prompt) - 1 + shift]  # [T - 1, V]
            L = rows.gather(1, torch.tensor(prompt[1:])[:, None])[:, 0]
            return [float(x) for x in L], float(logp[-1].max()), int(logp[-1].argmax())

    def sample(self, prompt: list[int], n: int, max_tokens: int, temperature: float,
               top_k: int | None, seed: int) -> list[str]:
        """`n` continuations of `prompt` (temperature 0: greedy), decoded without the end token."""
        import torch

        gen = torch.Generator().manual_seed(seed)
        end = getattr(self.tokenizer, "eos_token_id", None)
        out = []
        with self._lock, torch.inference_mode():
            for _ in range(n):
                seq, new = list(prompt), []
                for _ in range(max_tokens):
                    logits = self.model(input_ids=torch.tensor([seq])).logits[0, -1].float()
                    if temperature == 0:
                        token = int(logits.argmax())
                    else:
                        logits = logits / temperature
                        if top_k:
                            kth = torch.topk(logits, int(top_k)).values[-1]
                            logits = logits.masked_fill(logits < kth, float("-inf"))
                        token = int(torch.multinomial(logits.softmax(-1), 1, generator=gen))
                    if token == end:
                        break
                    seq.append(token)
                    new.append(token)
                out.append(self.tokenizer.decode(new, skip_special_tokens=True))
        return out
