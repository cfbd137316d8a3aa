"""Benchmark contamination in the sandbox (Shi et al. 2024, section 6): formatted examples of
a benchmark (one text each, e.g. question + answer) are split at random into contaminants
and held-out examples; each contaminant is inserted whole into the target's training
stream a drawn number of times, and detection is evaluated on contaminants (label 1)
against held-out examples of the same file (label 0).

Counts: each contaminant's number of copies (per epoch, like `repeats`) is drawn from a
Poisson distribution with mean `contamination_repeats` (the paper's rule), or is exactly
`contamination_repeats`. A contaminant drawn 0 times is never inserted, so it is what a
held-out example is: it is evaluated with label 0 (its row keeps role `contaminant` and
`occurrences` 0, and the check treats it as held out). About e^-R of them: 37% for R = 1.

Clean split (module split.py's rules, applied to examples): an example that is empty, a
duplicate of an earlier one (lower-cased, whitespace folded), verbatim text inside another
example or inside a document of the split, or that shares a run of 13 words with such a
document, is left out (counted); examples sharing a run with each other stay on one side.

Files: OUTPUT/contamination-examples.jsonl (`id`, `role` contaminant / heldout, `text`,
`source`); RUN/contamination/examples.jsonl (`id`, `text`, `label`, `occurrences`); the
contaminants' rows in RUN/train-documents.jsonl (role `contaminant`, `repeats` = count).
`verify` re-reads them (module ground_truth's rules, for examples).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pddkit.data.ngrams import N, ngram_hashes
from pddkit.data.samples import Dataset, Sample, make_dataset
from pddkit.errors import PddkitError

EXAMPLES = "contamination-examples.jsonl"  # in the sandbox folder
EVALUATED = "examples.jsonl"  # in RUN/contamination
FOLDER = "contamination"


@dataclass(frozen=True)
class Example:
    id: str
    text: str
    source: str


@dataclass(frozen=True)
class ContaminationSplit:
    contaminants: tuple[Example, ...]
    heldout: tuple[Example, ...]
    file: str
    examples: int  # rows read from the file
    empty: int  # no text
    duplicates: int  # the same text as an earlier example (case and whitespace folded)
    inside_another: int  # verbatim text inside another example
    shared_with_corpus: int  # inside, or sharing a 13-word run with, a document of the split
    shared_both_sides: int  # sharing runs with examples already on both sides (or a full one)
    seed: int = 0

    def counts(self) -> dict:
        return {"file": self.file, "examples": self.examples, "contaminants": len(self.contaminants),
                "heldout": len(self.heldout), "empty": self.empty, "duplicates": self.duplicates,
                "inside_another": self.inside_another,
                "shared_with_corpus": self.shared_with_corpus,
                "shared_both_sides": self.shared_both_sides, "ngram": N}


def load_examples(path: str | Path) -> list[Example]:
    """Every row's text of a table (pddkit.data.load_table: JSONL, CSV, Parquet, ...)."""
    from pddkit.data import load_table

    p = Path(path)
    if not p.exists():
        raise PddkitError(f"`contaminate` file {p} does not exist")
    data = load_table(p)
    return [Example(f"example:{i}", s.text, s.source or f"{p} row {i}")
            for i, s in enumerate(data.samples)]


