"""Load a causal LM and its tokenizer from a local directory or a Hugging Face hub id."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class LoadedModel:
    model: Any  # transformers.PreTrainedModel, in eval mode
    tokenizer: Any  # transformers.PreTrainedTokenizerBase
    name: str
    device: str
    dtype: str

    @property
    def context_length(self) -> int | None:
        return context_length(self.model)


def context_length(model) -> int | None:
    """The model's context in tokens, from its config (None when it does not say)."""
    cfg = getattr(model, "config", None)
    for attr in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length"):
        value = getattr(cfg, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def pick_device(device: str) -> str:
    import torch

    if device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def pick_dtype(dtype: str, device: str):
    import torch

    if dtype not in DTYPES:
        raise PddkitError(f"`dtype` must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if dtype == "auto":
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return getattr(torch, dtype)


def looks_local(name: str) -> bool:
    """Whether `name` is a local path rather than a hub id."""
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists() or \
        name.count("/") > 1 or "\\" in name


def resolve_device_dtype(device: str, dtype: str) -> tuple[str, str]:
    """(device, dtype) as loading resolves them, importing torch only when the answer
    depends on the hardware ("auto" device, or "auto" dtype on CUDA)."""
    if dtype not in DTYPES:
        raise PddkitError(f"`dtype` must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if device != "auto" and (dtype != "auto" or not device.startswith("cuda")):
        return device, "float32" if dtype == "auto" else dtype
    device = pick_device(device)
    return device, str(pick_dtype(dtype, device)).replace("torch.", "")


def check_source(name: str, role: str, trust_remote_code: bool, revision: str | None,
                 local_files_only: bool) -> bool:
    """Refuse a local path that does not exist, or a hub id neither cached nor reachable
    (one sentence, in seconds); returns `local_files_only` as loading should use it."""
    if looks_local(name):
        if not Path(name).expanduser().exists():
            raise PddkitError(f"{role} path {name} does not exist")
        return local_files_only
    if not local_files_only:
        return _hub_files_needed(name, role, trust_remote_code, revision)
    return local_files_only


def load_model(
    name: str,
    *,
    device: str = "auto",
    dtype: str = "auto",
    trust_remote_code: bool = False,
    local_files_only: bool = False,
    revision: str | None = None,
    role: str = "model",
) -> LoadedModel:
    """`name` is a local directory or a hub id; remote code runs only if asked for."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    local_files_only = check_source(name, role, trust_remote_code, revision, local_files_only)
    device = pick_device(device)
    torch_dtype = pick_dtype(dtype, device)
    src = str(Path(name).expanduser()) if looks_local(name) else name
    common = {"trust_remote_code": trust_remote_code, "local_files_only": local_files_only}
    if revision is not None:
        common["revision"] = revision
    try:
        tokenizer = AutoTokenizer.from_pretrained(src, **common)
        model = AutoModelForCausalLM.from_pretrained(src, dtype=torch_dtype, **common)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        where = "the directory" if looks_local(name) else "the hub (offline? try a local path)"
        raise PddkitError(f"could not load {role} {name} from {where}: {first}") from None
    model.to(device).eval()
    logger.info("loaded %s %s on %s (%s)", role, name, device, torch_dtype)
    return LoadedModel(model, tokenizer, name, device, str(torch_dtype).replace("torch.", ""))


def _hub_files_needed(name: str, role: str, trust_remote_code: bool, revision: str | None) -> bool:
    """Whether a hub id can load from the local cache alone (then: no network at all). If
    it cannot and the hub is unreachable, one sentence now instead of minutes of retries."""
    import os
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return True
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(name, local_files_only=True, revision=revision,
                                   trust_remote_code=trust_remote_code)
        cached = True  # at least its config is cached; weights may still be missing
    except (OSError, ValueError, KeyError):
        cached = False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=5).close()
        return False  # reachable: load as usual (the cache is used where it has the files)
    except OSError:
        if cached:
            return True  # offline, but cached: load from the cache
        raise PddkitError(f"{role} {name} is not in the local Hugging Face cache and the hub "
                          f"({url.hostname}) cannot be reached: give a local directory, or load "
                          "it once online (`local_files_only` / HF_HUB_OFFLINE=1 use the cache "
                          "only)") from None


def start_token_id(tokenizer, name: str = "model") -> int:
    """x_0 of SPEC section 2: BOS, else EOS."""
    for tok_id in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if tok_id is not None:
            return int(tok_id)
    raise PddkitError(f"the tokenizer of {name} has neither a BOS nor an EOS token to start texts")


def load_tokenizer(name: str, *, trust_remote_code: bool = False, local_files_only: bool = False):
    """Just the tokenizer of a model directory or hub id (for frequency tables)."""
    from transformers import AutoTokenizer

    if looks_local(name) and not Path(name).expanduser().exists():
        raise PddkitError(f"tokenizer path {name} does not exist")
    src = str(Path(name).expanduser()) if looks_local(name) else name
    try:
        return AutoTokenizer.from_pretrained(src, trust_remote_code=trust_remote_code,
                                             local_files_only=local_files_only)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PddkitError(f"could not load the tokenizer of {name}: {first}") from None
