"""The provider of Need.PAIRS (`emmia`, SPEC 3e): every text given every text as its prefix,
R[j, i] = LL(x_i | x_j) / LL(x_i), then EM-MIA's loop (methods/emmia.py) once per distinct
(init, iters, prefix_score) among the calls; Observation.emmia holds each text's result.
The design (why the cross-text work is here and the mathematics in the method's module):
methods/emmia.py's docstring.

The conditional pass. LL(x_i | x_j) is the mean of log p(x_i,t | start, x_j, x_i,<t) over
x_i's n_i tokens, the model fed [start] + ids(x_j) + ids(x_i) (SPEC 3b with P = x_j alone,
run.py:158-171): x_i's first token is scored, predicted from x_j's last token, as the
target pass scores it from the start token (SPEC 2), so numerator and denominator average
the same n_i tokens. The authors' `infer` (modeling_utils.py:38-59) leaves x_i's first token
unscored in both, with a tokenizer that adds no BOS (docs/methods/emmia.md).

Prefix j is x_j's ids as the target pass encoded them (so truncated like it): each call of
the executor's `conditioned_stats` computes [start] + x_j's key/value cache once and expands
it across the batch of targets (backends/prefix_pass.py), and the statistics cache keys
each entry by the prefix's ids and the target's (CachingBackend.prefix_fingerprint): a rerun
computes nothing. Where [start] + x_j + x_i exceeds the context, x_j's first tokens are
dropped until it fits (its last ones, next to x_i, are kept), counted; a target with no
room for one prefix token keeps R[j, i] = 1 (LL(x_i | empty) = LL(x_i)), counted.

`emmia_texts` runs before any model loads (engine/prepare.py): more texts than a call's
`max_texts` is one sentence with the cost, or, with `subset=true`, a seeded uniform sample
(labels never read: a sample stratified by label would tell an unsupervised method the
classes' sizes) of `max_texts` texts is scored and the rest is counted in results.json
(`counts.emmia_sample`) and listed in emmia_left_out.jsonl."""

from __future__ import annotations

import logging

import numpy as np

from pddkit import progress
from pddkit.data.samples import Dataset
from pddkit.engine.pass_context import PassContext, provider
from pddkit.errors import PddkitError
from pddkit.methods.base import MethodCall, Need, unmet
from pddkit.stats import Observation

logger = logging.getLogger(__name__)

_TINY = 1e-12  # LL(x) of a text whose every token had probability 1: the denominator's floor
DESC = "emmia pair pass"


def emmia_calls(calls) -> list[MethodCall]:
    return [c for c in calls if Need.PAIRS in c.spec.needs]


def cost_line(n: int, tokens: int | None = None) -> str:
    """What scoring n texts costs: N^2 conditional passes (and their tokens, once known)."""
    over = f" over {n * tokens:,} text tokens" if tokens is not None else (
        f" (each text given each of the {n}: about {n} times the tokens of the target pass)")
    return f"{n * n:,} conditional passes{over}"


