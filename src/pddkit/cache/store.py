"""A content-addressed, append-only store of per-text statistics in a directory.

Layout: `manifest.json` ({"format": "pddkit-stats-cache", "version": N}) and immutable
shards `shard-<pid>-<time>-<random>.npz` (np.savez, no pickle). A shard is written to a
hidden `*.tmp` file and renamed into place, so a killed process leaves no shard a later run
could read as complete; each writer names its own shards, so processes need no locks.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import time
import weakref
import zipfile
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pddkit.errors import PddkitError
from pddkit.stats import TokenStats

logger = logging.getLogger(__name__)

FORMAT = "pddkit-stats-cache"
VERSION = 1  # bumped whenever the shard layout changes
MANIFEST = "manifest.json"
SHARD_PREFIX, SHARD_SUFFIX = "shard-", ".npz"
_LOADED_SHARDS = 16  # shards kept in memory by get()


def ids_digest(ids: Sequence[int] | np.ndarray) -> str:
    """Hex sha256 of a token-id sequence as little-endian int64 bytes."""
    return hashlib.sha256(np.asarray(ids, dtype="<i8").tobytes()).hexdigest()


def text_key(fingerprint: str, ids: Sequence[int] | np.ndarray) -> str:
    """The cache key of one id sequence under one model fingerprint."""
    return hashlib.sha256((fingerprint + ids_digest(ids)).encode("ascii")).hexdigest()


@dataclass(frozen=True)
class ModelCount:
    fingerprint: str
    model: str  # the backend's name when the entries were written
    entries: int


@dataclass(frozen=True)
class CacheInfo:
    """What a cache directory holds."""

    path: str
    version: int
    shards: int
    entries: int  # distinct texts (keys)
    bytes: int  # shards and manifest on disk
    models: tuple[ModelCount, ...]
    unfinished: int = 0  # *.tmp files of writers that were killed (ignored)

    def lines(self) -> list[str]:
        """Human-readable lines for `pddkit cache info`."""
        out = [f"cache {self.path} (format version {self.version})",
               f"{self.shards} shards, {self.entries:,} texts, {self.bytes / 2**20:,.1f} MiB"]
        out += [f"  {m.model or '?'} [{m.fingerprint[:12]}]: {m.entries:,} texts" for m in self.models]
        if self.unfinished:
            out.append(f"{self.unfinished} unfinished temporary files (ignored; `clear` removes them)")
        return out


def _our_manifest(path: Path) -> dict:
    """The cache directory's manifest; a foreign or unreadable one is refused."""
    try:
        data = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PddkitError(f"{path} is not a pddkit statistics cache ({MANIFEST} is not ours)")
    return data


def check_directory(path: Path, *, create: bool) -> None:
    """Refuse a file, a foreign or other-version cache, a missing or unwritable folder."""
    if path.exists() and not path.is_dir():
        raise PddkitError(f"cache path {path} is a file, not a directory")
    if not path.exists():
        if not create:
            raise PddkitError(f"cache directory {path} does not exist")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise PddkitError(f"cannot create cache directory {path}: {e.strerror or e}") from None
    manifest = path / MANIFEST
    if manifest.exists():
        data = _our_manifest(path)
        if data.get("version") != VERSION:
            raise PddkitError(
                f"cache directory {path} was written by statistics-cache version "
                f"{data.get('version')} and this pddkit uses version {VERSION}: clear it "
                "(pddkit cache clear) or use another directory")


