"""The sandbox's shots for `recall` and `conrecall` (the labelled texts put before each
text), members and non-members by construction: member shots are windows of member
documents the target was trained on but whose windows are held out of the evaluation;
non-member shots are windows of reference-pool documents, which no target model is
trained on.

`hold_out` picks the member documents (seeded), each sharing no run of 13 lower-cased words
with any other member or non-member document, so that no shot overlaps an evaluated window
(the leak guard of `prefix_data` would refuse it). `pool` cuts one window (of the shortest
window length, so that several shots and the text fit the model's context) from each
held-out member and from as many reference-pool documents, written as
RUN/window-W/shots-pool.jsonl and passed as `prefix_data`; the ground-truth check
(sandbox.ground_truth.verify_run) re-reads that file."""

from __future__ import annotations

import random
from dataclasses import replace

from pddkit.data.ngrams import ngram_hashes
from pddkit.data.samples import Dataset, make_dataset
from pddkit.errors import PddkitError
from pddkit.sandbox.split import Split, windows

POOL = "shots-pool.jsonl"
SHOT_METHODS = ("recall", "conrecall")


def needs_shots(methods: str) -> bool:
    """Whether a `methods` string names a method that reads shots."""
    from pddkit.params import parse_spec, split_spec_list

    return any(parse_spec(s)[0] in SHOT_METHODS for s in split_spec_list(methods))


def hold_out(split: Split, n: int, seed: int) -> tuple[Split, tuple[str, ...]]:
    """(the split whose members are the evaluated ones, ids of the `n` held-out member
    documents). The held-out documents stay in training (sandbox.ground_truth writes the
    training documents from the full split)."""
    if n < 1:
        raise PddkitError(f"`shots` must be at least 1, not {n}")
    grams = {d.id: ngram_hashes(d.text) for d in split.members + split.nonmembers}
    order = list(split.members)
    random.Random(f"shots-{seed}").shuffle(order)
    held: list[str] = []
    for d in order:
        others = [g for i, g in grams.items() if i != d.id]
        if all(grams[d.id].isdisjoint(g) for g in others):
            held.append(d.id)
        if len(held) == n:
            break
    if len(held) < n:
        raise PddkitError(f"only {len(held)} member documents share no 13-word run with the "
                          f"others; `shots` {n} needs that many: lower `shots` or give more members")
    kept = tuple(d for d in split.members if d.id not in held)
    return replace(split, members=kept), tuple(held)


def pool(split: Split, held: tuple[str, ...], words: int, seed: int) -> Dataset:
    """One `words`-word window of each held-out member document (label 1) and of as many
    reference-pool documents (label 0, the first in seeded order): the shots' table."""
    members = tuple(d for d in split.members if d.id in held)
    refs = list(split.reference)
    random.Random(f"shots-reference-{seed}").shuffle(refs)
    both = replace(split, members=members, nonmembers=tuple(refs[:len(members)]))
    cut = windows(both, words, per_doc=1, seed=seed)
    return make_dataset(f"sandbox shots of {words} words", list(cut.samples), [])
