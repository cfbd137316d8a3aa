"""Model fingerprints: a hex digest that changes whenever the statistics could change.

A backend's `fingerprint()` names its model. For the `hf` backend the weights are named by
their content: a model pddkit loaded from files itself, by the files (the hub cache's blob
names, free, else a sha256 of each weight file memoised by path, size and mtime); a model
object handed over in memory, by its tensors (cache/tensor_digest.py), since it may have
changed since it was loaded. A PEFT adapter on the model (loaded by pddkit through
transformers' integration, or a PeftModel handed over) joins the fingerprint by its
configuration and its own tensors (adapter_digest): the files a model was loaded from
name its base weights only, so without it two adapters on one base would share entries.
A quantised model adds its quantisation config and the bitsandbytes version.

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

from pddkit.cache.tensor_digest import named_tensors, tensor_digest

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
    extra: dict[str, object] = {}  # only when present: other models' keys stay as they were
    adapters = adapter_digest(model)
    if adapters is not None:
        extra["adapters"] = adapters
    quantized = quantization_digest(model)
    if quantized is not None:
        extra["quantization"] = quantized
    return fingerprint_of({
        **extra,
        "backend": backend,
        "stats_format": int(stats_format),
        "start_id": int(start_id),
        "dtype": str(dtype).replace("torch.", ""),
        "weights": digest,
        "config": config_digest(model),
        "attention": getattr(getattr(model, "config", None), "_attn_implementation", None),
        "tokenizer": tokenizer_digest(tokenizer),
    })


# adapter config keys that name where an adapter came from or how it was saved
ADAPTER_CONFIG_NOISE = ("base_model_name_or_path", "revision", "inference_mode", "peft_version")


def adapter_digest(model) -> str | None:
    """Hex sha256 of the PEFT adapters on `model` (None without any): each adapter's config
    (less ADAPTER_CONFIG_NOISE), which are active, whether any is merged into the base
    weights, and every tensor that belongs to an adapter (a name with the adapter's name
    as one of its parts: lora_A.default.weight, modules_to_save.default.weight, ...), by
    name, dtype, shape and a sha256 of its bytes. Adapters are small: hashed every time."""
    configs = getattr(model, "peft_config", None)
    if not isinstance(configs, Mapping) or not configs:
        return None
    names = {str(n) for n in configs}
    cfgs = {}
    for name, cfg in sorted(configs.items()):
        d = cfg.to_dict() if hasattr(cfg, "to_dict") else dict(vars(cfg))
        for key in ADAPTER_CONFIG_NOISE:
            d.pop(key, None)
        cfgs[str(name)] = _plain(d)
    active = None
    for attr in ("active_adapters", "active_adapter"):
        value = getattr(model, attr, None)
        try:
            value = value() if callable(value) else value
        except (ValueError, RuntimeError, AttributeError):  # transformers: none loaded
            value = None
        if value is not None:
            active = sorted([value] if isinstance(value, str) else map(str, value))
            break
    modules = model.modules() if hasattr(model, "modules") else ()
    merged = any(bool(getattr(m, "merged", False)) for m in modules)
    h = hashlib.sha256()
    for name, t in named_tensors(model):
        if names.isdisjoint(name.split(":", 1)[-1].split(".")):
            continue
        h.update(f"{name}|{str(t.dtype).replace('torch.', '')}|{tuple(t.shape)}|"
                 f"{_bytes_sha256(t)}\n".encode())
    return fingerprint_of({"configs": cfgs, "active": active, "merged": merged,
                           "tensors": h.hexdigest()})


def _plain(value):
    """A config value as JSON keeps it the same every time (sets sorted, enums by value)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and not isinstance(value, (str, int, float, bool)):
        return _plain(value.value)  # an Enum (PeftType, TaskType)
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def _bytes_sha256(t) -> str:
    """sha256 of a tensor's raw bytes (moved to the CPU)."""
    import torch

    flat = t.detach().reshape(-1).contiguous()
    h = hashlib.sha256()
    if flat.numel():
        h.update(flat.view(torch.uint8).cpu().numpy())
    return h.hexdigest()


def quantization_digest(model) -> dict | None:
    """The model's quantisation (None when it has none): its quantisation config as
    transformers records it and the bitsandbytes version that computes with it."""
    cfg = getattr(getattr(model, "config", None), "quantization_config", None)
    if cfg is None and not getattr(model, "is_quantized", False):
        return None
    from importlib.metadata import PackageNotFoundError, version

    d = cfg.to_dict() if hasattr(cfg, "to_dict") else cfg
    try:
        bnb = version("bitsandbytes")
    except PackageNotFoundError:
        bnb = None
    return {"config": _plain(d), "bitsandbytes": bnb}


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


def vocab_fingerprint(tokenizer) -> str:
    """sha256 of the token -> id map, so equal-sized but different vocabularies differ."""
    items = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    return hashlib.sha256(json.dumps(items, ensure_ascii=False).encode("utf-8")).hexdigest()
