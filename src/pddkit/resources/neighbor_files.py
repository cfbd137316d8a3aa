"""Neighbour texts made elsewhere, for the neighbourhood attack (Mattern et al. 2023):
MIMIR's pre-computed neighbours (Duan et al. 2024; 25 BERT in-place word swaps per text),
a file with one line per text in the data's order, or neighbours a data set carries
(`Dataset.meta["neighbors"]`, id -> texts: WikiMIA's perturbed variants, Zhang et al.
2024). pddkit's own OUTPUT/neighbors.jsonl is read by neighbors.load.

A line is a JSON list of neighbour texts, or an object holding one (under `neighbors`,
`neighbours`, `perturbed` or `texts`, or its only list of texts). These neighbours do
not depend on the mask model's (top_k, dropout, seed): every parameter set gets them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pddkit.errors import PddkitError
from pddkit.resources.neighbor_sets import NeighborParams, NeighborSets

logger = logging.getLogger(__name__)

MIMIR_SUFFIX = "_neighbors_25_bert_in_place_swap.jsonl"
MIMIR_CACHES = ("cache_100_200_1000_512", "cache_100_200_10000_512")
MIMIR_ID = re.compile(r"^(?P<stem>.+)/(?P<kind>member|nonmember)-(?P<index>\d+)$")
SIDES = {"member": "train_neighbors", "nonmember": "test_neighbors"}
LIST_KEYS = ("neighbors", "neighbours", "perturbed", "texts")


def is_pddkit_file(path: Path) -> bool:
    """A file pddkit wrote (its lines are objects with an `id`); False for a folder or an
    external format."""
    if not path.is_file():
        return False
    with path.open(encoding="utf-8", errors="replace") as fh:
        first = next((line for line in fh if line.strip()), "")
    try:
        obj = json.loads(first)
    except json.JSONDecodeError:
        return True  # let neighbors.load name the bad line
    return isinstance(obj, dict) and "id" in obj


def neighbour_list(value: object, where: str) -> list[str]:
    """One line's neighbour texts (see the module docstring for the forms read)."""
    if isinstance(value, dict):
        lists = [v for v in value.values() if _texts(v)]
        found = next((value[k] for k in LIST_KEYS if _texts(value.get(k))), None)
        value = found if found is not None else (lists[0] if len(lists) == 1 else None)
    if not _texts(value):
        raise PddkitError(f"{where} is not a list of neighbour texts (nor an object with a "
                          "'neighbors' list)")
    return list(value)


def _texts(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _lines(path: Path) -> list[list[str]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                raise PddkitError(f"{path} line {no} is not valid JSON") from None
            out.append(neighbour_list(value, f"{path} line {no}"))
    return out


def read_external(path: Path, ids: Sequence[str]) -> tuple[dict[str, list[str]], str]:
    """({id: neighbours}, a description) from a MIMIR folder or file (ids as the `mimir`
    benchmark makes them), or from a file with one line per text in the data's order."""
    if ids and all(MIMIR_ID.match(i) for i in ids):
        return _mimir(path, ids), f"MIMIR neighbours (BERT in-place swaps) from {path}"
    if path.is_dir():
        raise PddkitError(f"`neighbors_file` {path} is a folder: only MIMIR's neighbour folders "
                          "are read so, for the `mimir` benchmark's texts; give a file")
    lines = _lines(path)
    if len(lines) != len(ids):
        raise PddkitError(f"{path} holds neighbours for {len(lines)} texts, one line each, but "
                          f"the data has {len(ids)} texts")
    return dict(zip(ids, lines)), f"neighbours from {path}"


def _mimir_roots(path: Path) -> list[Path]:
    """Folders that may hold {train,test}_neighbors/: from a neighbour file, one of those
    folders, a cache folder, or the repo root."""
    if path.is_file():
        return [path.parent.parent]
    if path.name in SIDES.values():
        return [path.parent]
    return [path, *(path / c for c in MIMIR_CACHES)]


def _mimir(path: Path, ids: Sequence[str]) -> dict[str, list[str]]:
    roots = _mimir_roots(path)
    files: dict[tuple[str, str], list[list[str]]] = {}
    out = {}
    for sid in ids:
        m = MIMIR_ID.match(sid)
        key = (m["stem"], m["kind"])
        if key not in files:
            rel = f"{SIDES[key[1]]}/{key[0]}{MIMIR_SUFFIX}"
            found = next((r / rel for r in roots if (r / rel).is_file()), None)
            if found is None:
                raise PddkitError(f"`neighbors_file` {path} has no {rel} (MIMIR's layout), which "
                                  f"holds the neighbours of {sid}")
            files[key] = _lines(found)
            logger.info("read %d MIMIR neighbour lines from %s", len(files[key]), found)
        lines, index = files[key], int(m["index"])
        if index >= len(lines):
            raise PddkitError(f"{roots[0] / SIDES[key[1]]}/{key[0]}{MIMIR_SUFFIX} holds neighbours "
                              f"for {len(lines)} texts, but the data has {sid}")
        out[sid] = lines[index]
    return out


def as_sets(neighbours: Mapping[str, Sequence[str]], ids: Sequence[str],
            wanted: Mapping[NeighborParams, int], source: str) -> NeighborSets:
    """Every wanted parameter set gets the same given neighbours, in the order of `ids`;
    `n_generated` is the fewest any text has (a call asking for more uses those)."""
    missing = [i for i in ids if not neighbours.get(i)]
    if missing:
        raise PddkitError(f"{source} has no neighbours for {len(missing)} of the texts "
                          f"(first: id {missing[0]})")
    texts = tuple(tuple(neighbours[i]) for i in ids)
    fewest = min(len(t) for t in texts)
    return NeighborSets({p: texts for p in wanted}, dict.fromkeys(wanted, fewest), source)
