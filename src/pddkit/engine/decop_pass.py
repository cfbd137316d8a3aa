"""The provider of Need.QUIZ (`decop`): each text's 3 paraphrases (read from `paraphrases`,
or written by `paraphraser` and kept in the statistics cache directory), its document's
title and author (data/paraphrases.py), the quiz items (methods/decop.py: every order of
the text among its paraphrases, for each `permutations` and `chat` of the decop calls,
each distinct prompt asked once) and the target's answers (backends/choice.py), kept in
the cache directory (`choices.jsonl`, keyed by the target's fingerprint and the prompt)
so that a rerun asks nothing again. Writes paraphrases.jsonl beside scores.jsonl.

The paraphrasing prompt is pddkit's (PARAPHRASE_PROMPT): the authors paraphrased with
Claude v2.0 and published no prompt. Each text's 3 paraphrases are sampled continuations
of it (temperature 1, top-p 0.95, no top-k), seeded per text by the run's seed, cut at the
first blank line."""

from __future__ import annotations

import hashlib
import json
import logging

from pddkit.engine.pass_context import PassContext, provider
from pddkit.errors import PddkitError
from pddkit.methods.base import Need

logger = logging.getLogger(__name__)

PARAPHRASE_PROMPT = ("Rewrite the following passage in different words. Keep its meaning, its "
                     "length and its style, but do not copy its sentences.\n\nPassage: {text}\n\n"
                     "Rewritten passage:")
PARAPHRASE_SAMPLING = {"top_k": 0, "top_p": 0.95, "temperature": 1.0}
CHOICES_FILE = "choices.jsonl"  # the answers, in the cache directory
CHUNK = 192  # prompts answered between two writes of the cache (8 texts' 24 items)
NAMED = 3


def _first(ids) -> str:
    ids = list(ids)
    more = f" (and {len(ids) - NAMED} more)" if len(ids) > NAMED else ""
    return ", ".join(map(repr, ids[:NAMED])) + more


def check_inputs(dataset, config) -> None:
    """What decop reads besides the model, checked before any model loads: the paraphrases
    file against the evaluated texts, and each text's title and author."""
    from pddkit.data.paraphrases import document_fields, load_paraphrases

    if config.engine != "local":
        raise PddkitError("decop asks the target model its quiz in this process: run it with "
                          "`engine='local'`")
    ids = [s.id for s in dataset.samples]
    fields = None
    if config.paraphrases:
        fields = load_paraphrases(config.paraphrases, ids, [s.text for s in dataset.samples]).fields
    document_fields(ids, dataset.meta.get("document_fields"), fields)


@provider(Need.QUIZ)
def decop_provider(ctx: PassContext) -> None:
    from pddkit.data.paraphrases import document_fields, load_paraphrases
    from pddkit.methods.decop import check, orders, prompt

    calls = [c for c in ctx.calls if Need.QUIZ in c.spec.needs]
    for c in calls:
        check(c.params["permutations"], c.params["score"], c.params["chat"])
    cfg = ctx.config
    if cfg.paraphrases:
        pf = load_paraphrases(cfg.paraphrases, ctx.ids, ctx.texts)
        paras, given = [pf.paraphrases[i] for i in ctx.ids], pf.fields
        ctx.models["paraphrases"] = {"path": cfg.paraphrases}
    else:
        paras, given = _generated(ctx), None
    docs = document_fields(ctx.ids, ctx.document_fields, given)
    ctx.extras.setdefault("trail", {})["paraphrases.jsonl"] = [
        {"id": i, "title": d.title, "author": d.author, "paraphrases": list(p)}
        for i, d, p in zip(ctx.ids, docs, paras)]

    backend = ctx.target
    inner = getattr(backend, "backend", backend)
    tokenizer = _tokenizer(inner)
    chat = {mode: _use_chat(mode, tokenizer, inner.name) for mode in {c.params["chat"] for c in calls}}
    wanted = sorted({o for c in calls for o in orders(c.params["permutations"])})
    prompts: dict[str, str] = {}  # prompt -> the name of its first text (errors)
    per_text = []
    for name, text, doc, para in zip(ctx.names, ctx.texts, docs, paras):
        options = (text, *para)
        keys = {}
        for mode, wrap in chat.items():
            for order in wanted:
                p = prompt(doc.title, doc.author, [options[k] for k in order])
                p = _chat_prompt(tokenizer, p) if wrap else p
                prompts.setdefault(p, name)
                keys[(mode, order)] = p
        per_text.append(keys)
    got = _answers(ctx, backend, inner, list(prompts), list(prompts.values()))
    ctx.fields["quiz"] = [{k: (got[p].letter, got[p].probs) for k, p in keys.items()}
                          for keys in per_text]
    ctx.counts["decop_prompts"] = len(prompts)
    if any(c.params["score"] == "prob" for c in calls) and any(a.probs is None for a in got.values()):
        raise PddkitError("decop:score=prob needs the letters' log-probabilities, and the server "
                          "gave only the letter: use score=share")


