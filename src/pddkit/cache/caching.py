"""`CachingBackend`: any backend behind the statistics store (lm-evaluation-harness's
`CachingLM`). Only id sequences no finished shard holds reach the wrapped backend.

Misses are computed in chunks of `chunk` texts, longest first (the order the hf
backend's own pass uses), and the store flushes only between chunks, so every shard holds
whole chunks. A run killed and started again with the same texts therefore recomputes the
same chunks in the same batches, and its statistics equal an uninterrupted run's bit for bit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pddkit.backends.base import Backend, Capabilities, Encoded
from pddkit.cache.store import StatsStore, text_key
from pddkit.stats import TokenStats

logger = logging.getLogger(__name__)


def _batch_size(backend) -> int:
    """The wrapped backend's batch size when it has one (hf: its StatsRunner's), else 1."""
    for owner in (backend, getattr(backend, "runner", None)):
        size = getattr(owner, "batch_size", None)
        if isinstance(size, int) and size > 0:
            return size
    return 1


class CachingBackend:
    """`backend` with its statistics read from and written to `store`.

    `hits` and `misses` count texts per pass (the `desc` of stats_for_ids).
    """

    def __init__(self, backend: Backend, store: StatsStore, *, chunk: int | None = None) -> None:
        self.backend = backend
        self.store = store
        batch = _batch_size(backend)
        size = chunk if chunk is not None else store.flush_every
        self.chunk = max(batch, -(-max(1, size) // batch) * batch)  # a multiple of the batch size
        self.hits: dict[str, int] = {}
        self.misses: dict[str, int] = {}
        self.calls = 0  # calls of the wrapped backend's stats_for_ids
        self._fingerprint: str | None = None

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def capabilities(self) -> Capabilities:
        return self.backend.capabilities

    @property
    def kind(self) -> str:
        return getattr(self.backend, "kind", "?")

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self.backend.fingerprint()
        return self._fingerprint

    def encode(self, texts: Sequence[str], names: Sequence[str], what: str = "statistics") -> Encoded:
        return self.backend.encode(texts, names, what=what)

    def decode(self, ids: Sequence[int]) -> str:
        return self.backend.decode(ids)

    def counts(self) -> dict[str, tuple[int, int]]:
        """desc -> (hits, misses) of every pass so far."""
        return {d: (self.hits.get(d, 0), self.misses.get(d, 0))
                for d in dict.fromkeys([*self.hits, *self.misses])}

    def stats_for_ids(self, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                      desc: str = "statistics", compute=None) -> list[TokenStats]:
        """TokenStats per id sequence, in order: stored ones read, the others computed and
        stored. Each carries the `truncated` flag given here. `compute(ids, truncated,
        desc)` computes the misses elsewhere (the Ray executor); default: the backend."""
        compute = compute or (lambda i, t, d: self.backend.stats_for_ids(i, t, desc=d))
        fp = self.fingerprint()
        seqs = [list(s) for s in ids]
        flags = [bool(t) for t in truncated]
        keys = [text_key(fp, s) for s in seqs]
        found = self.store.get(keys)
        out: list[TokenStats | None] = [found.get(k) for k in keys]
        todo = [i for i, s in enumerate(out) if s is None]
        todo.sort(key=lambda i: -len(seqs[i]))  # stable: the hf pass's own order
        self.hits[desc] = self.hits.get(desc, 0) + len(keys) - len(todo)
        self.misses[desc] = self.misses.get(desc, 0) + len(todo)
        if todo:
            logger.info("%s: %d of %d texts from the cache, computing %d", desc,
                        len(keys) - len(todo), len(keys), len(todo))
        for c in range(0, len(todo), self.chunk):
            part = todo[c:c + self.chunk]
            self.calls += 1
            new = compute([seqs[i] for i in part], [flags[i] for i in part], desc)
            for i, st in zip(part, new):
                out[i] = st
            self.store.put_many(((keys[i], out[i]) for i in part), fingerprint=fp, model=self.name)
        return [_with_flag(st, flag) for st, flag in zip(out, flags)]

    def close(self) -> None:
        """Write what is buffered (also done at exit)."""
        self.store.close()

    def __enter__(self) -> CachingBackend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _with_flag(stats: TokenStats | None, truncated: bool) -> TokenStats:
    assert stats is not None
    if stats.truncated == truncated:
        return stats
    return TokenStats(ids=stats.ids, L=stats.L, H=stats.H, M2=stats.M2, truncated=truncated)
