"""The `openai` backend: prompt log-probabilities from an OpenAI-compatible server (issue 10,
section 3). Texts are tokenised here and sent as token ids (start token first, so the server
re-tokenises nothing) to POST {api_base}/completions with echo, logprobs=1, max_tokens=1,
temperature=0; `token_logprobs` (first entry null, last the generated token, both dropped)
or vLLM's `prompt_logprobs` give L. H and M2 need the full distribution: they are NaN.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from http.client import HTTPException

import numpy as np

from pddkit import progress
from pddkit.backends import register_backend
from pddkit.backends.base import STATS_FORMAT, BackendSpec, Capabilities, Encoded
from pddkit.errors import PddkitError
from pddkit.stats import TokenStats

logger = logging.getLogger(__name__)

MAX_BACKOFF = 30.0  # seconds, the longest wait between two attempts


def public_url(url: str) -> str:
    """`url` without user:password@ (never shown, never part of a fingerprint)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


@dataclass(frozen=True)
class _TokenizerOnly:
    """What backends.stats_pass.encode reads of a LoadedModel: the API model's context is
    not known here, so only max_length cuts texts."""

    tokenizer: object
    name: str
    context_length: int | None = None


@dataclass(frozen=True)
class CompletionsClient:
    """POST {api_base}/completions with retries (exponential backoff with jitter) on HTTP
    429 and 5xx, connection errors and timeouts; every other failure is one sentence."""

    api_base: str
    model: str
    api_key_env: str | None = None
    timeout: float = 60.0
    max_retries: int = 5
    backoff: float = 0.5  # seconds before the first retry, doubled each time
    api_key: str | None = field(default=None, repr=False)  # never logged, never stored

    @property
    def url(self) -> str:
        return self.api_base + "/completions"

    def _say(self, text: str) -> str:
        """`text` with the key scrubbed, in case a server echoes it back."""
        return text.replace(self.api_key, "***") if self.api_key else text

    def _request(self, payload: dict) -> urllib.request.Request:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return urllib.request.Request(self.url, data=json.dumps(payload).encode("utf-8"),
                                      headers=headers, method="POST")

    def post(self, payload: dict, rng: random.Random) -> dict:
        """The server's JSON answer to `payload`."""
        where = public_url(self.url)
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            retry_after = None
            try:
                with urllib.request.urlopen(self._request(payload), timeout=self.timeout) as r:
                    body = r.read()
                try:
                    return json.loads(body)
                except ValueError:
                    raise PddkitError(f"the server at {where} answered with something that is "
                                      "not JSON") from None
            except urllib.error.HTTPError as e:
                detail = _error_detail(e)
                e.close()
                if e.code in (401, 403):
                    var = self.api_key_env or "the API key variable"
                    if self.api_key:
                        raise PddkitError(f"the server at {where} rejected the API key from "
                                          f"{var} (HTTP {e.code})") from None
                    raise PddkitError(f"the server at {where} needs an API key (HTTP {e.code}): "
                                      f"set {var}") from None
                if e.code == 404:
                    raise PddkitError(f"model {self.model} or the completions endpoint was not "
                                      f"found at {where} (HTTP 404)") from None
                if e.code != 429 and not 500 <= e.code < 600:
                    raise PddkitError(self._say(f"the server at {where} refused the request "
                                                f"(HTTP {e.code}{detail})")) from None
                failure = f"HTTP {e.code}"
                retry_after = _seconds(e.headers.get("Retry-After") if e.headers else None)
                last = PddkitError(self._say(f"the server at {where} answered HTTP {e.code} "
                                             f"{attempts} times{detail}"))
            except TimeoutError:
                failure = f"no answer within {self.timeout:g} s"
                last = PddkitError(f"the server at {where} did not answer within "
                                   f"{self.timeout:g} s ({attempts} attempts)")
            except (urllib.error.URLError, HTTPException, ConnectionError, OSError) as e:
                reason = getattr(e, "reason", e)
                if isinstance(reason, TimeoutError):
                    failure = f"no answer within {self.timeout:g} s"
                    last = PddkitError(f"the server at {where} did not answer within "
                                       f"{self.timeout:g} s ({attempts} attempts)")
                else:
                    failure = str(reason) or type(reason).__name__
                    last = PddkitError(self._say(f"could not reach the server at {where} after "
                                                 f"{attempts} attempts ({failure})"))
            if attempt + 1 < attempts:
                delay = min(self.backoff * 2 ** attempt, MAX_BACKOFF) * (1 + 0.25 * rng.random())
                if retry_after is not None:
                    delay = max(delay, min(retry_after, MAX_BACKOFF))
                logger.warning("%s: %s; retrying in %.2f s (attempt %d of %d)", where,
                               self._say(failure), delay, attempt + 2, attempts)
                time.sleep(delay)
        raise last


