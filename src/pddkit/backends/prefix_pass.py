"""Statistics of texts given a shared prefix (`recall` / `conrecall`; the hf backend's
optional `stats_given_prefix`), the prefix computed once.

LL(x | P) reads log p(x_i | start, P, x_<i) over the text's own tokens. The keys and values of
[start] + P[:-1] are computed once per call; each batch of texts starts from a copy of that
cache expanded to its rows and feeds [P[-1], x_1, ..., x_{n-1}] at the positions after it,
so the first text token is predicted from the prefix's last token, and a text costs its own
n tokens, not |P| + n. Texts are batched longest first, right-padded.

The first use per model checks a few texts against the plain pass over [start] + P + x and
falls back to it, with a warning, for a model whose cache cannot be copied and expanded or
gives other numbers.
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



def added_prefix(tokenizer) -> list[int]:
    """The special ids `tokenizer` puts before a text when it adds its special tokens (its
    default `tokenizer(text)`): Llama's, Mistral's or OPT's BOS; none for GPT-2, Pythia or
    Qwen. recall's `variant=reference` feeds them between prefix and text, as the authors'
    code does (it concatenates `tokenizer(P)` and `tokenizer(x)`)."""
    special = set(getattr(tokenizer, "all_special_ids", None) or [])
    ids = list(tokenizer("a")["input_ids"])
    out = []
    for t in ids:
        if int(t) not in special:
            break
        out.append(int(t))
    return out


def shared_prefix_stats(runner, prefix: Sequence[int], seqs: Sequence[Sequence[int]],
                        truncated: Sequence[bool], batch_size: int) -> list[TokenStats]:
    """TokenStats of each text given `prefix` (module docstring); `prefix` is not empty."""
    import torch

    dev, start = runner.lm.device, runner.start_id
    head = [start, *[int(t) for t in prefix[:-1]]]
    x = torch.tensor([head], device=dev)
    with torch.inference_mode():
        _, cache = forward_with_cache(runner, x, torch.ones_like(x),
                                      torch.arange(len(head), device=dev)[None], None)
        order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
        out: list[TokenStats | None] = [None] * len(seqs)
        for b in range(0, len(order), batch_size):
            part = order[b:b + batch_size]
            B, W = len(part), max(len(seqs[i]) for i in part)
            new = torch.full((B, W), start, dtype=torch.long)
            mask = torch.zeros((B, len(head) + W), dtype=torch.long)
            mask[:, :len(head)] = 1
            for r, i in enumerate(part):
                s = [int(t) for t in seqs[i]]
                new[r, :len(s)] = torch.tensor([int(prefix[-1]), *s[:-1]])
                mask[r, len(head):len(head) + len(s)] = 1
            pos = (len(head) + torch.arange(W))[None].expand(B, W)
            past = copy.deepcopy(cache)
            past.batch_repeat_interleave(B)
            hidden, _ = forward_with_cache(runner, new.to(dev), mask.to(dev), pos.to(dev), past)
            real = mask[:, len(head):].bool()  # [B, W]
            targets = torch.tensor([int(t) for i in part for t in seqs[i]], device=dev)
            flat = position_stats(runner, hidden[real.to(dev)], targets)  # [P, 6]
            at = 0
            for i in part:
                n = len(seqs[i])
                w = flat[at:at + n]
                at += n
                out[i] = TokenStats(np.asarray(seqs[i], dtype=np.int64), w[:, 0].astype(np.float32),
                                    w[:, 1].astype(np.float32), w[:, 2].astype(np.float32),
                                    bool(truncated[i]), top=w[:, 4].astype(np.int64),
                                    var=w[:, 3].astype(np.float32), Lmax=w[:, 5].astype(np.float32))
    return out  # type: ignore[return-value]


def plain_prefix_stats(runner, prefix: Sequence[int], seqs: Sequence[Sequence[int]],
                       truncated: Sequence[bool]) -> list[TokenStats]:
    """The same statistics from the plain pass over [start] + P + x (the prefix run per text)."""
    full = runner.run_ids([[*map(int, prefix), *map(int, s)] for s in seqs])
    return [TokenStats(np.asarray(s, dtype=np.int64), st.L[len(prefix):], st.H[len(prefix):],
                       st.M2[len(prefix):], bool(t),
                       top=None if st.top is None else st.top[len(prefix):],
                       var=st.var[len(prefix):],
                       Lmax=None if st.Lmax is None else st.Lmax[len(prefix):])
            for s, st, t in zip(seqs, full, truncated)]


def shared_prefix_works(runner, prefix: Sequence[int], seqs: Sequence[Sequence[int]],
                        batch_size: int) -> bool:
    """Whether the shared prefix gives the plain pass's numbers on the shortest two of
    `seqs` (two rows, so the expansion across a batch is checked; the plain pass runs the
    prefix again for each, so no more)."""
    sample = sorted(seqs, key=len)[:2]
    flags = [False] * len(sample)
    try:
        import torch

        with torch.inference_mode():
            got = shared_prefix_stats(runner, prefix, sample, flags, batch_size)
            want = plain_prefix_stats(runner, prefix, sample, flags)
    except Exception as e:  # a cache that cannot be copied or expanded, a model without one
        logger.warning("%s: the shots' key/value cache cannot be shared (%s: %s); the prefix "
                       "runs with every text", runner.lm.name, type(e).__name__, e)
        return False
    atol = agreement_atol(runner.lm.model)
    ok = all(np.allclose(g.L, w.L, atol=atol) and np.allclose(g.H, w.H, atol=atol)
             for g, w in zip(got, want))
    if not ok:
        logger.warning("%s: the shots' shared key/value cache does not reproduce the plain pass; "
                       "the prefix runs with every text", runner.lm.name)
    return ok
