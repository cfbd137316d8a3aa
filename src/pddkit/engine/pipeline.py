"""A run as a list of named stages (engine/run.py lists them: `STAGES`).

Each stage is a function from typed values to one typed value: it `reads` values by name
(what the caller gave, `"given"`, or what an earlier stage `gives`) and `gives` one. The
list is the order, in one place; a stage is added (`inserted`) or replaced (`replaced`)
without editing the others, and `run_dataset(..., stages=...)` runs the list it is given.
A list whose stage reads what no earlier stage gives is refused before anything runs.

A stage may `undo` what it gave (the blind baseline's job, cancelled) when a later stage
raises; the exception then goes on to the caller unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pddkit.data.samples import Dataset
from pddkit.engine.config import RunConfig
from pddkit.evaluation.results import RunResult

GIVEN = "given"  # the name of what the caller gave (`Given`)
RESULT = "result"  # the name of what the run returns (a RunResult)


@dataclass(frozen=True)
class Given:
    """What the caller handed `run_dataset`: the data, the configuration, the models it
    loaded itself (a Backend or a LoadedModel; None: loaded from the configuration), the
    validation data, and `on_scored`, called with the scores and metrics before the
    optional stages (the CLI writes them there)."""

    dataset: Dataset
    config: RunConfig
    model: object = None
    ref_model: object = None
    val_dataset: Dataset | None = None
    on_scored: Callable[[RunResult], None] | None = None
    started: str = ""  # when the run began (provenance.now)


@dataclass(frozen=True)
class RunStage:
    """One stage: `run(*values read) -> the value it gives`. `undo(value)`: called on what
    it gave when a later stage raises (None: nothing to undo)."""

    name: str
    run: Callable[..., object]
    reads: tuple[str, ...]
    gives: str
    undo: Callable[[object], None] | None = None


def check_order(stages: Sequence[RunStage]) -> None:
    """Every value a stage reads is given by the caller or by a stage before it, names are
    unique, and some stage gives the result; else ValueError naming the stage."""
    known = {GIVEN}
    names: set[str] = set()
    for stage in stages:
        if stage.name in names:
            raise ValueError(f"two stages are named {stage.name!r}")
        names.add(stage.name)
        missing = [r for r in stage.reads if r not in known]
        if missing:
            raise ValueError(f"stage {stage.name!r} reads {', '.join(missing)}, which no "
                             "stage before it gives")
        known.add(stage.gives)
    if RESULT not in known:
        raise ValueError(f"no stage gives the {RESULT!r}")


def run_in_order(given: Given, stages: Sequence[RunStage]) -> RunResult:
    """Run `stages` in order on what the caller gave; the last `result` given."""
    check_order(stages)
    values: dict[str, object] = {GIVEN: given}
    done: list[tuple[RunStage, object]] = []
    try:
        for stage in stages:
            value = stage.run(*(values[r] for r in stage.reads))
            values[stage.gives] = value
            done.append((stage, value))
    except BaseException:
        for stage, value in reversed(done):  # nobody will ask for what they started now
            if stage.undo is not None:
                stage.undo(value)
        raise
    return values[RESULT]


def replaced(stages: Sequence[RunStage], name: str, run: Callable[..., object]
             ) -> tuple[RunStage, ...]:
    """`stages` with the stage `name` running `run` instead (it reads and gives the same)."""
    _position(stages, name)
    return tuple(replace(s, run=run) if s.name == name else s for s in stages)


def inserted(stages: Sequence[RunStage], stage: RunStage, after: str) -> tuple[RunStage, ...]:
    """`stages` with `stage` run right after the stage `after`."""
    i = _position(stages, after) + 1
    return (*stages[:i], stage, *stages[i:])


def _position(stages: Sequence[RunStage], name: str) -> int:
    for i, s in enumerate(stages):
        if s.name == name:
            return i
    raise ValueError(f"no stage is named {name!r} (stages: "
                     f"{', '.join(s.name for s in stages)})")
