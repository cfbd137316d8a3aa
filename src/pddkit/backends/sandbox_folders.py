"""Where a sandbox folder keeps its models (`pddkit sandbox --output OUT`): OUT/run/
target-model (OUT/KNOB=VALUE/target-model per value of a sweep) and OUT/reference-model.
A user who gives OUT itself as a model is told where they are (one sentence)."""

from __future__ import annotations

from pathlib import Path

TARGET = "target-model"
REFERENCE = "reference-model"
MARKERS = ("summary.json", "split.json")  # written by every sandbox at its root


def _models(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob(f"*/{TARGET}") if (p / "config.json").is_file())


def not_a_model(name: str, role: str = "model") -> str | None:
    """One sentence when the local folder `name` is a sandbox folder or one of its run
    folders rather than a model (it has no config.json): where its models are; else None."""
    folder = Path(name).expanduser()
    if not folder.is_dir() or (folder / "config.json").is_file():
        return None
    if (folder / TARGET / "config.json").is_file():  # a run folder (OUT/run)
        return (f"{role} {name} is a sandbox run folder, not a model: its target model is "
                f"{Path(name) / TARGET}")
    targets = _models(folder)
    if not targets or not any((folder / m).is_file() for m in MARKERS):
        return None
    shown = [str(Path(name) / t.relative_to(folder)) for t in targets]
    ref = folder / REFERENCE
    return (f"{role} {name} is a sandbox folder, not a model: its target model"
            + (f" is {shown[0]}" if len(shown) == 1 else f"s are {', '.join(shown)}")
            + (f", and its reference model is {Path(name) / REFERENCE}"
               if (ref / "config.json").is_file() else ""))