def _tokenizer(inner):
    tok = getattr(inner, "tokenizer", None)
    if tok is None and hasattr(inner, "lm"):
        tok = inner.lm.tokenizer
    if tok is None:
        raise PddkitError(f"decop needs the tokenizer of {inner.name} (the letters' token ids)")
    return tok


def _use_chat(mode: str, tokenizer, name: str) -> bool:
    has = bool(getattr(tokenizer, "chat_template", None))
    if mode == "yes" and not has:
        raise PddkitError(f"decop:chat=yes needs a chat template, and the tokenizer of {name} "
                          "has none: use chat=no or chat=auto")
    return has if mode == "auto" else mode == "yes"


def _chat_prompt(tokenizer, text: str) -> str:
    """The prompt in the tokenizer's chat template with the authors' system text (folded
    into the user turn where the template takes no system role), the start token left out
    (the backend puts its own)."""
    from pddkit.methods.decop import SYSTEM_TEXT

    try:
        out = tokenizer.apply_chat_template(
            [{"role": "system", "content": SYSTEM_TEXT}, {"role": "user", "content": text}],
            tokenize=False, add_generation_prompt=True)
    except Exception:  # a template without a system role raises its own error
        out = tokenizer.apply_chat_template(
            [{"role": "user", "content": f"{SYSTEM_TEXT}\n\n{text}"}], tokenize=False,
            add_generation_prompt=True)
    bos = getattr(tokenizer, "bos_token", None)
    return out[len(bos):] if bos and out.startswith(bos) else out


def choice_key(fingerprint: str, prompt: str) -> str:
    from pddkit.backends.choice import API_SEED, LOGIT_BIAS, MAX_STEPS

    blob = json.dumps(["decop-choice", 1, fingerprint, prompt, MAX_STEPS, LOGIT_BIAS, API_SEED])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _answers(ctx: PassContext, backend, inner, prompts: list[str], names: list[str]) -> dict:
    """prompt -> backends.choice.Choice: from the cache directory where it holds them, the
    others asked a chunk at a time and stored as each chunk is done."""
    from pddkit.backends.choice import Choice

    store, keys = None, [None] * len(prompts)
    if hasattr(backend, "store"):
        from pddkit.cache.samples import SampleStore

        store = SampleStore(backend.store.path, CHOICES_FILE)
        fp = backend.fingerprint()
        keys = [choice_key(fp, p) for p in prompts]
    out: list = [None] * len(prompts)
    if store is not None:
        for i, k in enumerate(keys):
            row = store.get(k)
            out[i] = None if row is None else Choice.from_row(row)
    todo = [i for i, a in enumerate(out) if a is None]
    if store is not None:
        backend.hits["decop quiz"] = backend.hits.get("decop quiz", 0) + len(prompts) - len(todo)
        backend.misses["decop quiz"] = backend.misses.get("decop quiz", 0) + len(todo)
    for c in range(0, len(todo), CHUNK):
        part = todo[c:c + CHUNK]
        got = ask(ctx, inner, [prompts[i] for i in part], [names[i] for i in part])
        for i, a in zip(part, got):
            out[i] = a
        if store is not None:
            store.put([(keys[i], out[i].to_row()) for i in part])
    return dict(zip(prompts, out))


def ask(ctx: PassContext, inner, prompts: list[str], names: list[str]) -> list:
    """The target's answers to `prompts` (hf: batched greedy steps; openai: one call each)."""
    from pddkit.backends.choice import MAX_STEPS, api_choices, hf_choices

    if getattr(inner, "kind", None) == "openai" or hasattr(inner, "client"):
        got, notices = api_choices(inner, prompts, names)
        for line in notices:
            if line not in ctx.notices:
                logger.warning(line)
                ctx.notices.append(line)
        return got
    if not hasattr(inner, "lm"):
        raise PddkitError(f"decop cannot ask {inner.name} its quiz: the backend is neither a "
                          "local model (hf) nor an OpenAI-compatible server")
    from pddkit import progress
    from pddkit.backends.sampling import end_token_ids

    lm = inner.lm
    start = inner.runner.start_id
    seqs = [[start, *inner.tokenize(p)] for p in prompts]
    limit = lm.context_length
    for seq, name in zip(seqs, names):
        if limit is not None and len(seq) + MAX_STEPS > limit:
            raise PddkitError(f"decop: a quiz item of {name} holds {len(seq)} tokens, and "
                              f"{inner.name} reads at most {limit} (the text and its 3 "
                              "paraphrases are all in each item): use shorter texts")
    bar = progress.bar(total=len(prompts), desc="decop quiz", unit="item")
    try:
        return hf_choices(lm.model, lm.tokenizer, seqs, batch_size=ctx.config.fixed_batch_size,
                          end_ids=end_token_ids(lm.model, lm.tokenizer), on_batch=bar.update)
    finally:
        bar.close()


