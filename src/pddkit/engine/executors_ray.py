"""The Ray executor (`engine="ray"`): statistics passes spread over Ray actors. The only
module that imports ray (`pip install -e '.[ray]'`).

The driver never loads an `hf` model for a pass the actors run: it encodes the texts with
the tokenizer alone (backends.hf.HFBackend.run_elsewhere; same truncation and errors as
the local engine), asks an actor for the model's fingerprint and facts (so the cache key
and results.json carry the device and dtype the statistics were computed with), looks up
the statistics cache, and cuts the sequences that remain into the batches the local pass
would make (longest first, `batch_size` each). Each batch goes to an idle actor, one at a
time per actor; an actor builds its backend from the backend's picklable spec when first
asked and runs the same statistics pass on exactly that batch. Same batches, same code:
the statistics equal the local engine's bit for bit on CPU.

Failures are bounded and named. An exception raised in an actor (a model that cannot be
loaded, ...) is one sentence at once. An actor that dies (killed, out of memory, a crash
in native code) is replaced and its batch sent once more; a batch that kills its actor
twice ends the run with one sentence naming its texts. Ray itself neither restarts actors
nor retries their tasks (max_restarts=0, max_task_retries=0), so the driver always knows
which batch an actor died on.

One actor pool (one model load per actor) serves every pass of a backend; a pass of
another backend (the reference model) replaces it, so that one GPU never holds two pools.
Behind the cache, the driver writes the new statistics as they come back, chunk by chunk
(one writer, so the actors need neither the cache folder - on a cluster, often not their
disk - nor locks), and a killed run keeps every chunk it finished."""

from __future__ import annotations

import logging
import re
import socket
from collections import Counter, deque
from collections.abc import Iterator, Sequence, Set

import numpy as np

from pddkit import progress
from pddkit.backends.base import Backend, BackendSpec, Encoded
from pddkit.backends.caching import cache_fields
from pddkit.errors import PddkitError, install_hint
from pddkit.stats import ON_REQUEST, TokenStats

logger = logging.getLogger(__name__)

MAX_DEATHS = 2  # a batch that kills this many actors ends the run
NAMED = 5  # texts named in that sentence, at most


def _ray():
    try:
        import ray
    except ModuleNotFoundError:
        raise PddkitError("`engine='ray'` needs Ray: " + install_hint("ray")) from None
    return ray


class StatsWorker:
    """One Ray actor: a backend built from its spec when first needed (so a failure to build
    it is the error of that call, one sentence on the driver)."""

    def __init__(self, spec: BackendSpec, threads: int) -> None:
        self.spec, self.threads = spec, threads
        self._built: Backend | None = None

    def backend(self) -> Backend:
        if self._built is None:
            if self.threads > 0 and self.spec.kind == "hf":
                import torch

                torch.set_num_threads(self.threads)  # two one-CPU actors must not each take every core
            self._built = self.spec.build()
        return self._built

    def identity(self) -> tuple[str, dict | None]:
        """The backend's fingerprint and facts, as computed where the statistics are."""
        backend = self.backend()
        facts = getattr(backend, "facts", None)
        return backend.fingerprint(), (facts() if facts is not None else None)

    def stats(self, seqs: list[list[int]], prefix: list[int] | None = None,
              fields: frozenset[str] = frozenset()) -> list[tuple]:
        """(L, H, M2, top, var, Lmax, tempered) of each sequence: one batch of the local pass
        (top: the argmax ids, Lmax the largest log-probabilities, None from a backend that
        gives none; tempered: acmia's [2, 52] means, computed only when `fields` asks for
        them); given `prefix` (recall's shots), its conditioned pass, the prefix computed
        once for the batch."""
        backend, flags = self.backend(), [False] * len(seqs)
        if prefix is not None:
            out = backend.stats_given_prefix(prefix, seqs, flags, desc="ray actor")
        elif fields & ON_REQUEST:
            out = backend.stats_for_ids(seqs, flags, desc="ray actor", fields=fields)
        else:
            out = backend.stats_for_ids(seqs, flags, desc="ray actor")
        return [(st.L, st.H, st.M2, st.top, st.var, st.Lmax, st.tempered) for st in out]


    def sample(self, prompts: list[str], names: list[str], n: int, top_k: int, top_p: float,
               temperature: float, max_new_tokens: int | None, seeds: list[int]):
        """Continuations of `prompts` (backends.sampling.Sampled), seeded per prompt."""
        return self.backend().sample(prompts, n, top_k, top_p, temperature, max_new_tokens,
                                     seeds, names=names)


