"""The HTTP side of the `openai` backend: POST {api_base}/completions with retries, GET
{api_base}/models for the served context, and a stop flag that ends every retry loop as
soon as one request has failed for good (no minutes of retries after the fatal error).

Retried: what can pass on a second try (connection refused or reset, HTTP 429, 502, 503,
504, timeouts). Not retried: every other answer, a request the server refused (4xx, or a
5xx whose body is a request-validation error, as llama-cpp-python answers a prompt of token
ids) is a RefusedError quoting the server's reason, which the caller turns into a fallback
(text prompts) or one sentence saying what the user can do."""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.client import HTTPException

from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

MAX_BACKOFF = 30.0  # seconds, the longest wait between two attempts
SAY_EVERY = 5.0  # seconds: at most one retry line per server this often (the rest at debug level)


class _RetryLines:
    """The retry warnings of every request to one URL, thinned out: with the server down,
    `api_concurrency` requests each retrying would otherwise print a line per attempt."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: dict[str, float] = {}
        self.quiet: dict[str, int] = {}

    def say(self, where: str, line: str, attempt: str) -> None:
        """`line (attempt)`, or `line (attempt; N more retries since the last line)`."""
        now = time.monotonic()
        with self.lock:
            if where in self.last and now - self.last[where] < SAY_EVERY:
                self.quiet[where] = self.quiet.get(where, 0) + 1
                quiet = None
            else:
                self.last[where] = now
                quiet = self.quiet.pop(where, 0)
        if quiet is None:
            logger.debug("%s (%s)", line, attempt)
        else:
            logger.warning("%s (%s%s)", line, attempt,
                           f"; {quiet} more retries since the last line" if quiet else "")


_RETRY_LINES = _RetryLines()


class StoppedError(Exception):
    """A request given up because another one failed for good (never shown to users)."""


RETRIED = frozenset({429, 502, 503, 504})  # HTTP statuses a second attempt may pass


class RefusedError(PddkitError):
    """The server refused the request as sent (HTTP 4xx other than 401, 403, 404, 429; or a
    5xx that no retry mends): `detail` is its message (": reason"), `validation` whether the
    body is a request-validation error (a field of the request has a type or value the
    server does not take: the caller may send another form)."""

    def __init__(self, message: str, code: int, detail: str, validation: bool = False) -> None:
        super().__init__(message)
        self.code, self.detail, self.validation = code, detail, validation


def check_url(api_base: str) -> str:
    """`api_base` without a trailing slash; one sentence for a URL that is not http(s) or
    that carries credentials (user:password@ would end up in logs, errors and the cache key)."""
    if not isinstance(api_base, str) or not api_base.startswith(("http://", "https://")):
        raise PddkitError(f"`api_base` must be an http(s) URL such as http://127.0.0.1:8000/v1, "
                          f"not {api_base!r}")
    parts = urllib.parse.urlsplit(api_base)
    if "@" in parts.netloc:
        raise PddkitError(f"`api_base` must not carry credentials (user:password@ before "
                          f"{parts.netloc.rsplit('@', 1)[1]}): put the key in an environment "
                          "variable and name it with `api_key_env`")
    return api_base.rstrip("/")


@dataclass(frozen=True)
class CompletionsClient:
    """POST {api_base}/completions with retries (exponential backoff with jitter) on HTTP
    429, 502, 503 and 504, connection errors and timeouts; every other failure is one
    sentence (RefusedError for a request the server refused)."""

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

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def served_context(self) -> int | None:
        """The served model's context in tokens as GET {api_base}/models reports it (vLLM's
        `max_model_len`; also `context_length`, `max_context_length`), or None when the
        server does not say (one attempt; any failure only means "not known")."""
        request = urllib.request.Request(self.api_base + "/models", headers=self._headers())
        try:
            with urllib.request.urlopen(request, timeout=min(self.timeout, 10.0)) as r:
                listing = json.loads(r.read())
        except (urllib.error.URLError, HTTPException, OSError, ValueError) as e:
            logger.info("%s/models did not tell the served context (%s)", self.api_base,
                        self._say(str(getattr(e, "reason", e))))
            return None
        entries = listing.get("data") if isinstance(listing, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("id") == self.model:
                for key in ("max_model_len", "context_length", "max_context_length"):
                    value = entry.get(key)
                    if isinstance(value, int) and value > 0:
                        return value
        return None

    def post(self, payload: dict, rng: random.Random, stop: threading.Event | None = None) -> dict:
        """The server's JSON answer to `payload`. When `stop` is set (another request failed
        for good), no further attempt is made and no backoff is waited out: StoppedError."""
        stop = stop or threading.Event()
        where = self.url
        attempts = self.max_retries + 1
        body = json.dumps(payload).encode("utf-8")
        for attempt in range(attempts):
            if stop.is_set():
                raise StoppedError
            retry_after = None
            request = urllib.request.Request(self.url, data=body, headers=self._headers(),
                                             method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as r:
                    answer = r.read()
                try:
                    return json.loads(answer)
                except ValueError:
                    raise PddkitError(f"the server at {where} answered with something that is "
                                      "not JSON: is it an OpenAI-compatible server, and does "
                                      "`api_base` end in /v1?") from None
            except urllib.error.HTTPError as e:
                detail, validation = _error_detail(e)
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
                                      f"found at {where} (HTTP 404{detail}): is `api_base` the "
                                      "server's /v1 address, and the model the name it serves?"
                                      ) from None
                if e.code in (405, 501):
                    raise PddkitError(f"the server at {where} does not take POST "
                                      f"/completions (HTTP {e.code}{detail}): is it an "
                                      "OpenAI-compatible completions server, and does "
                                      "`api_base` end in /v1?") from None
                if e.code not in RETRIED:
                    what = "refused the request" if e.code < 500 or validation else "failed"
                    raise RefusedError(self._say(f"the server at {where} {what} (HTTP "
                                                 f"{e.code}{detail})"), e.code,
                                       self._say(detail), validation) from None
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
                if stop.is_set():
                    raise StoppedError
                _RETRY_LINES.say(where, f"{where}: {self._say(failure)}; retrying in {delay:.2f} s",
                                 f"attempt {attempt + 2} of {attempts}")
                if stop.wait(delay):  # woken early: another request failed for good
                    raise StoppedError
        raise last


_CONTEXT = re.compile(r"context (?:length|window|size)|maximum context|exceeds? (?:the )?"
                      r"(?:context|max)", re.IGNORECASE)
_NUMBER = re.compile(r"(?:context (?:length|window|size)|maximum context length)(?: of| is)? (\d+)",
                     re.IGNORECASE)


def too_long(e: RefusedError, where: str, tokens: int) -> PddkitError | None:
    """The one sentence for a prompt the server refused as longer than its context
    (llama-cpp-python reports no context before: its refusal is the first word of it),
    saying which `max_length` cuts texts to it; None for other refusals."""
    if not _CONTEXT.search(e.detail):
        return None
    m = _NUMBER.search(e.detail)
    fix = (f"pass `max_length` {int(m.group(1)) - 2} (its context less the start token and the "
           "one generated token) to cut texts to it" if m else "pass a smaller `max_length`")
    reason = e.detail.split(". ")[0]  # its first sentence
    return PddkitError(f"the server at {where} refused a prompt of {tokens} tokens as longer than "
                       f"its context (HTTP {e.code}{reason}): {fix}")


def _error_detail(e: urllib.error.HTTPError) -> tuple[str, bool]:
    """(': <the server's reason>', whether it is a request-validation error); ('', False)
    when the body says nothing."""
    try:
        body = e.read().decode("utf-8", "replace").strip()
    except (OSError, HTTPException):
        return "", False
    return error_reason(body)


# a request-validation error as pydantic (llama-cpp-python, FastAPI) or vLLM words it
_VALIDATION = re.compile(r"validation error|Input should be|field required|BadRequestError|"
                         r"value is not a valid|type=\w+_type", re.IGNORECASE)


_PYDANTIC_DICT = re.compile(r"'loc': \(([^)]*)\), 'msg': '([^']*)'")


def error_reason(body: str) -> tuple[str, bool]:
    """The reason an error body gives, short enough for one sentence (OpenAI's
    {"error": {"message"}}, FastAPI's {"detail": [{"loc", "msg"}]}, pydantic's "N
    validation errors for X / field / message" text; at most 300 characters), and whether
    it is a request-validation error."""
    text = body
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message", body)))
        if isinstance(err, dict):
            err = err.get("message", err)
        if isinstance(err, list):  # FastAPI: [{"loc": [...], "msg": "...", "type": ...}, ...]
            parts = [f"{'.'.join(map(str, x.get('loc', ())))}: {x.get('msg', '')}"
                     if isinstance(x, dict) else str(x) for x in err[:2]]
            err = f"{len(err)} validation error{'s' if len(err) != 1 else ''}: " + "; ".join(parts)
        text = str(err)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = _PYDANTIC_DICT.search(text)
    if len(lines) > 1 and re.match(r"\d+ validation errors?:?$", lines[0]) and first:
        # llama-cpp-python: "14 validation errors:", then one dict per error
        loc = ".".join(x.strip(" '") for x in first.group(1).split(",") if x.strip(" '"))
        text = f"{lines[0].rstrip(':')}, the first: {loc}: {first.group(2)}"
    elif len(lines) > 1 and re.match(r"\d+ validation errors? for", lines[0]):
        # pydantic: "82 validation errors for X", then field lines and their messages
        message = re.sub(r" \[type=.*$", "", lines[2]) if len(lines) > 2 else ""
        text = f"{lines[0]}: {lines[1]}: {message}"
    else:
        text = lines[0] if lines else ""
    text = text[:300].rstrip(" :")
    return (f": {text}" if text else ""), bool(_VALIDATION.search(body))


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def run_concurrently(n: int, work, concurrency: int, name: str = "pddkit-openai") -> None:
    """work(i, stop) for i in range(n), `concurrency` at a time on daemon threads. The first
    failure sets `stop` (every other request stops retrying and nothing queued starts) and
    is raised at once: in-flight requests are abandoned, never waited for, and cannot keep
    the process alive."""
    if n < 1:
        return
    stop = threading.Event()
    lock = threading.Lock()
    todo = iter(range(n))
    failures: list[BaseException] = []
    running = [min(concurrency, n)]
    finished = threading.Event()

    def worker() -> None:
        try:
            while not stop.is_set():
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                try:
                    work(i, stop)
                except StoppedError:
                    return
                except BaseException as e:  # handed to the caller
                    with lock:
                        failures.append(e)
                    stop.set()
                    finished.set()
                    return
        finally:
            with lock:
                running[0] -= 1
                if running[0] == 0:
                    finished.set()

    for k in range(running[0]):
        threading.Thread(target=worker, name=f"{name}-{k}", daemon=True).start()
    try:
        finished.wait()
    finally:
        stop.set()  # also on KeyboardInterrupt: the workers stop at their next check
    if failures:
        raise failures[0]