def write_atomic(path: Path, write) -> None:
    """Call write(file) on a hidden temporary file beside `path`, then rename it into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def shard_paths(path: Path) -> list[Path]:
    """Finished shards, sorted by name (temporary files never match)."""
    return sorted(p for p in path.glob(f"{SHARD_PREFIX}*{SHARD_SUFFIX}") if p.is_file())


def _read_index(shard: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(keys [n] S64, fingerprint index [n] int32, fingerprints [F] S64, models [F] str)."""
    try:
        with np.load(shard, allow_pickle=False) as z:
            if int(z["version"]) != VERSION:
                logger.warning("skipping cache shard %s: written by another version", shard)
                return None
            return z["keys"], z["fp_index"], z["fingerprints"], z["models"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        logger.warning("skipping unreadable cache shard %s: %s", shard, e)
        return None


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
        }
        name = f"{SHARD_PREFIX}{os.getpid()}-{time.time_ns()}-{secrets.token_hex(4)}{SHARD_SUFFIX}"
        target = directory / name
        write_atomic(target, lambda f: np.savez(f, **arrays))
        self.entries.clear()
        return target


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
        self._known: set[str] = set()
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
            return False
        number = len(self._shards)
        self._shards.append(shard)
        for row, key in enumerate(index[0].astype(str)):
            self._index.setdefault(key, (number, row))
        return True

    def __contains__(self, key: str) -> bool:
        return key in self._pending.entries or key in self._index

    def __len__(self) -> int:
        return len(self._index.keys() | self._pending.entries.keys())

    def get(self, keys: Sequence[str]) -> dict[str, TokenStats]:
        """The stored statistics of those `keys` the store holds (copies)."""
        out: dict[str, TokenStats] = {}
        by_shard: dict[int, list[tuple[str, int]]] = {}
        for key in keys:
            if key in self._pending.entries:
                out[key] = self._pending.entries[key][0]
            elif key in self._index:
                number, row = self._index[key]
                by_shard.setdefault(number, []).append((key, row))
        for number, rows in by_shard.items():
            z = self._arrays(number)
            for key, row in rows:
                a, b = int(z["offsets"][row]), int(z["offsets"][row + 1])
                out[key] = TokenStats(ids=z["ids"][a:b].copy(), L=z["L"][a:b].copy(),
                                      H=z["H"][a:b].copy(), M2=z["M2"][a:b].copy(),
                                      truncated=bool(z["truncated"][row]))
        return out

    def _arrays(self, number: int) -> dict[str, np.ndarray]:
        if number in self._loaded:
            self._loaded.move_to_end(number)
            return self._loaded[number]
        with np.load(self._shards[number], allow_pickle=False) as z:
            arrays = {k: z[k] for k in ("offsets", "truncated", "ids", "L", "H", "M2")}
        self._loaded[number] = arrays
        while len(self._loaded) > _LOADED_SHARDS:
            self._loaded.popitem(last=False)
        return arrays

    def put(self, key: str, stats: TokenStats, *, fingerprint: str = "", model: str = "") -> None:
        """Buffer one entry; written with the next flush (every `flush_every` entries or
        `flush_seconds`)."""
        self.put_many([(key, stats)], fingerprint=fingerprint, model=model)

    def put_many(self, items: Iterable[tuple[str, TokenStats]], *, fingerprint: str = "",
                 model: str = "") -> None:
        """Buffer entries together: a flush never splits them across shards."""
        for key, stats in items:
            if key not in self._index:
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

    def info(self) -> CacheInfo:
        self.flush()
        return directory_info(self.path)

    def clear(self) -> int:
        """Remove pddkit's own files (and the directory when it is then empty)."""
        self._pending.entries.clear()
        self._index.clear()
        self._shards.clear()
        self._known.clear()
        self._loaded.clear()
        return clear_directory(self.path)


def directory_info(path: Path) -> CacheInfo:
    """Shards, distinct entries, bytes and entries per model of a cache directory."""
    check_directory(path, create=False)
    keys_per_fp: dict[tuple[str, str], set[str]] = {}
    shards, size = 0, 0
    seen: set[str] = set()
    for shard in shard_paths(path):
        index = _read_index(shard)
        if index is None:
            continue
        shards += 1
        size += shard.stat().st_size
        keys, fp_index, fps, models = index
        pairs = [(fp.decode("ascii"), str(m)) for fp, m in zip(fps, models)]
        for key, i in zip(keys.astype(str), fp_index):
            keys_per_fp.setdefault(pairs[int(i)], set()).add(key)
            seen.add(key)
    manifest = path / MANIFEST
    size += manifest.stat().st_size if manifest.exists() else 0
    counts = Counter({pair: len(k) for pair, k in keys_per_fp.items()})
    models = tuple(ModelCount(fp, m, n) for (fp, m), n in
                   sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return CacheInfo(path=str(path), version=VERSION, shards=shards, entries=len(seen),
                     bytes=size, models=models, unfinished=len(_temporary_files(path)))


def _temporary_files(path: Path) -> list[Path]:
    patterns = (f".{SHARD_PREFIX}*.tmp", f".{MANIFEST}.*.tmp", ".write-test.*.tmp")
    return [p for pattern in patterns for p in path.glob(pattern) if p.is_file()]


def clear_directory(path: Path) -> int:
    """Remove the cache's shards, temporary files and manifest; the directory too when
    nothing else is left in it. Returns the number of files removed."""
    if path.exists() and not path.is_dir():
        raise PddkitError(f"cache path {path} is a file, not a directory")
    if not path.exists():
        raise PddkitError(f"cache directory {path} does not exist")
    manifest = path / MANIFEST
    ours = shard_paths(path) + _temporary_files(path)
    if not ours and not manifest.exists():
        return 0
    if manifest.exists():
        _our_manifest(path)
        ours.append(manifest)
    memo = path / "memo"  # cache/memo.py: fingerprints, encodings, blind-baseline scores
    owned = manifest.exists() and memo.is_dir()  # a memo/ beside our manifest only
    memo_files = [p for p in memo.rglob("*") if p.is_file()] if owned else []
    ours += memo_files
    try:
        for p in ours:
            p.unlink(missing_ok=True)
        if owned:
            for d in sorted((p for p in memo.rglob("*") if p.is_dir()), reverse=True):
                d.rmdir()
            memo.rmdir()
        if not any(path.iterdir()):
            path.rmdir()
    except OSError as e:
        raise PddkitError(f"cannot remove files from cache directory {path}: {e.strerror or e}") from None
    return len(ours)
