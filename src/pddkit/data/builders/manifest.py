"""A built benchmark on disk: OUTPUT/data.jsonl (the rows) and OUTPUT/manifest.json (what
it was built from and how), so it can be cited and rebuilt.

Each file is written to a temporary name and renamed into place, the manifest last and
only after the data file is complete; a previous manifest is removed before anything
else. A folder with a manifest.json therefore always holds a whole build (the manifest
records the data file's sha256), and a crash leaves no folder that looks complete.
Nothing in the files depends on the time or the output path: same inputs and seed, same bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict
from pathlib import Path

from pddkit.data.builders.registry import Built
from pddkit.errors import PddkitError
from pddkit.version import __version__

logger = logging.getLogger(__name__)

DATA = "data.jsonl"
MANIFEST = "manifest.json"
FIELDS = ("text", "label", "id", "group", "subset")  # SPEC section 5, in this order


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _jsonable(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def data_bytes(rows) -> bytes:
    """The JSONL file's bytes: one object per row, fields in FIELDS order (text, label, id,
    group, subset), UTF-8."""
    lines = (json.dumps({k: r[k] for k in FIELDS if r.get(k) is not None}, ensure_ascii=False)
             for r in rows)
    return "".join(line + "\n" for line in lines).encode("utf-8")


def manifest(builder: str, params: dict, built: Built, data: bytes) -> dict:
    """The manifest's content (no output path; no time stamp outside `provenance`, which
    write_build adds: apart from it, rebuilds compare equal)."""
    labels = [r["label"] for r in built.rows]
    return {
        "builder": builder,
        "pddkit_version": __version__,
        "language": built.language,
        "seed": params.get("seed"),
        "parameters": _jsonable(params),
        "sources": [asdict(s) for s in built.sources],
        "files": {DATA: {"sha256": hashlib.sha256(data).hexdigest(), "rows": len(built.rows),
                         "members": labels.count(1), "nonmembers": labels.count(0)}},
        "counts": _jsonable(built.counts),
        "notes": list(built.notes),
    }


def _write_atomic(path: Path, content: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("wb") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_build(output: str | Path, builder: str, params: dict, built: Built,
                overwrite: bool = False, started_at: str | None = None) -> Path:
    """Write `built` into the folder `output`; a folder already holding a build (or a
    data.jsonl) is refused unless `overwrite`. Other files in the folder are left alone.
    The manifest's `provenance` (pddkit/provenance.py) spans `started_at` to now."""
    from pddkit.provenance import Provenance

    out = Path(output).expanduser()
    if out.exists() and not out.is_dir():
        raise PddkitError(f"`output` {out} is a file, not a folder")
    held = [n for n in (MANIFEST, DATA) if (out / n).exists()]
    if held and not overwrite:
        raise PddkitError(f"`output` {out} already holds {held[0]}; choose another folder or "
                          "pass `overwrite=True` to replace the build")
    data = data_bytes(built.rows)
    text = json.dumps({**manifest(builder, params, built, data), "provenance": Provenance.collect(
        started_at, devices=["cpu"]).to_dict()}, indent=2, ensure_ascii=False)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / MANIFEST).unlink(missing_ok=True)  # from here on the folder is not complete
        _write_atomic(out / DATA, data)
        _write_atomic(out / MANIFEST, (text + "\n").encode("utf-8"))
    except OSError as e:
        raise PddkitError(f"cannot write to `output` {out}: {e.strerror or e}") from None
    for note in built.notes:
        logger.warning("%s", note)
    logger.debug("%s: %d rows in %s", builder, len(built.rows), out / DATA)
    return out
