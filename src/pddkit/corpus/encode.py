"""Texts to token ids the same way for indexing and for checking: no special tokens, the
fast tokenizer's batch encoder where there is one (no length warnings, all cores)."""

from __future__ import annotations

from collections.abc import Sequence


def encode_texts(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, without BOS/EOS."""
    fast = getattr(tokenizer, "backend_tokenizer", None)
    if fast is not None:
        return [e.ids for e in fast.encode_batch(list(texts), add_special_tokens=False)]
    return [tokenizer.encode(t, add_special_tokens=False) for t in texts]


def vocab_size_of(tokenizer) -> int:
    """Ids run below this (added tokens included)."""
    return max(len(tokenizer), int(getattr(tokenizer, "vocab_size", 0) or 0))
