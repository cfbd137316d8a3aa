"""Calibration data (SPEC 3e): labelled texts that methods such as `acmia` fit on (a
hyperparameter chosen by its calibration AUC) and that are never evaluated.

They come from `calibration` (any labelled table `data` reads, holding both classes) or,
without it, a seeded stratified 30% held out of the labelled data under evaluation (the
share CAMIA's and FSD's authors use), every document (`group`) wholly on one side. A
`calibration` text equal to, or sharing a run of 13 lower-cased words with, a text under
test is refused: its label would choose the hyperparameter that scores that text. A text
under test sharing such a run with a held-out calibration text leaves the evaluation
(counted), as texts sharing a run with a drawn shot do (data/shots.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pddkit.data.ngrams import N
from pddkit.data.overlap import sharing_text
from pddkit.data.samples import Dataset, Sample
from pddkit.data.shots import first_overlap
from pddkit.errors import PddkitError

HELD_OUT = 0.3  # the share of the labelled data held out when no `calibration` is given


@dataclass(frozen=True)
class CalibrationSet:
    """The calibration texts, with their labels, and where they came from."""

    samples: tuple[Sample, ...]
    source: str  # the `calibration` file, or "held out 30%"
    left_out: dict = field(default_factory=dict)  # texts under test left out (held out only)

    @property
    def labels(self) -> list[int]:
        return [int(s.label) for s in self.samples]

    def counts(self) -> dict:
        """results.json `counts.calibration`."""
        members = sum(s.label == 1 for s in self.samples)
        out = {"texts": len(self.samples), "members": members,
               "nonmembers": len(self.samples) - members, "source": self.source}
        if self.left_out:
            out["left_out"] = dict(self.left_out)
        return out

    def rows(self) -> list[dict]:
        """calibration.jsonl: one line per calibration text."""
        return [{"id": s.id, "label": s.label, "source": s.source, "text": s.text}
                for s in self.samples]


def from_table(table: Dataset, where: str, data: Dataset,
               both_classes: bool = True) -> CalibrationSet:
    """The texts of the `calibration` table `where`: labelled, both classes (with
    `both_classes=False`, non-members at least: fsd fine-tunes on them alone), and none equal
    to, or sharing a 13-word run with, a text of `data` (the texts under test)."""
    if not table.labelled:
        note = table.meta.get("unlabelled")
        raise PddkitError(f"`calibration` {where} has no labels, and its methods fit on "
                          "labelled texts: give a table with a label per text"
                          + (f" ({note})" if note else ""))
    members = sum(s.label == 1 for s in table.samples)
    if not both_classes and members == len(table.samples):
        raise PddkitError(f"`calibration` {where} holds only members, and fsd fine-tunes on "
                          "the calibration non-members: give a table with non-members "
                          "(label 0)")
    if both_classes and members in (0, len(table.samples)):
        have = "members" if members else "non-members"
        raise PddkitError(f"`calibration` {where} holds only {have}: a calibration AUC needs "
                          "members and non-members")
    found = first_overlap([s.text for s in table.samples], data)
    if found is not None:
        j, how, hit = found
        raise PddkitError(f"`calibration` {where}: the text at {table.samples[j].source} {how} "
                          f"{hit.source} under test, whose label would leak into the choice of "
                          "its score; remove it")
    return CalibrationSet(table.samples, where)


def held_out(data: Dataset, seed: int) -> tuple[Dataset, CalibrationSet]:
    """(the texts left to evaluate, the calibration set): a seeded stratified 30% of the
    labelled `data` (documents kept whole), and out of the rest the texts equal to, or
    sharing a 13-word run with, a calibration text."""
    from pddkit.data.stratified import stratified_split

    if not data.labelled:
        note = data.meta.get("unlabelled")
        raise PddkitError("calibration data must be labelled: pass `calibration` (a labelled "
                          "table), or labelled data to hold 30% out of"
                          + (f" ({note})" if note else ""))
    cal_idx, rest_idx = stratified_split(data.labels, HELD_OUT, seed,
                                         groups=[s.group for s in data.samples],
                                         what="holding out calibration data (30%)")
    cal = [data.samples[i] for i in cal_idx]
    rest = [data.samples[i] for i in rest_idx]
    touched = sharing_text(rest, [s.text for s in cal])
    kept = [s for j, s in enumerate(rest) if j not in touched]
    overlap = len(touched)
    if {s.label for s in kept} != {0, 1}:
        raise PddkitError(f"{data.name}: after holding out 30% as calibration data and leaving "
                          f"out the texts sharing a {N}-word run with it, one class has no "
                          "text left to evaluate; give `calibration`")
    left = {f"sharing_a_{N}_word_run_with_a_calibration_text": overlap}
    return replace(data, samples=tuple(kept)), CalibrationSet(tuple(cal), "held out 30%", left)


def calibration_for(data: Dataset, path: str | None, seed: int, on_invalid: str = "error",
                    both_classes: bool = True) -> tuple[Dataset, CalibrationSet]:
    """(the texts to evaluate, the calibration set): from the `calibration` table when
    given, else held out of `data`; `both_classes=False`: a table of non-members only is
    enough (fsd alone)."""
    if path:
        from pddkit.data.tables import load_table

        return data, from_table(load_table(path, on_invalid=on_invalid), path, data,
                                both_classes)
    return held_out(data, seed)
