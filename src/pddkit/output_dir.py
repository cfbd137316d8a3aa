"""Output folders: checked before any model loads, never overwritten by accident.

`prepare(path, overwrite)` creates the folder and writes a probe file, so a path under a
plain file or a read-only folder is one sentence before hours of scoring, not a
traceback after them. A folder that already holds pddkit results (a run's results.json,
a sandbox's summary.json) is refused unless `overwrite` is set, which first removes the
previous run's files (and only those: other files in the folder are left alone), so no
stale report of old methods sits beside new results.

A command that fails leaves no empty folder behind: within `removed_if_failed()` (every
command of the CLI runs in one), a folder `prepare` created is removed again when the
block fails and the folder holds no file (only folders pddkit made in it, or nothing). A
folder that existed before, or one holding any file, is never touched.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
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


# the folders `prepare` created (their topmost new ancestor) within removed_if_failed()
_CREATED: ContextVar[list[Path] | None] = ContextVar("pddkit_created_folders", default=None)


@contextmanager
def removed_if_failed() -> Iterator[None]:
    """Run a block; if it raises (KeyboardInterrupt included), every folder `prepare`
    created in it that holds no file is removed, then the exception goes on."""
    token = _CREATED.set([])
    try:
        yield
    except BaseException:
        for path in reversed(_CREATED.get() or []):
            _remove_if_no_files(path)
        raise
    finally:
        _CREATED.reset(token)


def _remove_if_no_files(top: Path) -> None:
    """Remove `top` and the folders under it when none holds a file (or link); else leave
    everything as it is."""
    if not top.is_dir() or top.is_symlink():
        return
    folders = []
    for root, dirs, files in os.walk(top, topdown=False, followlinks=False):
        if files or any(Path(root, d).is_symlink() for d in dirs):
            return
        folders.append(root)
    try:
        for folder in folders:  # deepest first
            os.rmdir(folder)
    except OSError as e:  # a file appeared meanwhile, or no permission: leave it
        logger.debug("left the folder %s: %s", top, e)
        return
    logger.debug("removed the empty folder %s the failed command had created", top)


def _first_missing(path: Path) -> Path | None:
    """The topmost folder of `path` (itself or an ancestor) that does not exist yet."""
    missing = None
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            break
        missing = p
    return missing


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
    new, created = _first_missing(out.absolute()), _CREATED.get()
    if new is not None and created is not None:
        created.append(new)  # before mkdir: it may create some parents and then fail
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".pddkit-write-check"
        probe.write_text("pddkit checks that it can write here\n")
        probe.unlink()
    except OSError as e:
        raise PddkitError(f"cannot write to `{name}` {out}: {e.strerror or e}") from None
    return out
