"""`infill`'s variants with each text's key/value cache shared (the hf backend's optional
`infill_stats`).

A variant x' of a text x replaces x_i by the argmax v_i and is cut after i + lookahead.
Positions before i are predicted from exactly the tokens x has there, so their statistics
are x's own (the target pass's); only the window i .. i + lookahead needs the model, and its
keys and values before position i are x's. So x runs once with its cache kept, and each
batch of its variants starts from a copy of that cache, cropped to the longest prefix the
batch needs: a row attends to the cached positions before its own i (the others are
masked), then to its new tokens [x_{i-1} (or the start token), v_i, x_{i+1}, ...] at
positions i, i+1, .... The tokens run per variant fall from about i + lookahead to
lookahead + 1.

Each variant's TokenStats equals that of a plain pass over x' (positions before i copied
from x's statistics, which a plain pass recomputes to the same values). The first use per
model checks one batch against the plain pass and falls back to it, with a warning, for a
model whose cache cannot be cropped and copied or whose masked cache gives other numbers.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence

import numpy as np

from pddkit.backends.cached_forward import forward_with_cache, position_stats
from pddkit.backends.kv_agreement import agreement_atol
from pddkit.stats import TokenStats

logger = logging.getLogger(__name__)



def windows_of_text(runner, base: TokenStats, rows: Sequence[tuple[int, Sequence[int]]],
                    batch_size: int) -> list[TokenStats]:
    """TokenStats of each variant (i, ids) of the text whose target statistics are `base`
    (module docstring), batches of `batch_size` variants sharing its key/value cache."""
    import torch

    dev, start = runner.lm.device, runner.start_id
    ids = [int(t) for t in base.ids]
    longest = max(i for i, _ in rows)  # cached positions 0 .. longest - 1 are read
    out: list[TokenStats | None] = [None] * len(rows)
    if longest == 0:
        cache = None
    else:
        x = torch.tensor([[start, *ids[:longest - 1]]], device=dev)
        where = torch.arange(longest, device=dev)[None]
        _, cache = forward_with_cache(runner, x, torch.ones_like(x), where, None)
    for b in range(0, len(rows), batch_size):
        part = list(range(b, min(b + batch_size, len(rows))))
        prefix = max(rows[r][0] for r in part)  # cached positions this batch reads
        feeds = []
        for r in part:
            i, seq = rows[r]
            feeds.append([start if i == 0 else ids[i - 1], *[int(t) for t in seq[i:-1]]])
        B, W = len(part), max(len(f) for f in feeds)
        new = torch.full((B, W), start, dtype=torch.long)
        mask = torch.zeros((B, prefix + W), dtype=torch.long)
        pos = torch.zeros((B, W), dtype=torch.long)
        for k, (r, f) in enumerate(zip(part, feeds)):
            i = rows[r][0]
            new[k, :len(f)] = torch.tensor(f)
            mask[k, :i] = 1
            mask[k, prefix:prefix + len(f)] = 1
            pos[k] = i + torch.arange(W).clamp(max=len(f) - 1)  # padding: never past the context
        past = None
        if prefix > 0:
            past = copy.deepcopy(cache)
            extra = past.get_seq_length() - prefix
            if extra > 0:  # transformers 5: crop(-k) drops the last k positions
                past.crop(-extra)
            past.batch_repeat_interleave(B)
        hidden, _ = forward_with_cache(runner, new.to(dev), mask.to(dev), pos.to(dev), past)  # [B, W, d]
        real = torch.zeros((B, W), dtype=torch.bool)
        targets = []
        for k, (r, f) in enumerate(zip(part, feeds)):
            real[k, :len(f)] = True
            i, seq = rows[r]
            targets += [int(t) for t in seq[i:]]
        flat = position_stats(runner, hidden[real.to(dev)], torch.tensor(targets, device=dev))  # [P, 6]
        at = 0
        for r, f in zip(part, feeds):
            i, seq = rows[r]
            w = flat[at:at + len(f)]
            at += len(f)
            out[r] = TokenStats(
                ids=np.asarray(seq, dtype=np.int64),
                L=np.concatenate([base.L[:i], w[:, 0]]).astype(np.float32),
                H=np.concatenate([base.H[:i], w[:, 1]]).astype(np.float32),
                M2=np.concatenate([base.M2[:i], w[:, 2]]).astype(np.float32),
                var=np.concatenate([base.var[:i], w[:, 3]]).astype(np.float32),
                top=None if base.top is None else np.concatenate(
                    [base.top[:i], w[:, 4].astype(np.int64)]),
                Lmax=None if base.Lmax is None else np.concatenate(
                    [base.Lmax[:i], w[:, 5]]).astype(np.float32))
    return out  # type: ignore[return-value]


def shared_cache_works(runner, base: TokenStats, rows, batch_size: int) -> bool:
    """Whether the shared-cache windows of (up to 4 of) `rows` equal the plain pass over
    the same variants (checked once per model by the hf backend)."""
    sample = list(rows[:4])
    try:
        import torch

        with torch.inference_mode():
            got = windows_of_text(runner, base, sample, batch_size)
            want = runner.run_ids([list(seq) for _, seq in sample])
    except Exception as e:  # a cache that cannot be cropped or copied, a model without one
        logger.warning("%s: infill's shared key/value cache is not available (%s: %s); "
                       "every variant runs in full", runner.lm.name, type(e).__name__, e)
        return False
    atol = agreement_atol(runner.lm.model)
    for (i, _), g, w in zip(sample, got, want):
        if not (np.allclose(g.L[i:], w.L[i:], atol=atol)
                and np.allclose(g.H[i:], w.H[i:], atol=atol)):
            logger.warning("%s: infill's shared key/value cache does not reproduce the plain "
                           "pass; every variant runs in full", runner.lm.name)
            return False
    return True
