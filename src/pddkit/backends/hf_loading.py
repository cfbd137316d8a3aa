"""Load a causal LM and its tokenizer from a local directory or a Hugging Face hub id,
optionally with a PEFT adapter on it (`adapter`; an adapter folder given as the model loads
its base) and quantised to 8 or 4 bits with bitsandbytes on a CUDA GPU (`quantize`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pddkit.errors import PddkitError, install_hint

logger = logging.getLogger(__name__)

DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZE = ("8bit", "4bit")  # bitsandbytes, on a CUDA GPU
ADAPTER_CONFIG = "adapter_config.json"  # what marks a PEFT adapter folder or hub repository
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


@dataclass(frozen=True)
class LoadedModel:
    model: Any  # transformers.PreTrainedModel, in eval mode
    tokenizer: Any  # transformers.PreTrainedTokenizerBase
    name: str
    device: str
    dtype: str
    adapter: str | None = None  # the PEFT adapter loaded onto the model (folder or hub id)
    base: str | None = None  # with an adapter: the base model it was loaded onto
    quantize: str | None = None  # "8bit" or "4bit" (bitsandbytes)

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
                 local_files_only: bool, reachable: bool | None = None) -> bool:
    """Refuse a local path that does not exist, or a hub id neither cached nor reachable
    (one sentence, in seconds); returns `local_files_only` as loading should use it.
    `reachable`: hub_reachable()'s answer when the caller has it (else it is asked)."""
    if looks_local(name):
        if not Path(name).expanduser().exists():
            raise PddkitError(f"{role} path {name} does not exist")
        _refuse_sandbox_folder(name, role)
        _refuse_folder_without_model(name, role)
        return local_files_only
    if not local_files_only:
        return _hub_files_needed(name, role, trust_remote_code, revision, reachable)
    return local_files_only


def checked_source(name: str, adapter: str | None, *, role: str, trust_remote_code: bool,
                   revision: str | None, local_files_only: bool) -> tuple[str, str | None, bool]:
    """(base model, adapter, `local_files_only` as loading should use it) for `name` with
    `adapter`, refused in one sentence now if it cannot load: a bad local adapter folder, a
    missing local path, a hub id neither cached nor reachable. Hub adapters are looked up
    when loading."""
    base, with_adapter = resolve_adapter(name, adapter, role=role, revision=revision,
                                         local_files_only=local_files_only, hub=False)
    return base, with_adapter, check_source(base, role, trust_remote_code, revision,
                                            local_files_only)


def _refuse_sandbox_folder(name: str, role: str) -> None:
    """A sandbox's output folder given as a model: one sentence saying where its models are."""
    from pddkit.backends.sandbox_folders import not_a_model

    said = not_a_model(name, role)
    if said:
        raise PddkitError(said)


# files a tokenizer's save_pretrained writes (one of them is enough to call a folder a tokenizer)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                   "tokenizer.model", "spiece.model", "vocab.txt", "special_tokens_map.json")


def _refuse_folder_without_model(name: str, role: str) -> None:
    """A local folder without config.json, which every saved model has: one sentence
    (a folder holding only a tokenizer says so) instead of transformers' "Unrecognized
    model ... model_type"."""
    folder = Path(name).expanduser()
    if not folder.is_dir() or (folder / "config.json").is_file():
        return
    tokenizer = sorted(f for f in TOKENIZER_FILES if (folder / f).is_file())
    if tokenizer:
        raise PddkitError(f"{role} folder {name} holds only a tokenizer ({', '.join(tokenizer)}), "
                          "no model: a model folder also needs config.json and the weights "
                          "(model.safetensors), as the model's save_pretrained writes them; "
                          "give that folder")
    raise PddkitError(f"{role} folder {name} holds no model: config.json is missing (a model "
                      "folder holds config.json and the weights, as the model's "
                      "save_pretrained writes them)")


