"""Forward passes that start from a key/value cache, and the statistics of chosen positions:
what the passes sharing a computed prefix use (backends/prefix_pass.py: a run's shots,
backends/infill_windows.py: a text's own prefix)."""

from __future__ import annotations


def forward_with_cache(runner, input_ids, mask, position_ids, past):
    """(hidden states, or logits when the head is not separable; the cache) with `past`."""
    if runner.body is None:
        out = runner.lm.model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                              past_key_values=past, use_cache=True)
        return out.logits, out.past_key_values
    out = runner.body(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                      past_key_values=past, use_cache=True)
    return out[0], out.past_key_values


def position_stats(runner, hidden, targets):
    """[P, d] hidden (or [P, V] logits), [P] target ids -> [P, 4] (L, H, M2, top) float64."""
    import torch

    from pddkit.backends.stats_pass import _postprocess, chunk_stats

    V = runner.head.weight.shape[0] if runner.body is not None else hidden.shape[-1]
    chunk = max(1, runner.chunk_bytes // (V * 4 * 3))
    parts = []
    for c in range(0, hidden.shape[0], chunk):
        hc = hidden[c:c + chunk]
        logits = hc if runner.body is None else _postprocess(runner.lm.model.config, runner.head(hc))
        L, H, M2, top = chunk_stats(logits, targets[c:c + chunk])
        parts.append(torch.stack([L.double(), H.double(), M2.double(), top.double()], dim=1))
    return torch.cat(parts).cpu().numpy()
