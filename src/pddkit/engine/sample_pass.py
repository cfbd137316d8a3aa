"""The provider of Need.SAMPLES (`samia`, `ngram`): each method's prompt per text, continued
`samples` times by the target model through the run's executor (the Ray engine samples on
its actors) and the statistics cache directory (a rerun samples nothing it has), seeded per
text, and the continuations written to samples.jsonl beside scores.jsonl.

A method that samples has a recipe here: the key of its sampling request (the parameters
that change the continuations: a frozen dataclass with `values()`, `label()`, `top_k`,
`top_p`, `temperature`, `max_new_tokens`), the check of its hyperparameters, and its prompt
of each scored span (every text checked before anything is sampled). samia's prompt is the
first floor(prefix * #words) whitespace words; ngram's is sentences 1-3 (data/sentences.py),
sent through the model's chat template with `chat=true`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pddkit.engine.pass_context import PassContext, provider
from pddkit.errors import PddkitError
from pddkit.methods.base import Need

logger = logging.getLogger(__name__)

NAMED = 3  # texts named in the sentence refusing short texts, at most


@dataclass(frozen=True)
class Recipe:
    """How one sampling method asks for continuations."""

    key: Callable[[dict], object]  # params -> the request key
    check: Callable[[dict], None]  # params -> None, or PddkitError
    prompts: Callable[[PassContext, object], list[str]]  # (ctx, key) -> one prompt per text
    empty: str  # why a text may get only empty continuations, for the notice
    trail: Callable[[PassContext, object, int], dict] = lambda ctx, key, i: {}  # extra row fields


def _samia_prompts(ctx: PassContext, key) -> list[str]:
    from pddkit.methods.samia import split_words

    split = [split_words(span, key.prefix) for span in ctx.spans]
    short = [name for name, (p, r) in zip(ctx.names, split) if not p or not r]
    if short:
        raise PddkitError(
            f"samia ({key.label()}) needs a prompt word and a reference word in every "
            f"text; {_named(short)} {'has' if len(short) == 1 else 'have'} too few words (at "
            f"least {_least(key.prefix)} needed)")
    return [" ".join(p) for p, _ in split]


def _samia_check(p: dict) -> None:
    from pddkit.methods.samia import check

    check(p["samples"], p["prefix"], p["top_k"], p["max_new_tokens"])


def _samia_key(p: dict):
    from pddkit.methods.samia import SampleParams

    return SampleParams.of(p)


def _ngram_split(ctx: PassContext, key) -> list[tuple[str, str] | None]:
    from pddkit.data.sentences import prompt_and_reference

    memo = ctx.extras.setdefault("ngram_splits", {})
    if (key.start, key.sentences) not in memo:
        memo[key.start, key.sentences] = [prompt_and_reference(span, key.start, key.sentences)
                                          for span in ctx.spans]
    return memo[key.start, key.sentences]


def _ngram_prompts(ctx: PassContext, key) -> list[str]:
    from pddkit.backends.sampling import chat_prompt
    from pddkit.data.sentences import least_sentences
    from pddkit.methods.ngram import INSTRUCTION

    split = _ngram_split(ctx, key)
    short = [name for name, s in zip(ctx.names, split) if s is None]
    if short:
        raise PddkitError(
            f"ngram ({key.label()}) needs a prompt sentence after the first {key.start} and a "
            f"reference sentence in every text; {_named(short)} "
            f"{'has' if len(short) == 1 else 'have'} fewer than {least_sentences(key.start)} "
            "sentences (NLTK punkt, line by line): leave them out"
            + (", or pass start=0 to prompt from the first sentence" if key.start else ""))
    if not key.chat:
        return [p for p, _ in split]
    return [chat_prompt(ctx.target, INSTRUCTION + p) for p, _ in split]


def _ngram_check(p: dict) -> None:
    from pddkit.methods.ngram import check

    check(p["samples"], p["agg"], p["stat"], p["start"], p["sentences"], p["max_new_tokens"])


def _ngram_key(p: dict):
    from pddkit.methods.ngram import NgramSampleParams

    return NgramSampleParams.of(p)


RECIPES: dict[str, Recipe] = {
    "samia": Recipe(_samia_key, _samia_check, _samia_prompts,
                    "the prompt filled the 1024-token budget or the context, or the model ended "
                    "at once): ROUGE 0"),
    "ngram": Recipe(_ngram_key, _ngram_check, _ngram_prompts,
                    "the prompt filled the context, or the model ended at once): coverage 0",
                    lambda ctx, key, i: {"reference": _ngram_split(ctx, key)[i][1]}),
}


@provider(Need.SAMPLES)
def sample_provider(ctx: PassContext) -> None:
    """One set of continuations per text for each distinct request key among the sampling
    calls, sampled for its largest `samples` (a call asking for fewer takes the first ones;
    parameters outside the key, samia's `zlib`, ngram's `agg` and `stat`, do not change
    sampling)."""
    from pddkit.backends.sampling import text_seed

    calls = [c for c in ctx.calls if Need.SAMPLES in c.spec.needs]
    wanted: dict = {}  # key -> (recipe name, most samples)
    for c in calls:
        recipe = RECIPES.get(c.spec.name)
        if recipe is None:
            raise PddkitError(f"{c.spec.name} needs sampled continuations, and pddkit has no "
                              "prompt recipe for it")
        recipe.check(c.params)
        key = recipe.key(c.params)
        wanted[key] = (c.spec.name, max(wanted.get(key, ("", 0))[1], int(c.params["samples"])))
    prompts_of = {key: RECIPES[name].prompts(ctx, key) for key, (name, _) in wanted.items()}
    sets: dict = {}
    sampled = 0
    for key, (name, n) in wanted.items():
        prompts = prompts_of[key]
        seeds = [text_seed(ctx.config.seed, span, key.values()) for span in ctx.spans]
        got = ctx.executor.sample(ctx.target, prompts, ctx.names, n, key.top_k, key.top_p,
                                  key.temperature, key.max_new_tokens, seeds)
        for line in got.notices:
            logger.warning(line)
            ctx.notices.append(line)
        sets[key] = list(got.texts)
        sampled += n * len(prompts)
        empty = sum(not any(t.strip() for t in texts) for texts in got.texts)
        if empty:
            line = (f"{name} ({key.label()}): {empty} of {len(prompts)} texts got only empty "
                    f"continuations ({RECIPES[name].empty}")
            logger.warning(line)
            ctx.notices.append(line)
    ctx.counts["sampled_continuations"] = sampled
    ctx.fields["samples"] = [{key: texts[i] for key, texts in sets.items()}
                             for i in range(len(ctx.texts))]
    rows = []
    for c in calls:
        recipe = RECIPES[c.spec.name]
        key = recipe.key(c.params)
        rows += [{"id": ctx.ids[i], "method": c.label, "prompt": prompts_of[key][i],
                  "continuations": list(sets[key][i][:int(c.params["samples"])]),
                  **recipe.trail(ctx, key, i)}
                 for i in range(len(ctx.texts))]
    ctx.extras.setdefault("trail", {})["samples.jsonl"] = rows


def _named(names: list[str]) -> str:
    """The first NAMED names, and how many more."""
    more = f" (and {len(names) - NAMED} more)" if len(names) > NAMED else ""
    return ", ".join(names[:NAMED]) + more


def _least(prefix: float) -> int:
    """The fewest words that give a prompt word and a reference word at `prefix`."""
    n = 2
    while not 1 <= int(prefix * n) < n:
        n += 1
    return n
