"""What the benchmark loaders share: a parameter checked against its valid values, rows
read from a release's local files (JSONL, or a `datasets` save_to_disk Arrow folder) or
from the hub, and rows tagged with ids and subsets. Registers no benchmark."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from pddkit.data.hub import hub_rows
from pddkit.data.jsonl import read_lines
from pddkit.data.tables import arrow_folder_table
from pddkit.errors import PddkitError

Rows = list[tuple[int, object]]  # (line or row number, decoded row or the reader's BadRow)


def choose(what: str, value: object, valid: Sequence) -> object:
    """`value` if it is one of `valid` (compared as text), else one sentence listing them."""
    for v in valid:
        if str(v) == str(value):
            return v
    raise PddkitError(f"{what} must be one of {', '.join(map(str, valid))}, not {value!r}")


def jsonl_values(path: Path) -> Rows:
    """(line number, JSON value or BadRow) of every non-blank line of `path`."""
    return list(read_lines(path))


def arrow_rows(folder: Path) -> Rows:
    """The rows of one split saved by `datasets` save_to_disk, numbered from 1."""
    return list(enumerate(arrow_folder_table(folder).to_pylist(), start=1))


def local_split(data_dir: str | Path, split: str) -> tuple[Rows, str, str]:
    """(rows, where, unit) of `{data_dir}/{split}.jsonl` or the Arrow folder `{data_dir}/{split}`;
    neither is one sentence naming the file looked for."""
    base = Path(data_dir)
    path = base / f"{split}.jsonl"
    if path.is_file():
        return jsonl_values(path), str(path), "line"
    if (base / split).is_dir():
        return arrow_rows(base / split), str(base / split), "row"
    raise PddkitError(f"`data_dir` {data_dir} has no {split}.jsonl (nor a {split} Arrow folder)")


def split_rows(data_dir: str | Path | None, split: str, repo: str) -> tuple[Rows, str, str]:
    """A split from `data_dir` when given (offline), else from the hub repo `repo`."""
    if data_dir is not None:
        return local_split(data_dir, split)
    rows = hub_rows(repo, split=split)
    return [(i, dict(r)) for i, r in enumerate(rows, start=1)], f"{repo} {split}", "row"


def row_id(number: int, row: dict, prefix: str = "") -> str:
    """A row's id: `prefix` + its own `id` field, else its line or row number."""
    own = row.get("id")
    return f"{prefix}{number if own is None else own}"


def tagged(rows: Iterable[tuple[int, object]], id_prefix: str = "", subset: str | None = None,
           **fixed: object) -> Iterator[tuple[int, object]]:
    """Rows with `id` = prefix + (their own id, else their number), `subset` and any
    `fixed` fields set; BadRows and non-objects pass through for records.py to name."""
    for number, row in rows:
        if isinstance(row, dict):
            row = {**row, "id": row_id(number, row, id_prefix), **fixed}
            if subset is not None:
                row["subset"] = subset
        yield number, row
