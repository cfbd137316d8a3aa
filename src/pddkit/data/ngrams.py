"""Word n-grams as MIMIR counts them: runs of 13 lower-cased whitespace words
(`text.lower().split()`), hashed with a stable 8-byte BLAKE2b so sets of them can be
built and compared in linear time and give the same answer in every process."""

from __future__ import annotations

from hashlib import blake2b

N = 13  # words in a run that counts as shared text


def ngram_hashes(text: str, n: int = N) -> set[int]:
    """Hashes of every run of `n` consecutive lower-cased whitespace words of `text`
    (empty for a text of fewer than `n` words)."""
    words = text.lower().split()
    return {int.from_bytes(blake2b(" ".join(words[i:i + n]).encode("utf-8", "surrogatepass"),
                                   digest_size=8).digest(), "little")
            for i in range(len(words) - n + 1)}


def shares_run(a: str, b: str, n: int = N) -> bool:
    """True when `a` and `b` have a run of `n` or more lower-cased whitespace words in common."""
    return not ngram_hashes(a, n).isdisjoint(ngram_hashes(b, n))
