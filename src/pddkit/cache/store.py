"""A content-addressed, append-only store of per-text statistics in a directory.

Layout: `manifest.json` ({"format": "pddkit-stats-cache", "version": N}) and immutable
shards `shard-<pid>-<time>-<random>.npz` (np.savez, no pickle). A shard holds each entry's
argmax ids (TokenStats.top, `infill`) as `top` (int32, -1 where absent) with `has_top`
per entry; a shard written before either existed reads as top=None. Each entry's variance
(TokenStats.var) is `var`; a shard without it (written before pddkit stored it, under
an older statistics format whose keys never match) is refused as unreadable rather than read
with a variance derived from M2 - H^2. An optional field (stats.OPTIONAL_FIELDS: Lmax,
`gapk`) is `<field>` (float32, NaN where absent) with `has_<field>` per entry; one held
per text (stats.PER_TEXT_SHAPES: tempered, `acmia`) is one float64 row per entry
([n, 2, 52]). A shard written before a field existed reads it as None, an entry that
stays a hit for every pass not asking for the field (`get(keys, fields)`, `holds`). A
pass asking for it computes the entry again, and the new entry replaces the old one
(put_many, _place). A shard is written to a hidden `*.tmp` file and renamed into place,
so a killed process leaves no shard a later run could read as complete; each writer names
its own shards, so processes need no locks.

A shard that cannot be read (truncated, garbage, arrays that do not fit together) is
skipped with a warning and counted (`StatsStore.skipped`, a notice of the run, `cache info`):
its texts are misses and are computed again, never a traceback.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence, Set
from pathlib import Path

import numpy as np

from pddkit.cache.layout import (
    FORMAT,
    MANIFEST,
    SHARD_PREFIX,
    SHARD_SUFFIX,
    VERSION,
    _read_index,
    check_directory,
    read_arrays,
    shard_paths,
    write_atomic,
)
from pddkit.errors import PddkitError
from pddkit.stats import OPTIONAL_FIELDS, PER_TEXT_SHAPES, TokenStats

logger = logging.getLogger(__name__)

_LOADED_SHARDS = 16  # shards kept in memory by get()


class _Pending:
    """Buffered entries not yet in a shard (kept apart from the store for its finaliser)."""

    def __init__(self) -> None:
        self.entries: OrderedDict[str, tuple[TokenStats, str, str]] = OrderedDict()

    def write(self, directory: Path) -> Path | None:
        """Write the buffer as one shard; None when empty."""
        if not self.entries:
            return None
        keys = list(self.entries)
        stats = [self.entries[k][0] for k in keys]
        fps = sorted({(fp, model) for _, fp, model in self.entries.values()})
        fp_pos = {pair: i for i, pair in enumerate(fps)}
        lengths = np.array([len(s) for s in stats], dtype=np.int64)  # [n]
        arrays = {
            "version": np.array(VERSION, dtype=np.int64),
            "keys": np.array(keys, dtype="S64"),  # [n]
            "fp_index": np.array([fp_pos[(fp, m)] for _, fp, m in self.entries.values()],
                                 dtype=np.int32),  # [n]
            "fingerprints": np.array([fp for fp, _ in fps], dtype="S64"),  # [F]
            "models": np.array([m for _, m in fps], dtype=str),  # [F]
            "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),  # [n+1]
            "truncated": np.array([s.truncated for s in stats], dtype=bool),  # [n]
            "ids": _cat([s.ids for s in stats], np.int64),  # [total]
            "L": _cat([s.L for s in stats], np.float32),  # [total]
            "H": _cat([s.H for s in stats], np.float32),  # [total]
            "M2": _cat([s.M2 for s in stats], np.float32),  # [total]
            "var": _cat([s.var for s in stats], np.float32),  # [total]
            "has_top": np.array([s.top is not None for s in stats], dtype=bool),  # [n]
            "top": _cat([np.full(len(s), -1) if s.top is None else s.top for s in stats],
                        np.int32),  # [total] argmax ids, -1 where an entry has none
        }
        for field in OPTIONAL_FIELDS:  # [n] bool and [total] float32, NaN where absent
            values = [getattr(s, field) for s in stats]
            arrays[f"has_{field}"] = np.array([v is not None for v in values], dtype=bool)
            if field in PER_TEXT_SHAPES:  # [n, *shape] float64, one row per entry
                shape = PER_TEXT_SHAPES[field]
                arrays[field] = np.stack([np.full(shape, np.nan) if v is None else
                                          np.asarray(v, dtype=np.float64).reshape(shape)
                                          for v in values]) if values else np.zeros((0, *shape))
                continue
            arrays[field] = _cat([np.full(len(s), np.nan) if v is None else v
                                  for s, v in zip(stats, values)], np.float32)
        name = f"{SHARD_PREFIX}{os.getpid()}-{time.time_ns()}-{secrets.token_hex(4)}{SHARD_SUFFIX}"
        target = directory / name
        write_atomic(target, lambda f: np.savez(f, **arrays))
        self.entries.clear()
        return target


def fields_of(stats: TokenStats) -> frozenset[str]:
    """The optional fields (stats.OPTIONAL_FIELDS) `stats` holds."""
    return frozenset(f for f in OPTIONAL_FIELDS if getattr(stats, f) is not None)


def _cat(parts: list[np.ndarray], dtype) -> np.ndarray:
    if not parts:
        return np.zeros(0, dtype=dtype)
    return np.concatenate([np.asarray(p, dtype=dtype).reshape(-1) for p in parts])


def _flush_at_exit(pending: _Pending, directory: Path) -> None:
    try:
        pending.write(directory)
    except Exception as e:  # at exit there is nobody to raise to
        logger.warning("could not write the last statistics of the cache %s: %s", directory, e)


class StatsStore:
    """Per-text TokenStats by key in a directory; see the module docstring for the layout."""

    def __init__(self, path: Path, *, flush_every: int = 256, flush_seconds: float = 60.0) -> None:
        self.path = path
        self.flush_every = max(1, int(flush_every))
        self.flush_seconds = float(flush_seconds)
        self._index: dict[str, tuple[int, int]] = {}  # key -> (shard number, row)
        self._shards: list[Path] = []
        self._keys: list[np.ndarray] = []  # per shard number: its keys [n] S64
        self._has: list[dict[str, np.ndarray]] = []  # per shard number: field -> [n] bool
        self._known: set[str] = set()
        self._bad: set[int] = set()  # shard numbers whose arrays could not be read
        self._readable: set[int] = set()  # shard numbers whose arrays were read
        self.skipped: list[str] = []  # names of the shards skipped as unreadable
        self._loaded: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self._pending = _Pending()
        self._last_flush = time.monotonic()
        self._finalizer = weakref.finalize(self, _flush_at_exit, self._pending, path)
        self.refresh()

    @classmethod
    def open(cls, path: str | os.PathLike, *, flush_every: int = 256,
             flush_seconds: float = 60.0) -> StatsStore:
        """Open (creating it if needed) the cache directory `path`."""
        p = Path(path).expanduser()
        check_directory(p, create=True)
        manifest = p / MANIFEST
        try:
            if not manifest.exists():
                body = json.dumps({"format": FORMAT, "version": VERSION}).encode("utf-8")
                write_atomic(manifest, lambda f: f.write(body))
            probe = p / f".write-test.{os.getpid()}.{secrets.token_hex(4)}.tmp"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise PddkitError(f"cache directory {p} is not writable: {e.strerror or e}") from None
        return cls(p, flush_every=flush_every, flush_seconds=flush_seconds)

    def refresh(self) -> int:
        """Index shards finished since the last look (by any process); returns how many."""
        return sum(self._add_shard(s) for s in shard_paths(self.path) if s.name not in self._known)

    def _add_shard(self, shard: Path) -> bool:
        self._known.add(shard.name)
        index = _read_index(shard)
        if index is None:
            self.skipped.append(shard.name)
            return False
        number = len(self._shards)
        self._shards.append(shard)
        self._keys.append(index[0])
        self._has.append(index[4])
        for row, key in enumerate(index[0].astype(str)):
            self._place(key, number, row)
        return True

    def _fields_at(self, number: int, row: int) -> frozenset[str]:
        """The optional fields of a stored entry."""
        return frozenset(f for f, has in self._has[number].items() if has[row])

    def _place(self, key: str, number: int, row: int) -> None:
        """Index `key` at (shard, row) unless it is indexed at an entry holding at least the
        same optional fields (among equals, the first shard in name order)."""
        here = self._index.setdefault(key, (number, row))
        if here != (number, row) and self._fields_at(*here) < self._fields_at(number, row):
            self._index[key] = (number, row)

    def _served(self, key: str) -> frozenset[str] | None:
        """The optional fields of the entry get() would serve for `key`; None if none is held."""
        if key in self._pending.entries:
            return fields_of(self._pending.entries[key][0])
        here = self._index.get(key)
        return None if here is None else self._fields_at(*here)

    def _drop(self, number: int, reason: str) -> None:
        """Stop serving a shard whose arrays cannot be read: its keys are misses, unless
        another shard holds them too."""
        shard = self._shards[number]
        logger.warning("skipping unreadable cache shard %s: %s (its texts are computed again)",
                       shard, reason)
        self.skipped.append(shard.name)
        self._bad.add(number)
        lost = {k for k, v in self._index.items() if v[0] == number}
        self._index = {k: v for k, v in self._index.items() if v[0] != number}
        for other, keys in enumerate(self._keys):
            if other not in self._bad:
                for row, key in enumerate(keys.astype(str)):
                    if key in lost:
                        self._place(key, other, row)

    def __contains__(self, key: str) -> bool:
        """Whether get() would serve `key` (to a pass asking for no optional field)."""
        return self.holds(key)

    def holds(self, key: str, fields: Set[str] = frozenset()) -> bool:
        """Whether get(.., fields) would serve `key`: an entry holding every optional field
        in `fields`, in a shard read once to make sure it can be (the Ray engine plans its
        misses with this)."""
        if key in self._pending.entries:
            return fields <= fields_of(self._pending.entries[key][0])
        while key in self._index:
            number, row = self._index[key]
            if not fields <= self._fields_at(number, row):
                return False
            if number in self._readable or self._arrays(number) is not None:
                return True
        return False

    def __len__(self) -> int:
        return len(self._index.keys() | self._pending.entries.keys())

    def get(self, keys: Sequence[str], fields: Set[str] = frozenset()) -> dict[str, TokenStats]:
        """The stored statistics of those `keys` the store holds (copies) with every optional
        field in `fields` (stats.OPTIONAL_FIELDS); an entry without one of them is left out,
        a miss for this call only."""
        out: dict[str, TokenStats] = {}
        todo = []
        for key in keys:
            if key in self._pending.entries:
                if fields <= fields_of(self._pending.entries[key][0]):
                    out[key] = self._pending.entries[key][0]
            else:
                todo.append(key)
        while todo:  # again for the keys of a shard found unreadable, from other shards
            by_shard: dict[int, list[tuple[str, int]]] = {}
            for key in todo:
                if key in self._index:
                    number, row = self._index[key]
                    if fields <= self._fields_at(number, row):
                        by_shard.setdefault(number, []).append((key, row))
            todo = []
            for number, rows in by_shard.items():
                z = self._arrays(number)
                if z is None:
                    todo += [key for key, _ in rows]
                    continue
                for key, row in rows:
                    a, b = int(z["offsets"][row]), int(z["offsets"][row + 1])
                    top = (z["top"][a:b].astype(np.int64)
                           if "has_top" in z and z["has_top"][row] else None)
                    extra = {f: (z[f][row] if f in PER_TEXT_SHAPES else z[f][a:b]).copy()
                             for f in OPTIONAL_FIELDS if f"has_{f}" in z and z[f"has_{f}"][row]}
                    out[key] = TokenStats(ids=z["ids"][a:b].copy(), L=z["L"][a:b].copy(),
                                          H=z["H"][a:b].copy(), M2=z["M2"][a:b].copy(),
                                          var=z["var"][a:b].copy(),
                                          truncated=bool(z["truncated"][row]), top=top, **extra)
        return out

    def _arrays(self, number: int) -> dict[str, np.ndarray] | None:
        """The statistics arrays of a shard; None (and the shard dropped) when unreadable."""
        if number in self._loaded:
            self._loaded.move_to_end(number)
            return self._loaded[number]
        try:
            arrays = read_arrays(self._shards[number], len(self._keys[number]))
        except ValueError as e:
            self._drop(number, str(e))
            return None
        self._loaded[number] = arrays
        self._readable.add(number)
        while len(self._loaded) > _LOADED_SHARDS:
            self._loaded.popitem(last=False)
        return arrays

    def put(self, key: str, stats: TokenStats, *, fingerprint: str = "", model: str = "") -> None:
        """Buffer one entry; written with the next flush (every `flush_every` entries or
        `flush_seconds`)."""
        self.put_many([(key, stats)], fingerprint=fingerprint, model=model)

    def put_many(self, items: Iterable[tuple[str, TokenStats]], *, fingerprint: str = "",
                 model: str = "") -> None:
        """Buffer entries together: a flush never splits them across shards. An entry the
        store already serves is kept, unless the new one holds an optional field it lacks
        (Lmax computed again for `gapk`): the new one then replaces it."""
        for key, stats in items:
            served = self._served(key)
            if served is None or not fields_of(stats) <= served:
                self._pending.entries[key] = (stats, fingerprint, model)
        self.maybe_flush()

    def maybe_flush(self) -> Path | None:
        """Flush when `flush_every` entries wait or `flush_seconds` have passed."""
        n = len(self._pending.entries)
        if n >= self.flush_every or (n and time.monotonic() - self._last_flush >= self.flush_seconds):
            return self.flush()
        return None

    def flush(self) -> Path | None:
        """Write the buffered entries as one shard now; returns it (None when empty)."""
        try:
            shard = self._pending.write(self.path)
        except OSError as e:
            raise PddkitError(f"cannot write to cache directory {self.path}: {e.strerror or e}") from None
        self._last_flush = time.monotonic()
        if shard is not None:
            logger.debug("wrote cache shard %s", shard.name)
            self._add_shard(shard)
        return shard

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> StatsStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def info(self):
        """What the directory holds (cache/directory.py CacheInfo), after a flush."""
        from pddkit.cache.directory import directory_info

        self.flush()
        return directory_info(self.path)

    def clear(self) -> int:
        """Remove pddkit's own files (and the directory when it is then empty)."""
        from pddkit.cache.directory import clear_directory

        self._pending.entries.clear()
        self._index.clear()
        self._shards.clear()
        self._keys.clear()
        self._has.clear()
        self._known.clear()
        self._bad.clear()
        self._readable.clear()
        self._loaded.clear()
        return clear_directory(self.path)
