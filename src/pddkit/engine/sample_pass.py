"""The provider of Need.SAMPLES (`samia`): each text's prompt (its first
floor(prefix * #words) whitespace words, of the scored span) continued `samples` times by
the target model through the run's executor (the Ray engine samples on its actors) and
the statistics cache directory (a rerun samples nothing it has), seeded per text, and the
continuations written to samples.jsonl beside scores.jsonl."""

from __future__ import annotations

import logging

from pddkit.engine.passes import PassContext, provider
from pddkit.errors import PddkitError
from pddkit.methods.base import Need

logger = logging.getLogger(__name__)

NAMED = 3  # texts named in the sentence refusing short texts, at most


@provider(Need.SAMPLES)
def sample_provider(ctx: PassContext) -> None:
    """One set of continuations per text for each distinct (prefix, top_k, max_new_tokens)
    among the samia calls, sampled for its largest `samples` (a call asking for fewer takes
    the first ones; `zlib` does not change sampling)."""
    from pddkit.backends.sampling import text_seed
    from pddkit.methods.samia import SampleParams, check, split_words

    calls = [c for c in ctx.calls if Need.SAMPLES in c.spec.needs]
    wanted: dict[SampleParams, int] = {}
    for c in calls:
        p = c.params
        check(p["samples"], p["prefix"], p["top_k"], p["max_new_tokens"])
        key = SampleParams.of(p)
        wanted[key] = max(wanted.get(key, 0), int(p["samples"]))
    sets: dict[SampleParams, list[tuple[str, ...]]] = {}
    prompts_of: dict[SampleParams, list[str]] = {}
    sampled = 0
    splits = {key: [split_words(span, key.prefix) for span in ctx.spans] for key in wanted}
    for key, split in splits.items():  # every text checked before anything is sampled
        short = [name for name, (p, r) in zip(ctx.names, split) if not p or not r]
        if short:
            more = f" (and {len(short) - NAMED} more)" if len(short) > NAMED else ""
            raise PddkitError(
                f"samia ({key.label()}) needs a prompt word and a reference word in every "
                f"text; {', '.join(short[:NAMED])}{more} "
                f"{'has' if len(short) == 1 else 'have'} too few words (at least "
                f"{_least(key.prefix)} needed)")
    for key, n in wanted.items():
        prompts = [" ".join(p) for p, _ in splits[key]]
        seeds = [text_seed(ctx.config.seed, span, key.values()) for span in ctx.spans]
        got = ctx.executor.sample(ctx.target, prompts, ctx.names, n, key.top_k, key.top_p,
                                  key.temperature, key.max_new_tokens, seeds)
        for line in got.notices:
            logger.warning(line)
            ctx.notices.append(line)
        sets[key], prompts_of[key] = list(got.texts), prompts
        sampled += n * len(prompts)
        empty = sum(not any(t.strip() for t in texts) for texts in got.texts)
        if empty:
            line = (f"samia ({key.label()}): {empty} of {len(prompts)} texts got only empty "
                    "continuations (the prompt filled the 1024-token budget or the context, "
                    "or the model ended at once): ROUGE 0")
            logger.warning(line)
            ctx.notices.append(line)
    ctx.counts["sampled_continuations"] = sampled
    ctx.fields["samples"] = [{key: texts[i] for key, texts in sets.items()}
                             for i in range(len(ctx.texts))]
    rows = []
    for c in calls:
        key = SampleParams.of(c.params)
        rows += [{"id": ctx.ids[i], "method": c.label, "prompt": prompts_of[key][i],
                  "continuations": list(sets[key][i][:int(c.params["samples"])])}
                 for i in range(len(ctx.texts))]
    ctx.extras.setdefault("trail", {})["samples.jsonl"] = rows


def _least(prefix: float) -> int:
    """The fewest words that give a prompt word and a reference word at `prefix`."""
    n = 2
    while not 1 <= int(prefix * n) < n:
        n += 1
    return n
