"""The provider of Need.SHOTS (SPEC 3b, `recall` / `conrecall`): one prefix per role and
number of shots among the calls, trimmed to the context once per run, and each text's
statistics given it, the prefix's key/value cache computed once (executor
`conditioned_stats`, through the statistics cache).

P is the shots joined with no separator (the reference code's `"".join`), encoded whole
(add_special_tokens=False). When [start] + P + the longest text under test exceeds the
context (the model's, or `max_length`), whole shots are dropped from the front until it
fits (the reference code's "keep the last shots that fit"); none fitting is one sentence
with the lengths. shots.jsonl records, per call, the shots kept and their order in P."""

from __future__ import annotations

import logging

from pddkit.data.shots import ShotPool, pool_for
from pddkit.engine.passes import PassContext, provider
from pddkit.errors import PddkitError
from pddkit.methods.base import Need

logger = logging.getLogger(__name__)


def roles_of(call) -> tuple[str, ...]:
    from pddkit.methods.recall import SHOT_ROLES

    return SHOT_ROLES[call.spec.name]


def wanted(calls) -> dict[str, int]:
    """Shots each role needs: the largest `shots` among the calls reading it."""
    out: dict[str, int] = {}
    for c in calls:
        if Need.SHOTS in c.spec.needs:
            for role in roles_of(c):
                out[role] = max(out.get(role, 0), int(c.params["shots"]))
    return out


def shot_pool(dataset, config, calls):
    """(the texts to evaluate, the shots) before anything else sees the data
    (engine/run.py): from `prefix_data`, or drawn from `dataset` and left out of it."""
    return pool_for(dataset, wanted(calls), config.prefix_data, config.seed, config.on_invalid)


def trim(backend, shots: tuple[str, ...], longest: int, what: str) -> tuple[int, list[int]]:
    """(index of the first shot kept, ids of P from there on): whole shots dropped from the
    front until [start] + P + the longest text fits the backend's context."""
    limit = backend.context_limit()
    for first in range(len(shots)):
        ids = backend.tokenize("".join(shots[first:]))
        if limit is None or 1 + len(ids) + longest <= limit:
            return first, ids
    last = len(backend.tokenize(shots[-1]))
    raise PddkitError(f"{what}: no shot fits the context of {limit} tokens: the longest text "
                      f"under test has {longest} tokens and the shortest prefix (the last shot "
                      f"alone) {last}, with the start token; cut the texts shorter with "
                      "`max_length`, or give shorter shots")


@provider(Need.SHOTS)
def shots_provider(ctx: PassContext) -> None:
    pool: ShotPool = ctx.shots
    if pool is None:
        raise PddkitError("recall needs its shots (engine/run.py draws or loads them)")
    calls = [c for c in ctx.calls if Need.SHOTS in c.spec.needs]
    target = ctx.fields["target"]
    longest = max(len(st) for st in target)
    ids, flags = [st.ids.tolist() for st in target], [st.truncated for st in target]
    keys = sorted({(role, int(c.params["shots"])) for c in calls for role in roles_of(c)})
    per_text: list[dict] = [{} for _ in target]
    kept: dict[tuple, tuple[str, ...]] = {}
    prefixes = {}
    for role, k in keys:
        shots = pool.shots[role][:k]
        first, prefix = trim(ctx.target, shots, longest, f"{role} shots (shots={k})")
        kept[(role, k)] = shots[first:]
        prefixes[f"{role}, shots={k}"] = {"kept": k - first, "dropped": first,
                                          "prefix_tokens": len(prefix)}
        if first:
            line = (f"{role} shots (shots={k}): the first {first} of {k} dropped so that the "
                    f"prefix and the longest text ({longest} tokens) fit the context")
            logger.warning(line)
            ctx.notices.append(line)
        stats = ctx.executor.conditioned_stats(ctx.target, prefix, ids, flags, ctx.names,
                                               f"conditioned pass ({role} shots)")
        for d, st in zip(per_text, stats):
            d[(role, k)] = st
    ctx.fields["conditioned"] = per_text
    ctx.counts["shots"] = {**pool.counts(), "prefixes": prefixes}
    ctx.extras.setdefault("trail", {})["shots.jsonl"] = [
        {"method": c.label, "role": role, "order": j, "text": text}
        for c in calls for role in roles_of(c)
        for j, text in enumerate(kept[(role, int(c.params["shots"]))])]
