"""Sampled continuations (`samia`): what a backend's optional `sample` operation returns,
the per-text seed, the continuation length rule, and the `hf` sampling loop.

The `hf` loop prefills [start] + prompt once, expands its key/value cache to the `n` rows,
then draws one token per row and step at `temperature` with top-k (ties at the k-th logit
kept, as transformers' TopKLogitsWarper) and top-p (nucleus) filtering, from a
torch.Generator seeded per text: a text's continuations depend on its own prompt, seed and
parameters only, never on the batch or the other texts. A row ends at the model's end
token (not part of its text) or when the length rule stops it. Several texts are decoded
together (`sample_many`: left-padded, one forward per step for all their rows), each
drawing from its own generator exactly as it would alone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

TOTAL_TOKENS = 1024  # the reference code's max_length: prompt (start token included) + continuation


@dataclass(frozen=True)
class Sampled:
    """Per prompt, its continuations' texts (continuation tokens only, never the prompt's),
    and one line per thing the backend had to work around (a server ignoring `n`, ...)."""

    texts: tuple[tuple[str, ...], ...]
    notices: tuple[str, ...] = ()


def text_seed(run_seed: int, text: str, params: Sequence) -> int:
    """The seed of one text's sampling stream: a digest of the run seed, the text and the
    sampling parameters (plain values): the same in any batch, order or run; different
    texts, different streams."""
    blob = json.dumps([int(run_seed), text, *params])
    return int.from_bytes(hashlib.sha256(blob.encode("utf-8")).digest()[:8], "big") >> 1


def continuation_budget(prompt_tokens: int, context: int | None, max_new_tokens: int | None) -> int:
    """Tokens a continuation may have: prompt (start token included) + continuation at most
    TOTAL_TOKENS and the context, and at most `max_new_tokens` when given."""
    limit = TOTAL_TOKENS if context is None else min(TOTAL_TOKENS, context)
    room = limit - prompt_tokens
    if max_new_tokens is not None:
        room = min(room, max_new_tokens)
    return max(0, room)


def _draw(logits, top_k: int, top_p: float, temperature: float, generator):
    """One token per row of [n, V] float32 logits."""
    import torch

    logits = logits / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        order = torch.sort(logits, descending=False, dim=-1)
        cum = order.values.softmax(-1).cumsum(-1)
        drop = cum <= 1 - top_p
        drop[:, -1] = False  # the most likely token always stays
        logits = logits.masked_fill(drop.scatter(1, order.indices, drop), float("-inf"))
    probs = logits.softmax(-1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


def sample_ids(model, prompt: Sequence[int], n: int, *, top_k: int, top_p: float,
               temperature: float, max_new: int, seed: int, end_ids: set[int]) -> list[list[int]]:
    """`n` continuations (token ids, end token excluded) of `prompt` ([start] + prompt ids)."""
    return sample_many(model, [prompt], n, top_k=top_k, top_p=top_p, temperature=temperature,
                       max_new=[max_new], seeds=[seed], end_ids=end_ids)[0]


def sample_many(model, prompts: Sequence[Sequence[int]], n: int, *, top_k: int, top_p: float,
                temperature: float, max_new: Sequence[int], seeds: Sequence[int],
                end_ids: set[int]) -> list[list[list[int]]]:
    """`n` continuations of each prompt ([start] + prompt ids), decoded together: per prompt
    its own budget `max_new[b]` and its own generator seeded with `seeds[b]`.

    The prompts are left-padded to one length (masked, positions counted from each prompt's
    first token) and prefilled in one forward; their caches are expanded to `n` rows each,
    and every step is one forward over the rows of the prompts still drawing. Each prompt's
    tokens are drawn as `sample_ids` draws them alone: one `_draw` over its own [n, V]
    logits with its own generator, stopping when its rows have all ended or its budget is
    spent, so its generator gives the same numbers in the same order whatever else is in
    the batch. A prompt that is done leaves the batch (its cache rows dropped)."""
    import torch

    from pddkit.backends.cached_forward import cache_arguments, returned_cache

    out: list[list[list[int]]] = [[[] for _ in range(n)] for _ in prompts]
    active = [b for b in range(len(prompts)) if max_new[b] > 0 and n > 0]
    if not active:
        return out
    device = next(model.parameters()).device
    gens = {}
    for b in active:
        gens[b] = torch.Generator(device=device)
        gens[b].manual_seed(int(seeds[b]))
    width = max(len(prompts[b]) for b in active)
    padded = any(len(prompts[b]) < width for b in active)
    # the pad id is any id of the vocabulary: its positions are masked out
    ids = [[prompts[b][0]] * (width - len(prompts[b])) + list(prompts[b]) for b in active]
    mask = position = None
    extra: dict = {}
    if padded:
        mask = torch.tensor([[0] * (width - len(prompts[b])) + [1] * len(prompts[b])
                             for b in active], device=device)
        position = (mask.cumsum(-1) - 1).clamp(min=0)
        extra = {"attention_mask": mask, "position_ids": position}
    drawn: dict[int, list] = {b: [] for b in active}
    done = {b: torch.zeros(n, dtype=torch.bool, device=device) for b in active}
    ends = torch.tensor(sorted(end_ids) or [-1], device=device)
    with torch.inference_mode():
        keep = _last_logits_only(model)  # the prompt's last position only: no [T, V] logits
        res = model(input_ids=torch.tensor(ids, device=device), use_cache=True, **extra,
                    **keep, **cache_arguments(model, None))
        cache = _expandable(model, returned_cache(res))
        cache.batch_repeat_interleave(n)  # each prompt's keys and values, once per row
        logits = res.logits[:, -1, :].float().repeat_interleave(n, 0)
        if padded:
            mask, position = mask.repeat_interleave(n, 0), position[:, -1:].repeat_interleave(n, 0)
        step = 0
        while True:
            tokens, going = [], []
            for j, b in enumerate(active):
                token = _draw(logits[j * n:(j + 1) * n], top_k, top_p, temperature, gens[b])
                drawn[b].append(token)
                done[b] |= torch.isin(token, ends)
                tokens.append(token)
                if not (bool(done[b].all()) or step + 1 == max_new[b]):
                    going.append(j)
            step += 1
            if not going:
                break
            token = torch.cat(tokens)
            if len(going) < len(active):  # the prompts that are done leave the batch
                rows = torch.tensor([j * n + r for j in going for r in range(n)], device=device)
                cache.batch_select_indices(rows)
                token = token[rows]
                if padded:
                    mask, position = mask[rows], position[rows]
                active = [active[j] for j in going]
            if padded:
                mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], 1)
                position = position + 1
                extra = {"attention_mask": mask, "position_ids": position}
            res = model(input_ids=token[:, None], use_cache=True, **extra,
                        **cache_arguments(model, cache))
            cache, logits = returned_cache(res), res.logits[:, -1, :].float()
    for b, steps in drawn.items():
        for r, seq in enumerate(torch.stack(steps, 1).tolist()):
            for t in seq:
                if t in end_ids:
                    break
                out[b][r].append(t)
    return out


def _expandable(model, cache):
    """The prefill's cache, refused in one sentence when it cannot be expanded to several
    rows and cut back to some of them."""
    from pddkit.errors import PddkitError

    if cache is None:
        raise PddkitError(f"{type(model).__name__} gives no key/value cache to sample with")
    if not (hasattr(cache, "batch_repeat_interleave") and hasattr(cache, "batch_select_indices")):
        raise PddkitError(f"{type(model).__name__} returns a key/value cache pddkit cannot "
                          f"expand to several samples ({type(cache).__name__}); samia "
                          "cannot sample with it")
    return cache


def _last_logits_only(model) -> dict:
    """`logits_to_keep=1` where the model's forward takes it (transformers' causal LMs do)."""
    import inspect

    try:
        takes = "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        takes = False
    return {"logits_to_keep": 1} if takes else {}


def end_token_ids(model, tokenizer) -> set[int]:
    """The ids that end a continuation: the tokenizer's and the model's end tokens."""
    found: set[int] = set()
    for value in (getattr(tokenizer, "eos_token_id", None),
                  getattr(getattr(model, "generation_config", None), "eos_token_id", None),
                  getattr(getattr(model, "config", None), "eos_token_id", None)):
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, int):
                found.add(v)
    return found


def chat_prompt(backend, content: str) -> str:
    """`content` as the one user message of the model's chat template, with the template's
    generation prompt (the assistant's turn opened), as text; a leading start token's text
    is taken off, since the backend puts the start token before every prompt it samples."""
    from pddkit.errors import PddkitError

    inner = getattr(backend, "backend", backend)  # behind the statistics cache
    tok = getattr(inner, "tokenizer", None)
    if tok is None and hasattr(inner, "_tokenizer_view"):
        tok = inner._tokenizer_view().tokenizer
    if tok is None or not getattr(tok, "chat_template", None):
        raise PddkitError(f"chat=true needs the model's chat template, and the tokenizer of "
                          f"{backend.name} has none: pass chat=false (a base model is sent the "
                          "prompt alone)")
    text = tok.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                   add_generation_prompt=True)
    start = getattr(tok, "bos_token", None)
    return text[len(start):] if start and text.startswith(start) else text
