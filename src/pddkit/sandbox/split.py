"""Seeded split of whole documents into members, non-members, reference pool and
background, free of near-duplicates across roles, and evaluation windows of W words cut
verbatim from their document.

Near-duplicates: documents of different roles never share a run of 13 or more lower-cased
whitespace words (sandbox.ngrams). Documents are taken in seeded random order; one that
shares such a run with documents already given to one role can only join that role (it is
dropped when that role is full), one that shares runs with two roles is dropped, and any
other goes to the role that is least filled. This implies the sandbox's ground-truth
rules: training text (members, background) shares no run with a non-member, and the
reference pool and tokenizer text (reference pool, background) share none with an evaluated
document.

Trap carriers (sandbox.traps): after every role is full, the documents left, in the same
seeded order, that share no run of 13 words with a member, non-member or reference-pool
document are joined, in turn and separated by a blank line, into carriers of at least
`carrier_boundaries` sentence boundaries each (studies.traps.inject.sentence_boundaries), so
that a trap repeated that many times finds as many distinct places. Carriers are training
text (like background) but never background: no background sweep draws them, and the four
roles, hence the tokenizer and the reference model, are the same with carriers or without.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from pddkit.data.ngrams import N, ngram_hashes
from pddkit.data.samples import Dataset, Sample, make_dataset
from pddkit.errors import PddkitError
from pddkit.sandbox.corpus import Corpus, Document

ROLES = ("member", "nonmember", "reference", "background")
CARRIER = "trap-carrier"  # a document joined into a trap carrier (sandbox.traps)
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class NearDuplicates:
    """What removing near-duplicates across roles did to the split."""

    examined: int = 0  # documents looked at until every role was full
    moved: int = 0  # placed in the role whose documents they share a run with
    dropped_role_full: int = 0  # share a run with a role that was already full
    dropped_two_roles: int = 0  # share runs with documents of two roles or more
    ngram: int = N
    carrier_examined: int = 0  # documents looked at after the roles were full, for carriers
    carrier_dropped: int = 0  # of those, sharing a run with a member, non-member or reference

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
    carriers: tuple[Document, ...] = ()  # trap carriers, each joined from `carrier_parts`
    carrier_parts: tuple[tuple[str, ...], ...] = ()  # the document ids each carrier joins

    def roles(self) -> dict[str, str]:
        out = {}
        for role, docs in zip(ROLES, (self.members, self.nonmembers, self.reference,
                                      self.background)):
            out.update({d.id: role for d in docs})
        out.update({i: CARRIER for parts in self.carrier_parts for i in parts})
        return out

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        counts = {r: sum(1 for v in self.roles().values() if v == r) for r in (*ROLES, CARRIER)}
        nd = {**asdict(self.near_duplicates), "dropped": self.near_duplicates.dropped}
        path.write_text(json.dumps({"seed": self.seed, "counts": counts,
                                    "too_short": self.too_short, "near_duplicates": nd,
                                    "documents": self.roles()}, indent=1) + "\n")
        return path


def split_documents(corpus: Corpus, n_members: int, n_reference: int, n_background: int,
                    min_words: int, seed: int = 0, carriers: int = 0,
                    carrier_boundaries: int = 1) -> Split:
    """Members and non-members (n_members each), reference pool and background documents,
    drawn without replacement from documents of at least `min_words` words, so that no two
    documents of different roles share a run of 13 words; then `carriers` trap carriers of
    at least `carrier_boundaries` sentence boundaries each (module docstring)."""
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
    rest = len(docs)  # where the documents past the roles (trap carriers) begin
    for i, d in enumerate(docs):
        if all(len(placed[r]) >= target[r] for r in ROLES):
            rest = i
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
    built, parts, looked, dropped = _carriers(docs[rest:], owner, carriers, carrier_boundaries)
    if len(built) < carriers:
        raise PddkitError(
            f"corpus {corpus.name} leaves {len(docs) - rest} documents of at least {min_words} "
            f"words after the split ({dropped} of them sharing a {N}-word run with a member, "
            f"non-member or reference document), enough for {len(built)} of the {carriers} trap "
            f"carriers of at least {carrier_boundaries} sentence boundaries each (the highest "
            "of `trap_repeats`): lower `traps` or `trap_repeats`, or give a larger corpus")
    nd = replace(nd, carrier_examined=looked, carrier_dropped=dropped)
    return Split(*(tuple(placed[r]) for r in ROLES), too_short=len(corpus.documents) - len(eligible),
                 seed=seed, near_duplicates=nd, carriers=tuple(built), carrier_parts=tuple(parts))


def _carriers(spare: list[Document], owner: dict[int, str], n: int, boundaries: int):
    """(carriers, the ids each joins, documents looked at, documents dropped): the spare
    documents clean of members, non-members and the reference pool, joined in turn until
    each has `boundaries` sentence boundaries, until `n` carriers are built."""
    from pddkit.studies.traps.inject import sentence_boundaries

    built: list[Document] = []
    parts: list[tuple[str, ...]] = []
    pending: list[Document] = []
    looked = dropped = 0
    for d in spare:
        if len(built) >= n:
            break
        looked += 1
        if any(owner.get(g, "background") != "background" for g in ngram_hashes(d.text)):
            dropped += 1
            continue
        pending.append(d)
        text = "\n\n".join(p.text for p in pending)
        if len(sentence_boundaries(text)) >= boundaries:
            ids = tuple(p.id for p in pending)
            built.append(Document(f"carrier:{len(built)}", text, " + ".join(ids)))
            parts.append(ids)
            pending = []
    return built, parts, looked, dropped


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
