"""Long documents -> consecutive N-word texts (`--split-words N [--max-texts K]`).

As the SoK of Meeus et al. 2024 (arXiv 2406.17975; 25 sequences of 200 words per book): each
input row is a document, cut into consecutive `words`-word texts, verbatim (a text is the
document's own characters from its first word to its last, spacing and newlines kept),
`group` = the row's group, else its id (the document), `id` = "<document id>@<k>", label =
the document's. The trailing words short of a full text are dropped and counted; `max_texts`
keeps the first K texts of each document (the words past them are counted too). A document
shorter than one text is skipped and counted. `run_dataset` applies it when
RunConfig.split_words is set.
"""

from __future__ import annotations

import re
from dataclasses import replace

from pddkit.data.samples import Dataset, Sample, Skipped, make_dataset
from pddkit.errors import PddkitError

_WORD = re.compile(r"\S+")


def split_documents(dataset: Dataset, words: int, max_texts: int | None = None) -> Dataset:
    """`dataset` with each document replaced by its consecutive `words`-word texts;
    `meta["split_words"]` counts documents, texts, skipped documents and dropped words."""
    if words < 1:
        raise PddkitError(f"`split_words` must be at least 1 word per text, not {words}")
    if max_texts is not None and max_texts < 1:
        raise PddkitError(f"`max_texts` must be at least 1 text per document, not {max_texts}")
    samples: list[Sample] = []
    skipped = list(dataset.skipped)
    short = dropped = beyond = 0
    for doc in dataset.samples:
        spans = [m.span() for m in _WORD.finditer(doc.text)]
        n = len(spans) // words
        if n == 0:
            short += 1
            skipped.append(Skipped(doc.source or f"document {doc.id}",
                                   f"has {len(spans)} words, fewer than one {words}-word text"))
            continue
        keep = n if max_texts is None else min(n, max_texts)
        dropped += len(spans) - n * words
        beyond += (n - keep) * words
        for k in range(keep):
            first, last = spans[k * words], spans[(k + 1) * words - 1]
            samples.append(replace(doc, id=f"{doc.id}@{k}", text=doc.text[first[0]:last[1]],
                                   group=doc.group or doc.id))
    counts = {"words": words, "max_texts": max_texts, "documents": len(dataset.samples) - short,
              "texts": len(samples), "documents_too_short": short, "trailing_words_dropped": dropped,
              "words_beyond_max_texts": beyond}
    if not samples:
        raise PddkitError(f"{dataset.name}: no document has {words} words (all {short} are "
                          "shorter than one text of `split_words` words)")
    return make_dataset(dataset.name, samples, skipped, {**dataset.meta, "split_words": counts})
