"""Case studies (Shi et al. 2024 sections 6-7; Maini et al. 2024): each one configures a
question, scores texts through the engine, decides, and reports, as a Python function
returning a typed result and one CLI command. One module per study below this package;
`register_study` is the one place they are named (`pddkit list` shows them)."""

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


def _load_all() -> None:
    """Import every study module (each registers itself). The contamination simulation is
    part of the sandbox (`pddkit sandbox --contaminate`), not a study of its own."""
    from pddkit.studies import audit, compare, infer  # noqa: F401
    from pddkit.studies.traps import detect, generate, inject

    paper = detect.PAPER  # copyright traps: one entry per step (detect registers itself)
    for name, fn, what in (
            ("traps generate", generate.generate_traps, "Trap sequences of exact token lengths "
             "spread over a perplexity range, half to insert, half held out"),
            ("traps inject", inject.inject_traps, "Member traps inserted R times each into "
             "documents at random sentence boundaries")):
        if name not in STUDIES.names():  # unless the step's module registered itself
            register_study(name, what, paper)(fn)


STUDIES.set_loader(_load_all)