def emmia_texts(dataset: Dataset, calls, seed: int, extra: int = 0,
                capabilities=None) -> Dataset:
    """The texts emmia may score (module docstring): `dataset` as it is when every call's
    max_texts allows its texts plus `extra` (validation texts scored with them); a seeded
    uniform sample when the calls over their cap have subset=true; else one sentence with
    the cost. An init method the backend cannot serve (`capabilities`) is one sentence too."""
    calls = emmia_calls(calls)
    if not calls:
        return dataset
    from pddkit.methods.base import METHODS

    for c in calls:
        why = unmet(METHODS.get(c.params["init"]), capabilities)
        if why:
            raise PddkitError(f"method {c.label}: its init method cannot run on this backend "
                              f"({why.removeprefix('skipping ')}); pass another init, e.g. "
                              "emmia:init=loss")
    n = len(dataset.samples) + extra
    over = [c for c in calls if n > int(c.params["max_texts"])]
    if not over:
        return dataset
    refused = [c for c in over if not c.params["subset"]]
    if refused:
        cap = int(refused[0].params["max_texts"])
        raise PddkitError(f"method {refused[0].label} on {n:,} texts would run "
                          f"{cost_line(n)}, more than its cap max_texts={cap} allows: raise "
                          f"the cap (emmia:max_texts={n}) to pay that, or score a seeded "
                          f"sample of {cap} texts (emmia:subset=true)")
    cap = min(int(c.params["max_texts"]) for c in over)
    keep = cap - extra
    if keep < 2:
        raise PddkitError(f"emmia:max_texts={cap} leaves room for {max(keep, 0)} texts beside "
                          f"the {extra} validation texts scored with them: raise max_texts")
    rng = np.random.default_rng(seed)
    chosen = set(rng.choice(len(dataset.samples), size=keep, replace=False).tolist())
    kept = tuple(s for i, s in enumerate(dataset.samples) if i in chosen)
    left = [s for i, s in enumerate(dataset.samples) if i not in chosen]
    sample = {"texts_given": len(dataset.samples), "scored": len(kept), "left_out": len(left),
              "max_texts": cap, "seed": int(seed)}
    line = (f"emmia: {len(dataset.samples):,} texts are more than max_texts={cap}: a seeded "
            f"sample of {len(kept)} is scored by every method of this run, {len(left)} are "
            "left out (counted in results.json, listed in emmia_left_out.jsonl)")
    logger.warning(line)
    out = Dataset(dataset.name, kept, dataset.skipped,
                  {**dataset.meta, "emmia_sample": sample, "emmia_sample_notice": line,
                   "emmia_left_out": [{"id": s.id, "source": s.source} for s in left]})
    if dataset.labelled:
        out.require_both_classes()  # metrics need both (the sample itself read no label)
    return out


def record_sample(ctx: PassContext, dataset: Dataset) -> None:
    """results.json's count, the notice and emmia_left_out.jsonl of a sampled subset."""
    if "emmia_sample" not in dataset.meta:
        return
    ctx.counts["emmia_sample"] = dict(dataset.meta["emmia_sample"])
    ctx.notices.append(dataset.meta["emmia_sample_notice"])
    ctx.extras.setdefault("trail", {})["emmia_left_out.jsonl"] = list(dataset.meta["emmia_left_out"])