def _source(name: str, trust_remote_code: bool, local_files_only: bool,
            revision: str | None) -> tuple[str, dict]:
    """(what `from_pretrained` is given, its shared keyword arguments) for `name`."""
    src = str(Path(name).expanduser()) if looks_local(name) else name
    common = {"trust_remote_code": trust_remote_code, "local_files_only": local_files_only}
    if revision is not None:
        common["revision"] = revision
    return src, common



def _dtype_keyword() -> str:
    """from_pretrained's dtype argument: `dtype` from transformers 4.56 (where `torch_dtype`
    became deprecated), `torch_dtype` before (4.45-4.55 pass an unknown `dtype` on to the
    model's constructor, which refuses it)."""
    from importlib.metadata import version

    from packaging.version import Version

    return "dtype" if Version(version("transformers")) >= Version("4.56") else "torch_dtype"

def load_model(
    name: str,
    *,
    device: str = "auto",
    dtype: str = "auto",
    trust_remote_code: bool = False,
    local_files_only: bool = False,
    revision: str | None = None,
    role: str = "model",
    adapter: str | None = None,
    quantize: str | None = None,
) -> LoadedModel:
    """`name` is a local directory or a hub id; remote code runs only if asked for.
    `adapter`: a PEFT adapter (folder or hub id) loaded onto it, unmerged; a `name` that
    is itself an adapter (its adapter_config.json) loads the base model it names.
    `quantize`: "8bit" or "4bit" (bitsandbytes), on a CUDA GPU only."""
    from transformers import AutoConfig, AutoModelForCausalLM

    check_quantize(quantize, device)  # one sentence before anything loads
    given = name
    # an unreachable hub: adapter configs are looked up in the cache only (no retries)
    reachable = None if local_files_only or all(
        n is None or looks_local(n) for n in (name, adapter)) else hub_reachable()
    name, adapter = resolve_adapter(name, adapter, role=role, revision=revision,
                                    local_files_only=local_files_only or reachable is False,
                                    hub=True)
    local_files_only = check_source(name, role, trust_remote_code, revision, local_files_only,
                                    reachable=reachable)
    device = pick_device(device)
    torch_dtype = pick_dtype(dtype, device)
    src, common = _source(name, trust_remote_code, local_files_only, revision)
    extra = _quantized(quantize, device, torch_dtype)
    try:
        config = AutoConfig.from_pretrained(src, **common)
        check_causal(config, name, role)  # before any weights are read
        tokenizer = load_tokenizer_of(name, adapter, trust_remote_code=trust_remote_code,
                                      local_files_only=local_files_only, revision=revision)
        model, info = AutoModelForCausalLM.from_pretrained(src, config=config,
                                                           **{_dtype_keyword(): torch_dtype},
                                                           output_loading_info=True, **common,
                                                           **extra)
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
    if not extra:  # a quantised model is placed by its device_map (and cannot be moved)
        model.to(device)
    model.eval()
    if adapter is not None:
        attach_adapter(model, adapter, base=name, role=role, revision=revision,
                       local_files_only=local_files_only)
    logger.info("loaded %s %s on %s (%s%s)", role, given if adapter is None else
                f"{name} with adapter {adapter}", device, torch_dtype,
                f", quantised to {quantize}" if quantize else "")
    return LoadedModel(model, tokenizer, given, device, str(torch_dtype).replace("torch.", ""),
                       adapter=adapter, base=name if adapter is not None else None,
                       quantize=quantize)


def adapter_param(role: str) -> str:
    """The parameter naming the adapter of a model in `role` (errors name it)."""
    return "ref_adapter" if role.startswith("ref") else "adapter"


