"""The on-disk layout of a statistics cache directory (cache/store.py describes it): the
manifest, the shards' names, and reading a shard's index and arrays. Shared by the store,
the memo (memo.py) and `pddkit cache info/clear` (directory.py)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pddkit.errors import PddkitError
from pddkit.stats import OPTIONAL_FIELDS, PER_TEXT_SHAPES

logger = logging.getLogger(__name__)

FORMAT = "pddkit-stats-cache"
VERSION = 1  # bumped whenever the shard layout changes
MANIFEST = "manifest.json"
SHARD_PREFIX, SHARD_SUFFIX = "shard-", ".npz"
_UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def ids_digest(ids: Sequence[int] | np.ndarray) -> str:
    """Hex sha256 of a token-id sequence as little-endian int64 bytes."""
    return hashlib.sha256(np.asarray(ids, dtype="<i8").tobytes()).hexdigest()


def text_key(fingerprint: str, ids: Sequence[int] | np.ndarray) -> str:
    """The cache key of one id sequence under one model fingerprint."""
    return hashlib.sha256((fingerprint + ids_digest(ids)).encode("ascii")).hexdigest()


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


def read_index(shard: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(keys [n] S64, fingerprint index [n] int32, fingerprints [F] S64, models [F] str), or
    None (with a warning) for a shard of another version or one that cannot be read."""
    found = _read_index(shard)
    return None if found is None else found[:4]


def _read_index(shard: Path):
    """read_index's four arrays and, per optional field, which entries hold it ([n] bool;
    all False in a shard written before the field existed)."""
    try:
        with np.load(shard, allow_pickle=False) as z:
            if int(z["version"]) != VERSION:
                logger.warning("skipping cache shard %s: written by another version", shard)
                return None
            keys, fp_index, fps, models = z["keys"], z["fp_index"], z["fingerprints"], z["models"]
            has = {f: z[f"has_{f}"] if f"has_{f}" in z.files else np.zeros(len(keys), dtype=bool)
                   for f in OPTIONAL_FIELDS}
        n, f = len(keys), len(fps)
        if (keys.ndim != 1 or fp_index.shape != (n,) or models.shape != (f,)
                or any(h.shape != (n,) for h in has.values())
                or (n and not 0 <= int(fp_index.min()) <= int(fp_index.max()) < f)):
            raise ValueError("its index arrays do not fit together")
        return keys, fp_index, fps, models, has
    except _UNREADABLE as e:
        logger.warning("skipping unreadable cache shard %s: %s", shard, e)
        return None


def read_arrays(shard: Path, n: int) -> dict[str, np.ndarray]:
    """The statistics arrays of a shard of `n` entries; raises ValueError when they cannot
    be read or do not fit together."""
    try:
        with np.load(shard, allow_pickle=False) as z:
            if "var" not in z.files:
                raise ValueError("it has no variances (written by an older pddkit)")
            arrays = {k: z[k] for k in ("offsets", "truncated", "ids", "L", "H", "M2", "var")}
            if "has_top" in z.files:  # argmax ids (infill); older shards have none
                arrays["has_top"], arrays["top"] = z["has_top"], z["top"]
            for name in OPTIONAL_FIELDS:  # Lmax (gapk); older shards have none
                if f"has_{name}" in z.files:
                    arrays[f"has_{name}"], arrays[name] = z[f"has_{name}"], z[name]
    except _UNREADABLE as e:
        raise ValueError(str(e) or type(e).__name__) from None
    offsets, total = arrays["offsets"], len(arrays["ids"])
    if (offsets.shape != (n + 1,) or arrays["truncated"].shape != (n,) or int(offsets[0]) != 0
            or int(offsets[-1]) != total or bool(np.any(np.diff(offsets) < 0))
            or any(arrays[k].shape != (total,) for k in ("L", "H", "M2", "var"))
            or any(f"has_{k}" in arrays and (arrays[f"has_{k}"].shape != (n,)
                                             or arrays[k].shape != _field_shape(k, n, total))
                   for k in ("top", *OPTIONAL_FIELDS))):
        raise ValueError("its arrays do not fit together")
    return arrays


def _field_shape(name: str, n: int, total: int) -> tuple[int, ...]:
    """The shape of an optional field's array in a shard of `n` entries and `total`
    positions: one row per entry (stats.PER_TEXT_SHAPES: tempered), or one value per position."""
    return (n, *PER_TEXT_SHAPES[name]) if name in PER_TEXT_SHAPES else (total,)
