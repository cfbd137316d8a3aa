"""Forward passes that start from a key/value cache, and the statistics of chosen positions:
what the passes sharing a computed prefix use (backends/prefix_pass.py: a run's shots,
backends/infill_windows.py: a text's own prefix) and the sampling loop (backends/sampling.py).

The cache travels as a transformers `Cache` object (`DynamicCache`: copied, cropped and
expanded to several rows by its own methods), passed by the keyword the model's forward
declares: `cache` (transformers 5.x, where `past_key_values` is deprecated and removed in
5.40) or `past_key_values` (4.x). A first call passes none on 5.x (the model makes the cache
its layers need) and an empty DynamicCache on 4.x, where a model given none returns the
legacy tuple; a 4.x model that takes only tuples (`_supports_cache_class` False, GPT-2 up to
4.4x) gets the tuple of the Cache, and what it returns is made a Cache again.
"""

from __future__ import annotations

import inspect


def cache_keyword(module) -> str:
    """The forward's key/value cache argument: `cache` where the signature has it
    (transformers 5.x), else `past_key_values` (transformers 4.x)."""
    try:
        params = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def cache_arguments(module, past) -> dict:
    """The keyword arguments that give `module` the cache `past` (None: a new one)."""
    name = cache_keyword(module)
    takes_objects = getattr(module, "_supports_cache_class", True)  # 4.x: per model class
    if past is None:
        if name == "cache" or not takes_objects:
            return {}
        from transformers import DynamicCache

        return {name: DynamicCache()}
    if not takes_objects and hasattr(past, "to_legacy_cache"):
        past = past.to_legacy_cache()
    return {name: past}


def returned_cache(out):
    """The cache a forward returned, as a Cache object: `out.cache` (transformers 5.x) or
    `out.past_key_values` (4.x; a legacy tuple made a DynamicCache), read without touching
    the deprecated name where the new one exists; None when the model gives none."""
    cache = out.cache if hasattr(out, "cache") else getattr(out, "past_key_values", None)
    if isinstance(cache, tuple):
        from transformers import DynamicCache

        cache = DynamicCache.from_legacy_cache(cache)
    return cache


def forward_with_cache(runner, input_ids, mask, position_ids, past):
    """(hidden states, or logits when the head is not separable; the cache) with `past`
    (None: a new, empty cache)."""
    module = runner.lm.model if runner.body is None else runner.body
    out = module(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                 use_cache=True, **cache_arguments(module, past))
    first = out.logits if runner.body is None else out[0]
    return first, returned_cache(out)


def position_stats(runner, hidden, targets):
    """[P, d] hidden (or [P, V] logits), [P] target ids -> [P, 6] (L, H, M2, var, top, Lmax)
    float64 (stats_pass.chunk_stats on each chunk). `hidden` is the caller's own (a masked
    copy): where it holds logits, they are overwritten."""
    import torch

    V = runner.head.weight.shape[0] if runner.body is not None else hidden.shape[-1]
    chunk = runner.chunk_size(V)
    parts = []
    for c in range(0, hidden.shape[0], chunk):
        logits = runner.chunk_logits(hidden[c:c + chunk])  # [C, V], overwritten below
        L, H, M2, var, top, Lmax = runner.chunk_stats(logits, targets[c:c + chunk])
        parts.append(torch.stack([L.double(), H.double(), M2.double(), var.double(),
                                  top.double(), Lmax.double()], dim=1))
    return torch.cat(parts).cpu().numpy()