def _error_detail(e: urllib.error.HTTPError) -> str:
    """': <the server's message>' (first line, short), or '' when it gave none."""
    try:
        body = e.read().decode("utf-8", "replace").strip()
    except (OSError, HTTPException):
        return ""
    try:
        err = json.loads(body).get("error", body)
        body = str(err.get("message", err) if isinstance(err, dict) else err)
    except (ValueError, AttributeError):
        pass
    first = body.splitlines()[0][:200] if body else ""
    return f": {first}" if first else ""


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def prompt_logprobs(answer: dict, ids: Sequence[int], where: str) -> np.ndarray:
    """log P(ids[i]) for each prompt token after the start token, from a completions answer:
    vLLM's choices[0].prompt_logprobs, else choices[0].logprobs.token_logprobs."""
    no_logprobs = PddkitError(f"the server at {where} does not return prompt log-probabilities "
                              "(echo with logprobs, or vLLM's prompt_logprobs)")
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise PddkitError(f"the server at {where} answered without completion choices")
    choice, n = choices[0], len(ids)
    vllm = choice.get("prompt_logprobs")
    if vllm:  # [null, {token_id: {"logprob": x, ...}, ...}, ...], one entry per prompt token
        if len(vllm) != n + 1:
            raise PddkitError(f"the server at {where} returned {len(vllm)} prompt log-probabilities "
                              f"for a prompt of {n + 1} tokens")
        out = []
        for tok, entry in zip(ids, vllm[1:]):
            hit = (entry or {}).get(str(tok), (entry or {}).get(tok)) if isinstance(entry, dict) \
                else None
            value = hit.get("logprob") if isinstance(hit, dict) else hit
            if value is None:
                raise PddkitError(f"the server at {where} returned no log-probability for prompt "
                                  f"token {tok}")
            out.append(value)
        return np.asarray(out, dtype=np.float32)
    token_logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
    if not token_logprobs or len(token_logprobs) <= 1:
        raise no_logprobs
    if len(token_logprobs) == n + 2:  # start token (null), n prompt tokens, the generated one
        values = token_logprobs[1:n + 1]
    elif len(token_logprobs) == n + 1:  # some servers echo the prompt without the generated token
        values = token_logprobs[1:]
    else:
        raise PddkitError(f"the server at {where} returned {len(token_logprobs)} log-probabilities "
                          f"for a prompt of {n + 1} tokens (expected {n + 1} or {n + 2})")
    if any(v is None for v in values):
        raise no_logprobs
    return np.asarray(values, dtype=np.float32)


