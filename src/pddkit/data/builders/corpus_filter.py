"""Builders' non-members checked against the training corpus (`index`): a non-member text
with at least `max_overlap` of its `index_n`-grams found in an infini-gram index of the
corpus is not a non-member of a model trained on it, and is dropped; how many were
checked, dropped and too short to check (kept: fewer tokens than one n-gram) is counted
in the manifest with the index, its tokenizer and the threshold.

The overlap is measured with the index's tokenizer (pddkit.corpus.overlap), whatever model
the benchmark is meant for.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)


@dataclass
class CorpusFilter:
    """An open index and the rule; `tally` accumulates what was checked and dropped."""

    index: object  # pddkit.corpus.index.CorpusIndex
    n: int
    max_overlap: float
    tally: dict = field(default_factory=lambda: {"nonmembers_checked": 0, "nonmembers_dropped": 0,
                                                 "nonmembers_too_short": 0, "dropped": []})

    def nonmembers_to_keep(self, texts: Sequence[str], ids: Sequence[str]) -> list[bool]:
        """Per non-member text: False when the corpus contains it (overlap >= max_overlap);
        texts shorter than one n-gram are kept and counted."""
        from pddkit.corpus.overlap import contradictions, measure_overlap

        overlaps = measure_overlap(self.index, list(texts), self.n)
        found = {c.position for c in contradictions(overlaps, [0] * len(overlaps),
                                                    self.max_overlap)}
        short = sum(o.overlap is None for o in overlaps)
        self.tally["nonmembers_checked"] += len(overlaps) - short
        self.tally["nonmembers_too_short"] += short
        self.tally["nonmembers_dropped"] += len(found)
        self.tally["dropped"] += [{"id": ids[i], "overlap": overlaps[i].overlap,
                                   "longest_match": overlaps[i].longest_match}
                                  for i in sorted(found)]
        return [i not in found for i in range(len(overlaps))]

    def record(self) -> dict:
        """The manifest's `counts.corpus_check`: the index, its tokenizer, the rule and the
        tally."""
        info = self.index.info
        return {"index": [str(f) for f in info.folders], "tokenizer": self.index.tokenizer_name,
                "tokenizer_fingerprint": info.tokenizer_fingerprint,
                "built_by_pddkit": info.built_by_pddkit, "normalize": info.normalize,
                "index_documents": info.documents, "index_tokens": info.tokens,
                "n": self.n, "max_overlap": self.max_overlap, **self.tally}

    def note(self, builder: str) -> str:
        t = self.tally
        short = (f"; {t['nonmembers_too_short']} shorter than {self.n} tokens could not be "
                 "checked and were kept" if t["nonmembers_too_short"] else "")
        return (f"{builder}: dropped {t['nonmembers_dropped']} of {t['nonmembers_checked']} "
                f"non-members checked that the corpus contains (at least {self.max_overlap:g} "
                f"of their {self.n}-grams found in index {self.index.info.name}, tokenizer "
                f"{self.index.tokenizer_name}){short}")


def open_filter(index: object, index_tokenizer: str | None, index_n: int,
                max_overlap: float) -> CorpusFilter | None:
    """The builders' `index` parameters checked, the index opened (None without one)."""
    from pddkit.data.builders.registry import paths

    folders = paths(index)
    if not folders:
        if index_tokenizer is not None:
            raise PddkitError("`index_tokenizer` names the tokenizer of a corpus index; give "
                              "`index` too")
        return None
    if not isinstance(index_n, int) or isinstance(index_n, bool) or index_n < 1:
        raise PddkitError(f"`index_n` must be at least 1 token, not {index_n!r}")
    if not isinstance(max_overlap, (int, float)) or not 0 < max_overlap <= 1:
        raise PddkitError(f"`max_overlap` must be a share in (0, 1], not {max_overlap!r}")
    from pddkit.corpus.index import open_index

    # one sentence for a folder that is not an index, or a public one without its tokenizer
    opened = open_index(list(folders), tokenizer_name=index_tokenizer)
    return CorpusFilter(opened, index_n, float(max_overlap))
