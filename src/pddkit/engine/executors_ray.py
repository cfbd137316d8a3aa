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
local engine's bit for bit on CPU. New statistics are written to the cache by the driver
(one writer, so the actors need neither the cache folder nor locks)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from pddkit.backends.base import Backend, BackendSpec
from pddkit.errors import PddkitError
from pddkit.stats import TokenStats

logger = logging.getLogger(__name__)


def _ray():
    try:
        import ray
    except ModuleNotFoundError:
        raise PddkitError("engine 'ray' needs Ray: pip install 'pddkit[ray]'") from None
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
        f32 = pa.list_(pa.list_(pa.float32()))
        return pa.table({"row": pa.array(rows, pa.int64()), "L": pa.array(out["L"], f32),
                         "H": pa.array(out["H"], f32), "M2": pa.array(out["M2"], f32)})


class RayExecutor:
    """Statistics passes on `actors` Ray actors (`address`: an existing cluster, else one
    started here). `threads`: torch threads per actor on CPU (0 = torch's default)."""

    name = "ray"

    def __init__(self, address: str | None = None, actors: int = 1, gpus_per_actor: float = 0.0,
                 threads: int = 1) -> None:
        self.ray = _ray()
        if actors < 1:
            raise PddkitError(f"actors must be at least 1, not {actors}")
        self.address, self.actors, self.gpus, self.threads = address, actors, gpus_per_actor, threads

    def _init(self) -> None:
        if not self.ray.is_initialized():
            self.ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                          configure_logging=False)

    def token_stats(self, backend: Backend, texts: Sequence[str], names: Sequence[str],
                    desc: str) -> list[TokenStats]:
        enc = backend.encode(texts, names, what=desc)
        if hasattr(backend, "store"):  # the statistics cache: only its misses go to the actors
            return backend.stats_for_ids(enc.ids, enc.truncated, desc=desc,
                                         compute=lambda ids, flags, d: self._remote(
                                             backend.backend, ids, flags, d))
        return self._remote(backend, enc.ids, enc.truncated, desc)

    def _remote(self, backend: Backend, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                desc: str) -> list[TokenStats]:
        spec = getattr(backend, "spec", None)
        if spec is None:
            raise PddkitError(f"engine 'ray' needs a model it can load by name in each actor; "
                              f"{backend.name} was handed over in memory (use the local engine, "
                              "or give its directory or hub id)")
        if not ids:
            return []
        self._init()
        size = max(1, int(getattr(getattr(backend, "runner", None), "batch_size", 8)))
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # the local pass's order
        batches = [order[b:b + size] for b in range(0, len(order), size)]
        items = [{"row": r, "ids": [list(map(int, ids[i])) for i in batch]}
                 for r, batch in enumerate(batches)]
        logger.info("%s: %d texts in %d batches on %d Ray actor(s)", desc, len(ids), len(batches),
                    self.actors)
        ds = self.ray.data.from_items(items).map_batches(
            StatsActor, batch_size=1, batch_format="pyarrow",
            fn_constructor_kwargs={"spec": spec, "threads": self.threads if not self.gpus else 0},
            compute=self.ray.data.ActorPoolStrategy(size=self.actors), num_gpus=self.gpus or None)
        out: list[TokenStats | None] = [None] * len(ids)
        for row in ds.iter_rows():
            batch = batches[int(row["row"])]
            for j, i in enumerate(batch):
                out[i] = TokenStats(np.asarray(ids[i], dtype=np.int64),
                                    np.asarray(row["L"][j], dtype=np.float32),
                                    np.asarray(row["H"][j], dtype=np.float32),
                                    np.asarray(row["M2"][j], dtype=np.float32), bool(truncated[i]))
        missing = [i for i, st in enumerate(out) if st is None]
        if missing:
            raise RuntimeError(f"the Ray pass returned no statistics for {len(missing)} texts")
        return out  # type: ignore[return-value]
