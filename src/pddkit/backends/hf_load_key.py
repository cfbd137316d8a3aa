"""The `hf` backend's load key: what loading a model by name would give, named without
loading anything, so that the cache can remember the fingerprint, the facts results.json
reports and the texts' token ids under it (cache/memo.py). The key is a digest of the
folders loading reads (a local path, or its snapshot in the hub cache when loading is
offline) by their files' names, sizes and mtimes, the load options with device and dtype
resolved, the library versions and the statistics format."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pddkit.backends.base import STATS_FORMAT
from pddkit.backends.devices import resolve_device_dtype
from pddkit.backends.model_source import looks_local

_LIBRARIES = ("torch", "transformers", "tokenizers")


def folder_files(d: Path) -> list[tuple[str, int, int]]:
    """(name, size, mtime_ns) of each file of the folder `d`, sorted."""
    files = []
    for p in sorted(d.iterdir()):
        try:
            st = p.stat()
        except OSError:
            continue
        if p.is_file():
            files.append((p.name, st.st_size, st.st_mtime_ns))
    return files


def local_folder(name: str, marker: str, revision: str | None,
                 local_files_only: bool | None) -> Path | None:
    """The local folder `name` is read from, when that is known without loading: a local
    path, or (loading offline: `local_files_only` or HF_HUB_OFFLINE) the snapshot in the hub
    cache holding the file `marker`; None otherwise."""
    if looks_local(name):
        d = Path(name).expanduser()
        return d.resolve() if d.is_dir() else None
    offline = local_files_only or os.environ.get("HF_HUB_OFFLINE", "").lower() in (
        "1", "true", "yes", "on")
    if not offline:
        return None  # online, the hub may hold a newer revision: ask it by loading
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(name, marker, revision=revision)
    except Exception:  # any failure only means "load it"
        return None
    return Path(found).parent if isinstance(found, str) else None


def load_key(folders: list[Path], options: dict, where: str | None) -> str:
    """The key of a load reading `folders` (the model's, then its adapter's) with the load
    `options` (the backend spec's); `where`: where the model runs when not in this process
    (the Ray engine's actors)."""
    from importlib.metadata import PackageNotFoundError, version

    d, listed = folders[0], [folder_files(f) for f in folders]
    files = listed[0]
    o = options
    versions = {}
    for lib in _LIBRARIES:
        try:
            versions[lib] = version(lib)
        except PackageNotFoundError:
            versions[lib] = None
    parts = {"backend": "hf", "stats_format": STATS_FORMAT, "dir": str(d), "files": files,
             "device_dtype": resolve_device_dtype(o["device"], o["dtype"]),
             "trust_remote_code": o["trust_remote_code"], "revision": o["revision"],
             "versions": versions, **({"where": where} if where else {})}
    if len(folders) > 1:  # only with one: a key without an adapter stays as it was
        parts["adapter"] = {"dir": str(folders[1]), "files": listed[1]}
    if o.get("quantize"):
        parts["quantize"] = o["quantize"]
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
