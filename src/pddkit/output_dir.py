"""Output folders: checked before any model loads, never overwritten by accident.

`prepare(path, overwrite)` creates the folder and writes a probe file, so a path under a
plain file or a read-only folder is one sentence before hours of scoring, not a
traceback after them. A folder that already holds pddkit results (a run's results.json,
a sandbox's summary.json) is refused unless `overwrite` is set, which first removes the
previous run's files (and only those: other files in the folder are left alone), so no
stale report of old methods sits beside new results.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

MARKERS = ("results.json", "summary.json")  # a folder holding one of these holds pddkit results
# what pddkit writes into an output folder (runs, sandboxes, blind checks)
OUTPUT_NAMES = ("results.json", "scores.jsonl", "report.html", "report.md", "*.png",
                "neighbors.jsonl", "shots.jsonl", "augmentations.jsonl", "samples.jsonl", "probe",
                "probe-validated", "summary.json", "split.json",
                "freq.npz", "reference-pool.jsonl", "train-documents.jsonl", "windows*.jsonl",
                "evaluated-documents.jsonl", "tokenizer-texts.jsonl", "contamination-examples.jsonl",
                "reference-model", "run", "window-*", "*=*", "run.yaml", "documents.jsonl",
                "traps")


def holds_results(path: Path) -> bool:
    return any((path / m).is_file() for m in MARKERS)


def previous_outputs(path: Path) -> list[Path]:
    """Files and folders of an earlier pddkit run in `path` (top level only)."""
    found: set[Path] = set()
    for pattern in OUTPUT_NAMES:
        found.update(path.glob(pattern))
    return sorted(found)


def prepare(path: str | Path, overwrite: bool = False, name: str = "output") -> Path:
    """Create `path` (with parents) and check that it can be written; refuse one that holds
    pddkit results unless `overwrite`, which removes those results first. Messages name
    the folder by its parameter, `name` (the CLI shows the flag)."""
    out = Path(path).expanduser()
    if out.exists() and not out.is_dir():
        raise PddkitError(f"`{name}` {out} is a file, not a folder")
    if out.is_dir() and holds_results(out):
        if not overwrite:
            raise PddkitError(f"`{name}` {out} already holds pddkit results; choose another "
                              "folder or pass `overwrite=True` to replace them")
        old = previous_outputs(out)
        for p in old:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        logger.info("`overwrite`: removed %d files and folders of the previous run in %s",
                    len(old), out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".pddkit-write-check"
        probe.write_text("pddkit checks that it can write here\n")
        probe.unlink()
    except OSError as e:
        raise PddkitError(f"cannot write to `{name}` {out}: {e.strerror or e}") from None
    return out
