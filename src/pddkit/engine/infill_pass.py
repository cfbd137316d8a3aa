"""The provider of Need.INFILL (`infill`): for each text and each scored position i
whose token is not the target's argmax (TokenStats.top of the target pass), the variant
x' = x with x_i replaced by the argmax, cut after i + the largest lookahead among the
`infill` calls (a causal model's statistics up to there do not depend on what follows).
All variants of all texts are token ids, scored in one batched pass through the run's
executor (`id_stats`) and statistics cache, each distinct variant once; their cost is
counted (counts["infill"]) and logged."""

from __future__ import annotations

import logging

import numpy as np

from pddkit.engine.pass_context import PassContext, provider
from pddkit.errors import PddkitError
from pddkit.methods.base import Need

logger = logging.getLogger(__name__)


def variants(ids: np.ndarray, top: np.ndarray, lookahead: int) -> list[tuple[int, list[int]]]:
    """(i, ids of x with x_i replaced by top_i, cut after i + lookahead) for each 0-based
    position i where ids[i] != top[i]."""
    n = len(ids)
    out = []
    for i in np.flatnonzero(np.asarray(ids) != np.asarray(top)).tolist():
        seq = [int(t) for t in ids[:min(i + 1 + lookahead, n)]]
        seq[i] = int(top[i])
        out.append((i, seq))
    return out


def _variant_stats(ctx: PassContext, flat: list[list[int]], names: list[str],
                   owner: list[tuple[int, int]]):
    """The variants' statistics through the statistics cache: on the local engine with an
    `hf` model, each text's variants share its key/value cache (backends/infill_windows.py,
    HFBackend.infill_stats); else (Ray, other backends) every variant runs in full through
    the executor."""
    inner = getattr(ctx.target, "backend", ctx.target)
    shared = getattr(inner, "infill_stats", None)
    if shared is None or ctx.executor.name != "local":
        return ctx.executor.id_stats(ctx.target, flat, [False] * len(flat), names, "infilling pass")
    where = {tuple(seq): k for k, seq in enumerate(flat)}
    target = ctx.fields["target"]

    def compute(seqs, truncated, desc):
        by_text: dict[int, list[int]] = {}
        for j, seq in enumerate(seqs):
            by_text.setdefault(owner[where[tuple(seq)]][0], []).append(j)
        texts = sorted(by_text)
        got = shared([target[t] for t in texts],
                     [[(owner[where[tuple(seqs[j])]][1], seqs[j]) for j in by_text[t]] for t in texts])
        out = [None] * len(seqs)
        for t, stats in zip(texts, got):
            for j, st in zip(by_text[t], stats):
                out[j] = st
        return out

    if hasattr(ctx.target, "store"):  # behind the statistics cache: misses only
        return ctx.target.stats_for_ids(flat, [False] * len(flat), desc="infilling pass",
                                        compute=compute)
    return compute(flat, [False] * len(flat), "infilling pass")


@provider(Need.INFILL)
def infill_provider(ctx: PassContext) -> None:
    from pddkit.methods.infill import check

    calls = [c for c in ctx.calls if Need.INFILL in c.spec.needs]
    for c in calls:
        check(c.params["k"], c.params["lookahead"], c.params["variant"])
    ahead = max(int(c.params["lookahead"]) for c in calls)
    target = ctx.fields["target"]
    per_text: list[list[tuple[int, int]]] = []  # (position, index of its variant in `flat`)
    unique: dict[tuple[int, ...], int] = {}
    flat: list[list[int]] = []
    names: list[str] = []
    owner: list[tuple[int, int]] = []  # (text, position) each distinct variant was made from
    for t, (st, name) in enumerate(zip(target, ctx.names)):
        if st.top is None:
            raise PddkitError(f"infill needs the argmax token of every position, which "
                              f"{ctx.target.name} did not give for {name}")
        mine = []
        for i, seq in variants(st.ids, st.top, ahead):
            key = tuple(seq)
            if key not in unique:
                unique[key] = len(flat)
                flat.append(seq)
                names.append(f"{name} with token {i + 1} infilled by the argmax")
                owner.append((t, i))
            mine.append((i, unique[key]))
        per_text.append(mine)
    stats = _variant_stats(ctx, flat, names, owner)
    for st, name in zip(stats, names):
        if not (np.isfinite(st.L).all() and np.isfinite(st.H).all() and np.isfinite(st.M2).all()):
            raise PddkitError(f"{ctx.target.name} gave non-finite log-probabilities for {name} "
                              "(a float16 overflow? try `dtype='float32'`)")
    ctx.fields["infill"] = [tuple((i, stats[k]) for i, k in mine) for mine in per_text]
    n_texts = max(len(target), 1)
    n_variants = sum(len(m) for m in per_text)
    tokens = int(sum(len(s) for s in flat))
    inner = getattr(ctx.target, "backend", ctx.target)
    shared = (getattr(inner, "_shared_cache", False)
              if ctx.executor.name == "local" and hasattr(inner, "infill_stats") else False)
    if shared is None:  # every variant came from the statistics cache: nothing ran
        run = 0
    elif shared:  # per text: its prefix once, then each variant's window (infill_windows.py)
        run = sum(max(i for i, _ in mine) + sum(len(flat[k]) - i for i, k in mine)
                  for mine in per_text if mine)
    else:
        run = tokens
    ctx.counts["infill"] = {
        "lookahead": ahead, "variants": n_variants, "distinct_variants": len(flat),
        "tokens": tokens, "variants_per_text": round(n_variants / n_texts, 2),
        "tokens_per_text": round(tokens / n_texts, 2), "shared_kv_cache": shared,  # None: cached
        "tokens_run": int(run), "tokens_run_per_text": round(run / n_texts, 2),
        "target_tokens_per_text": round(sum(len(s) for s in target) / n_texts, 2)}
    logger.info("infilling pass: %d variants (%.1f per text) of %d texts, %d tokens scored "
                "(%.1f per text), %d run through the model%s (%.1f per text, against %.1f in "
                "the target pass)", n_variants, n_variants / n_texts, len(target), tokens,
                tokens / n_texts, run, " with each text's key/value cache shared" if shared else "",
                run / n_texts, ctx.counts["infill"]["target_tokens_per_text"])
