"""Sampled continuations of the unlearning audit (`pddkit compare`, Shi et al. 2024 section
7): a flagged chunk's first `prompt_words` words are continued by the unlearned model
(batched `generate` calls, a progress bar with its ETA) and each continuation is compared
with the chunk's true rest by ROUGE-L recall (Lin 2004)."""

from __future__ import annotations

import re

_ROUGE_WORD = re.compile(r"\w+")


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two word lists (bit-parallel, Hyyrö
    2004: one big-integer step per word of `a`)."""
    masks: dict[str, int] = {}
    for i, w in enumerate(b):
        masks[w] = masks.get(w, 0) | (1 << i)
    full = (1 << len(b)) - 1
    v = full
    for w in a:
        u = v & masks.get(w, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - bin(v).count("1")


def rouge_l_recall(candidate: str, reference: str) -> float:
    """ROUGE-L recall (Lin 2004): LCS of the lower-cased words / words of the reference
    (0.0 for a reference without words)."""
    ref = _ROUGE_WORD.findall(reference.lower())
    return lcs_length(_ROUGE_WORD.findall(candidate.lower()), ref) / len(ref) if ref else 0.0


def sample_continuations(lm, prompt: str, reference: str, n: int, seed: int) -> list[str]:
    """`n` continuations of `prompt` by multinomial sampling (temperature 1, no top-k or
    top-p), seeded, each as long in tokens as `reference` (within the model's context)."""
    return sample_batch(lm, [(prompt, reference)], n, seed)[0]


def _prompt_ids(lm, prompt: str, reference: str) -> tuple[list[int], int]:
    """([start] + prompt ids, cut to leave room, and the continuation's length in tokens)."""
    from pddkit.backends.hf_tokenizers import start_token_id

    tok = lm.tokenizer
    ids = [start_token_id(tok, lm.name), *tok(prompt, add_special_tokens=False)["input_ids"]]
    want = max(1, len(tok(reference, add_special_tokens=False)["input_ids"]))
    ctx = lm.context_length or 2048
    want = min(want, ctx // 2) if len(ids) + want > ctx else want
    return ids[-(ctx - want):], want


def sample_batch(lm, pairs: list[tuple[str, str]], n: int, seed: int) -> list[list[str]]:
    """Per (prompt, reference) pair, `n` continuations of the prompt sampled in one
    `generate` call for the whole batch (prompts padded on the left; temperature 1, no
    top-k or top-p), each cut to as many tokens as its reference has (within the model's
    context). Seeded by `seed`: the same pairs in the same batch give the same texts."""
    import torch

    tok, model = lm.tokenizer, lm.model
    prompts = [_prompt_ids(lm, p, r) for p, r in pairs]
    width = max(len(ids) for ids, _ in prompts)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    pad = 0 if pad is None else pad
    rows = [[pad] * (width - len(ids)) + ids for ids, _ in prompts]
    mask = [[0] * (width - len(ids)) + [1] * len(ids) for ids, _ in prompts]
    device = next(model.parameters()).device
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(torch.tensor(rows, device=device),
                             attention_mask=torch.tensor(mask, dtype=torch.long, device=device),
                             do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                             max_new_tokens=max(w for _, w in prompts), num_return_sequences=n,
                             pad_token_id=pad)
    new = out[:, width:]
    return [tok.batch_decode(new[i * n:(i + 1) * n, :want], skip_special_tokens=True)
            for i, (_, want) in enumerate(prompts)]


def generation_batch(batch_size: int | str, n: int) -> int:
    """Chunks per `generate` call: `batch_size` sequences (16 for "auto"), `n` per chunk."""
    rows = 16 if batch_size == "auto" else int(batch_size)
    return max(1, rows // max(1, n))


def split_prompt(text: str, prompt_words: int) -> tuple[str, str] | None:
    """(the text's first `prompt_words` words, the rest); None when the text is not longer
    than that."""
    from pddkit.data.builders.words import word_spans

    spans = word_spans(text)
    if len(spans) <= prompt_words:
        return None
    return text[:spans[prompt_words - 1][1]], text[spans[prompt_words][0]:]


def continue_all(texts: list[str], lm, n: int, prompt_words: int, seed: int,
                 per_batch: int) -> dict[int, tuple[tuple[float, ...], tuple[str, ...]]]:
    """Text index -> (ROUGE-L recalls, continuations) of each text longer than
    `prompt_words` words, sampled `per_batch` chunks per `generate` call with a progress
    bar (its ETA); batch k is seeded with `seed` + k."""
    from pddkit import progress

    todo = [(i, got) for i, t in enumerate(texts)
            if (got := split_prompt(t, prompt_words)) is not None]
    out = {}
    with progress.bar(len(todo), "sampling continuations", unit="chunk") as bar:
        for k, start in enumerate(range(0, len(todo), per_batch)):
            batch = todo[start:start + per_batch]
            sampled = sample_batch(lm, [pair for _, pair in batch], n, seed + k)
            for (i, (_, rest)), got in zip(batch, sampled):
                out[i] = (tuple(rouge_l_recall(t, rest) for t in got), tuple(got))
            bar.update(len(batch))
    return out
