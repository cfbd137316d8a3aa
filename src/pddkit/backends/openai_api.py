"""The `openai` backend: prompt log-probabilities from an OpenAI-compatible server. Texts
are tokenised here, cut to the served context, and sent to POST {api_base}/completions with
echo, logprobs=1, max_tokens=1, temperature=0: as token ids (start token first, so the
server re-tokenises nothing) where the server takes them, else as text, the server's tokens
then checked against the local tokenizer's one by one. `token_logprobs` or vLLM's
`prompt_logprobs` give L (openai_echo.py reads the layouts servers use). H and M2 need the
full distribution: they are NaN. The capability probe (openai_probe.py) runs before the
first text; the HTTP side is openai_client.py.

`sample` (samia) asks the same endpoint for sampled continuations (n, temperature, top_p,
top_k, max_tokens, seed): it works on a server that gives no log-probabilities at all,
whose fingerprint then holds its greedy continuation of the canary text instead.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pddkit import progress
from pddkit.backends.base import STATS_FORMAT, BackendSpec, Capabilities, Encoded
from pddkit.backends.openai_client import (
    CompletionsClient,
    RefusedError,
    check_url,
    run_concurrently,
    too_long,
)
from pddkit.backends.openai_echo import NoLogprobsError, completion_texts, prompt_logprobs
from pddkit.backends.openai_probe import as_sent
from pddkit.backends.registry import register_backend
from pddkit.errors import PddkitError
from pddkit.stats import TokenStats

logger = logging.getLogger(__name__)

# the canary: a fixed text whose prompt log-probabilities join the fingerprint, so a server
# that now serves another checkpoint under the same name never gets the old statistics
CANARY_TEXT = ("The old lighthouse keeper counted seventeen ships before the storm, then wrote "
               "their names in a ledger that nobody has read since 1894.")
CANARY_DECIMALS = 2  # rounded to 0.01 nats: a server's run-to-run noise keeps its key
_UNKNOWN = object()


@dataclass(frozen=True)
class _TokenizerOnly:
    """What backends.stats_pass.encode reads of a LoadedModel: the tokenizer, and the
    context a prompt may fill (None when the server does not say: only max_length cuts)."""

    tokenizer: object
    name: str
    context_length: int | None = None


@register_backend("openai")
class OpenAIBackend:
    """A model served behind an OpenAI-compatible /v1/completions endpoint, with its
    tokenizer loaded here."""

    # what such a server may give; the probe narrows it per server (`server`)
    capabilities = Capabilities(full_distribution=False, hidden_states=False, local_model=False,
                                sampling=True)
    probes = True  # the engine probes it before planning (engine/prepare.py)
    canary_text = CANARY_TEXT
    # the run options `load` takes (engine.config.RunConfig field names)
    OPTIONS = ("api_base", "tokenizer", "api_key_env", "api_concurrency", "api_timeout",
               "api_retries", "api_prompt", "max_length", "local_files_only", "trust_remote_code")

    def __init__(self, model: str, api_base: str, tokenizer, *,
                 api_key_env: str | None = "OPENAI_API_KEY", concurrency: int = 8,
                 timeout: float = 60.0, max_retries: int = 5, max_length: int | None = None,
                 backoff: float = 0.5, seed: int = 0, spec: BackendSpec | None = None,
                 prompt_form: str = "auto") -> None:
        from pddkit.backends.hf_tokenizers import start_token_id
        from pddkit.backends.openai_probe import PROMPT_FORMS

        api_base = check_url(api_base)
        checks = [(concurrency >= 1, f"concurrency must be at least 1, not {concurrency}"),
                  (timeout > 0, f"timeout must be positive, not {timeout}"),
                  (max_retries >= 0, f"max_retries must be 0 or more, not {max_retries}"),
                  (max_length is None or max_length >= 2,
                   f"max_length {max_length} leaves no room for a text token after the start token"),
                  (prompt_form in PROMPT_FORMS,
                   f"`api_prompt` must be one of {', '.join(PROMPT_FORMS)}, not {prompt_form!r}")]
        for ok, message in checks:
            if not ok:
                raise PddkitError(message)
        self.name = model
        self.api_base = api_base
        self.tokenizer = tokenizer
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.max_length = max_length
        self.start_id = start_token_id(tokenizer, model)
        self.seed = seed
        key = (os.environ.get(api_key_env) or None) if api_key_env else None
        if api_key_env and key is None:
            logger.info("%s is not set: requests to %s carry no API key", api_key_env,
                        self.api_base)
        self.client = CompletionsClient(self.api_base, model, api_key_env=api_key_env,
                                        timeout=timeout, max_retries=max_retries,
                                        backoff=backoff, api_key=key)
        self._spec = spec
        self.prompt_form = prompt_form
        self._probe = None  # openai_probe.ServerProbe, found before the first text
        self._probing = threading.Lock()  # concurrent requests wait for the one probe
        self._fingerprint: str | None = None
        self._served = _UNKNOWN  # the served context (GET /models), asked once

    def __repr__(self) -> str:
        return (f"OpenAIBackend(model={self.name!r}, api_base={self.api_base!r}, "
                f"api_key_env={self.api_key_env!r})")

    @classmethod
    def load(cls, model: str, *, api_base: str | None = None, tokenizer: str | None = None,
             api_key_env: str | None = "OPENAI_API_KEY", api_concurrency: int = 8,
             api_timeout: float = 60.0, api_retries: int = 5, api_prompt: str = "auto",
             max_length: int | None = None, local_files_only: bool = False,
             trust_remote_code: bool = False, role: str = "model") -> OpenAIBackend:
        """`model` is the served model's name; its tokenizer is loaded from `tokenizer`
        (a directory or hub id, default: the model name)."""
        from pddkit.backends.hf_tokenizers import load_tokenizer

        if not api_base:
            raise PddkitError(f"the openai backend of {role} {model} needs `api_base`, the "
                              "server's URL (e.g. http://127.0.0.1:8000/v1)")
        options = {"api_base": api_base, "tokenizer": tokenizer, "api_key_env": api_key_env,
                   "api_concurrency": api_concurrency, "api_timeout": api_timeout,
                   "api_retries": api_retries, "api_prompt": api_prompt, "max_length": max_length,
                   "local_files_only": local_files_only, "trust_remote_code": trust_remote_code,
                   "role": role}
        tok = load_tokenizer(tokenizer or model, trust_remote_code=trust_remote_code,
                             local_files_only=local_files_only)
        return cls(model, api_base, tok, api_key_env=api_key_env, concurrency=api_concurrency,
                   timeout=api_timeout, max_retries=api_retries, max_length=max_length,
                   spec=BackendSpec("openai", model, tuple(sorted(options.items()))),
                   prompt_form=api_prompt)

    @classmethod
    def from_spec(cls, spec: BackendSpec) -> OpenAIBackend:
        return cls.load(spec.model, **dict(spec.options))

    @property
    def spec(self) -> BackendSpec | None:
        """How to build this backend again elsewhere (the key is read from the environment
        there); None for a tokenizer handed over in memory."""
        return self._spec

    def fingerprint(self) -> str:
        """The URL, served name, tokenizer, start token, statistics format, and the canary:
        the prompt form and echo layout the probe found and the served model's rounded
        log-probabilities of the probe's tokens (no request beyond the probe's), so that
        another checkpoint served under the same name gets another key."""
        if self._fingerprint is None:
            from pddkit.cache.fingerprint import fingerprint_of, tokenizer_digest

            self._fingerprint = fingerprint_of({
                "backend": "openai", "stats_format": int(STATS_FORMAT),
                "api_base": self.api_base, "model": self.name,
                "tokenizer": tokenizer_digest(self.tokenizer), "start_id": int(self.start_id),
                "canary": self.canary()})
        return self._fingerprint

    @property
    def server(self):
        """What the server takes and gives (openai_probe.ServerProbe), probed once, before
        the first text is sent; narrows `capabilities` to what this server gives."""
        with self._probing:
            if self._probe is None:
                from dataclasses import replace

                from pddkit.backends.openai_probe import probe

                found = probe(self, self.prompt_form)
                logger.info("%s", found.summary(self.api_base))
                self.capabilities = replace(type(self).capabilities,
                                            prompt_logprobs=found.prompt_logprobs,
                                            first_token=found.first_token)
                self._probe = found
        return self._probe

    def server_notices(self) -> list[str]:
        """What the probe found that changes what is scored, one line each (results.json)."""
        found, where = self.server, self.client.url
        lines = []
        if found.ids_refused:
            lines.append(f"the server at {where} refused token-id prompts ({found.ids_refused}): "
                         "texts were sent as text and the server's tokens checked against "
                         "the tokenizer's, token by token")
        if found.prompt_logprobs and not found.first_token:
            lines.append(f"the server at {where} gives no log-probability for a text's first "
                         "token (it echoes that token's as null, as llama-cpp-python does): "
                         "each text is scored from its second token, the first kept as context")
        return lines

    def _prompt(self, prefix: Sequence[int], seq: Sequence[int]):
        """What is sent for [start] + prefix + seq in the server's prompt form."""
        from pddkit.backends.openai_probe import text_prompt

        found = self.server
        if found.prompt_form == "ids":
            return [self.start_id, *map(int, prefix), *map(int, seq)]
        return text_prompt(self, prefix, seq, found.start == "server")

    def canary(self) -> list:
        """What the probe found of the served model: the prompt form, start token and echo
        layout, and the log-probabilities the server echoed for the probe's tokens (the
        start of CANARY_TEXT) rounded to CANARY_DECIMALS; a server that only samples gives
        its greedy continuation of CANARY_TEXT instead (one request)."""
        found = self.server
        head = [found.prompt_form, found.start, found.echo]
        if found.echoed is not None:
            return [*head, *(None if np.isnan(x) else round(x, CANARY_DECIMALS) + 0.0  # no -0.0
                             for x in found.echoed)]
        ids = self.encode([CANARY_TEXT], ["the canary text"], what="canary").ids[0]
        ids = ids[:max(1, len(ids) - 8)]  # room for the 8 tokens in a short served context
        answer = self.client.post({"model": self.name, "prompt": self._prompt((), ids),
                                   "max_tokens": 8, "temperature": 0}, random.Random(self.seed))
        return [*head, "greedy", *completion_texts(answer, self.client.url)]

    def context_length(self) -> int | None:
        """The tokens a prompt may hold, start token included: the context the server
        reports (GET {api_base}/models) less the one token it generates; None when unknown."""
        if self._served is _UNKNOWN:
            self._served = self.client.served_context()
            if self._served is not None:
                logger.info("%s serves %s with a context of %d tokens", self.api_base, self.name,
                            self._served)
        return None if self._served is None else self._served - 1

    def encode(self, texts: Sequence[str], names: Sequence[str], what: str = "statistics") -> Encoded:
        """Token ids cut to `max_length` and to the served context (counted and logged as
        the hf backend does)."""
        from pddkit.backends.stats_pass import encode

        view = _TokenizerOnly(self.tokenizer, self.name, self.context_length())
        enc = encode(view, texts, names, self.max_length, what=what)
        return Encoded(ids=enc.ids, truncated=enc.truncated)

    def tokenize(self, text: str) -> list[int]:
        """Token ids of `text` (add_special_tokens=False), never cut (recall's shots)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def added_prefix_ids(self) -> list[int]:
        """The special ids the tokenizer puts before a text by default (its BOS, if it adds
        one): recall's `variant=reference`."""
        from pddkit.backends.prefix_pass import added_prefix

        return added_prefix(self.tokenizer)

    def context_limit(self) -> int | None:
        """Tokens a prompt may hold, start token included: the served context (less the one
        token generated) and `max_length`."""
        limit = self.context_length()
        if self.max_length is not None:
            limit = self.max_length if limit is None else min(limit, self.max_length)
        return limit

    def stats_given_prefix(self, prefix: Sequence[int], ids: Sequence[Sequence[int]],
                           truncated: Sequence[bool], desc: str = "conditioned pass") -> list[TokenStats]:
        """TokenStats of each x given `prefix` (the shots): the prompt log-probabilities of
        [start] + P + x, x's positions kept. A server may reuse the prefix it has seen
        (vLLM's prefix caching); each request still sends it."""
        return self.stats_for_ids(ids, truncated, desc=desc, prefix=prefix)

    def stats_for_ids(self, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                      desc: str = "statistics", prefix: Sequence[int] = ()) -> list[TokenStats]:
        """One request per text, `concurrency` at a time; results in order. The first
        request that fails for good stops all others (openai_client.run_concurrently).
        `prefix`: token ids sent before each text and not scored (stats_given_prefix)."""
        head = [int(t) for t in prefix]
        seqs = [[int(t) for t in s] for s in ids]
        out: list[TokenStats | None] = [None] * len(seqs)
        if not seqs:
            return []
        _ = self.server  # the probe, here and once, before the concurrent requests
        bar = progress.bar(total=sum(len(s) for s in seqs), desc=desc, unit="tok")
        lock = threading.Lock()

        def one(i: int, stop: threading.Event) -> None:
            rng = random.Random(self.seed * 1_000_003 + i)  # jitter, reproducible
            out[i] = self._stats(seqs[i], bool(truncated[i]), rng, stop, head)
            with lock:
                bar.update(len(seqs[i]))

        try:
            run_concurrently(len(seqs), one, self.concurrency)
        finally:
            bar.close()
        return out  # type: ignore[return-value]

    def _stats(self, seq: list[int], truncated: bool, rng: random.Random,
               stop: threading.Event | None, prefix: Sequence[int] = ()) -> TokenStats:
        """The statistics of `seq` (after [start] + prefix): L from the echo; a server that
        gives no log-probability for the first prompt token after the start token (probe:
        `first_token`) scores the text from its second token when there is no prefix."""
        found = self.server
        if not found.prompt_logprobs:
            raise NoLogprobsError(f"the server at {self.client.url} returns no log-probabilities "
                                  f"of the prompt's tokens ({found.no_echo_reason}): only methods "
                                  "reading sampled continuations (samia) can run on it")
        if found.prompt_form == "text":  # the tokens the server will find in the text sent
            seq = as_sent(self, prefix, seq)
        nan = np.full(len(seq), np.nan, dtype=np.float32)
        if not seq:  # nothing to score (encode never gives one)
            return TokenStats(np.zeros(0, dtype=np.int64), nan, nan, nan.copy(), truncated)
        meant = [self.start_id, *prefix, *seq]
        payload = {"model": self.name, "prompt": self._prompt(prefix, seq), "echo": True,
                   "logprobs": 1, "max_tokens": 1, "temperature": 0}
        try:
            answer = self.client.post(payload, rng, stop)
        except RefusedError as e:
            raise too_long(e, self.client.url, len(meant)) or e from None
        L = prompt_logprobs(answer, meant, self.client.url, self.tokenizer,
                            layout=found.echo if found.echo != "prompt_logprobs" else "full",
                            text_form=found.prompt_form == "text")[len(prefix):]
        ids = np.asarray(seq, dtype=np.int64)
        if np.isnan(L[0]):  # the first token's log-probability was not given: context
            ids, L, nan = ids[1:], L[1:], nan[1:]
        return TokenStats(ids, L, nan, nan.copy(), truncated)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def sample(self, prompts: Sequence[str], n: int, top_k: int, top_p: float,
               temperature: float, max_new_tokens: int | None, seeds: Sequence[int],
               names: Sequence[str] | None = None):
        """`n` continuations of each prompt (backends.sampling.Sampled): POST /completions
        with the prompt in the server's form (ids, start token first, or text), n,
        temperature, top_p, top_k, max_tokens (prompt + continuation at most 1024 tokens
        and the served context, or `max_new_tokens`) and the text's seed. A server that
        returns fewer than n choices is asked again for the rest (seed + 1, + 2, ...); a
        server that refuses top_k is asked without it (sampling from the whole
        distribution): one notice each, nothing lost. A server that accepts top_k and
        silently ignores it cannot be told apart."""
        from pddkit.backends.sampling import Sampled, continuation_budget

        names = list(names) if names is not None else [f"prompt {i + 1}" for i in range(len(prompts))]
        _ = self.server  # the probe, here and once, before the concurrent requests
        enc = self.encode(prompts, names, what="sampling prompts")
        served = self.context_length()
        context = None if served is None else served + 1  # context_length() keeps one for the answer
        out: list[tuple[str, ...] | None] = [None] * len(prompts)
        state = {"top_k": True, "refusal": "", "again": 0}
        lock = threading.Lock()
        bar = progress.bar(total=len(prompts), desc="sampling", unit="text")

        def one(i: int, stop: threading.Event) -> None:
            ids = enc.ids[i] if self.server.prompt_form == "ids" else as_sent(self, (), enc.ids[i])
            prompt = self._prompt((), ids)
            budget = continuation_budget(len(ids) + 1, context, max_new_tokens)
            texts: list[str] = []
            rng, extra = random.Random(seeds[i]), 0
            while budget and len(texts) < n:
                payload = {"model": self.name, "prompt": prompt, "n": n - len(texts),
                           "temperature": temperature, "top_p": top_p, "max_tokens": budget,
                           "seed": (int(seeds[i]) + extra) % 2**31}
                if state["top_k"] and top_k > 0:  # 0: no top-k (ngram), not sent
                    payload["top_k"] = top_k
                try:
                    answer = self.client.post(payload, rng, stop)
                except RefusedError as e:
                    if "top_k" not in payload or "top_k" not in e.detail:
                        raise
                    with lock:
                        state["top_k"], state["refusal"] = False, e.detail.lstrip(": ")
                    continue
                texts += completion_texts(answer, self.client.url)[:n - len(texts)]
                if len(texts) < n:
                    extra += 1
                    with lock:
                        state["again"] += 1
            out[i] = tuple(texts) if budget else ("",) * n
            with lock:
                bar.update(1)

        try:
            run_concurrently(len(prompts), one, self.concurrency)
        finally:
            bar.close()
        notices = []
        if not state["top_k"]:
            notices.append(f"the server at {self.client.url} refused top_k ({state['refusal']}): "
                           f"continuations were sampled without top-k, from the whole "
                           f"distribution at top_p {top_p:g}")
        if state["again"]:
            notices.append(f"the server at {self.client.url} returned fewer continuations than "
                           f"the n={n} asked for (it ignores n): pddkit asked "
                           f"{state['again']} more times, so every text has its {n}")
        return Sampled(tuple(out), tuple(notices))  # type: ignore[arg-type]