def _names(labels: Sequence[str]) -> str:
    shown = ", ".join(labels[:NAMED])
    return shown if len(labels) <= NAMED else f"{shown} and {len(labels) - NAMED} more"


class _Pool:
    """`size` actors of `worker` for one backend spec, each running one batch at a time."""

    def __init__(self, ray, worker: type, spec: BackendSpec, size: int, gpus: float,
                 threads: int) -> None:
        self.ray, self.spec, self.threads = ray, spec, threads
        self.cls = ray.remote(worker).options(num_cpus=1, num_gpus=gpus or None,
                                              max_restarts=0, max_task_retries=0)
        self.actors = [self._new() for _ in range(size)]

    def _new(self):
        return self.cls.remote(self.spec, self.threads)

    def replace(self, slot: int) -> None:
        self.ray.kill(self.actors[slot], no_restart=True)
        self.actors[slot] = self._new()

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors = []

    def identity(self) -> tuple[str, dict | None]:
        """Actor 0's (fingerprint, facts); an actor that dies loading the model is replaced once."""
        for death in range(1, MAX_DEATHS + 1):
            try:
                return self.ray.get(self.actors[0].identity.remote())
            except self.ray.exceptions.RayActorError as e:
                if getattr(e, "actor_init_failed", False):
                    raise PddkitError(f"a Ray actor could not start: {_cause(e)}") from None
                if death == MAX_DEATHS:
                    raise PddkitError(f"the Ray actor loading {self.spec.model} died {death} times "
                                      "(out of memory, or a crash in native code)") from None
                self.replace(0)
            except self.ray.exceptions.RayError as e:
                raise PddkitError(f"a Ray actor failed: {_cause(e)}") from None
        raise AssertionError("unreachable")

    def run(self, batches: list[list[list[int]]], labels: list[list[str]],
            desc: str, prefix: list[int] | None = None,
            fields: frozenset[str] = frozenset()) -> Iterator[tuple[int, list]]:
        """(batch index, [(L, H, M2, ...)] per sequence) as batches finish, in any order;
        `fields`: the optional statistics computed only on request (stats.ON_REQUEST)."""
        queue, idle = deque(range(len(batches))), list(range(len(self.actors)))
        pending: dict = {}  # object ref -> (actor slot, batch index)
        deaths: Counter = Counter()
        while queue or pending:
            while queue and idle:
                slot, b = idle.pop(0), queue.popleft()
                extra = () if prefix is None else (prefix,)  # a worker may take batches only
                asked = {"fields": fields} if fields else {}
                pending[self.actors[slot].stats.remote(batches[b], *extra, **asked)] = (slot, b)
            [ref], _ = self.ray.wait(list(pending), num_returns=1)
            slot, b = pending.pop(ref)
            try:
                out = self.ray.get(ref)
            except self.ray.exceptions.RayActorError as e:  # the actor's process died
                if getattr(e, "actor_init_failed", False):  # ... before it could run anything
                    raise PddkitError(f"a Ray actor could not start: {_cause(e)}") from None
                deaths[b] += 1
                if deaths[b] >= MAX_DEATHS:
                    raise PddkitError(
                        f"{desc}: the batch of {_names(labels[b])} killed its Ray actor "
                        f"{deaths[b]} times (out of memory, or a crash in native code); score "
                        "these texts with the local engine, or leave them out") from None
                logger.warning("%s: a Ray actor died on the batch of %s; running it once more on "
                               "a new actor", desc, _names(labels[b]))
                self.replace(slot)
                queue.appendleft(b)
            except self.ray.exceptions.RayError as e:
                raise PddkitError(f"a Ray actor failed: {_cause(e)}") from None
            else:
                yield b, out
            idle.append(slot)