def adapter_config(name: str, *, revision: str | None = None, local_files_only: bool = False,
                   hub: bool = True) -> dict | None:
    """The adapter_config.json of `name` when it is a PEFT adapter (a local folder holding
    one, or, with `hub`, a hub repository that has one), else None."""
    import json

    if looks_local(name):
        path = Path(name).expanduser() / ADAPTER_CONFIG
        if not path.is_file():
            return None
    elif not hub:
        return None
    else:
        try:
            from transformers.utils import find_adapter_config_file

            found = find_adapter_config_file(name, revision=revision,
                                             local_files_only=local_files_only)
        except Exception:  # unreachable, gated, malformed id: not known to be an adapter
            return None
        if found is None:
            return None
        path = Path(found)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PddkitError(f"the PEFT adapter {name} has an unreadable {ADAPTER_CONFIG}: "
                          f"{e}") from None
    if not isinstance(data, dict):
        raise PddkitError(f"the PEFT adapter {name} has an {ADAPTER_CONFIG} that is not a "
                          "JSON object")
    return data


def is_adapter_folder(name: str) -> bool:
    """Whether `name` is a local folder holding a PEFT adapter alone (adapter_config.json,
    no config.json of a complete model)."""
    if not looks_local(name):
        return False
    d = Path(name).expanduser()
    return (d / ADAPTER_CONFIG).is_file() and not (d / "config.json").is_file()


def resolve_adapter(name: str, adapter: str | None, *, role: str = "model",
                    revision: str | None = None, local_files_only: bool = False,
                    hub: bool = True) -> tuple[str, str | None]:
    """(base model, adapter) to load for the model `name` with `adapter`: a `name` that is
    a PEFT adapter (a folder with adapter_config.json and no config.json; with `hub`, also
    a hub repository with one, looked up only when peft is installed) gives the base model
    its config names (base_model_name_or_path) and itself as the adapter. A given
    `adapter` must be a PEFT adapter; an adapter whose config names another base than
    `name` is loaded with a warning (a local copy and a hub id of one model differ in name
    only; weights that do not fit the model are refused by attach_adapter)."""
    param = adapter_param(role)
    if adapter is not None:
        if looks_local(adapter) and not Path(adapter).expanduser().exists():
            raise PddkitError(f"`{param}` path {adapter} does not exist")
        cfg = adapter_config(adapter, revision=None, local_files_only=local_files_only, hub=hub)
        if cfg is None and (looks_local(adapter) or hub):
            raise PddkitError(f"`{param}` {adapter} is not a PEFT adapter: it has no "
                              f"{ADAPTER_CONFIG} (give the folder or hub id that "
                              "save_pretrained of a PEFT model wrote)")
        if is_adapter_folder(name):
            raise PddkitError(f"{role} {name} is itself a PEFT adapter ({ADAPTER_CONFIG}) and "
                              f"`{param}` {adapter} is another: give the base model as the "
                              f"model and one adapter as `{param}`")
        named = (cfg or {}).get("base_model_name_or_path")
        if hub and named and not same_model(named, name):  # said once, when loading
            logger.warning("`%s` %s was trained on %s, not on %s (%s): loading it anyway; "
                           "weights that do not fit the model are refused", param, adapter,
                           named, name, role)
        return name, adapter
    if is_adapter_folder(name):
        cfg = adapter_config(name) or {}
    elif hub and not looks_local(name) and _peft_installed():
        cfg = adapter_config(name, revision=revision, local_files_only=local_files_only)
        if cfg is None:
            return name, None
    else:
        return name, None
    base = cfg.get("base_model_name_or_path")
    if not base:
        raise PddkitError(f"{role} {name} is a PEFT adapter whose {ADAPTER_CONFIG} names no "
                          f"base model (base_model_name_or_path): give the base model as the "
                          f"model and this folder as `{param}`")
    if looks_local(base) and not Path(base).expanduser().exists():
        raise PddkitError(f"{role} {name} is a PEFT adapter on {base} (base_model_name_or_path "
                          f"in its {ADAPTER_CONFIG}), which does not exist here: give the base "
                          f"model as the model and this adapter as `{param}`")
    logger.info("%s %s is a PEFT adapter: loading its base model %s with it", role, name, base)
    return base, name


