"""Texts to token ids the same way for indexing and for checking: no special tokens, the
fast tokenizer's batch encoder where there is one (no length warnings, all cores).

Fast tokenizers slow down on very long strings (a whole book encodes at a third of the
speed of the same book in 4 kB pieces), so long documents are encoded in pieces cut
before a space, and the ids joined, but only for a tokenizer for which that was checked
to give the ids of the whole text (on the first long document it meets, and on a probe
text); for any other the whole text is encoded at once.
"""

from __future__ import annotations

from collections.abc import Sequence

PIECE_CHARS = 4096
_PROBE = ("It was the best of times,  it was the worst of times; 1,234 men  said \"don't\" "
          "and 'won't' -- then   left.\nNew line\u00a0here,   then spaces.  ") * 40
_SAFE: dict[int, tuple[object, bool]] = {}  # id -> (tokenizer kept alive, pieces are safe)


def encode_texts(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, without BOS/EOS."""
    fast = getattr(tokenizer, "backend_tokenizer", None)
    if fast is None:
        return [tokenizer.encode(t, add_special_tokens=False) for t in texts]
    texts = list(texts)
    long = [i for i, t in enumerate(texts) if len(t) > 2 * PIECE_CHARS]
    if not long or not _pieces_safe(fast, texts[long[0]]):
        return [e.ids for e in fast.encode_batch(texts, add_special_tokens=False)]
    flat: list[str] = []
    spans: list[tuple[int, int]] = []
    for t in texts:
        parts = _pieces(t)
        spans.append((len(flat), len(flat) + len(parts)))
        flat.extend(parts)
    enc = fast.encode_batch(flat, add_special_tokens=False)
    return [[i for e in enc[a:b] for i in e.ids] for a, b in spans]


def _pieces(text: str) -> list[str]:
    """`text` cut into pieces of about PIECE_CHARS, each cut just before a space."""
    out, i = [], 0
    while i < len(text):
        j = text.find(" ", i + PIECE_CHARS)
        j = len(text) if j < 0 else j
        out.append(text[i:j])
        i = j
    return out


def _pieces_safe(fast, sample: str) -> bool:
    key = id(fast)
    if key not in _SAFE:
        _SAFE[key] = fast, all(
            [i for e in fast.encode_batch(_pieces(t), add_special_tokens=False) for i in e.ids]
            == fast.encode(t, add_special_tokens=False).ids
            for t in (_PROBE, sample[: 8 * PIECE_CHARS]))
    return _SAFE[key][1]


def vocab_size_of(tokenizer) -> int:
    """Ids run below this (added tokens included)."""
    return max(len(tokenizer), int(getattr(tokenizer, "vocab_size", 0) or 0))
