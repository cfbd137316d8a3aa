"""The provider of Need.SHOTS (`recall` / `conrecall`): one prefix per role and
number of shots among the calls, trimmed to the context, and each text's
statistics given it, the prefix's key/value cache computed once (executor
`conditioned_stats`, through the statistics cache).

P is the shots joined with no separator (the reference code's `"".join`), encoded whole
(add_special_tokens=False). When [start] + P + a text exceeds the context (the model's, or
`max_length`), whole shots are dropped from the front until it fits (the reference code's
"keep the last shots that fit"), per text: the texts that keep the same shots share one
prefix, computed once. A text with no room for even the last shot is scored by
recall's fallback (counted); no text with room is one sentence with the lengths.
shots.jsonl records, per call and role, the shots kept, their order in the longest prefix
any text got, and how many texts' prefixes hold each.

A call with `variant="reference"` (the authors' token counting) feeds, between P and each
text, the special ids the tokenizer puts before a text (its BOS, if it adds one) and
scores them with the text: its statistics hold those ids first, then x's n tokens, and the
trimming counts them. Without such ids its statistics are the default variant's (computed
once)."""

from __future__ import annotations

import logging

from pddkit.data.shots import ShotPool, pool_for
from pddkit.engine.pass_context import PassContext, provider
from pddkit.errors import PddkitError
from pddkit.methods.base import Need

logger = logging.getLogger(__name__)


def roles_of(call) -> tuple[str, ...]:
    from pddkit.methods.recall import SHOT_ROLES

    return SHOT_ROLES[call.spec.name]


def variant_of(call) -> str:
    return str(call.params.get("variant", "pddkit"))


def wanted(calls) -> dict[str, int]:
    """Shots each role needs: the largest `shots` among the calls reading it."""
    out: dict[str, int] = {}
    for c in calls:
        if Need.SHOTS in c.spec.needs:
            for role in roles_of(c):
                out[role] = max(out.get(role, 0), int(c.params["shots"]))
    return out


def added_ids(backend) -> list[int]:
    """The special ids the target's tokenizer puts before a text (variant=reference)."""
    inner = getattr(backend, "backend", backend)  # the statistics cache wraps the backend
    get = getattr(inner, "added_prefix_ids", None)
    if get is None:
        raise PddkitError(f"recall's variant=reference needs the special tokens the tokenizer of "
                          f"{backend.name} puts before a text, which this backend does not "
                          "say; use the default variant")
    return [int(t) for t in get()]


def shot_pool(dataset, config, calls):
    """(the texts to evaluate, the shots) before anything else sees the data
    (engine/prepare.py): from `prefix_data`, or drawn from `dataset` and left out of it."""
    return pool_for(dataset, wanted(calls), config.prefix_data, config.seed, config.on_invalid)


def trimmed(backend, shots: tuple[str, ...], lengths: list[int], what: str) -> list[tuple[int, list[int]]]:
    """Per text (its length in tokens), (index of the first shot kept, ids of P from there
    on): whole shots dropped from the front until [start] + P + the text fits the backend's
    context; (len(shots), []) for a text with no room for the last shot alone. No text with
    room for a shot is one sentence with the lengths."""
    limit = backend.context_limit()
    suffixes = [backend.tokenize("".join(shots[first:])) for first in range(len(shots))]
    out = []
    for n in lengths:
        first = next((f for f, ids in enumerate(suffixes)
                      if limit is None or 1 + len(ids) + n <= limit), len(shots))
        out.append((first, suffixes[first] if first < len(shots) else []))
    if all(first == len(shots) for first, _ in out):
        raise PddkitError(f"{what}: no shot fits the context of {limit} tokens: the shortest text "
                          f"under test has {min(lengths)} tokens and the shortest prefix (the "
                          f"last shot alone) {len(suffixes[-1])}, with the start token; cut the "
                          "texts shorter with `max_length`, or give shorter shots")
    return out


@provider(Need.SHOTS)
def shots_provider(ctx: PassContext) -> None:
    from pddkit.methods.recall import shot_key

    pool: ShotPool = ctx.shots
    if pool is None:
        raise PddkitError("recall needs its shots (engine/prepare.py draws or loads them)")
    calls = [c for c in ctx.calls if Need.SHOTS in c.spec.needs]
    target = ctx.fields["target"]
    lengths = [len(st) for st in target]
    keys = sorted({(role, int(c.params["shots"]), variant_of(c)) for c in calls
                   for role in roles_of(c)})
    lead = added_ids(ctx.target) if any(v == "reference" for _, _, v in keys) else []
    per_text: list[dict] = [{} for _ in target]
    rows: dict[tuple, list[dict]] = {}
    prefixes = {}
    done: dict[tuple, tuple] = {}  # (role, k, inserted ids) -> (its key, its rows): computed once
    for role, k, variant in keys:
        key = shot_key(role, k, variant)
        inserted = tuple(lead) if variant == "reference" else ()
        if (role, k, inserted) in done:  # the reference variant of a tokenizer without BOS
            first_key, first_rows = done[(role, k, inserted)]
            for texts in per_text:
                texts[key] = texts[first_key]
            rows[(role, k, variant)] = first_rows
            continue
        name = f"{role}, shots={k}" + (", variant=reference" if inserted else "")
        shots = pool.shots[role][:k]
        cut = trimmed(ctx.target, shots, [n + len(inserted) for n in lengths],
                      f"{role} shots (shots={k})")
        groups: dict[int, list[int]] = {}
        for i, (first, _) in enumerate(cut):
            groups.setdefault(first, []).append(i)
        desc = f"conditioned pass ({role} shots" + (", BOS after them)" if inserted else ")")
        for first, members in sorted(groups.items()):
            if first == len(shots):  # no room for a shot: LL(x | P) is not defined (fallback)
                for i in members:
                    per_text[i][key] = None
                continue
            stats = ctx.executor.conditioned_stats(
                ctx.target, cut[members[0]][1],
                [[*inserted, *target[i].ids.tolist()] for i in members],
                [target[i].truncated for i in members], [ctx.names[i] for i in members], desc)
            for i, st in zip(members, stats):
                per_text[i][key] = st
        most = min(groups)  # the longest prefix any text has
        used = {j: sum(len(m) for f, m in groups.items() if f <= j < len(shots)) for j in range(k)}
        rows[(role, k, variant)] = [{"role": role, "order": j - most, "text": shots[j],
                                     "texts": used[j]} for j in range(most, k)]
        done[(role, k, inserted)] = (key, rows[(role, k, variant)])
        prefixes[name] = {
            "texts_by_shots_kept": {str(k - f): len(m) for f, m in sorted(groups.items())},
            "prefix_tokens": len(cut[groups[most][0]][1])}
        trimmed_texts = sum(len(m) for f, m in groups.items() if f > 0)
        if trimmed_texts:
            said = f"{role} shots (shots={k}" + (", variant=reference)" if inserted else ")")
            line = (f"{said}: for {trimmed_texts} of "
                    f"{len(target)} texts whole shots were dropped from the front of the prefix "
                    "so that prefix and text fit the context (shots kept per text: "
                    + ", ".join(f"{k - f} for {len(m)}" for f, m in sorted(groups.items())) + ")")
            logger.warning(line)
            ctx.notices.append(line)
    ctx.fields["conditioned"] = per_text
    ctx.counts["shots"] = {**pool.counts(), "prefixes": prefixes}
    ctx.extras.setdefault("trail", {})["shots.jsonl"] = [
        {"method": c.label, **row} for c in calls for role in roles_of(c)
        for row in rows[(role, int(c.params["shots"]), variant_of(c))]]
