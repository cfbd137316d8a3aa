"""The shots of `recall` and `conrecall`: labelled texts put before each text under test,
never evaluated themselves.

They come from `prefix_data` (any table `data` reads; its labels say which shots are
members; the first ones of each label, in file order) or, without it, are drawn (seeded)
from the labelled data under evaluation. Drawn shots, and as many texts of the other class
(the reference code's protocol: ReCaLL and Con-ReCall take their shots from WikiMIA and
score the rest), leave the evaluation: every method, the blind baseline and the validation
split see the same texts; results.json counts them. A `prefix_data` shot equal to, or
sharing a run of 13 lower-cased words with, a text under test is refused: its label would
leak into that text's score. A text under test that shares such a run with a drawn shot,
or comes from a shot's document (`group`), leaves the evaluation too (counted).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from pddkit.data.ngrams import N, ngram_hashes
from pddkit.data.overlap import normalise, sharing_text
from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError

ROLES = ("member", "nonmember")
LABEL = {"member": 1, "nonmember": 0}


@dataclass(frozen=True)
class ShotPool:
    """Shot texts per role ("member", "nonmember"), in their drawn (or file) order."""

    shots: dict[str, tuple[str, ...]]
    source: str  # "prefix_data" or "drawn"
    where: str  # the prefix_data file, or the data set the shots were drawn from
    left_out: dict = field(default_factory=dict)  # texts left out of the evaluation

    def counts(self) -> dict:
        """results.json `counts.shots`."""
        return {"source": self.source, "from": self.where,
                **{role: len(self.shots.get(role, ())) for role in ROLES},
                "left_out": dict(self.left_out)}


def _grams(samples) -> dict[int, int]:
    """13-word-run hash -> index of the first sample holding it."""
    out: dict[int, int] = {}
    for i, s in enumerate(samples):
        for g in ngram_hashes(s.text):
            out.setdefault(g, i)
    return out


def first_overlap(texts, data: Dataset):
    """(index in `texts`, "is" or "shares a 13-word run with", the sample of `data` hit) for
    the first text equal to, or sharing a 13-word run with, a text of `data`; None if none."""
    under_test = {normalise(s.text): s for s in data.samples}
    grams = _grams(data.samples)
    for j, text in enumerate(texts):
        same = under_test.get(normalise(text))
        hit = same or next((data.samples[grams[g]] for g in ngram_hashes(text) if g in grams), None)
        if hit is not None:
            return j, "is" if same else f"shares a {N}-word run with", hit
    return None


def from_table(table: Dataset, where: str, data: Dataset, wanted: dict[str, int]) -> ShotPool:
    """The first `wanted[role]` shots of each label of `table` (the `prefix_data` file
    `where`), refused when one is, or shares a 13-word run with, a text of `data`."""
    if not table.labelled:
        raise PddkitError(f"`prefix_data` {where} has no labels: they say which shots are members")
    found = first_overlap([s.text for s in table.samples], data)
    if found is not None:
        j, how, hit = found
        raise PddkitError(f"`prefix_data` {where}: the shot at {table.samples[j].source} {how} "
                          f"{hit.source} under test, whose label would leak into its score; "
                          "remove it")
    shots = {}
    for role, k in wanted.items():
        have = [s.text for s in table.samples if s.label == LABEL[role]]
        if len(have) < k:
            raise PddkitError(f"`prefix_data` {where} holds {len(have)} {role} shots; "
                              f"shots={k} needs {k}")
        shots[role] = tuple(have[:k])
    return ShotPool(shots, "prefix_data", where)


def draw(data: Dataset, wanted: dict[str, int], seed: int) -> tuple[Dataset, ShotPool]:
    """(the data without the drawn shots, as many texts of the other class, the texts
    sharing a 13-word run with a shot and those of a shot's document; the shots). Per role,
    `wanted[role]` shots drawn in seeded order; each class then loses as many texts as the
    larger number of shots."""
    if not data.labelled:
        note = data.meta.get("unlabelled")
        raise PddkitError("recall and conrecall need labelled shots: give `prefix_data` (a "
                          "labelled table), or labelled data to draw them from"
                          + (f" ({note})" if note else ""))
    rng = random.Random(f"pddkit-shots-{seed}")
    per_class = max(wanted.values())
    by_label = {lab: [i for i, s in enumerate(data.samples) if s.label == lab] for lab in (0, 1)}
    chosen: dict[str, list[int]] = {}
    out: set[int] = set()
    for role in ROLES:
        pool = by_label[LABEL[role]]
        if len(pool) <= per_class:
            raise PddkitError(f"{data.name} holds {len(pool)} {role} texts: drawing {per_class} "
                              f"shots (or leaving as many out) would leave none to evaluate; "
                              "lower `shots` or give `prefix_data`")
        order = pool[:]
        rng.shuffle(order)
        chosen[role] = order[:wanted.get(role, 0)]
        out.update(order[:per_class])  # the shots first, then others of the class
    shot_ids = [i for role in ROLES for i in chosen[role]]
    overlap = sharing_text(data.samples, [data.samples[i].text for i in shot_ids]) - out
    # texts of a shot's document (`group`) would be scored after a prefix holding their own
    # document: they leave too
    groups = {data.samples[i].group for i in shot_ids} - {None}
    siblings = {i for i, s in enumerate(data.samples)
                if s.group in groups and i not in out and i not in overlap}
    kept = tuple(s for i, s in enumerate(data.samples)
                 if i not in out and i not in overlap and i not in siblings)
    if {s.label for s in kept} != {0, 1}:
        raise PddkitError(f"{data.name}: after leaving out the shots, the texts of the other "
                          "class and those sharing a 13-word run with a shot, one class has no "
                          "text left; give `prefix_data`")
    left = {"shots": len(shot_ids), "other_class": len(out) - len(shot_ids),
            "sharing_a_run_with_a_shot": len(overlap), "same_document_as_a_shot": len(siblings)}
    pool = ShotPool({role: tuple(data.samples[i].text for i in chosen[role])
                     for role in ROLES if wanted.get(role)}, "drawn", data.name, left)
    return replace(data, samples=kept), pool


def refuse_overlap(pool: ShotPool, data: Dataset, what: str) -> None:
    """One sentence when a shot is, or shares a 13-word run with, a text of `data` (the
    validation data: a text whose score its own shot raised would choose gamma)."""
    for role, texts in pool.shots.items():
        found = first_overlap(texts, data)
        if found is not None:
            j, how, hit = found
            raise PddkitError(f"{role} shot {j + 1} (from {pool.where}) {how} {hit.source} of "
                              f"{what}, whose label would leak into the choice of "
                              "hyperparameters; remove it from one of them")


def pool_for(data: Dataset, wanted: dict[str, int], prefix_data: str | None, seed: int,
             on_invalid: str = "error") -> tuple[Dataset, ShotPool]:
    """(the texts to evaluate, the shots): from `prefix_data` when given, else drawn."""
    if prefix_data:
        from pddkit.data.tables import load_table

        return data, from_table(load_table(prefix_data, on_invalid=on_invalid), prefix_data,
                                data, wanted)
    return draw(data, wanted, seed)

