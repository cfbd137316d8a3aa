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
    """`device` as torch will use it: "auto" picks CUDA, then MPS, then the CPU; a named
    device this machine does not have is one sentence (check_device)."""
    import torch

    if device != "auto":
        return check_device(device)
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def check_device(device: str) -> str:
    """`device` when this machine has it ("cpu", "cuda", "cuda:1", "mps", ...); else one
    sentence saying what it has, before anything loads."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise PddkitError(f"`device` {device!r} is not a device torch knows (use auto, cpu, "
                          "cuda, cuda:N or mps)") from None
    have = available_devices()
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise PddkitError(f"`device` {device} is not available: this machine has no CUDA GPU "
                              f"usable by torch {torch.__version__} (available: {have})")
        if dev.index is not None and dev.index >= n:
            raise PddkitError(f"`device` {device} is not available: this machine has {n} CUDA "
                              f"GPU{'s' if n > 1 else ''} (cuda:0 to cuda:{n - 1})")
    elif dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if not (mps and mps.is_available()):
            raise PddkitError(f"`device` {device} is not available: this machine has no Apple "
                              f"MPS device usable by torch (available: {have})")
    elif dev.type != "cpu":
        backend = getattr(torch, dev.type, None)
        usable = getattr(backend, "is_available", None)
        if usable is None or not usable():
            raise PddkitError(f"`device` {device} is not available on this machine "
                              f"(available: {have})")
    return device


def available_devices() -> str:
    """The devices torch can use here, as `device` names them ("cpu, cuda:0, cuda:1")."""
    import torch

    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps and mps.is_available():
        found.append("mps")
    return ", ".join(found)


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


def _source(name: str, trust_remote_code: bool, local_files_only: bool,
            revision: str | None) -> tuple[str, dict]:
    """(what `from_pretrained` is given, its shared keyword arguments) for `name`."""
    src = str(Path(name).expanduser()) if looks_local(name) else name
    common = {"trust_remote_code": trust_remote_code, "local_files_only": local_files_only}
    if revision is not None:
        common["revision"] = revision
    return src, common


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
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    local_files_only = check_source(name, role, trust_remote_code, revision, local_files_only)
    device = pick_device(device)
    torch_dtype = pick_dtype(dtype, device)
    src, common = _source(name, trust_remote_code, local_files_only, revision)
    try:
        config = AutoConfig.from_pretrained(src, **common)
        check_causal(config, name, role)  # before any weights are read
        tokenizer = AutoTokenizer.from_pretrained(src, **common)
        model, info = AutoModelForCausalLM.from_pretrained(src, config=config, dtype=torch_dtype,
                                                           output_loading_info=True, **common)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        where = "the directory" if looks_local(name) else "the hub (offline? try a local path)"
        raise PddkitError(f"could not load {role} {name} from {where}: {first}") from None
    missing = sorted(info.get("missing_keys") or ())
    if missing:  # transformers initialised them at random: every score would be noise
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise PddkitError(f"{role} {name} ({type(model).__name__}) lacks weights for "
                          f"{', '.join(missing[:3])}{more}: loading would fill them with random "
                          "values, so it is not a complete causal language model checkpoint")
    model.to(device).eval()
    logger.info("loaded %s %s on %s (%s)", role, name, device, torch_dtype)
    return LoadedModel(model, tokenizer, name, device, str(torch_dtype).replace("torch.", ""))


def check_causal(config, name: str, role: str = "model",
                 architectures: list[str] | None = None) -> None:
    """Refuse a model that is not a causal (left-to-right) language model, by its config
    alone, in one sentence naming its architecture and model_type. The rule:

    1. an encoder-decoder (`is_encoder_decoder`: T5, BART, ...) is refused;
    2. a model type of an encoder family (BERT, RoBERTa, ELECTRA, ...: one transformers
       maps both to a masked and to a causal LM class) is a causal LM only with
       `is_decoder` true; without it, AutoModelForCausalLM would load e.g. a
       BertForMaskedLM as BertLMHeadModel with bidirectional attention, which sees the
       token it predicts;
    3. otherwise `architectures` (the config's, or the class of a model given in memory)
       must name a causal LM class (one of transformers' causal-LM classes, or a name
       ending in ForCausalLM or LMHeadModel), or the config's `auto_map` a remote-code
       AutoModelForCausalLM; without `architectures`, the model_type must be one
       transformers loads as a causal LM.
    A checkpoint that passes but lacks weights of the causal LM (a base model without its
    head) is refused after loading (load_model: its missing weights)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    model_type = getattr(config, "model_type", None) or "?"
    archs = list(architectures if architectures is not None
                 else getattr(config, "architectures", None) or [])
    named = f"{', '.join(archs) or 'no architecture named'}, model_type {model_type}"
    why = None
    if getattr(config, "is_encoder_decoder", False):
        why = "it is an encoder-decoder (sequence-to-sequence) model"
    elif model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES and model_type in \
            MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not getattr(config, "is_decoder", False):
        why = "it is an encoder (bidirectional attention: is_decoder is false)"
    elif "AutoModelForCausalLM" not in (getattr(config, "auto_map", None) or {}):
        causal = {c for v in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()
                  for c in ((v,) if isinstance(v, str) else v)}
        if archs and not any(a in causal or a.endswith(("ForCausalLM", "LMHeadModel"))
                             for a in archs):
            why = "its architectures name no causal-LM class"
        elif not archs and model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
            why = "transformers has no causal LM for its model_type"
    if why is not None:
        raise PddkitError(f"{role} {name} is not a causal language model: {why} ({named}); "
                          "pddkit scores causal (decoder-only) language models, whose "
                          "next-token probabilities every method reads")


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


@dataclass(frozen=True)
class TokenizerView:
    """What encoding reads of a LoadedModel (tokenizer, name, context), without the model."""

    tokenizer: Any
    name: str
    context_length: int | None


def load_tokenizer_view(name: str, *, role: str = "model", trust_remote_code: bool = False,
                        local_files_only: bool = False, revision: str | None = None) -> TokenizerView:
    """The tokenizer and the context of a model directory or hub id, read from its tokenizer
    and config files as load_model reads them, without loading the weights (the Ray
    engine's driver encodes with this; its actors load the model)."""
    from types import SimpleNamespace

    from transformers import AutoConfig, AutoTokenizer

    src, common = _source(name, trust_remote_code, local_files_only, revision)
    try:
        tokenizer = AutoTokenizer.from_pretrained(src, **common)
        config = AutoConfig.from_pretrained(src, **common)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PddkitError(f"could not load the tokenizer of {role} {name}: {first}") from None
    return TokenizerView(tokenizer, name, context_length(SimpleNamespace(config=config)))
