"""The trap folder the steps share (JSON only, no pickle).

`traps generate` writes DIR/traps.jsonl (one Trap per line) and DIR/manifest.json (how
they were made, and the tokenizer they are exact for). `traps inject` writes a new folder
holding the same two files, the documents with the member traps inserted (in the input's
format, under the input's file name), DIR/trap-info.jsonl (one Insertion per member trap)
and DIR/injection.json (its options and counts). `traps detect` reads either kind of
folder: inserted traps (in trap-info.jsonl) are members, held-out traps non-members.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pddkit.errors import PddkitError

TRAPS = "traps.jsonl"
MANIFEST = "manifest.json"
TRAP_INFO = "trap-info.jsonl"
INJECTION = "injection.json"
KIND = "pddkit-traps"
MEMBER, HELD_OUT = "member", "held_out"  # a trap's role: to be inserted, or never inserted


@dataclass(frozen=True)
class Trap:
    """One trap sequence: exactly `length` tokens of the generating model's tokenizer."""

    id: str  # "L{length}-{k:05d}"
    text: str  # the decoded sequence (re-encodes to token_ids when generated with retokenize)
    token_ids: tuple[int, ...]
    length: int
    perplexity: float  # under the generating model, temperature 1
    bucket: int  # 0-based perplexity bucket of the manifest's ppl_range
    temperature: float  # the sampling temperature that produced it
    role: str  # MEMBER (to be inserted) or HELD_OUT


@dataclass(frozen=True)
class Insertion:
    """Where one member trap went: `repeats` copies in document `document_id`, starting at
    the character offsets `positions` of the written document."""

    trap_id: str
    document_id: str
    repeats: int
    positions: tuple[int, ...]


@dataclass(frozen=True)
class TrapFolder:
    traps: tuple[Trap, ...]
    manifest: dict  # kind, model, tokenizer {name, vocab_size, fingerprint}, options, counts
    insertions: tuple[Insertion, ...] = ()  # empty until injected
    injection: dict = field(default_factory=dict)  # inject's options and counts

    @property
    def tokenizer_fingerprint(self) -> str | None:
        return (self.manifest.get("tokenizer") or {}).get("fingerprint")

    def write(self, out: str | Path) -> Path:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        _write_rows(out / TRAPS, (asdict(t) for t in self.traps))
        (out / MANIFEST).write_text(json.dumps({"kind": KIND, **self.manifest}, indent=2) + "\n")
        if self.insertions:
            _write_rows(out / TRAP_INFO, (asdict(i) for i in self.insertions))
            (out / INJECTION).write_text(json.dumps(self.injection, indent=2) + "\n")
        return out


def read_folder(path: str | Path) -> TrapFolder:
    """A trap folder; one sentence when it is not one (or a file in it is broken)."""
    path = Path(path)
    if not (path / TRAPS).is_file() or not (path / MANIFEST).is_file():
        raise PddkitError(f"{path} is not a trap folder: it needs {TRAPS} and {MANIFEST} "
                          "(written by `pddkit traps generate`)")
    manifest = _read_json(path / MANIFEST)
    if manifest.pop("kind", None) != KIND:
        raise PddkitError(f"{path / MANIFEST} was not written by `pddkit traps generate`")
    traps = tuple(Trap(**{**r, "token_ids": tuple(r["token_ids"])})
                  for r in _read_rows(path / TRAPS, Trap))
    insertions: tuple[Insertion, ...] = ()
    injection: dict = {}
    if (path / TRAP_INFO).is_file():
        insertions = tuple(Insertion(**{**r, "positions": tuple(r["positions"])})
                           for r in _read_rows(path / TRAP_INFO, Insertion))
        injection = _read_json(path / INJECTION) if (path / INJECTION).is_file() else {}
    return TrapFolder(traps, manifest, insertions, injection)


def _write_rows(path: Path, rows) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PddkitError(f"{path} is not readable JSON ({e})") from None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# a field's annotation -> (its check, what the sentence says it must be); bool is no number
_TYPES = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "int": (_is_int, "a whole number"),
    "float": (lambda v: _is_int(v) or isinstance(v, float), "a number"),
    "tuple[int, ...]": (lambda v: isinstance(v, list) and all(map(_is_int, v)),
                        "a list of whole numbers"),
}


def _read_rows(path: Path, cls) -> list[dict]:
    """The rows of a JSONL file of `cls` records: one sentence naming the file and line
    for a line that is not JSON, lacks or adds a field, or has a field of the wrong type."""
    fields = {name: f.type for name, f in cls.__dataclass_fields__.items()}
    rows = []
    with path.open(encoding="utf-8") as fh:
        for no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise PddkitError(f"{path} line {no} is not valid JSON") from None
            if not isinstance(row, dict) or set(row) != set(fields):
                raise PddkitError(f"{path} line {no} needs exactly the fields "
                                  f"{', '.join(sorted(fields))}")
            for name, kind in fields.items():
                ok, what = _TYPES[kind]
                if not ok(row[name]):
                    given = json.dumps(row[name])
                    raise PddkitError(f"{path} line {no}: '{name}' must be {what}, not "
                                      + (given if len(given) <= 40 else given[:37] + "..."))
            if cls is Trap and row["role"] not in (MEMBER, HELD_OUT):
                raise PddkitError(f"{path} line {no}: 'role' must be {MEMBER} or {HELD_OUT}, "
                                  f"not {json.dumps(row['role'])}")
            rows.append(row)
    return rows
