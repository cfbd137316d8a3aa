"""Load a causal LM and its tokenizer from a local directory or a Hugging Face hub id,
optionally with a PEFT adapter on it (`adapter`; an adapter folder given as the model loads
its base: adapters.py) and quantised to 8 or 4 bits with bitsandbytes on a CUDA GPU
(`quantize`). Where it is read from is checked by model_source.py, the device and dtype
chosen by devices.py, the tokenizer loaded by hf_tokenizers.py."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pddkit.backends.adapters import attach_adapter, resolve_adapter
from pddkit.backends.devices import check_quantize, pick_device, pick_dtype
from pddkit.backends.hf_tokenizers import load_tokenizer_of
from pddkit.backends.model_config import check_causal, context_length
from pddkit.backends.model_source import check_source, hub_reachable, looks_local, pretrained_source
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)


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
    src, common = pretrained_source(name, trust_remote_code, local_files_only, revision)
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