def same_model(a: str, b: str) -> bool:
    """Whether two model names name one model: equal, the same local folder, or a hub
    id and its snapshot folder in the hub cache."""
    if a == b or a.rstrip("/") == b.rstrip("/"):
        return True

    def key(n: str) -> str:
        if looks_local(n):
            p = Path(n).expanduser()
            p = p.resolve() if p.exists() else p
            parts = p.parts
            for i, part in enumerate(parts):  # .../models--org--name/snapshots/<commit>
                if part.startswith("models--") and parts[i + 1:i + 2] == ("snapshots",):
                    return part[len("models--"):].replace("--", "/")
            return str(p)
        return n

    return key(a) == key(b)


def _peft_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("peft") is not None


def attach_adapter(model, adapter: str, *, base: str, role: str = "model",
                   revision: str | None = None, local_files_only: bool = False) -> None:
    """Load the PEFT adapter `adapter` onto `model` (transformers' PEFT integration: the
    model keeps its class, the adapter stays unmerged, in eval mode). Weights that do not
    fit (a module it adapts that the model lacks, a shape that differs, a tensor the model
    has no place for or left without a value) are one sentence: the adapter was made for
    another base."""
    param = adapter_param(role)
    if not _peft_installed():
        raise PddkitError(f"`{param}` needs peft: {install_hint('adapters')}")
    src = str(Path(adapter).expanduser()) if looks_local(adapter) else adapter
    # offline for a hub id through adapter_kwargs (transformers 5 refuses load_adapter's own
    # local_files_only); a local folder needs neither
    offline = {"local_files_only": True} if local_files_only and not looks_local(adapter) else {}
    try:
        info = model.load_adapter(src, adapter_name="default", adapter_kwargs=offline or None)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PddkitError(f"`{param}` {adapter} does not fit {role} {base}: {first}") from None
    bad = [*sorted(getattr(info, "missing_keys", ()) or ()),
           *sorted(getattr(info, "unexpected_keys", ()) or ()),
           *sorted(k[0] if isinstance(k, tuple) else k
                   for k in getattr(info, "mismatched_keys", ()) or ())]
    if bad:
        more = f" and {len(bad) - 2} more" if len(bad) > 2 else ""
        raise PddkitError(f"`{param}` {adapter} does not fit {role} {base}: its weights "
                          f"{', '.join(bad[:2])}{more} have no place of that shape in the "
                          "model (an adapter made for another base model)")
    model.eval()


def load_tokenizer_of(name: str, adapter: str | None, *, trust_remote_code: bool = False,
                      local_files_only: bool = False, revision: str | None = None):
    """The tokenizer a model with `adapter` encodes with: the adapter's own when it has one
    (fine-tuning scripts save it beside the adapter), else the base model's."""
    from transformers import AutoTokenizer

    common = {"trust_remote_code": trust_remote_code, "local_files_only": local_files_only}
    if adapter is not None:
        if looks_local(adapter):
            d = Path(adapter).expanduser()
            if any((d / f).is_file() for f in _TOKENIZER_FILES):
                return AutoTokenizer.from_pretrained(str(d), **common)
        else:
            try:
                return AutoTokenizer.from_pretrained(adapter, **common)
            except (OSError, ValueError, KeyError):
                pass  # the adapter's repository holds no tokenizer: the base model's
    src, kw = _source(name, trust_remote_code, local_files_only, revision)
    return AutoTokenizer.from_pretrained(src, **kw)


def check_quantize(quantize: str | None, device: str) -> None:
    """`quantize` ("8bit" or "4bit") needs bitsandbytes and a CUDA GPU: one sentence, before
    anything loads, when either is missing. Imports torch only when `quantize` is set."""
    if quantize is None:
        return
    if quantize not in QUANTIZE:
        raise PddkitError(f"`quantize` must be one of {', '.join(QUANTIZE)}, not {quantize!r}")
    if device == "cpu" or device.startswith("mps"):
        raise PddkitError(f"`quantize` {quantize} needs a CUDA GPU (bitsandbytes), not `device` "
                          f"{device}")
    resolved = pick_device(device)
    if not resolved.startswith("cuda"):
        raise PddkitError(f"`quantize` {quantize} needs a CUDA GPU (bitsandbytes) and this "
                          f"machine has none (available: {available_devices()})")
    from importlib.util import find_spec

    if find_spec("bitsandbytes") is None:
        raise PddkitError(f"`quantize` {quantize} needs bitsandbytes: "
                          f"{install_hint('quantize')}")


