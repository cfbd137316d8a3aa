"""The studies' registry: `register_study` (each study module imports it) and STUDIES,
which the package's __init__ fills on first lookup."""


from __future__ import annotations

from dataclasses import dataclass

from pddkit.registry import Registry


@dataclass(frozen=True)
class StudySpec:
    name: str  # the CLI command, e.g. "audit"
    description: str  # one line: what it answers, and the paper
    paper: str


STUDIES: Registry[StudySpec] = Registry("study")


def register_study(name: str, description: str, paper: str):
    """Decorator of a study's entry function: registers its name, description and paper."""

    def deco(fn):
        STUDIES.add(name, StudySpec(name, description, paper))
        return fn

    return deco
