"""Open a corpus index (pddkit's or a public infini-gram v4 index) with the tokenizer it was
built with, and ask it about token sequences."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pddkit.corpus.encode import vocab_size_of
from pddkit.corpus.layout import IndexInfo, read_index
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)


@dataclass
class CorpusIndex:
    """An open index: `info` (layout.IndexInfo), the tokenizer texts are encoded with and
    the infini-gram engine."""

    info: IndexInfo
    tokenizer: Any
    tokenizer_name: str
    engine: Any

    def count(self, ids: list[int]) -> int:
        """Occurrences of the token sequence `ids` in the corpus (all shards)."""
        return int(_ok(self.engine.count(input_ids=[int(i) for i in ids]), self.info)["count"])

    def match_lengths(self, ids: list[int]) -> list[int]:
        """For each position i, the length of the longest run ids[i:i+k] the corpus holds
        (0 when not even ids[i] occurs). Two pointers: the run from i+1 reaches at least
        as far as the run from i, so at most 2 x len(ids) lookups (infini-gram's own
        `creativity` query extends every run from its start: quadratic on found texts)."""
        ids = [int(i) for i in ids]
        out, r = [], 0
        for i in range(len(ids)):
            r = max(r, i)
            while r < len(ids) and self._found(ids[i:r + 1]):
                r += 1
            out.append(r - i)
        return out

    def _found(self, ids: list[int]) -> bool:
        return _ok(self.engine.find(input_ids=ids), self.info)["cnt"] > 0

    @property
    def normalize(self) -> bool:
        return bool(self.info.normalize)


def _ok(response: dict, info: IndexInfo) -> dict:
    if "error" in response:
        raise PddkitError(f"index {info.name} refused a query: {response['error']}")
    return response


def open_index(folders: list[str | Path], tokenizer=None, tokenizer_name: str | None = None,
               *, local_files_only: bool = False, prefetch: bool | None = None) -> CorpusIndex:
    """Open `folders` (one index, or one folder per worker). A pddkit index loads the
    tokenizer its manifest names unless one is given, and refuses another; a public one
    needs `tokenizer_name`. `prefetch`: infini-gram's read-ahead of index pages (its
    defaults), which pays on an index larger than memory and costs five times the time of
    a lookup on one the page cache holds; None: on when the index is over half of RAM."""
    from pddkit.cache.fingerprint import tokenizer_digest

    info = read_index(folders)
    if tokenizer is None and tokenizer_name is None:
        if not info.built_by_pddkit:
            raise PddkitError(f"index {info.name} has no pddkit manifest (a public index): name "
                              "the tokenizer it was built with (`index_tokenizer`)")
        tokenizer_name = info.tokenizer_name
    if tokenizer is None:
        from pddkit.backends.hf_tokenizers import load_tokenizer

        try:
            tokenizer = load_tokenizer(tokenizer_name, local_files_only=local_files_only)
        except PddkitError as e:
            if tokenizer_name != info.tokenizer_name:
                raise
            raise PddkitError(f"index {info.name} was built with the tokenizer of "
                              f"{tokenizer_name}, which cannot be loaded here ({e}); name "
                              "where it is now with `index_tokenizer`") from None
    if info.built_by_pddkit and tokenizer_digest(tokenizer) != info.tokenizer_fingerprint:
        if str(tokenizer_name) == info.tokenizer_name:
            raise PddkitError(f"the tokenizer of {tokenizer_name} has changed since index "
                              f"{info.name} was built with it (its fingerprint differs): its "
                              "counts would be wrong; index the corpus again")
        raise PddkitError(f"index {info.name} was built with the tokenizer of "
                          f"{info.tokenizer_name}, not that of {tokenizer_name}: their token ids "
                          "differ, so its counts would be wrong (check with the index's "
                          "tokenizer, or index the corpus again)")
    vocab = vocab_size_of(tokenizer)
    if info.token_dtype == "u16" and vocab >= 0xFFFF:
        raise PddkitError(f"index {info.name} stores 16-bit token ids but the tokenizer of "
                          f"{tokenizer_name} has {vocab} tokens: it was built with another "
                          "tokenizer")
    if prefetch is None:
        prefetch = _index_bytes(info) > _memory_bytes() // 2
    return CorpusIndex(info, tokenizer, str(tokenizer_name), _engine(info, tokenizer, vocab, prefetch))


def _index_bytes(info: IndexInfo) -> int:
    return sum(p.stat().st_size for f in info.folders for p in f.glob("t*.[0-9]*"))


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _engine(info: IndexInfo, tokenizer, vocab: int, prefetch: bool):
    try:
        from infini_gram.engine import InfiniGramEngine
    except ImportError:
        raise PddkitError("corpus indexes need the infini-gram package: "
                          "pip install -e '.[corpus]'") from None
    eos = getattr(tokenizer, "eos_token_id", None)
    eos = int(eos) if eos is not None and 0 <= int(eos) < vocab else 0
    return InfiniGramEngine(index_dir=[str(f) for f in info.folders], eos_token_id=eos,
                            vocab_size=max(vocab, eos + 1), version=4,
                            token_dtype=info.token_dtype,
                            **({} if prefetch else {"ds_prefetch_depth": 0, "sa_prefetch_depth": 0,
                                                    "od_prefetch_depth": 0}))
