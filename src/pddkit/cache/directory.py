"""What a statistics cache directory holds (`pddkit cache info`) and removing it
(`pddkit cache clear`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pddkit.cache.layout import (
    MANIFEST,
    SHARD_PREFIX,
    VERSION,
    _our_manifest,
    check_directory,
    read_index,
    shard_paths,
)
from pddkit.cache.memo import MEMO
from pddkit.errors import PddkitError


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
    unreadable: int = 0  # shards that cannot be read (skipped)
    memo_files: int = 0  # memo/: fingerprints, encodings and spans, blind scores, figures
    memo_bytes: int = 0


def directory_info(path: Path) -> CacheInfo:
    """Shards, distinct entries, bytes and entries per model of a cache directory, and the
    files and bytes of its memo."""
    check_directory(path, create=False)
    keys_per_fp: dict[tuple[str, str], set[str]] = {}
    shards, size, unreadable = 0, 0, 0
    seen: set[str] = set()
    for shard in shard_paths(path):
        index = read_index(shard)
        if index is None:
            unreadable += 1
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
    memo = _memo_files(path)
    return CacheInfo(path=str(path), version=VERSION, shards=shards, entries=len(seen),
                     bytes=size, models=models, unfinished=len(_temporary_files(path)),
                     unreadable=unreadable, memo_files=len(memo),
                     memo_bytes=sum(p.stat().st_size for p in memo))


def _memo_files(path: Path) -> list[Path]:
    """The files of memo/ beside our manifest (cache/memo.py), and samia's sampled
    continuations there (cache/samples.py): `info` counts them, `clear` removes them."""
    if not (path / MANIFEST).exists():
        return []
    from pddkit.cache.samples import FILE_NAME

    memo = path / MEMO
    found = [p for p in memo.rglob("*") if p.is_file()] if memo.is_dir() else []
    return found + [p for p in [path / FILE_NAME] if p.is_file()]


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
    memo = path / MEMO
    owned = manifest.exists() and memo.is_dir()  # a memo/ beside our manifest only
    ours += _memo_files(path)
    if manifest.exists():
        ours.append(manifest)
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
