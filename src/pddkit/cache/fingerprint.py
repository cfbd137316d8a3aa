"""Model fingerprints: a hex digest that changes whenever the statistics could change.

A backend's `fingerprint()` names its model. For the `hf` backend the weights are named by
their content: a model pddkit loaded from files itself, by the files (the hub cache's blob
names, free, else a sha256 of each weight file memoised by path, size and mtime); a model
object handed over in memory, by its tensors (cache/tensor_digest.py), since it may have
changed since it was loaded.

A backend puts everything that names its model into `fingerprint()` (the `openai` backend
its canary too). The statistics cache keys entries by `cache_fingerprint(fingerprint)`:
that plus the torch and transformers versions and STATS_CODE_VERSION, so neither an
upgrade nor a change of the statistics code reuses old statistics.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

from pddkit.cache.tensor_digest import tensor_digest

logger = logging.getLogger(__name__)

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt")
# config keys that name where or with what a model was saved, not what it computes
CONFIG_NOISE = ("_name_or_path", "name_or_path", "transformers_version", "_commit_hash",
                "dtype", "torch_dtype")
# tokenizer runtime settings, not part of what ids mean
TOKENIZER_NOISE = ("truncation", "padding")
_BLOB = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")  # git sha1 or LFS sha256
_CHUNK = 8 * 2**20
# Bump whenever the code computing per-token statistics changes their numbers (the hf pass
# in backends/stats_pass.py, the openai backend's log-probabilities, pddkit/stats.py):
# every cache entry written before is then a miss. (STATS_FORMAT in backends/base.py
# is the layout and meaning of TokenStats.)
# 2: the hf pass also gives each position's argmax id (TokenStats.top, `infill`); entries
# written before lack it and must not be served.
STATS_CODE_VERSION = 2
KEY_LIBRARIES = ("torch", "transformers")  # their versions are part of every cache key


def fingerprint_of(parts: Mapping[str, object]) -> str:
    """Hex sha256 of `parts` (JSON-able values; anything else by its str)."""
    text = json.dumps(dict(parts), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def library_versions() -> dict[str, str | None]:
    """Installed versions of KEY_LIBRARIES (None for one not installed); imports nothing."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for lib in KEY_LIBRARIES:
        try:
            out[lib] = version(lib)
        except PackageNotFoundError:
            out[lib] = None
    return out


def cache_fingerprint(model_fingerprint: str) -> str:
    """The fingerprint the statistics cache keys entries by: the backend's fingerprint (all
    a backend contributes, its canary included), the library versions and
    STATS_CODE_VERSION."""
    return fingerprint_of({"model": model_fingerprint, "versions": library_versions(),
                           "stats_code": STATS_CODE_VERSION})


def hf_fingerprint(model, tokenizer, *, start_id: int, dtype: str, backend: str = "hf",
                   stats_format: int = 1, memo_path: str | Path | None = None,
                   weights: str = "files") -> str:
    """Fingerprint of a Hugging Face model: weights, config, tokenizer, start token, dtype,
    backend kind and statistics format. `weights`: "files" (the weight files the model was
    loaded from, its tensors when none are found) for a model pddkit loaded itself,
    "tensors" for a model object handed over (it may differ from any files)."""
    if weights not in ("files", "tensors"):
        raise ValueError(f"weights must be 'files' or 'tensors', not {weights!r}")
    digest = (weights_digest(model, memo_path=memo_path) if weights == "files"
              else "tensors:" + tensor_digest(model))
    return fingerprint_of({
        "backend": backend,
        "stats_format": int(stats_format),
        "start_id": int(start_id),
        "dtype": str(dtype).replace("torch.", ""),
        "weights": digest,
        "config": config_digest(model),
        "attention": getattr(getattr(model, "config", None), "_attn_implementation", None),
        "tokenizer": tokenizer_digest(tokenizer),
    })


def config_digest(model) -> str:
    """Hex sha256 of the model's config without path-like and version noise."""
    cfg = getattr(model, "config", None)
    if cfg is None:
        return fingerprint_of({"class": type(model).__name__})
    d = cfg.to_dict() if hasattr(cfg, "to_dict") else dict(vars(cfg))
    for key in CONFIG_NOISE:
        d.pop(key, None)
    return fingerprint_of(d)


