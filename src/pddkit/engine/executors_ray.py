"""The Ray executor (`engine="ray"`): statistics passes spread over Ray actors with Ray Data.
The only module that imports ray (`pip install 'pddkit[ray]'`).

The driver encodes the texts with the backend's own tokenizer (so truncation and errors
are those of the local engine), looks up the statistics cache, and cuts the sequences that
remain into the batches the local pass would make (longest first, `batch_size` each).
Each batch is one row of a Ray dataset (`from_items`, with its row index); `map_batches`
runs a callable class on an actor pool (`ActorPoolStrategy(size=actors)`), each actor
building its backend once from the backend's picklable spec and running the same
statistics pass on exactly that batch; per-token arrays come back as Arrow list columns
and are put back in order by row index. Same batches, same code: the statistics equal the
local engine's bit for bit on CPU.

One dataset (one actor pool, one model load per actor) serves a whole call. Behind the
cache, the driver writes the new statistics as they stream back, chunk by chunk (one
writer, so the actors need neither the cache folder - on a cluster, often not their
disk - nor locks), and a killed run keeps every chunk it finished."""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Sequence

import numpy as np

from pddkit import progress
from pddkit.backends.base import Backend, BackendSpec
from pddkit.errors import PddkitError
from pddkit.stats import TokenStats

logger = logging.getLogger(__name__)


def _ray():
    try:
        import ray
    except ModuleNotFoundError:
        raise PddkitError("`engine='ray'` needs Ray: `pip install 'pddkit[ray]'`") from None
    return ray


class StatsActor:
    """Ray Data callable class: one backend per actor, built from its spec."""

    def __init__(self, spec: BackendSpec, threads: int) -> None:
        import torch

        if threads > 0:
            torch.set_num_threads(threads)  # two one-CPU actors must not each take every core
        self.backend = spec.build()

    def __call__(self, batch):
        """One row = one batch of the local pass: [rows] -> L, H, M2 as Arrow list columns."""
        import pyarrow as pa

        rows = batch.column("row").to_pylist()
        ids_col = batch.column("ids").to_pylist()  # [R][B][n]
        out = {"row": rows, "L": [], "H": [], "M2": []}
        for seqs in ids_col:
            stats = self.backend.stats_for_ids(seqs, [False] * len(seqs), desc="ray actor")
            for k in ("L", "H", "M2"):
                out[k].append([getattr(st, k).tolist() for st in stats])
        f32 = pa.list_(pa.list_(pa.float32()))  # [R][B][n]
        return pa.table({"row": pa.array(rows, pa.int64()), "L": pa.array(out["L"], f32),
                         "H": pa.array(out["H"], f32), "M2": pa.array(out["M2"], f32)})


class _Stream:
    """One Ray Data pass over `ids` (the local pass's batches), read as it streams:
    `get(i)` waits for the batch holding sequence i and returns its (L, H, M2)."""

    def __init__(self, ray, rows, batches: list[list[int]]) -> None:
        self.ray, self.rows, self.batches = ray, rows, batches
        self.ready: dict[int, tuple] = {}

    def get(self, i: int) -> tuple:
        while i not in self.ready:
            try:
                row = next(self.rows)
            except StopIteration:
                raise RuntimeError("the Ray pass returned no statistics for some texts") from None
            except self.ray.exceptions.RayError as e:
                raise PddkitError(f"a Ray actor failed: {_cause(e)}") from None
            for j, k in enumerate(self.batches[int(row["row"])]):
                self.ready[k] = (row["L"][j], row["H"][j], row["M2"][j])
        return self.ready.pop(i)


