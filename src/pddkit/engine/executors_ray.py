"""The Ray executor (`engine="ray"`): statistics passes spread over Ray actors (the actors
and their pool: engine/ray_actors.py). The only module that imports ray
(`pip install -e '.[ray]'`).

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
another backend (the reference model) moves the same actors to it (the old model freed
before the new one loads, so that one GPU never holds two models; no new processes).
At the end of a run the actors stop, unless `keep_actors()` is open: then the next run
with as many actors, GPUs and threads takes them over (a notebook's second `evaluate`, a
test session), and they stop when it closes.
Behind the cache, the driver writes the new statistics as they come back, chunk by chunk
(one writer, so the actors need neither the cache folder - on a cluster, often not their
disk - nor locks), and a killed run keeps every chunk it finished."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator, Sequence, Set

from pddkit import progress
from pddkit.backends.base import Backend, BackendSpec, Encoded
from pddkit.backends.caching import cache_fields
from pddkit.engine.ray_actors import (
    ActorPool,
    PassStream,
    StatsWorker,
    actor_error,
    token_stats_from,
)
from pddkit.errors import PddkitError, install_hint
from pddkit.stats import ON_REQUEST, TokenStats

logger = logging.getLogger(__name__)


# while keep_actors() is open: (worker class, actors, GPUs per actor, threads) -> an idle
# pool and the Ray job it belongs to; None when it is closed
_parked: dict[tuple, tuple[str, ActorPool]] | None = None


@contextlib.contextmanager
def keep_actors() -> Iterator[None]:
    """Within this context a run's Ray actors outlive it, their model freed, and the next
    run with as many actors, GPUs per actor and threads takes them over (their interpreters
    and imports kept; the model loaded anew, so a folder rewritten between two runs is read
    as it is now); they stop when a run needs actors of another shape (whose CPUs or GPUs
    they hold) and when the context closes. Outside it (the default), each run stops its
    actors when it ends."""
    global _parked
    if _parked is not None:  # nested: the outer context keeps them
        yield
        return
    _parked = {}
    try:
        yield
    finally:
        _stop_parked()
        _parked = None


def _stop_parked() -> None:
    """Stop every idle pool keep_actors() holds."""
    while _parked:
        _job, pool = _parked.popitem()[1]
        with contextlib.suppress(Exception):  # Ray may be down already
            pool.close()


def _ray():
    try:
        import ray
    except ModuleNotFoundError:
        raise PddkitError("`engine='ray'` needs Ray: " + install_hint("ray")) from None
    return ray


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
        self._pool: ActorPool | None = None
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
            raise PddkitError(f"could not start or reach {where}: {actor_error(e)}") from None

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

    def _key(self) -> tuple:
        return (self.worker, self.actors, self.gpus, self.threads if not self.gpus else 0)

    def _job(self) -> str:
        """This Ray session's job (a restarted local Ray numbers its jobs anew: the node id,
        random at each start, tells two sessions apart)."""
        ctx = self.ray.get_runtime_context()
        return f"{ctx.get_job_id()}/{ctx.get_node_id()}"

    def _pool_for(self, spec: BackendSpec) -> ActorPool:
        if self._pool is None:
            self._init()
            job, parked = (_parked or {}).pop(self._key(), (None, None))
            if parked is not None and job == self._job():
                logger.info("taking over %d idle Ray actor(s) for %s", self.actors, spec.model)
                self._pool = parked
            else:
                if parked is not None:  # another Ray session's: its handles are stale
                    with contextlib.suppress(Exception):
                        parked.close()
                _stop_parked()  # idle actors of another shape hold CPUs or GPUs this pool needs
                logger.info("starting %d Ray actor(s) for %s", self.actors, spec.model)
                self._pool = ActorPool(self.ray, self.worker, spec, self.actors, self.gpus,
                                       self._key()[3])
        if self._pool.spec != spec:
            self._pool.switch(spec)
        return self._pool

    def close(self, failed: bool = False) -> None:
        """The run is over: stop the actors (and free what they hold), or, while
        `keep_actors()` is open and the run did not fail, leave them idle for the next run."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if (not failed and _parked is not None and self.ray.is_initialized()
                and self._key() not in _parked):
            try:  # idle actors hold no model: the next run loads its own, read anew from disk
                pool.switch(None)
            except Exception:  # an actor that cannot even be reached: stop them all
                pool.close()
                return
            _parked[self._key()] = (self._job(), pool)
        else:
            pool.close()

    def _abandon(self) -> None:
        """A pass failed: stop the actors whatever else is open (one may be busy still)."""
        self.close(failed=True)

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
            return [token_stats_from(seq, stream.get(i), flag)
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
            out = [token_stats_from(s, stream.get(done + j), f) for j, (s, f) in enumerate(zip(ids, flags))]
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
                raise PddkitError(f"sampling on a Ray actor failed: {actor_error(e)}") from None
            return Sampled(tuple(t for part in parts for t in part.texts),
                           tuple(dict.fromkeys(x for part in parts for x in part.notices)))

        if getattr(backend, "store", None) is not None:
            return backend.sample(prompts, n, top_k, top_p, temperature, max_new_tokens, seeds,
                                  names=names, compute=compute)
        return compute(list(prompts), n, top_k, top_p, temperature, max_new_tokens, list(seeds),
                       list(names))

    def _start(self, backend: Backend, ids: Sequence[Sequence[int]], labels: list[str],
               desc: str, prefix: list[int] | None = None,
               fields: frozenset[str] = frozenset()) -> PassStream:
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
            return PassStream(iter(()), batches, bar, self._abandon)
        pool = self._pool_for(spec)
        logger.info("%s: %d texts in %d batches on %d Ray actor(s)", desc, len(ids), len(batches),
                    self.actors)
        rows = pool.run([[list(map(int, ids[i])) for i in batch] for batch in batches],
                        [[labels[i] for i in batch] for batch in batches], desc, prefix, fields)
        return PassStream(rows, batches, bar, self._abandon)