def _quantized(quantize: str | None, device: str, torch_dtype) -> dict:
    """from_pretrained's extra keyword arguments for `quantize` (none without it): the
    bitsandbytes config (4bit: NF4 weights, computing in the model's dtype) and the whole
    model placed on `device`."""
    if quantize is None:
        return {}
    from transformers import BitsAndBytesConfig

    if quantize == "8bit":
        config = BitsAndBytesConfig(load_in_8bit=True)
    else:
        config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                    bnb_4bit_compute_dtype=torch_dtype)
    return {"quantization_config": config, "device_map": {"": device}}


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


def _hub_files_needed(name: str, role: str, trust_remote_code: bool, revision: str | None,
                      reachable: bool | None = None) -> bool:
    """Whether a hub id can load from the local cache alone (then: no network at all). If
    it cannot and the hub is unreachable, one sentence now instead of minutes of retries."""
    import os
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
    if hub_reachable() if reachable is None else reachable:
        return False  # reachable: load as usual (the cache is used where it has the files)
    if cached:
        return True  # offline, but cached: load from the cache
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    raise PddkitError(f"{role} {name} is not in the local Hugging Face cache and the hub "
                      f"({url.hostname}) cannot be reached: give a local directory, or load "
                      "it once online (`local_files_only` / HF_HUB_OFFLINE=1 use the cache "
                      "only)")


def hub_reachable() -> bool:
    """Whether the Hugging Face hub (HF_ENDPOINT) accepts a connection within 5 seconds;
    HF_HUB_OFFLINE=1 says no without trying."""
    import os
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=5).close()
        return True
    except OSError:
        return False


def start_token_id(tokenizer, name: str = "model") -> int:
    """The start token x_0 put before every text: BOS, else EOS."""
    for tok_id in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if tok_id is not None:
            return int(tok_id)
    raise PddkitError(f"the tokenizer of {name} has neither a BOS nor an EOS token to start texts")


def load_tokenizer(name: str, *, trust_remote_code: bool = False, local_files_only: bool = False):
    """Just the tokenizer of a model directory or hub id (for frequency tables); of a PEFT
    adapter folder, the tokenizer its model encodes with (load_tokenizer_of)."""
    if looks_local(name) and not Path(name).expanduser().exists():
        raise PddkitError(f"tokenizer path {name} does not exist")
    _refuse_sandbox_folder(name, "model")
    try:
        base, adapter = resolve_adapter(name, None, hub=False)
        return load_tokenizer_of(base, adapter, trust_remote_code=trust_remote_code,
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
                        local_files_only: bool = False, revision: str | None = None,
                        adapter: str | None = None) -> TokenizerView:
    """The tokenizer and the context of a model directory or hub id (with `adapter`, or a
    PEFT adapter folder: the tokenizer load_model would use), read from its tokenizer and
    config files as load_model reads them, without loading the weights (the Ray engine's
    driver encodes with this; its actors load the model)."""
    from types import SimpleNamespace

    from transformers import AutoConfig

    base, adapter = resolve_adapter(name, adapter, role=role, revision=revision,
                                    local_files_only=local_files_only)
    src, common = _source(base, trust_remote_code, local_files_only, revision)
    try:
        tokenizer = load_tokenizer_of(base, adapter, trust_remote_code=trust_remote_code,
                                      local_files_only=local_files_only, revision=revision)
        config = AutoConfig.from_pretrained(src, **common)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PddkitError(f"could not load the tokenizer of {role} {name}: {first}") from None
    return TokenizerView(tokenizer, name, context_length(SimpleNamespace(config=config)))