def split_examples(examples: Sequence[Example], corpus_texts: Iterable[str], fraction: float = 0.5,
                   seed: int = 0, file: str = "") -> ContaminationSplit:
    """Contaminants (a seeded random `fraction`) and held-out examples, free of duplicates
    and of text shared with the corpus documents (module docstring)."""
    if not 0 < fraction < 1:
        raise PddkitError(f"`contamination_fraction` must lie between 0 and 1, not {fraction}")
    corpus = list(corpus_texts)
    corpus_grams: set[int] = set()
    for t in corpus:
        corpus_grams |= ngram_hashes(t)
    corpus_blob = "\x00".join(corpus)
    seen: set[str] = set()
    kept: list[Example] = []
    empty = duplicates = with_corpus = 0
    for e in examples:
        folded = " ".join(e.text.lower().split())
        if not folded:
            empty += 1
        elif folded in seen:
            duplicates += 1
        elif e.text in corpus_blob or not ngram_hashes(e.text).isdisjoint(corpus_grams):
            seen.add(folded)
            with_corpus += 1
        else:
            seen.add(folded)
            kept.append(e)
    blob = "\x00".join(e.text for e in kept)
    inside = [e for e in kept if blob.count(e.text) > 1]  # also inside a longer example
    kept = [e for e in kept if blob.count(e.text) == 1]
    order = kept[:]
    random.Random(f"contaminate-{seed}").shuffle(order)
    n_cont = round(fraction * len(order))
    target = {"contaminant": n_cont, "heldout": len(order) - n_cont}
    placed: dict[str, list[Example]] = {"contaminant": [], "heldout": []}
    owner: dict[int, str] = {}
    both = 0
    for e in order:
        grams = ngram_hashes(e.text)
        hit = {owner[g] for g in grams if g in owner}
        if len(hit) == 1 and len(placed[next(iter(hit))]) < target[next(iter(hit))]:
            side = hit.pop()
        elif hit:
            both += 1
            continue
        else:
            side = min((s for s in placed if len(placed[s]) < target[s]),
                       key=lambda s: len(placed[s]) / max(target[s], 1))
        placed[side].append(e)
        owner.update(dict.fromkeys(grams, side))
    split = ContaminationSplit(tuple(placed["contaminant"]), tuple(placed["heldout"]), file,
                               examples=len(examples), empty=empty, duplicates=duplicates,
                               inside_another=len(inside), shared_with_corpus=with_corpus,
                               shared_both_sides=both, seed=seed)
    if min(len(split.contaminants), len(split.heldout)) < 2:
        raise PddkitError(
            f"`contaminate` file {file} leaves {len(split.contaminants)} contaminants and "
            f"{len(split.heldout)} held-out examples (of {len(examples)}: {empty} empty, "
            f"{duplicates} duplicates, {len(inside)} inside another example, {with_corpus} "
            f"sharing text with the corpus): at least 2 of each are needed")
    return split


def draw_occurrences(n: int, repeats: int, poisson: bool = True, seed: int = 0) -> tuple[int, ...]:
    """Copies of each of `n` contaminants: Poisson with mean `repeats` (0 included), or
    exactly `repeats`."""
    import numpy as np

    if repeats < 1:
        raise PddkitError(f"`contamination_repeats` must be at least 1, not {repeats}")
    if not poisson:
        return (int(repeats),) * n
    rng = np.random.default_rng([seed, int(repeats)])
    return tuple(int(k) for k in rng.poisson(repeats, n))


def example_rows(split: ContaminationSplit) -> list[dict]:
    """The rows of OUTPUT/contamination-examples.jsonl."""
    return [{"id": e.id, "role": role, "text": e.text, "source": e.source}
            for role, side in (("contaminant", split.contaminants), ("heldout", split.heldout))
            for e in side]


def training_rows(split: ContaminationSplit, occurrences: Sequence[int]) -> list[dict]:
    """The contaminants' rows of RUN/train-documents.jsonl (none for one drawn 0 times)."""
    return [{"id": e.id, "role": "contaminant", "repeats": k, "text": e.text}
            for e, k in zip(split.contaminants, occurrences) if k > 0]


def dataset(split: ContaminationSplit, occurrences: Sequence[int]) -> Dataset:
    """Contaminants inserted at least once (label 1), then contaminants drawn 0 times and
    held-out examples (label 0: never trained on); `group` = example id. One sentence when
    either side has fewer than 2 examples."""
    samples = [Sample(id=e.id, text=e.text, label=int(k > 0), group=e.id,
                      source=f"{e.source} (inserted {k} times)" if k else
                      f"{e.source} (contaminant drawn 0 times: never inserted)")
               for e, k in zip(split.contaminants, occurrences)]
    samples += [Sample(id=e.id, text=e.text, label=0, source=f"{e.source} (held out)", group=e.id)
                for e in split.heldout]
    inserted = sum(k > 0 for k in occurrences)
    if min(inserted, len(samples) - inserted) < 2:
        raise PddkitError(f"{inserted} of {len(occurrences)} contaminants were drawn at least once "
                          f"and {len(samples) - inserted} examples are never inserted: at least 2 "
                          "of each are needed (more examples or another `contamination_repeats`)")
    return make_dataset(f"contamination: {split.file}", samples, [])


def evaluated_rows(data: Dataset, occurrences: Sequence[int]) -> list[dict]:
    """The rows of RUN/contamination/examples.jsonl: the contaminants first (with their
    drawn count, 0 included), then the held-out examples (count 0)."""
    counts = list(occurrences) + [0] * (len(data.samples) - len(occurrences))
    return [{"id": s.id, "text": s.text, "label": s.label, "occurrences": k,
             "role": "contaminant" if i < len(occurrences) else "heldout"}
            for i, (s, k) in enumerate(zip(data.samples, counts))]


