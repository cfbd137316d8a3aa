"""Seeded split of whole documents into members, non-members, reference pool and
background, free of near-duplicates across roles, and evaluation windows of W words cut
verbatim from their document.

Near-duplicates: documents of different roles never share a run of 13 or more lower-cased
whitespace words (sandbox.ngrams). Documents are taken in seeded random order; one that
shares such a run with documents already given to one role can only join that role (it is
dropped when that role is full), one that shares runs with two roles is dropped, and any
other goes to the role that is least filled. This implies the ground-truth rules of SPEC
section 7: training text (members, background) shares no run with a non-member, and the
reference pool and tokenizer text (reference pool, background) share none with an evaluated
document.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from pddkit.data.ngrams import N, ngram_hashes
from pddkit.data.samples import Dataset, Sample, make_dataset
from pddkit.errors import PddkitError
from pddkit.sandbox.corpus import Corpus, Document

ROLES = ("member", "nonmember", "reference", "background")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class NearDuplicates:
    """What removing near-duplicates across roles did to the split."""

    examined: int = 0  # documents looked at until every role was full
    moved: int = 0  # placed in the role whose documents they share a run with
    dropped_role_full: int = 0  # share a run with a role that was already full
    dropped_two_roles: int = 0  # share runs with documents of two roles or more
    ngram: int = N

    @property
    def dropped(self) -> int:
        return self.dropped_role_full + self.dropped_two_roles


@dataclass(frozen=True)
class Split:
    members: tuple[Document, ...]
    nonmembers: tuple[Document, ...]
    reference: tuple[Document, ...]
    background: tuple[Document, ...]
    too_short: int  # documents shorter than the longest window, not used
    seed: int
    near_duplicates: NearDuplicates = NearDuplicates()

    def roles(self) -> dict[str, str]:
        out = {}
        for role, docs in zip(ROLES, (self.members, self.nonmembers, self.reference,
                                      self.background)):
            out.update({d.id: role for d in docs})
        return out

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        counts = {r: sum(1 for v in self.roles().values() if v == r) for r in ROLES}
        nd = {**asdict(self.near_duplicates), "dropped": self.near_duplicates.dropped}
        path.write_text(json.dumps({"seed": self.seed, "counts": counts,
                                    "too_short": self.too_short, "near_duplicates": nd,
                                    "documents": self.roles()}, indent=1) + "\n")
        return path


def split_documents(corpus: Corpus, n_members: int, n_reference: int, n_background: int,
                    min_words: int, seed: int = 0) -> Split:
    """Members and non-members (n_members each), reference pool and background documents,
    drawn without replacement from documents of at least `min_words` words, so that no two
    documents of different roles share a run of 13 words (module docstring)."""
    eligible = [d for d in corpus.documents if len(d.text.split()) >= min_words]
    need = 2 * n_members + n_reference + n_background
    needs = (f"this split needs {need} (2 x {n_members} members/non-members + {n_reference} "
             f"reference + {n_background} background): lower `members`, `reference` or "
             "`background`, or give a larger corpus")
    if len(eligible) < need:
        raise PddkitError(
            f"corpus {corpus.name} has {len(eligible)} documents of at least {min_words} words "
            f"(after cutting into sections); {needs}")
    docs = eligible[:]
    random.Random(seed).shuffle(docs)
    target = dict(zip(ROLES, (n_members, n_members, n_reference, n_background)))
    placed: dict[str, list[Document]] = {r: [] for r in ROLES}
    owner: dict[int, str] = {}  # n-gram hash -> the role whose documents hold it
    examined = moved = role_full = two_roles = 0
    for d in docs:
        if all(len(placed[r]) >= target[r] for r in ROLES):
            break
        examined += 1
        grams = ngram_hashes(d.text)
        hit = {owner[g] for g in grams if g in owner}
        if len(hit) > 1:
            two_roles += 1
            continue
        if hit:
            role = hit.pop()
            if len(placed[role]) >= target[role]:
                role_full += 1
                continue
            moved += 1
        else:  # the least filled role, in ROLES order on ties
            role = min((r for r in ROLES if len(placed[r]) < target[r]),
                       key=lambda r: len(placed[r]) / target[r])
        placed[role].append(d)
        owner.update(dict.fromkeys(grams, role))
    nd = NearDuplicates(examined=examined, moved=moved, dropped_role_full=role_full,
                        dropped_two_roles=two_roles)
    if any(len(placed[r]) < target[r] for r in ROLES):
        got = sum(len(v) for v in placed.values())
        raise PddkitError(
            f"corpus {corpus.name} has {got} documents of at least {min_words} words after "
            f"removing near-duplicates across roles ({nd.dropped} dropped for sharing a run of "
            f"{N} words with another role); {needs}")
    return Split(*(tuple(placed[r]) for r in ROLES), too_short=len(corpus.documents) - len(eligible),
                 seed=seed, near_duplicates=nd)


def windows(split: Split, words: int, per_doc: int = 2, seed: int = 0) -> Dataset:
    """Up to `per_doc` non-overlapping windows of `words` words from each member (label 1)
    and non-member (label 0) document, at seeded random word offsets; `group` = document id.
    A window is the document's own text from its first word to its last, whitespace and
    newlines kept, so it is a verbatim substring of what the target was (or was not)
    trained on."""
    rng = random.Random(f"{seed}-{words}")
    samples = []
    for label, docs in ((1, split.members), (0, split.nonmembers)):
        for d in docs:
            spans = [m.span() for m in _WORD.finditer(d.text)]
            k = min(per_doc, len(spans) // words)
            part = len(spans) // max(k, 1)
            for j in range(k):
                start = j * part + rng.randint(0, part - words)
                text = d.text[spans[start][0]:spans[start + words - 1][1]]
                samples.append(Sample(id=f"{d.id}@{start}", text=text, label=label,
                                      source=f"{d.source} ({d.id})", group=d.id))
    return make_dataset(f"sandbox windows of {words} words", samples, [])
