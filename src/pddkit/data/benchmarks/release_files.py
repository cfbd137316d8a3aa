"""Reading one split of a hub release from a local copy in the layouts the hub and
`datasets` give it, or from the hub: `{split}.jsonl`, `{split}.csv`, a `datasets`
save_to_disk folder `{split}/`, or Parquet shards as the hub repo stores them
(`data/{split}-*.parquet`, `{split}/*.parquet`, `default/{split}/*.parquet`). Registers no
benchmark; used by the loaders of the newer benchmarks (wikimia25, wikimia24-hard,
stackmia, booktection, arxivtection, scaling-mia)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from pddkit.data.benchmarks.files import Rows, arrow_rows, jsonl_values
from pddkit.data.hub import hub_rows
from pddkit.data.records import BadRow
from pddkit.errors import PddkitError, install_hint

PARQUET_GLOBS = ("data/{s}-*.parquet", "data/{s}.parquet", "{s}.parquet", "{s}-*.parquet",
                 "{s}/*.parquet", "default/{s}/*.parquet")


def layouts(split: str) -> str:
    """The local files looked for, for a sentence naming them."""
    return (f"{split}.jsonl, {split}.csv, a {split}/ folder saved by datasets' save_to_disk, "
            f"or data/{split}-*.parquet as the hub repo stores it")


def local_split(base: Path, split: str) -> tuple[Rows, str, str] | None:
    """(rows, where, unit) of `split` in the folder `base`, or None when it holds none."""
    if (base / f"{split}.jsonl").is_file():
        path = base / f"{split}.jsonl"
        return jsonl_values(path), str(path), "line"
    if (base / f"{split}.csv").is_file():
        path = base / f"{split}.csv"
        return csv_rows(path), str(path), "row"
    if (base / split).is_dir() and any((base / split).glob("*.arrow")):
        return arrow_rows(base / split), str(base / split), "row"
    files = parquet_files(base, split)
    if files:
        where = str(files[0]) if len(files) == 1 else f"{base}/{split} Parquet shards"
        return parquet_rows(files), where, "row"
    return None


def parquet_files(base: Path, split: str) -> list[Path]:
    """The Parquet shards of `split` under `base`, in name order (the first layout found)."""
    for pattern in PARQUET_GLOBS:
        files = sorted(base.glob(pattern.format(s=split)))
        if files:
            return files
    return []


def read_split(data_dir: str | Path | None, split: str, repo: str,
               hub_split: str | None = None) -> tuple[Rows, str, str]:
    """A split from `data_dir` (offline; one sentence naming the files looked for when it
    has none), else the hub repo's split `hub_split` (default `split`)."""
    if data_dir is not None:
        found = local_split(Path(data_dir), split)
        if found is None:
            raise PddkitError(f"`data_dir` {data_dir} has no split {split} of {repo}: expected "
                              f"{layouts(split)}")
        return found
    name = hub_split or split
    rows = hub_rows(repo, split=name)
    return [(i, dict(r)) for i, r in enumerate(rows, start=1)], f"{repo} {name}", "row"


def _pyarrow(path: Path):
    try:
        import pyarrow as pa
        import pyarrow.parquet
    except ImportError:
        raise PddkitError(f"reading {path} needs pyarrow: {install_hint('tables')}") from None
    return pa


def _check_columns(pa, f: Path, columns: list[str] | None) -> None:
    """One sentence naming the columns a shard has when it lacks one asked for."""
    if not columns:
        return
    try:
        have = pa.parquet.ParquetFile(f).schema_arrow.names
    except (pa.ArrowException, OSError) as e:
        raise PddkitError(f"{f} is not a readable Parquet file ({type(e).__name__})") from None
    missing = [c for c in columns if c not in have]
    if missing:
        raise PddkitError(f"{f} has no '{missing[0]}' column; its columns are "
                          f"{', '.join(map(repr, have)) or 'none'}")


def parquet_rows(files: list[Path], columns: list[str] | None = None) -> Rows:
    """The rows of Parquet shards, in file order, numbered from 1."""
    pa = _pyarrow(files[0])
    rows: list[dict] = []
    for f in files:
        _check_columns(pa, f, columns)
        try:
            rows.extend(pa.parquet.read_table(f, columns=columns).to_pylist())
        except (pa.ArrowException, OSError) as e:
            raise PddkitError(f"{f} is not a readable Parquet file ({type(e).__name__})") from None
    return list(enumerate(rows, start=1))


def parquet_count(files: list[Path]) -> int:
    """Rows in Parquet shards, from their footers (no data read)."""
    pa = _pyarrow(files[0])
    try:
        return sum(pa.parquet.ParquetFile(f).metadata.num_rows for f in files)
    except (pa.ArrowException, OSError) as e:
        raise PddkitError(f"{files[0]} is not a readable Parquet file ({type(e).__name__})") from None


def parquet_take(files: list[Path], indices: list[int], columns: list[str] | None = None) -> list[dict]:
    """Rows at `indices` (0-based over the shards in order), in the order given, reading one
    row group at a time so only the rows taken stay in memory."""
    import bisect

    pa = _pyarrow(files[0])
    wanted: dict[int, list[int]] = {}  # global index -> positions in the answer
    for pos, i in enumerate(indices):
        wanted.setdefault(i, []).append(pos)
    keys = sorted(wanted)
    out: list[dict | None] = [None] * len(indices)
    start = 0
    for f in files:
        _check_columns(pa, f, columns)
        pf = pa.parquet.ParquetFile(f)
        for g in range(pf.metadata.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            here = keys[bisect.bisect_left(keys, start):bisect.bisect_left(keys, start + n)]
            if here:
                table = pf.read_row_group(g, columns=columns)
                for i in here:
                    row = table.slice(i - start, 1).to_pylist()[0]
                    for pos in wanted[i]:
                        out[pos] = row
            start += n
    return [r for r in out if r is not None]


def csv_rows(path: Path) -> Rows:
    """The rows of a CSV file with a header (cells may hold quoted newlines), numbered
    from 1 (the first row after the header); a row with another number of cells than the
    header is a BadRow."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    rows: Rows = []
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                return []
            for no, cells in enumerate(reader, start=1):
                if not any(c.strip() for c in cells):
                    continue
                if len(cells) != len(header):
                    rows.append((no, BadRow(f"has {len(cells)} cells, the header {len(header)}")))
                    continue
                rows.append((no, dict(zip(header, cells))))
    except UnicodeDecodeError as e:
        raise PddkitError(f"{path} is not UTF-8 text (byte {e.start})") from None
    except csv.Error as e:
        raise PddkitError(f"{path} is not a readable CSV file ({e})") from None
    return rows


def merge_parts(parts: list, meta: dict) -> tuple[list, list, dict]:
    """(samples, skipped, meta) of several loaded parts (Datasets): what each part's meta
    counted (data.samples.LOADER_COUNTS) summed into `meta`, their document fields merged."""
    from pddkit.data.samples import LOADER_COUNTS

    samples: list = []
    skipped: list = []
    out = dict(meta)
    for part in parts:
        samples.extend(part.samples)
        skipped.extend(part.skipped)
        for key in LOADER_COUNTS:
            if part.meta.get(key):
                out[key] = out.get(key, 0) + int(part.meta[key])
        if part.meta.get("document_fields"):
            out.setdefault("document_fields", {}).update(part.meta["document_fields"])
    return samples, skipped, out
