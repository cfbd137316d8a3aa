"""A small training corpus with planted non-members, its index, and the overlap of a text
with it counted in plain Python over the same token ids (never with pddkit.corpus.overlap):
shared by tests/test_run_index.py and tests/test_builders_index.py."""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from pathlib import Path


def save_index_tokenizer(folder: Path, texts: list[str], vocab_size: int = 1024):
    """A byte-level BPE trained on `texts`, saved to `folder` and loaded back from it (the
    saved copy is what the index manifest names and fingerprints)."""
    from transformers import AutoTokenizer

    from pddkit.sandbox.training import train_bpe_tokenizer

    train_bpe_tokenizer(texts, vocab_size=vocab_size).save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def build_corpus_index(folder: Path, documents: list[str], tokenizer, tokenizer_dir: Path) -> Path:
    """`documents` written as a JSONL corpus and indexed by pddkit into `folder`."""
    from pddkit.corpus.build import IndexSettings, build_index

    corpus = folder.parent / f"{folder.name}-corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    (corpus / "docs.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
    build_index([corpus], tokenizer, str(tokenizer_dir), folder,
                IndexSettings(threads=1, memory_gb=1))
    return folder


def normalised(text: str) -> str:
    """NFC, whitespace runs to one space, ends stripped: the index's normaliser, as its
    manifest records it, written out here."""
    return " ".join(unicodedata.normalize("NFC", text).split())


class PlainCounts:
    """Token n-grams of a corpus counted with Python tuples: per length k, a Counter of the
    k-grams inside each document (none crosses a document boundary)."""

    def __init__(self, documents: list[str], tokenizer) -> None:
        self.tok = tokenizer
        self.docs = [self.ids(d) for d in documents]
        self._by_k: dict[int, Counter] = {}

    def ids(self, text: str) -> list[int]:
        return self.tok.encode(normalised(text), add_special_tokens=False)

    def grams(self, k: int) -> Counter:
        if k not in self._by_k:
            self._by_k[k] = Counter(tuple(d[i:i + k]) for d in self.docs
                                    for i in range(len(d) - k + 1))
        return self._by_k[k]

    def occurs(self, seq: list[int]) -> bool:
        return self.grams(len(seq))[tuple(seq)] > 0

    def longest(self, ids: list[int]) -> int:
        """The longest run of consecutive ids found: occurring is monotone in k (a k-gram
        that occurs has its (k-1)-gram prefix occur), so the largest k with any k-gram of
        `ids` occurring, found by scanning k up."""
        best = 0
        for k in range(1, len(ids) + 1):
            if not any(self.occurs(ids[i:i + k]) for i in range(len(ids) - k + 1)):
                break
            best = k
        return best

    def row(self, text: str, n: int) -> dict:
        """The overlap columns of `text`, by pddkit's documented rule, counted here: its own
        spelling a; when a's first n-gram (all of a, when shorter) does not occur, also that
        of " " + text, b, and the spelling with the larger share found (shorter than n: 1 if
        all of it occurs) is reported whole, a on a tie; the count covers both spellings
        (the shorter's alone when one ends with the other)."""
        a = self.ids(text)
        b = self.tok.encode(" " + normalised(text), add_special_tokens=False)

        def measured(ids):
            ngrams = max(len(ids) - n + 1, 0)
            found = sum(self.occurs(ids[i:i + n]) for i in range(ngrams))
            share = found / ngrams if ngrams else float(self.occurs(ids))
            return {"tokens": len(ids), "ngrams": ngrams, "ngrams_found": found,
                    "overlap": found / ngrams if ngrams else None,
                    "longest_match": self.longest(ids)}, share

        row, share = measured(a)
        if b != a and not self.occurs(a[:n]):
            row_b, share_b = measured(b)
            if share_b > share:
                row = row_b
        count_a = self.grams(len(a))[tuple(a)]
        count_b = self.grams(len(b))[tuple(b)] if b != a else 0
        if b != a and len(b) > len(a) and tuple(b[-len(a):]) == tuple(a):
            count = count_a
        elif b != a and len(a) > len(b) and tuple(a[-len(b):]) == tuple(b):
            count = count_b
        else:
            count = count_a + count_b
        return {**row, "count": count}


def auc_by_ranks(scores: list[float], labels: list[int]) -> float:
    """AUC as the Mann-Whitney statistic: the share of (member, non-member) pairs where the
    member scores higher, ties counting one half."""
    pos = [s for s, y in zip(scores, labels) if y == 1]
    neg = [s for s, y in zip(scores, labels) if y == 0]
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))