def tokenizer_digest(tokenizer) -> str:
    """Hex sha256 of a tokenizer's vocabulary, merges, normaliser and special tokens."""
    fast = getattr(tokenizer, "backend_tokenizer", None)
    parts: dict[str, object] = {
        "special": {k: str(v) for k, v in sorted(getattr(tokenizer, "special_tokens_map", {}).items())},
        "special_ids": sorted(int(i) for i in getattr(tokenizer, "all_special_ids", []) or []),
    }
    if fast is not None:
        spec = json.loads(fast.to_str())
        for key in TOKENIZER_NOISE:
            spec.pop(key, None)
        parts["fast"] = spec
    else:  # a slow tokenizer: its algorithm is its class
        parts["class"] = type(tokenizer).__name__
        parts["vocab"] = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        ranks = getattr(tokenizer, "bpe_ranks", None)
        if ranks:
            parts["merges"] = sorted((" ".join(k), int(v)) for k, v in ranks.items())
    return fingerprint_of(parts)


def weights_digest(model, *, memo_path: str | Path | None = None) -> str:
    """Content digest of the model's weights: "files:<hex>" from its weight files, or
    "tensors:<hex>" from its tensors when no weight files are found."""
    files = weight_files(model)
    if files:
        memo = DigestMemo(Path(memo_path) if memo_path else default_memo_path())
        entries = [(p.name, file_digest(p, memo)) for p in files]
        memo.save()
        return "files:" + fingerprint_of({"files": entries})
    logger.info("no weight files found for %s: hashing its tensors in memory",
                type(model).__name__)
    return "tensors:" + tensor_digest(model)


def model_directory(model) -> Path | None:
    """The local directory the model was loaded from: its own path, or its snapshot in the
    hub cache (from the config's commit hash); None for a model built in memory."""
    cfg = getattr(model, "config", None)
    names = [getattr(model, "name_or_path", None), getattr(cfg, "_name_or_path", None)]
    for name in names:
        if name and Path(name).expanduser().is_dir():
            return Path(name).expanduser().resolve()
    commit = getattr(cfg, "_commit_hash", None)
    for name in names:
        if name and commit:
            snap = hub_cache_dir() / f"models--{name.replace('/', '--')}" / "snapshots" / commit
            if snap.is_dir():
                return snap
    return None


def hub_cache_dir() -> Path:
    try:
        from huggingface_hub import constants

        return Path(constants.HF_HUB_CACHE)
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return Path("~/.cache/huggingface/hub").expanduser()


def weight_files(model) -> list[Path]:
    """Weight files of the model's directory, sorted; safetensors only when there are any
    (they are what transformers loads then)."""
    d = model_directory(model)
    if d is None:
        return []
    found = {p for pattern in WEIGHT_PATTERNS for p in d.glob(pattern) if p.is_file()}
    safe = sorted(p for p in found if p.suffix == ".safetensors")
    return safe or sorted(found)


def blob_name(path: Path) -> str | None:
    """The content hash a hub-cache symlink names (.../blobs/<hash>), without reading it."""
    if not path.is_symlink():
        return None
    target = path.resolve()
    if target.parent.name == "blobs" and _BLOB.match(target.name):
        return target.name
    return None


def file_digest(path: Path, memo: DigestMemo) -> str:
    """A weight file's content hash: its hub blob name, a memoised sha256, or sha256 now."""
    blob = blob_name(path)
    if blob is not None:
        return "blob:" + blob
    real = path.resolve()
    st = real.stat()
    key = f"{real}|{st.st_size}|{st.st_mtime_ns}"
    digest = memo.get(key)
    if digest is None:
        digest = hash_file(real)
        memo.put(key, digest)
    return "sha256:" + digest


def hash_file(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks."""
    logger.info("hashing %s (once; memoised by size and mtime)", path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def default_memo_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "pddkit" / "weights-digests.json"


class DigestMemo:
    """A small JSON file of "abs path|size|mtime_ns" -> sha256; never an error if it cannot
    be read or written (it only saves time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, str] = {}
        self.dirty = False
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                self.entries = {str(k): str(v) for k, v in data.items()}
        except (OSError, ValueError):
            pass

    def get(self, key: str) -> str | None:
        return self.entries.get(key)

    def put(self, key: str, digest: str) -> None:
        self.entries[key] = digest
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        self.entries = {k: v for k, v in self.entries.items() if Path(k.rsplit("|", 2)[0]).exists()}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.entries, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.path)
            self.dirty = False
        except OSError as e:
            logger.debug("could not write the weights digest memo %s: %s", self.path, e)
            tmp.unlink(missing_ok=True)