@dataclass(frozen=True)
class ContaminationCheck:
    run: str
    contaminants: int
    contaminants_counted: int  # occur verbatim in the training documents exactly as drawn (>= 1)
    insertions: int  # copies of contaminants in the training documents (per epoch)
    heldout: int
    heldout_in_training: int  # occur verbatim in, or share a 13-word run with, training text
    examples: int
    reference_shared: int  # inside, or share a 13-word run with, reference pool / tokenizer texts
    outside_source: int  # not an example of the file with this role and text
    drawn_zero: int = 0  # contaminants drawn 0 times: never inserted, checked as held out

    @property
    def failures(self) -> list[str]:
        out = []
        if self.contaminants_counted < self.contaminants:
            out.append(f"{self.contaminants - self.contaminants_counted} of {self.contaminants} "
                       "contaminants do not occur in the training documents as often as drawn")
        for count, total, what in (
                (self.heldout_in_training, self.heldout,
                 f"held-out examples occur in, or share a {N}-word run with, training text"),
                (self.reference_shared, self.examples,
                 f"examples occur in, or share a {N}-word run with, the reference pool or "
                 "tokenizer texts"),
                (self.outside_source, self.examples,
                 "evaluated examples are not examples of the file with their role, or carry a "
                 "label their drawn count contradicts")):
            if count:
                out.append(f"{count} of {total} {what}")
        return out

    def sentence(self, copies: bool = True) -> str:
        return (f"{self.contaminants_counted} of {self.contaminants} contaminants occur verbatim "
                "in the training documents exactly as often as drawn"
                + (f" ({self.insertions} copies per epoch)" if copies else "")
                + f"; {self.heldout_in_training} of {self.heldout} held-out examples"
                + (f" ({self.drawn_zero} of them contaminants drawn 0 times)" if self.drawn_zero else "")
                + f" occur in or share a {N}-word run with training text")


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise PddkitError(f"ground truth check: {path} is missing")
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def present(out: Path, run_dir: Path) -> bool:
    return (out / EXAMPLES).is_file() or (run_dir / FOLDER / EVALUATED).is_file()


def verify(out: Path, run_dir: Path, train: list[dict], ref_texts: list[str],
           ref_grams: set[int]) -> ContaminationCheck:
    """Check a run's contamination files (module docstring) against its training rows
    `train` and the reference pool / tokenizer texts; raises PddkitError on any failure."""
    source = {r["id"]: r for r in read_jsonl(out / EXAMPLES)}
    rows = read_jsonl(run_dir / FOLDER / EVALUATED)
    train_grams: set[int] = set()
    for r in train:
        train_grams |= ngram_hashes(r["text"])
    ref_blob = "\x00".join(ref_texts)
    n = {"c": 0, "cc": 0, "ins": 0, "h": 0, "hs": 0, "rs": 0, "out": 0, "zero": 0}
    for e in rows:
        text = e["text"]
        copies = sum(r["repeats"] * r["text"].count(text) for r in train)
        role = e.get("role", "contaminant" if e["label"] == 1 else "heldout")
        src = source.get(e["id"])
        n["out"] += (src is None or src["role"] != role or src["text"] != text
                     or e["label"] != int(role == "contaminant" and e["occurrences"] >= 1))
        n["rs"] += text in ref_blob or not ngram_hashes(text).isdisjoint(ref_grams)
        if e["label"] == 1:
            n["c"] += 1
            n["cc"] += copies == e["occurrences"] >= 1
            n["ins"] += copies
        else:
            n["h"] += 1
            n["zero"] += role == "contaminant"
            n["hs"] += copies > 0 or not ngram_hashes(text).isdisjoint(train_grams)
    check = ContaminationCheck(run=run_dir.name, contaminants=n["c"], contaminants_counted=n["cc"],
                               insertions=n["ins"], heldout=n["h"], heldout_in_training=n["hs"],
                               examples=len(rows), reference_shared=n["rs"],
                               outside_source=n["out"], drawn_zero=n["zero"])
    if check.failures:
        raise PddkitError(f"ground truth check failed for {run_dir / FOLDER}: "
                          + "; ".join(check.failures))
    return check
