"""The tokenizer a model encodes with (a PEFT adapter's own when it has one), loaded with or
without the model, and the start token put before every text."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pddkit.backends.adapters import resolve_adapter
from pddkit.backends.model_config import context_length
from pddkit.backends.model_source import looks_local, pretrained_source, refuse_sandbox_folder
from pddkit.errors import PddkitError

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


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
    src, kw = pretrained_source(name, trust_remote_code, local_files_only, revision)
    return AutoTokenizer.from_pretrained(src, **kw)


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
    refuse_sandbox_folder(name, "model")
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
    src, common = pretrained_source(base, trust_remote_code, local_files_only, revision)
    try:
        tokenizer = load_tokenizer_of(base, adapter, trust_remote_code=trust_remote_code,
                                      local_files_only=local_files_only, revision=revision)
        config = AutoConfig.from_pretrained(src, **common)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PddkitError(f"could not load the tokenizer of {role} {name}: {first}") from None
    return TokenizerView(tokenizer, name, context_length(SimpleNamespace(config=config)))
