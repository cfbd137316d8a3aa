"""The HTTP side of the `openai` backend: POST {api_base}/completions with retries, GET
{api_base}/models for the served context, and a stop flag that ends every retry loop as
soon as one request has failed for good (no minutes of retries after the fatal error)."""

from __future__ import annotations

import json
import logging
import random
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


class RefusedError(PddkitError):
    """HTTP 4xx (not 401, 403, 404, 429): the server refused the request as sent; `detail`
    is its message (the sampler retries without a parameter the server names)."""

    def __init__(self, message: str, code: int, detail: str) -> None:
        super().__init__(message)
        self.code, self.detail = code, detail


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
                    raise RefusedError(self._say(f"the server at {where} refused the request "
                                                 f"(HTTP {e.code}{detail})"), e.code,
                                       self._say(detail)) from None
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