class _OneLinePerPass(logging.Filter):
    """Drops the statistics cache's per-call line ("emmia pair pass: 0 of N texts from the
    cache, computing N"), which would repeat once per prefix: pair_matrix says it once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.args, tuple) and record.args[:1] == (DESC,))


def _mean(L) -> float:
    return float(np.mean(L, dtype=np.float64))


def _pairs_of_prefix(ctx: PassContext, j: int, limit: int | None, own: np.ndarray,
                     cond: np.ndarray, counted: dict) -> None:
    """Row j of LL(x_i | x_j) into `cond`: the targets grouped by how much of x_j fits
    before them, one executor call per group (one for all when every pair fits)."""
    target = ctx.fields["target"]
    n = len(target)
    lengths = [len(st) for st in target]
    prefix = target[j].ids.tolist()
    groups: dict[int, list[int]] = {}
    for i in range(n):
        room = len(prefix) if limit is None else min(len(prefix), limit - 1 - lengths[i])
        groups.setdefault(max(room, 0), []).append(i)
    for keep, members in sorted(groups.items(), reverse=True):
        if keep == 0:  # no room for one prefix token: LL(x_i | empty) = LL(x_i)
            cond[j, members] = own[members]
            counted["no_room"] += len(members)
            continue
        counted["cut"] += len(members) if keep < len(prefix) else 0
        stats = ctx.executor.conditioned_stats(
            ctx.target, prefix[len(prefix) - keep:], [target[i].ids.tolist() for i in members],
            [target[i].truncated for i in members], [ctx.names[i] for i in members], DESC)
        for i, st in zip(members, stats):
            if not np.isfinite(st.L).all():
                raise PddkitError(f"{ctx.target.name} gave non-finite log-probabilities for "
                                  f"{ctx.names[i]} given {ctx.names[j]} as its prefix (a "
                                  "float16 overflow? try `dtype='float32'`)")
            cond[j, i] = _mean(st.L)


def pair_matrix(ctx: PassContext) -> tuple[np.ndarray, dict]:
    """(R [N, N] float64 with R[j, i] = LL(x_i | x_j) / LL(x_i), counts)."""
    target = ctx.fields["target"]
    n = len(target)
    lengths = [len(st) for st in target]
    own = np.array([_mean(st.L) for st in target])
    limit = ctx.target.context_limit()
    tokens = int(sum(lengths))
    line = (f"emmia: {n} texts: {cost_line(n, tokens)} (each text's key/value cache computed "
            "once as a prefix and shared by its targets), then the EM loop on the CPU")
    logger.info(line)
    cond = np.empty((n, n), dtype=np.float64)
    counted = {"cut": 0, "no_room": 0}
    quiet, cache_log = _OneLinePerPass(), logging.getLogger("pddkit.backends.caching")
    cache_log.addFilter(quiet)
    bar = progress.bar(total=n, desc="emmia prefixes", unit="prefix")
    try:
        for j in range(n):
            _pairs_of_prefix(ctx, j, limit, own, cond, counted)
            bar.update(1)
    finally:
        bar.close()
        cache_log.removeFilter(quiet)
    cut, no_room = counted["cut"], counted["no_room"]
    cache = getattr(ctx.target, "counts", None)
    if cache is not None and DESC in cache():
        hits, misses = cache()[DESC]
        logger.info("%s: %d of %d pairs from the statistics cache, %d computed", DESC, hits,
                    hits + misses, misses)
    zero = int((own >= -_TINY).sum())
    R = cond / np.minimum(own, -_TINY)[None, :]
    counts = {"texts": n, "conditional_passes": n * n, "tokens": n * tokens,
              "prefix_tokens": tokens, "pairs_prefix_cut": cut, "pairs_without_room": no_room,
              "texts_with_zero_ll": zero}
    for what, k in (("pairs (prefix j, text i) had their prefix's first tokens dropped to fit "
                     "the context", cut),
                    ("pairs (prefix j, text i) left no room in the context for one prefix token: "
                     "R[j, i] = 1 (an empty prefix)", no_room),
                    ("texts have a mean log-probability of 0: the ratio's denominator is floored "
                     f"at -{_TINY:g}", zero)):
        if k:
            msg = f"emmia: {k} of {n * n if 'pairs' in what else n} {what}"
            logger.warning(msg)
            ctx.notices.append(msg)
    return R, counts


def initial_scores(ctx: PassContext, init: str) -> np.ndarray:
    """The init method's scores on the target statistics (its defaults), NaN set to 0
    (emmia.py:104; a pddkit method is never NaN). A method reading an optional field the
    target pass did not ask for (gapk's Lmax) gets the target statistics with it."""
    from pddkit.methods.base import METHODS

    spec = METHODS.get(init)
    target = ctx.fields["target"]
    if any(getattr(st, f) is None for f in spec.reads for st in target):
        target = ctx.stats(ctx.target, ctx.texts, ctx.names, "target pass", fields=spec.reads)
    call = MethodCall(spec, dict(spec.defaults), init)
    s = np.array([call(Observation(text=span, target=st)) for span, st in zip(ctx.spans, target)],
                 dtype=np.float64)
    s[np.isnan(s)] = 0.0
    return s


@provider(Need.PAIRS)
def pairs_pass(ctx: PassContext) -> None:
    from pddkit.methods.emmia import em_key, em_scores

    calls = emmia_calls(ctx.calls)
    n = len(ctx.fields["target"])
    for c in calls:  # emmia_texts sampled or refused already; a caller that skipped it
        if n > int(c.params["max_texts"]):
            raise PddkitError(f"method {c.label} on {n:,} texts would run {cost_line(n)}, more "
                              f"than its cap max_texts={c.params['max_texts']} allows")
    if n < 2:
        raise PddkitError(f"emmia scores texts against each other and needs at least 2, not {n}")
    R, counts = pair_matrix(ctx)
    inits: dict[str, np.ndarray] = {}
    per_text: list[dict] = [{} for _ in range(n)]
    for c in calls:
        p = c.params
        key = em_key(p["init"], p["iters"], p["prefix_score"])
        if key in per_text[0]:
            continue
        if p["init"] not in inits:
            inits[p["init"]] = initial_scores(ctx, p["init"])
        s = em_scores(R, inits[p["init"]], p["iters"], p["prefix_score"])
        for i in range(n):
            per_text[i][key] = float(s[i])
    ctx.fields["emmia"] = per_text
    ctx.counts["emmia"] = counts