@register_backend("openai")
class OpenAIBackend:
    """A model served behind an OpenAI-compatible /v1/completions endpoint, with its
    tokenizer loaded here."""

    capabilities = Capabilities(full_distribution=False, hidden_states=False, local_model=False)
    # the run options `load` takes (engine.config.RunConfig field names)
    OPTIONS = ("api_base", "tokenizer", "api_key_env", "api_concurrency", "api_timeout",
               "api_retries", "max_length", "local_files_only", "trust_remote_code")

    def __init__(self, model: str, api_base: str, tokenizer, *,
                 api_key_env: str | None = "OPENAI_API_KEY", concurrency: int = 8,
                 timeout: float = 60.0, max_retries: int = 5, max_length: int | None = None,
                 backoff: float = 0.5, seed: int = 0, spec: BackendSpec | None = None) -> None:
        from pddkit.backends.hf_loading import start_token_id

        if not isinstance(api_base, str) or not api_base.startswith(("http://", "https://")):
            raise PddkitError(f"`api_base` must be an http(s) URL such as http://127.0.0.1:8000/v1, "
                              f"not {api_base!r}")
        checks = [(concurrency >= 1, f"concurrency must be at least 1, not {concurrency}"),
                  (timeout > 0, f"timeout must be positive, not {timeout}"),
                  (max_retries >= 0, f"max_retries must be 0 or more, not {max_retries}"),
                  (max_length is None or max_length >= 2,
                   f"max_length {max_length} leaves no room for a text token after the start token")]
        for ok, message in checks:
            if not ok:
                raise PddkitError(message)
        self.name = model
        self.api_base = api_base.rstrip("/")
        self.tokenizer = tokenizer
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.max_length = max_length
        self.start_id = start_token_id(tokenizer, model)
        self.seed = seed
        key = (os.environ.get(api_key_env) or None) if api_key_env else None
        if api_key_env and key is None:
            logger.info("%s is not set: requests to %s carry no API key", api_key_env,
                        public_url(self.api_base))
        self.client = CompletionsClient(self.api_base, model, api_key_env=api_key_env,
                                        timeout=timeout, max_retries=max_retries,
                                        backoff=backoff, api_key=key)
        self._spec = spec
        self._fingerprint: str | None = None

    def __repr__(self) -> str:
        return (f"OpenAIBackend(model={self.name!r}, api_base={public_url(self.api_base)!r}, "
                f"api_key_env={self.api_key_env!r})")

    @classmethod
    def load(cls, model: str, *, api_base: str | None = None, tokenizer: str | None = None,
             api_key_env: str | None = "OPENAI_API_KEY", api_concurrency: int = 8,
             api_timeout: float = 60.0, api_retries: int = 5, max_length: int | None = None,
             local_files_only: bool = False, trust_remote_code: bool = False,
             role: str = "model") -> OpenAIBackend:
        """`model` is the served model's name; its tokenizer is loaded from `tokenizer`
        (a directory or hub id, default: the model name)."""
        from pddkit.backends.hf_loading import load_tokenizer

        if not api_base:
            raise PddkitError(f"the openai backend of {role} {model} needs `api_base`, the "
                              "server's URL (e.g. http://127.0.0.1:8000/v1)")
        options = {"api_base": api_base, "tokenizer": tokenizer, "api_key_env": api_key_env,
                   "api_concurrency": api_concurrency, "api_timeout": api_timeout,
                   "api_retries": api_retries, "max_length": max_length,
                   "local_files_only": local_files_only, "trust_remote_code": trust_remote_code,
                   "role": role}
        tok = load_tokenizer(tokenizer or model, trust_remote_code=trust_remote_code,
                             local_files_only=local_files_only)
        return cls(model, api_base, tok, api_key_env=api_key_env, concurrency=api_concurrency,
                   timeout=api_timeout, max_retries=api_retries, max_length=max_length,
                   spec=BackendSpec("openai", model, tuple(sorted(options.items()))))

    @classmethod
    def from_spec(cls, spec: BackendSpec) -> OpenAIBackend:
        return cls.load(spec.model, **dict(spec.options))

    @property
    def spec(self) -> BackendSpec | None:
        """How to build this backend again elsewhere (the key is read from the environment
        there); None for a tokenizer handed over in memory."""
        return self._spec

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            from pddkit.cache.fingerprint import fingerprint_of, tokenizer_digest

            self._fingerprint = fingerprint_of({
                "backend": "openai", "stats_format": int(STATS_FORMAT),
                "api_base": public_url(self.api_base), "model": self.name,
                "tokenizer": tokenizer_digest(self.tokenizer), "start_id": int(self.start_id)})
        return self._fingerprint

    def encode(self, texts: Sequence[str], names: Sequence[str], what: str = "statistics") -> Encoded:
        from pddkit.backends.stats_pass import encode

        enc = encode(_TokenizerOnly(self.tokenizer, self.name), texts, names, self.max_length,
                     what=what)
        return Encoded(ids=enc.ids, truncated=enc.truncated)

    def stats_for_ids(self, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                      desc: str = "statistics") -> list[TokenStats]:
        """One request per text, `concurrency` at a time; results in order."""
        seqs = [[int(t) for t in s] for s in ids]
        out: list[TokenStats | None] = [None] * len(seqs)
        if not seqs:
            return []
        bar = progress.bar(total=sum(len(s) for s in seqs), desc=desc, unit="tok")
        lock = threading.Lock()

        def one(i: int) -> None:
            rng = random.Random(self.seed * 1_000_003 + i)  # jitter, reproducible
            out[i] = self._stats(seqs[i], bool(truncated[i]), rng)
            with lock:
                bar.update(len(seqs[i]))

        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(seqs)),
                                  thread_name_prefix="pddkit-openai")
        try:
            futures = [pool.submit(one, i) for i in range(len(seqs))]
            wait(futures, return_when=FIRST_EXCEPTION)
            for f in futures:
                if f.done() and f.exception() is not None:
                    raise f.exception()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            bar.close()
        return out  # type: ignore[return-value]

    def _stats(self, seq: list[int], truncated: bool, rng: random.Random) -> TokenStats:
        nan = np.full(len(seq), np.nan, dtype=np.float32)
        if not seq:  # nothing to score (encode never gives one)
            return TokenStats(np.zeros(0, dtype=np.int64), nan, nan, nan.copy(), truncated)
        payload = {"model": self.name, "prompt": [self.start_id, *seq], "echo": True,
                   "logprobs": 1, "max_tokens": 1, "temperature": 0}
        answer = self.client.post(payload, rng)
        L = prompt_logprobs(answer, seq, public_url(self.client.url))
        return TokenStats(np.asarray(seq, dtype=np.int64), L, nan, nan.copy(), truncated)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))
