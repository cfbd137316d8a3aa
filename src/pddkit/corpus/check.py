"""A labelled data set against a corpus index: per-text overlap, the labels the corpus
contradicts, and the numbers by label (the report layer formats them)."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from pddkit.corpus.index import CorpusIndex
from pddkit.corpus.overlap import (
    DEFAULT_MAX_OVERLAP,
    DEFAULT_N,
    TextOverlap,
    contradicted_by,
    measure_overlap,
)
from pddkit.data.samples import Dataset


@dataclass(frozen=True)
class CheckedText:
    id: str
    label: int | None
    subset: str | None
    overlap: TextOverlap
    contradicted: str | None  # the reason, None when the corpus agrees (or cannot tell)

    def as_row(self) -> dict:
        return {"id": self.id, "label": self.label, "subset": self.subset,
                **self.overlap.as_row(), "contradicted": self.contradicted}


@dataclass(frozen=True)
class LabelSummary:
    """The texts of one label (1, 0 or None) against the corpus."""

    label: int | None
    texts: int
    checked: int  # long enough for one n-gram
    mean_overlap: float | None
    median_overlap: float | None
    at_or_above: int  # overlap >= max_overlap
    with_any_ngram: int
    contradicted: int


@dataclass(frozen=True)
class CorpusCheck:
    data: str
    index: str
    index_tokenizer: str
    normalized: bool | None  # None: a public index, queried as it was built
    n: int
    max_overlap: float
    whole_training_set: bool
    texts: tuple[CheckedText, ...]

    @property
    def contradicted(self) -> list[CheckedText]:
        return [t for t in self.texts if t.contradicted]

    @property
    def too_short(self) -> int:
        return sum(1 for t in self.texts if t.overlap.overlap is None)

    def by_label(self) -> list[LabelSummary]:
        labels = sorted({t.label for t in self.texts}, key=lambda v: (v is None, -(v or 0)))
        return [self._summary(lab, [t for t in self.texts if t.label == lab]) for lab in labels]

    def _summary(self, label: int | None, texts: list[CheckedText]) -> LabelSummary:
        ov = [t.overlap.overlap for t in texts if t.overlap.overlap is not None]
        return LabelSummary(
            label, len(texts), len(ov), statistics.fmean(ov) if ov else None,
            statistics.median(ov) if ov else None, sum(1 for v in ov if v >= self.max_overlap),
            sum(1 for t in texts if t.overlap.ngrams_found > 0),
            sum(1 for t in texts if t.contradicted))

    def summary(self) -> dict:
        """Plain numbers for summary.json."""
        return {
            "data": self.data, "index": self.index, "index_tokenizer": self.index_tokenizer,
            "normalized": self.normalized, "n": self.n, "max_overlap": self.max_overlap,
            "whole_training_set": self.whole_training_set, "texts": len(self.texts),
            "too_short": self.too_short, "contradicted": len(self.contradicted),
            "by_label": [vars(s) for s in self.by_label()],
        }


def check_dataset(dataset: Dataset, index: CorpusIndex, n: int = DEFAULT_N,
                  max_overlap: float = DEFAULT_MAX_OVERLAP,
                  whole_training_set: bool = False) -> CorpusCheck:
    """Every text of `dataset` against `index`; contradictions as overlap.contradictions."""
    if not 0 < max_overlap <= 1:
        raise ValueError("`max_overlap` must be in (0, 1]")
    samples = dataset.samples
    overlaps = measure_overlap(index, [s.text for s in samples], n)
    reasons = contradicted_by(overlaps, [s.label for s in samples], max_overlap,
                              whole_training_set)
    texts = tuple(CheckedText(s.id, s.label, s.subset, o, why)
                  for s, o, why in zip(samples, overlaps, reasons))
    return CorpusCheck(dataset.name, index.info.name, index.tokenizer_name, index.info.normalize,
                       n, max_overlap, whole_training_set, texts)


def write_check(check: CorpusCheck, dataset: Dataset, out: Path) -> dict[str, Path]:
    """overlap.jsonl (every text), contradictions.jsonl (with their texts), summary.json."""
    paths = {k: out / f"{k}.{ext}" for k, ext in
             (("overlap", "jsonl"), ("contradictions", "jsonl"), ("summary", "json"))}
    text_of = {s.id: s.text for s in dataset.samples}
    with paths["overlap"].open("w", encoding="utf-8") as fh:
        for t in check.texts:
            fh.write(json.dumps(t.as_row()) + "\n")
    with paths["contradictions"].open("w", encoding="utf-8") as fh:
        for t in check.contradicted:
            fh.write(json.dumps(t.as_row() | {"text": text_of[t.id]}) + "\n")
    paths["summary"].write_text(json.dumps(check.summary(), indent=1) + "\n", encoding="utf-8")
    return paths
