"""`pddkit cache info`: a cache folder's shards, texts, size and memo, and the texts per
model, from its CacheInfo (cache/directory.py), as the lines the command prints."""

from __future__ import annotations

from pddkit.cache.directory import CacheInfo


def cache_info_lines(info: CacheInfo) -> list[str]:
    """What a cache folder holds (cache/directory.py CacheInfo), line by line."""
    out = [f"cache {info.path} (format version {info.version})",
           f"{info.shards} shards, {info.entries:,} texts, {info.bytes / 2**20:,.1f} MiB",
           f"memo: {info.memo_files:,} files, {info.memo_bytes / 2**20:,.1f} MiB"]
    out += [f"  {m.model or '?'} [{m.fingerprint[:12]}]: {m.entries:,} texts" for m in info.models]
    if info.unreadable:
        out.append(f"{info.unreadable} unreadable shards (skipped; `clear` removes them)")
    if info.unfinished:
        out.append(f"{info.unfinished} unfinished temporary files (ignored; `clear` removes them)")
    return out