def _generated(ctx: PassContext) -> list[tuple[str, str, str]]:
    """3 paraphrases per text from the `paraphraser` (module docstring), through the cache
    directory's sampled continuations when the run has one."""
    from pddkit.backends import get_backend
    from pddkit.backends.sampling import text_seed
    from pddkit.data.paraphrases import COUNT

    cfg = ctx.config
    same = cfg.paraphraser == cfg.model and cfg.paraphraser_backend == cfg.backend
    if same:
        para = ctx.target
    else:
        cls = get_backend(cfg.paraphraser_backend)
        options = {k: getattr(cfg, k) for k in cls.OPTIONS}
        options["max_length"] = None
        if cfg.paraphraser_backend == "openai":
            options["api_base"] = cfg.paraphraser_api_base or cfg.api_base
            options["tokenizer"] = cfg.paraphraser_tokenizer
        para = cls.load(cfg.paraphraser, role="paraphraser", **options)
        if cfg.cache:
            from pddkit.backends.caching import CachingBackend
            from pddkit.cache import StatsStore

            para = CachingBackend(para, StatsStore.open(cfg.cache))
    ctx.models["paraphraser"] = {"name": cfg.paraphraser, "backend": cfg.paraphraser_backend,
                                 "prompt": PARAPHRASE_PROMPT, **PARAPHRASE_SAMPLING}
    lengths = [len(x) for x in para.encode(ctx.texts, ctx.names, what="paraphrased texts").ids]
    cap = 2 * max(lengths) + 16  # room for a paraphrase somewhat longer than its text
    prompts = [PARAPHRASE_PROMPT.format(text=t) for t in ctx.texts]
    _say_short_room(ctx, para, prompts, lengths, cap)
    seeds = [text_seed(cfg.seed, t, ("decop-paraphrase", PARAPHRASE_PROMPT)) for t in ctx.texts]
    s = PARAPHRASE_SAMPLING
    got = para.sample(prompts, COUNT, s["top_k"], s["top_p"], s["temperature"], cap, seeds,
                      names=ctx.names)
    for line in got.notices:
        logger.warning(line)
        ctx.notices.append(line)
    if hasattr(para, "store") and not same:
        ctx.counts["paraphraser_cache"] = {"hits": para.hits.get("sampling", 0),
                                           "misses": para.misses.get("sampling", 0)}
        para.close()
    out, bad = [], []
    for sid, text, conts in zip(ctx.ids, ctx.texts, got.texts):
        cleaned = tuple(_clean(c) for c in conts)
        if any(not c or " ".join(c.split()) == " ".join(text.split()) for c in cleaned):
            bad.append(sid)
        out.append(cleaned)
    if bad:
        raise PddkitError(f"the paraphraser {cfg.paraphraser} wrote an empty paraphrase, or the "
                          f"text itself, for {len(bad)} of {len(ctx.ids)} texts (ids "
                          f"{_first(bad)}): give a `paraphrases` file, or another `paraphraser`")
    ctx.counts["paraphrased_texts"] = len(out)
    return out


def _say_short_room(ctx: PassContext, para, prompts: list[str], lengths: list[int], cap: int) -> None:
    """One notice when the sampler's length rule (backends/sampling.py: prompt and
    continuation at most 1024 tokens and the context) leaves some texts less room than their
    own length: their paraphrases may be cut short."""
    from pddkit.backends.sampling import continuation_budget

    limit = getattr(para, "context_limit", lambda: None)()
    used = [len(x) + 1 for x in para.encode(prompts, ctx.names, what="paraphrasing prompts").ids]
    short = [i for i, n, k in zip(ctx.ids, used, lengths)
             if continuation_budget(n, limit, cap) < k]
    if short:
        line = (f"decop: the paraphraser has room for fewer tokens than the text itself for "
                f"{len(short)} of {len(lengths)} texts (ids {_first(short)}; prompt and "
                "paraphrase at most 1024 tokens): their paraphrases may be cut short")
        logger.warning(line)
        ctx.notices.append(line)


def _clean(text: str) -> str:
    """A sampled paraphrase up to its first blank line, stripped."""
    return text.strip().split("\n\n", 1)[0].strip()