class _Stream:
    """One pass over `batches` (lists of sequence indices), read as it streams: `get(i)`
    waits for the batch holding sequence i and returns its (L, H, M2)."""

    def __init__(self, rows: Iterator[tuple[int, list]], batches: list[list[int]], bar,
                 on_error) -> None:
        self.rows, self.batches, self.bar, self.on_error = rows, batches, bar, on_error
        self.ready: dict[int, tuple] = {}
        self.received = 0
        if not batches:
            bar.close()

    def get(self, i: int) -> tuple:
        while i not in self.ready:
            try:
                b, out = next(self.rows)
            except StopIteration:
                raise RuntimeError("the Ray pass returned no statistics for some texts") from None
            except BaseException:
                self.bar.close()
                self.on_error()
                raise
            for k, arrays in zip(self.batches[b], out):
                self.ready[k] = arrays
            self.bar.update(len(out))
            self.received += 1
            if self.received == len(self.batches):
                self.bar.close()
        return self.ready.pop(i)


def _cause(error: BaseException) -> str:
    """The last line of what went wrong in an actor (Ray wraps it in tracebacks)."""
    text = ""
    for _ in range(8):  # Ray task or actor -> the exception raised in the actor
        text = str(error).strip() or text
        cause = getattr(error, "cause", None)
        error = cause if isinstance(cause, BaseException) else error.__cause__
        if error is None:
            break
    line = re.sub(r"\x1b\[[0-9;]*m", "", text).strip().splitlines()[-1:] or ["an unknown error"]
    return line[0].removeprefix(f"{PddkitError.__module__}.{PddkitError.__name__}: ")


def _check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """One sentence when `address` ("host:port" or "ray://host:port") refuses a connection."""
    if not address or address in ("auto", "local") or ":" not in address:
        return
    host, _, port = address.split("://")[-1].rpartition(":")
    if not port.isdigit():
        raise PddkitError(f"`ray_address` must be host:port (or ray://host:port), not {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise PddkitError(f"cannot reach the Ray cluster at {address}: "
                          f"{getattr(e, 'strerror', None) or e}") from None