def _cause(error: BaseException) -> str:
    """The last line of what went wrong in an actor (Ray wraps it in tracebacks)."""
    text = ""
    for _ in range(8):  # Ray Data -> Ray task or actor -> the exception raised in the actor
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
    started here). `threads`: torch threads per actor on CPU (0 = torch's default)."""

    name = "ray"

    def __init__(self, address: str | None = None, actors: int = 1, gpus_per_actor: float = 0.0,
                 threads: int = 1) -> None:
        self.ray = _ray()
        if actors < 1:
            raise PddkitError(f"`actors` must be at least 1, not {actors}")
        self.address, self.actors, self.gpus, self.threads = address, actors, gpus_per_actor, threads

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

    def token_stats(self, backend: Backend, texts: Sequence[str], names: Sequence[str],
                    desc: str) -> list[TokenStats]:
        enc = backend.encode(texts, names, what=desc)
        store = getattr(backend, "store", None)
        if store is None:
            stream = self._start(backend, enc.ids, desc)
            return [_stats(ids, stream.get(i), flag)
                    for i, (ids, flag) in enumerate(zip(enc.ids, enc.truncated))]
        # the statistics cache: only its misses go to the actors, in one pass, in the order
        # CachingBackend asks for them (longest first), so each chunk is stored as it arrives
        from pddkit.cache import text_key

        fp = backend.fingerprint()
        todo = [i for i, s in enumerate(enc.ids) if text_key(fp, list(s)) not in store]
        todo.sort(key=lambda i: -len(enc.ids[i]))
        misses = [list(enc.ids[i]) for i in todo]
        stream = self._start(backend.backend, misses, desc) if misses else None
        done = 0

        def compute(ids, flags, d):
            nonlocal done
            if stream is None or [list(s) for s in ids] != misses[done:done + len(ids)]:
                raise RuntimeError("the cache asked the Ray engine for texts it did not plan")
            out = [_stats(s, stream.get(done + j), f) for j, (s, f) in enumerate(zip(ids, flags))]
            done += len(ids)
            return out

        return backend.stats_for_ids(enc.ids, enc.truncated, desc=desc, compute=compute)

    def _start(self, backend: Backend, ids: Sequence[Sequence[int]], desc: str) -> _Stream:
        """Start the Ray Data pass over `ids` (lazily: rows stream as actors finish)."""
        spec = getattr(backend, "spec", None)
        if spec is None:
            raise PddkitError(f"`engine='ray'` needs a model it can load by name in each actor; "
                              f"{backend.name} was handed over in memory (use the local engine, "
                              "or give its directory or hub id)")
        size = max(1, int(getattr(backend, "batch_size", 8)))
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # the local pass's order
        batches = [order[b:b + size] for b in range(0, len(order), size)]
        if not batches:
            return _Stream(self.ray, iter(()), batches)
        self._init()
        context = self.ray.data.DataContext.get_current()
        context.enable_progress_bars = progress.enabled()  # PDDKIT_PROGRESS=0 silences Ray's too
        context.print_on_execution_start = False
        # Ray Data's own notices (start, finish, "progress bars disabled"): errors only
        logging.getLogger("ray.data").setLevel(logging.WARNING if progress.enabled() else logging.ERROR)
        items = [{"row": r, "ids": [list(map(int, ids[i])) for i in batch]}
                 for r, batch in enumerate(batches)]
        logger.info("%s: %d texts in %d batches on %d Ray actor(s)", desc, len(ids), len(batches),
                    self.actors)
        ds = self.ray.data.from_items(items).map_batches(
            StatsActor, batch_size=1, batch_format="pyarrow",
            fn_constructor_kwargs={"spec": spec, "threads": self.threads if not self.gpus else 0},
            compute=self.ray.data.ActorPoolStrategy(size=self.actors), num_gpus=self.gpus or None)
        return _Stream(self.ray, iter(ds.iter_rows()), batches)


def _stats(ids: Sequence[int], arrays: tuple, truncated: bool) -> TokenStats:
    """TokenStats as the local pass gives them: int64 ids, float32 L, H, M2."""
    L, H, M2 = (np.asarray(a, dtype=np.float32) for a in arrays)
    return TokenStats(np.asarray(ids, dtype=np.int64), L, H, M2, bool(truncated))
