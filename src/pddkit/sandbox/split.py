"""Seeded split of whole documents into members, non-members, reference pool and
background, and evaluation windows of W words that remember their document."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from pddkit.data.samples import Dataset, Sample, make_dataset
from pddkit.errors import PddkitError
from pddkit.sandbox.corpus import Corpus, Document

ROLES = ("member", "nonmember", "reference", "background")


@dataclass(frozen=True)
class Split:
    members: tuple[Document, ...]
    nonmembers: tuple[Document, ...]
    reference: tuple[Document, ...]
    background: tuple[Document, ...]
    too_short: int  # documents shorter than the longest window, not used
    seed: int

    def roles(self) -> dict[str, str]:
        out = {}
        for role, docs in zip(ROLES, (self.members, self.nonmembers, self.reference,
                                      self.background)):
            out.update({d.id: role for d in docs})
        return out

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        counts = {r: sum(1 for v in self.roles().values() if v == r) for r in ROLES}
        path.write_text(json.dumps({"seed": self.seed, "counts": counts,
                                    "too_short": self.too_short, "documents": self.roles()},
                                   indent=1) + "\n")
        return path


def split_documents(corpus: Corpus, n_members: int, n_reference: int, n_background: int,
                    min_words: int, seed: int = 0) -> Split:
    """Members and non-members (n_members each), reference pool and background documents,
    drawn without replacement from documents of at least `min_words` words."""
    eligible = [d for d in corpus.documents if len(d.text.split()) >= min_words]
    need = 2 * n_members + n_reference + n_background
    if len(eligible) < need:
        raise PddkitError(
            f"corpus {corpus.name} has {len(eligible)} documents of at least {min_words} words "
            f"(after cutting into sections); this split needs {need} (2 x {n_members} members/"
            f"non-members + {n_reference} reference + {n_background} background): lower "
            "--members, --reference or --background, or give a larger corpus")
    docs = eligible[:]
    random.Random(seed).shuffle(docs)
    a, b, c = n_members, 2 * n_members, 2 * n_members + n_reference
    return Split(tuple(docs[:a]), tuple(docs[a:b]), tuple(docs[b:c]), tuple(docs[c:need]),
                 too_short=len(corpus.documents) - len(eligible), seed=seed)


def windows(split: Split, words: int, per_doc: int = 2, seed: int = 0) -> Dataset:
    """Up to `per_doc` non-overlapping windows of `words` words from each member (label 1)
    and non-member (label 0) document, at seeded random offsets; `group` = document id."""
    rng = random.Random(f"{seed}-{words}")
    samples = []
    for label, docs in ((1, split.members), (0, split.nonmembers)):
        for d in docs:
            toks = d.text.split()
            k = min(per_doc, len(toks) // words)
            part = len(toks) // max(k, 1)
            for j in range(k):
                start = j * part + rng.randint(0, part - words)
                samples.append(Sample(id=f"{d.id}@{start}", text=" ".join(toks[start:start + words]),
                                      label=label, source=f"{d.source} ({d.id})", group=d.id))
    return make_dataset(f"sandbox windows of {words} words", samples, [])