class RayExecutor:
    """Statistics passes on `actors` Ray actors (`address`: an existing cluster, else one
    started here). `threads`: torch threads per actor on CPU (0 = torch's default).
    `worker`: the actor class (StatsWorker; tests give one that crashes)."""

    name = "ray"

    def __init__(self, address: str | None = None, actors: int = 1, gpus_per_actor: float = 0.0,
                 threads: int = 1, worker: type = StatsWorker) -> None:
        self.ray = _ray()
        if actors < 1:
            raise PddkitError(f"`actors` must be at least 1, not {actors}")
        self.address, self.actors, self.gpus, self.threads = address, actors, gpus_per_actor, threads
        self.worker = worker
        self._pool: _Pool | None = None
        self._identities: dict[BackendSpec, tuple[str, dict | None]] = {}
        self._prepared: set[int] = set()

    def _init(self) -> None:
        if self.ray.is_initialized():
            return
        _check_reachable(self.address)  # Ray itself retries an unreachable address for minutes
        try:
            self.ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                          configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray"
            raise PddkitError(f"could not start or reach {where}: {_cause(e)}") from None

    def prepare(self, backend: Backend) -> Backend:
        """A backend that can run elsewhere (hf, loaded by name) becomes the driver's view of
        the model the actors run: tokenizer only here, fingerprint and facts from an actor."""
        inner = getattr(backend, "backend", backend)
        spec, hook = getattr(inner, "spec", None), getattr(inner, "run_elsewhere", None)
        if spec is not None and hook is not None and id(inner) not in self._prepared:
            self._prepared.add(id(inner))
            hook(lambda: self._identity(spec), where=f"ray, {self.gpus:g} GPU per actor")
        return backend

    def _identity(self, spec: BackendSpec) -> tuple[str, dict | None]:
        if spec not in self._identities:
            self._identities[spec] = self._pool_for(spec).identity()
        return self._identities[spec]

    def _pool_for(self, spec: BackendSpec) -> _Pool:
        if self._pool is None or self._pool.spec != spec:
            self.close()
            self._init()
            logger.info("starting %d Ray actor(s) for %s", self.actors, spec.model)
            self._pool = _Pool(self.ray, self.worker, spec, self.actors, self.gpus,
                               self.threads if not self.gpus else 0)
        return self._pool

    def close(self) -> None:
        """Stop the actors (and free what they hold)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def token_stats(self, backend: Backend, texts: Sequence[str], names: Sequence[str],
                    desc: str, fields: Set[str] = frozenset()) -> list[TokenStats]:
        self.prepare(backend)
        enc = backend.encode(texts, names, what=desc)
        return self.id_stats(backend, enc.ids, enc.truncated, names, desc, fields=fields)

    def conditioned_stats(self, backend: Backend, prefix: Sequence[int],
                          ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                          names: Sequence[str], desc: str) -> list[TokenStats]:
        """TokenStats of each x given `prefix` (recall's shots) on the actors: each batch's
        actor computes the prefix's key/value cache once for its batch."""
        return self.id_stats(backend, ids, truncated, names, desc, prefix=[int(t) for t in prefix])

    def id_stats(self, backend: Backend, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                 names: Sequence[str], desc: str, prefix: list[int] | None = None,
                 fields: Set[str] = frozenset()) -> list[TokenStats]:
        """TokenStats of token-id sequences (`infill`'s variants) under `backend`, in order:
        the pass token_stats runs after encoding, behind the cache when there is one (its
        misses: entries it lacks, or holds without one of `fields`, executors.py)."""
        self.prepare(backend)
        enc = Encoded(ids=[list(s) for s in ids], truncated=[bool(t) for t in truncated])
        store = getattr(backend, "store", None)
        wanted = frozenset(fields) & ON_REQUEST  # computed by the actors only when asked
        if store is None:
            stream = self._start(backend, enc.ids, list(names), desc, prefix, wanted)
            return [_stats(seq, stream.get(i), flag)
                    for i, (seq, flag) in enumerate(zip(enc.ids, enc.truncated))]
        # the statistics cache: only its misses go to the actors, in one pass, in the order
        # CachingBackend asks for them (longest first), so each chunk is stored as it arrives
        from pddkit.cache import text_key

        fp = backend.fingerprint() if prefix is None else backend.prefix_fingerprint(prefix)
        todo = [i for i, s in enumerate(enc.ids) if not store.holds(text_key(fp, list(s)), fields)]
        todo.sort(key=lambda i: -len(enc.ids[i]))
        misses = [list(enc.ids[i]) for i in todo]
        stream = (self._start(backend.backend, misses, [names[i] for i in todo], desc, prefix,
                              wanted) if misses else None)
        done = 0

        def compute(ids, flags, d):
            nonlocal done
            if stream is None or [list(s) for s in ids] != misses[done:done + len(ids)]:
                raise RuntimeError("the cache asked the Ray engine for texts it did not plan")
            out = [_stats(s, stream.get(done + j), f) for j, (s, f) in enumerate(zip(ids, flags))]
            done += len(ids)
            return out

        if prefix is not None:
            return backend.stats_given_prefix(prefix, enc.ids, enc.truncated, desc=desc,
                                              compute=compute)
        return backend.stats_for_ids(enc.ids, enc.truncated, desc=desc, compute=compute,
                                     **cache_fields(backend, fields))

    def sample(self, backend: Backend, prompts: Sequence[str], names: Sequence[str], n: int,
               top_k: int, top_p: float, temperature: float, max_new_tokens: int | None,
               seeds: Sequence[int]):
        """`samia`'s sampling on the actors: the prompts (behind the cache: its misses, a
        chunk at a time) split into one contiguous part per actor. Each prompt has its own
        seed, so the parts give what one process would. An actor that dies ends the run
        with one sentence (no second try, unlike the statistics passes)."""
        from pddkit.backends.sampling import Sampled

        self.prepare(backend)
        inner = getattr(backend, "backend", backend)
        spec = getattr(inner, "spec", None)
        if spec is None:
            raise PddkitError(f"`engine='ray'` needs a model it can load by name in each actor; "
                              f"{inner.name} was handed over in memory (use the local engine, "
                              "or give its directory or hub id)")

        def compute(ps, n_, k, p, t, cap, ss, ns):
            if not ps:
                return Sampled(())
            pool = self._pool_for(spec)
            size = -(-len(ps) // len(pool.actors))
            refs = [actor.sample.remote(list(ps[a:a + size]), list(ns[a:a + size]), n_, k, p, t,
                                        cap, list(ss[a:a + size]))
                    for actor, a in zip(pool.actors, range(0, len(ps), size))]
            try:
                parts = self.ray.get(refs)
            except self.ray.exceptions.RayError as e:
                raise PddkitError(f"sampling on a Ray actor failed: {_cause(e)}") from None
            return Sampled(tuple(t for part in parts for t in part.texts),
                           tuple(dict.fromkeys(x for part in parts for x in part.notices)))

        if getattr(backend, "store", None) is not None:
            return backend.sample(prompts, n, top_k, top_p, temperature, max_new_tokens, seeds,
                                  names=names, compute=compute)
        return compute(list(prompts), n, top_k, top_p, temperature, max_new_tokens, list(seeds),
                       list(names))

    def _start(self, backend: Backend, ids: Sequence[Sequence[int]], labels: list[str],
               desc: str, prefix: list[int] | None = None,
               fields: frozenset[str] = frozenset()) -> _Stream:
        """Start the pass over `ids` (`labels` name each sequence's text in errors)."""
        spec = getattr(backend, "spec", None)
        if spec is None:
            raise PddkitError(f"`engine='ray'` needs a model it can load by name in each actor; "
                              f"{backend.name} was handed over in memory (use the local engine, "
                              "or give its directory or hub id)")
        size = max(1, int(getattr(backend, "batch_size", 8)))
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # the local pass's order
        batches = [order[b:b + size] for b in range(0, len(order), size)]
        bar = progress.bar(total=len(ids), desc=desc, unit="text")
        if not batches:
            return _Stream(iter(()), batches, bar, self.close)
        pool = self._pool_for(spec)
        logger.info("%s: %d texts in %d batches on %d Ray actor(s)", desc, len(ids), len(batches),
                    self.actors)
        rows = pool.run([[list(map(int, ids[i])) for i in batch] for batch in batches],
                        [[labels[i] for i in batch] for batch in batches], desc, prefix, fields)
        return _Stream(rows, batches, bar, self.close)


def _stats(ids: Sequence[int], arrays: tuple, truncated: bool) -> TokenStats:
    """TokenStats as the local pass gives them: int64 ids, float32 L, H, M2, int64 top
    (the argmax ids, when the actor's backend gives them), float32 var, float32 Lmax (when
    the actor's backend gives it), float64 [2, 52] tempered (when asked for: acmia)."""
    L, H, M2 = (np.asarray(a, dtype=np.float32) for a in arrays[:3])
    top, var, Lmax = arrays[3], arrays[4], arrays[5]
    tempered = arrays[6] if len(arrays) > 6 else None  # a test's worker may give six
    return TokenStats(np.asarray(ids, dtype=np.int64), L, H, M2, bool(truncated),
                      top=None if top is None else np.asarray(top, dtype=np.int64),
                      var=np.asarray(var, dtype=np.float32),
                      Lmax=None if Lmax is None else np.asarray(Lmax, dtype=np.float32),
                      tempered=None if tempered is None else np.asarray(tempered))
