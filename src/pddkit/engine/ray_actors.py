"""The Ray engine's actors and what comes back from them (engine/executors_ray.py drives
them; this module never imports ray: the executor hands it the module). StatsWorker is one
actor: a backend built from its picklable spec when first asked, running the local
statistics pass on exactly the batch it is given, and moved to another spec in the same
process (`use`). ActorPool keeps `size` of them for one backend spec at a time, one batch
at a time per actor; an actor that dies is replaced and its batch
sent once more, and a batch that kills MAX_DEATHS actors ends the run with one sentence
naming its texts. PassStream reads a pass's batches as they finish, and token_stats_from
turns an actor's arrays back into the TokenStats the local pass gives."""

from __future__ import annotations

import logging
import re
from collections import Counter, deque
from collections.abc import Iterator, Sequence

import numpy as np

from pddkit.backends.base import Backend, BackendSpec
from pddkit.errors import PddkitError
from pddkit.stats import ON_REQUEST, TokenStats

logger = logging.getLogger(__name__)


MAX_DEATHS = 2  # a batch that kills this many actors ends the run


NAMED = 5  # texts named in that sentence, at most


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

    def use(self, spec: BackendSpec | None) -> None:
        """Serve `spec` from now on (None: nothing, waiting): a backend built for another
        spec is dropped and its memory freed before the new one is built, when first asked,
        in this same process (its interpreter, imports and threads kept)."""
        if spec == self.spec:
            return
        self.spec, self._built = spec, None
        import gc
        import sys

        gc.collect()  # the old model's tensors, held in reference cycles by some modules
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()

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


class ActorPool:
    """`size` actors of `worker` for one backend spec at a time (`switch` moves them to
    another), each running one batch at a time."""

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

    def switch(self, spec: BackendSpec | None) -> None:
        """The same actors serve `spec` from now on (StatsWorker.use: the old model freed
        first, so a device never holds both; None: no model, idle); an actor found dead is
        replaced."""
        self.spec = spec
        refs = [actor.use.remote(spec) for actor in self.actors]
        for slot, ref in enumerate(refs):
            try:
                self.ray.get(ref)
            except self.ray.exceptions.RayActorError:
                self.replace(slot)
            except self.ray.exceptions.RayError as e:
                raise PddkitError(f"a Ray actor failed: {actor_error(e)}") from None

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
                    raise PddkitError(f"a Ray actor could not start: {actor_error(e)}") from None
                if death == MAX_DEATHS:
                    raise PddkitError(f"the Ray actor loading {self.spec.model} died {death} times "
                                      "(out of memory, or a crash in native code)") from None
                self.replace(0)
            except self.ray.exceptions.RayError as e:
                raise PddkitError(f"a Ray actor failed: {actor_error(e)}") from None
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
                    raise PddkitError(f"a Ray actor could not start: {actor_error(e)}") from None
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
                raise PddkitError(f"a Ray actor failed: {actor_error(e)}") from None
            else:
                yield b, out
            idle.append(slot)


class PassStream:
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


def actor_error(error: BaseException) -> str:
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


def token_stats_from(ids: Sequence[int], arrays: tuple, truncated: bool) -> TokenStats:
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
