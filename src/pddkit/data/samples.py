"""Typed inputs: a text under test, and a dataset of them with what was left out and why."""

from __future__ import annotations

from dataclasses import dataclass, field

from pddkit.errors import PddkitError

# counts a loader records in Dataset.meta that reach results.json (counts) when non-zero
LOADER_COUNTS = ("blank_lines", "unpaired_left_out", "nul_characters_removed", "snippets_with_nul",
                 "contradicting_labels_left_out")


@dataclass(frozen=True)
class Sample:
    """One text under test. `label` is 1 (member), 0 (non-member) or None (unknown)."""

    id: str
    text: str
    label: int | None = None
    source: str = ""  # where it came from, e.g. "data.jsonl line 12", for error messages
    group: str | None = None  # the document it was cut from: texts of a group stay together
    subset: str | None = None  # a part reported on its own too (domain, field, length, position)


@dataclass(frozen=True)
class Skipped:
    """A line of input that the `skip` policy left out, with the reason."""

    source: str
    reason: str


@dataclass(frozen=True)
class Dataset:
    name: str
    samples: tuple[Sample, ...]
    skipped: tuple[Skipped, ...] = ()
    meta: dict = field(default_factory=dict)

    @property
    def labelled(self) -> bool:
        return bool(self.samples) and self.samples[0].label is not None

    @property
    def subsets(self) -> list[str]:
        """The subsets present, in order of first appearance ([] when none is named)."""
        return list(dict.fromkeys(s.subset for s in self.samples if s.subset is not None))

    @property
    def language(self) -> str | None:
        """The language the data set declares ("en", "zh"), if any."""
        return self.meta.get("language")

    @property
    def labels(self) -> list[int]:
        return [s.label for s in self.samples if s.label is not None]

    def counts(self) -> dict[str, int]:
        members = sum(1 for s in self.samples if s.label == 1)
        nonmembers = sum(1 for s in self.samples if s.label == 0)
        out = {
            "samples": len(self.samples),
            "members": members,
            "nonmembers": nonmembers,
            "skipped": len(self.skipped),
        }
        if "limited_from" in self.meta:  # a quick try on a sample of the data (limit)
            out["limited_from"] = int(self.meta["limited_from"])
        for key in LOADER_COUNTS:  # what a loader left out or changed, counted
            if self.meta.get(key):
                out[key] = int(self.meta[key])
        return out

    def limit(self, n: int, seed: int = 0) -> Dataset:
        """A seeded sample of n texts for a quick try (stratified by label, so both
        classes stay when there are labels), in their original order; `meta` records it."""
        import numpy as np

        if n < 1:
            raise PddkitError(f"`limit` must be at least 1, not {n}")
        if n >= len(self.samples):
            return self
        rng = np.random.default_rng(seed)
        if self.labelled:
            y = np.array(self.labels)
            take = []
            for c in (0, 1):
                idx = np.flatnonzero(y == c)
                k = max(1, round(n * len(idx) / len(y))) if len(idx) else 0
                take.extend(rng.choice(idx, size=min(k, len(idx)), replace=False).tolist())
            keep = sorted(take[:n] if len(take) > n else take)
        else:
            keep = sorted(rng.choice(len(self.samples), size=n, replace=False).tolist())
        return Dataset(self.name, tuple(self.samples[i] for i in keep), self.skipped,
                       {**self.meta, "limited_from": len(self.samples)})

    def with_meta(self, **meta) -> Dataset:
        """The same texts with `meta` entries added (e.g. language="zh")."""
        return Dataset(self.name, self.samples, self.skipped, {**self.meta, **meta})

    def require_both_classes(self) -> None:
        """AUC is undefined with one class; say so before any model runs."""
        c = self.counts()
        if c["members"] == 0 or c["nonmembers"] == 0:
            have = "members (label 1)" if c["members"] else "non-members (label 0)"
            raise PddkitError(
                f"{self.name} has only {have}: metrics need both members and non-members "
                "(drop the labels to get scores only)"
            )


def make_dataset(
    name: str, samples: list[Sample], skipped: list[Skipped], meta: dict | None = None
) -> Dataset:
    """Check dataset-wide rules (non-empty, labels all present or all absent, unique ids)."""
    if not samples:
        why = f" ({len(skipped)} lines skipped as invalid)" if skipped else ""
        raise PddkitError(f"{name} contains no texts{why}")
    labelled = [s for s in samples if s.label is not None]
    if labelled and len(labelled) != len(samples):
        first = next(s for s in samples if s.label is None)
        raise PddkitError(
            f"{first.source} has no label but other lines do: label every line or none"
        )
    seen: dict[str, str] = {}
    for s in samples:
        if s.id in seen:
            raise PddkitError(f"{s.source} repeats id {s.id!r} already used at {seen[s.id]}")
        seen[s.id] = s.source
    return Dataset(name=name, samples=tuple(samples), skipped=tuple(skipped), meta=meta or {})
