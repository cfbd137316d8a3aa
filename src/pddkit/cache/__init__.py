"""The statistics cache: per-text TokenStats keyed by model fingerprint and token ids.

store = StatsStore.open(directory)           # creates it; one sentence if unusable
backend = CachingBackend(backend, store)     # backends/caching.py: same Backend protocol
backend.hits, backend.misses                 # texts per pass (desc)
backend.close()                              # write what is buffered (also at exit)

layout.py is the directory's format (manifest, shards), store.py the statistics store,
memo.py the memo of other results, directory.py `pddkit cache info/clear`, fingerprint.py
what identifies a model and tokenizer.

May import: errors, version, params, registry, progress, stats, provenance, output_dir and
data.
"""

from __future__ import annotations

import os
from pathlib import Path

from pddkit.cache.directory import CacheInfo, ModelCount
from pddkit.cache.fingerprint import (
    fingerprint_of,
    hf_fingerprint,
    tokenizer_digest,
    weights_digest,
)
from pddkit.cache.layout import VERSION, text_key
from pddkit.cache.store import StatsStore


def cache_info(path: str | os.PathLike) -> CacheInfo:
    """What the cache directory `path` holds (`pddkit cache info DIR`)."""
    from pddkit.cache.directory import directory_info

    return directory_info(Path(path).expanduser())


def cache_clear(path: str | os.PathLike) -> int:
    """Remove the cache's own files from `path` (`pddkit cache clear DIR`); returns how many."""
    from pddkit.cache.directory import clear_directory

    return clear_directory(Path(path).expanduser())


__all__ = ["VERSION", "CacheInfo", "ModelCount", "StatsStore", "cache_clear",
           "cache_info", "fingerprint_of", "hf_fingerprint", "text_key", "tokenizer_digest",
           "weights_digest"]
