"""The index folder: infini-gram's v4 layout (per shard s: `tokenized.s` the token ids,
each document after a separator of all-ones bytes; `offset.s` the documents' byte
offsets as uint64; `table.s` the suffix array; `metadata.s` / `metaoff.s` each document's
source) plus pddkit's manifest, one per worker: `pddkit-index.json` (one worker) or
`pddkit-index.worker-I-of-W.json`. An index without a manifest (a public one) opens too;
its tokenizer is then the user's word and its normalisation unknown.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from pddkit.errors import PddkitError

SHARD_FILES = ("tokenized", "table", "offset")
DTYPES = {"u16": 2, "u32": 4}
_MANIFEST = re.compile(r"^pddkit-index(?:\.worker-(\d+)-of-(\d+))?\.json$")
_PROGRESS = "pddkit-index.progress"


def manifest_name(worker_id: int, workers: int) -> str:
    return "pddkit-index.json" if workers == 1 else f"pddkit-index.worker-{worker_id}-of-{workers}.json"


def progress_name(worker_id: int, workers: int) -> str:
    return f"{_PROGRESS}.worker-{worker_id}-of-{workers}.json"


def shard_path(folder: Path, kind: str, shard: int) -> Path:
    return folder / f"{kind}.{shard}"


def token_dtype_for(vocab_size: int) -> str:
    """u16 while every id and the separator 0xFFFF stay distinct, else u32."""
    return "u16" if vocab_size < 0xFFFF else "u32"


@dataclass(frozen=True)
class IndexInfo:
    """What an index folder (or several, one per worker) holds, read and checked."""

    folders: tuple[Path, ...]
    token_dtype: str
    tokenizer_name: str | None  # None: a public index (no manifest)
    tokenizer_fingerprint: str | None
    normalize: bool | None  # None: unknown (built outside pddkit)
    shards: int
    documents: int | None
    tokens: int | None
    manifests: tuple[dict, ...]

    @property
    def built_by_pddkit(self) -> bool:
        return bool(self.manifests)

    @property
    def name(self) -> str:
        return ", ".join(str(f) for f in self.folders)


def read_index(folders: list[str | Path]) -> IndexInfo:
    """Check `folders` form one complete index; one sentence naming what is missing."""
    dirs = tuple(Path(f) for f in folders)
    seen = [d.resolve() for d in dirs]
    if len(set(seen)) < len(seen):
        twice = next(d for d, r in zip(dirs, seen) if seen.count(r) > 1)
        raise PddkitError(f"index {twice} is given twice: its counts would be added twice")
    manifests: list[dict] = []
    public: list[Path] = []
    shard_count = 0
    for d in dirs:
        if not d.is_dir():
            raise PddkitError(f"index {d} is not a folder" if d.exists() else
                              f"index {d} does not exist")
        found = _manifests(d)
        if not found and list(d.glob(f"{_PROGRESS}.*")):
            raise PddkitError(f"index {d} is incomplete: its indexing has not finished "
                              "(rerun the same `pddkit corpus index` command to resume it)")
        shards = _shards(d)
        if not shards:
            raise PddkitError(f"{d} is not an infini-gram index: it has no tokenized.N files")
        for s in shards:
            for kind in SHARD_FILES:
                if not shard_path(d, kind, s).is_file():
                    raise PddkitError(f"index {d} is incomplete: {kind}.{s} is missing")
        shard_count += len(shards)
        for m in found:
            _check_manifest_files(d, m)
        manifests.extend(found)
        if not found:
            public.append(d)
    if manifests and public:
        raise PddkitError(f"index {public[0]} has no pddkit manifest but "
                          f"{manifests[0]['_path']} has one: they are not parts of one index")
    if manifests:
        return _from_manifests(dirs, manifests, shard_count)
    dtypes = {_public_dtype(d, s) for d in dirs for s in _shards(d)}
    if len(dtypes) > 1:
        raise PddkitError(f"the shards of {', '.join(map(str, dirs))} store token ids of "
                          "different widths: they are not parts of one index")
    return IndexInfo(dirs, dtypes.pop(), None, None, None, shard_count, None, None, ())


_REQUIRED = {"tokenizer": dict, "token_dtype": str, "normalize": bool, "shards": int,
             "workers": int, "worker_id": int, "documents": int, "tokens": int,
             "shard_files": dict, "plan": dict}


def _manifests(d: Path) -> list[dict]:
    out = []
    for p in sorted(d.iterdir()):
        if _MANIFEST.match(p.name):
            try:
                m = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as e:
                raise PddkitError(f"index manifest {p} is not readable JSON ({e})") from None
            bad = (["a JSON object"] if not isinstance(m, dict) else
                   [k for k, t in _REQUIRED.items() if not isinstance(m.get(k), t)]
                   + [k for k in ("name", "fingerprint")
                      if not isinstance(m.get("tokenizer"), dict)
                      or not isinstance(m["tokenizer"].get(k), str)])
            if bad:
                raise PddkitError(f"{p} is not a pddkit index manifest (it lacks "
                                  f"{', '.join(bad[:3])}); rebuild the index with `pddkit "
                                  "corpus index`")
            out.append(m | {"_path": str(p)})
    return out


def _shards(d: Path) -> list[int]:
    return sorted(int(p.name.split(".", 1)[1]) for p in d.glob("tokenized.*")
                  if p.name.split(".", 1)[1].isdigit())


def _check_manifest_files(d: Path, m: dict) -> None:
    for s, sizes in m.get("shard_files", {}).items():
        for kind, size in sizes.items():
            if kind not in SHARD_FILES:
                continue
            p = shard_path(d, kind, int(s))
            if not p.is_file():
                raise PddkitError(f"index {d} is incomplete: {p.name} is missing")
            if p.stat().st_size != size:
                raise PddkitError(f"index {d}: {p.name} is {p.stat().st_size} bytes where its "
                                  f"manifest says {size}: the index is incomplete or altered")


def _from_manifests(dirs: tuple[Path, ...], manifests: list[dict], shard_count: int) -> IndexInfo:
    first = manifests[0]
    complete = [m for m in manifests if int(m["workers"]) == 1]
    if complete and len(manifests) > 1:
        raise PddkitError(f"{complete[0]['_path']} is a whole index by itself, not one "
                          "worker's part: check against one index at a time")
    for m in manifests[1:]:
        if m["plan"].get("files") != first["plan"].get("files") or (
                m["plan"].get("settings", {}).get("text_field")
                != first["plan"].get("settings", {}).get("text_field")):
            raise PddkitError(f"index manifests {first['_path']} and {m['_path']} were built "
                              "from different corpus files: they are not parts of one index")
        for key in ("token_dtype", "normalize", "shards", "workers"):
            if m.get(key) != first.get(key):
                raise PddkitError(f"index manifests {first['_path']} and {m['_path']} disagree "
                                  f"on {key}: they are not parts of one index")
        if m["tokenizer"]["fingerprint"] != first["tokenizer"]["fingerprint"]:
            raise PddkitError(f"index manifests {first['_path']} and {m['_path']} were built "
                              f"with different tokenizers ({first['tokenizer']['name']}, "
                              f"{m['tokenizer']['name']}): they are not parts of one index")
    workers = int(first["workers"])
    have = {int(m["worker_id"]) for m in manifests}
    missing = sorted(set(range(workers)) - have)
    if missing:
        raise PddkitError(
            f"index {', '.join(map(str, dirs))} is incomplete: the manifest of worker "
            f"{missing[0]} of {workers} is missing (its shards "
            f"{', '.join(str(s) for s in range(missing[0], int(first['shards']), workers))}): "
            "give every worker's folder, or finish that worker's indexing")
    if len(have) != len(manifests):
        raise PddkitError(f"index {', '.join(map(str, dirs))} holds one worker's part twice")
    return IndexInfo(dirs, first["token_dtype"], first["tokenizer"]["name"],
                     first["tokenizer"]["fingerprint"], bool(first["normalize"]),
                     int(first["shards"]), sum(int(m["documents"]) for m in manifests),
                     sum(int(m["tokens"]) for m in manifests), tuple(manifests))


def _public_dtype(d: Path, s: int) -> str:
    """A public shard's token width: the one for which its suffix array holds one pointer
    of infini-gram's width (ceil(log2(bytes) / 8)) per token; its first bytes must be a
    document separator (all ones)."""
    tokenized = shard_path(d, "tokenized", s)
    with tokenized.open("rb") as fh:
        head = fh.read(2)
    size, table = tokenized.stat().st_size, shard_path(d, "table", s).stat().st_size
    if head != b"\xff\xff" or size < 2:
        raise PddkitError(f"{tokenized} does not start with a document separator: not an "
                          "infini-gram v4 index of token ids (byte-level and reversed indexes "
                          "are not supported)")
    ratio = math.ceil(math.log2(size) / 8)
    fits = [name for name, width in DTYPES.items()
            if size % width == 0 and table == size // width * ratio]
    if len(fits) != 1:
        raise PddkitError(f"index {d}: table.{s} ({table} bytes) is not the suffix array of "
                          f"tokenized.{s} ({size} bytes) for 16- or 32-bit token ids: the "
                          "index is incomplete or of another kind")
    return fits[0]
