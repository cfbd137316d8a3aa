"""What a model's config says that pddkit reads before scoring: its context length, and
whether it is a causal (left-to-right) language model at all."""

from __future__ import annotations

from pddkit.errors import PddkitError


def context_length(model) -> int | None:
    """The model's context in tokens, from its config (None when it does not say)."""
    cfg = getattr(model, "config", None)
    for attr in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length"):
        value = getattr(cfg, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


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
