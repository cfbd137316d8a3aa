"""Corpus files into documents: a text file is one document; a JSONL line or a Parquet row
is one (its `text_field`); folders are read recursively in sorted order; `.gz` and `.zst`
are decompressed by their last suffix. A file that is not text is skipped, counted and
named; so is a table line without text."""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

TABLE_SUFFIXES = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
COMPRESSIONS = (".gz", ".zst")
_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class CorpusFile:
    """One file of a corpus: `name` is its path relative to the argument it was found under
    (the file's own name when given directly), as the manifest records it."""

    path: Path
    name: str
    kind: str  # "text" | "jsonl" | "parquet"
    compression: str | None  # ".gz" | ".zst" | None


@dataclass
class ReadTally:
    """What reading left out, by name: files that are not text, lines without text."""

    skipped_files: list[tuple[str, str]] = field(default_factory=list)  # (name, why)
    skipped_lines: int = 0
    skipped_examples: list[str] = field(default_factory=list)  # "file line N: why"
    replaced_lines: int = 0  # lines (or text files) not UTF-8: decoded with U+FFFD
    replaced_examples: list[str] = field(default_factory=list)

    def skip_line(self, where: str, why: str) -> None:
        self.skipped_lines += 1
        if len(self.skipped_examples) < 5:
            self.skipped_examples.append(f"{where}: {why}")
        logger.warning("%s: %s; left out of the index", where, why)

    def decode(self, raw: bytes, where: str) -> str:
        """UTF-8, or with replacement characters, counted and named."""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.replaced_lines += 1
            if len(self.replaced_examples) < 5:
                self.replaced_examples.append(where)
            logger.warning("%s is not UTF-8 throughout; indexed with replacement characters", where)
            return raw.decode("utf-8", errors="replace")


def corpus_files(paths: Iterable[str | Path], tally: ReadTally) -> list[CorpusFile]:
    """The corpus files under `paths` (files or folders), sorted within each folder; files
    that are not text are recorded in `tally` and left out."""
    found: list[CorpusFile] = []
    for arg in map(Path, paths):
        if arg.is_dir():
            members = sorted(p for p in arg.rglob("*") if p.is_file())
            if not members:
                raise PddkitError(f"corpus folder {arg} holds no files")
            for p in members:
                _add(found, p, (Path(arg.name) / p.relative_to(arg)).as_posix(), tally)
        elif arg.is_file():
            _add(found, arg, arg.name, tally)
        else:
            raise PddkitError(f"corpus path {arg} does not exist")
    if not found:
        raise PddkitError("no corpus file holds text: " + "; ".join(
            f"{name} ({why})" for name, why in tally.skipped_files[:5]))
    return found


def _add(found: list[CorpusFile], path: Path, name: str, tally: ReadTally) -> None:
    suffixes = [s.lower() for s in path.suffixes]
    compression = suffixes[-1] if suffixes and suffixes[-1] in COMPRESSIONS else None
    inner = suffixes[-2] if compression and len(suffixes) > 1 else (
        suffixes[-1] if suffixes and not compression else "")
    kind = TABLE_SUFFIXES.get(inner, "text")
    why = _not_text(path, compression, kind)
    if why:
        tally.skipped_files.append((name, why))
        logger.warning("corpus file %s is %s; skipped", path, why)
        return
    found.append(CorpusFile(path, name, kind, compression))


def _not_text(path: Path, compression: str | None, kind: str) -> str | None:
    """Why `path` cannot be read as text (None when it can): its first bytes decide."""
    try:
        with _open_binary(path, compression) as fh:
            head = fh.read(_SNIFF_BYTES)
    except (OSError, EOFError, ValueError) as e:
        return f"not a readable {compression or 'plain'} file ({type(e).__name__})"
    except PddkitError as e:
        return str(e)
    if kind == "parquet":
        if compression:
            return "a compressed Parquet file (Parquet compresses inside; give it uncompressed)"
        return None if head[:4] == b"PAR1" else "not a Parquet file"
    if b"\x00" in head:
        return "not text (it holds NUL bytes)"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # a character cut by the sniffed block is fine
            return "not UTF-8 text"
    return None


def _open_binary(path: Path, compression: str | None):
    if compression == ".gz":
        return gzip.open(path, "rb")
    if compression == ".zst":
        try:
            import zstandard
        except ImportError:
            raise PddkitError(f"{path} is zstd-compressed: pip install -e '.[corpus]' "
                              "(the zstandard package) to read it") from None
        return zstandard.ZstdDecompressor().stream_reader(path.open("rb"), closefd=True)
    return path.open("rb")


def read_documents(f: CorpusFile, text_field: str, tally: ReadTally) -> Iterator[tuple[int, str]]:
    """(line or row number from 1, text) of each document of `f`; a text file: (1, whole).
    A compressed file that ends early is one sentence naming it and the line reached."""
    if f.kind == "parquet":
        yield from _parquet_rows(f, text_field, tally)
        return
    no = 0
    try:
        if f.kind == "text":
            yield 1, tally.decode(b"".join(_chunks(f)), f.name)
            return
        for no, raw in enumerate(_lines(_chunks(f)), start=1):
            if not raw.strip():
                continue
            line = tally.decode(raw, f"{f.name} line {no}")
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                tally.skip_line(f"{f.name} line {no}", f"not JSON ({e.msg})")
                continue
            text = record.get(text_field) if isinstance(record, dict) else None
            if not isinstance(text, str):
                tally.skip_line(f"{f.name} line {no}", f"no text in field {text_field!r}")
                continue
            yield no, text
    except (EOFError, OSError, _ZstdError) as e:
        where = f" after line {no}" if no else ""
        raise PddkitError(f"corpus file {f.name} is damaged{where} ({e}); repair or remove "
                          "it, then rerun the same command: the index resumes") from None


try:
    from zstandard import ZstdError as _ZstdError
except ImportError:  # pragma: no cover - zstd files then refuse to open
    class _ZstdError(Exception):
        pass


def _chunks(f: CorpusFile, size: int = 1 << 20) -> Iterator[bytes]:
    """The file's bytes, decompressed; a stream that ends before its end marker raises."""
    if f.compression != ".zst":
        with _open_binary(f.path, f.compression) as fh:  # gzip raises EOFError itself
            yield from iter(lambda: fh.read(size), b"")
        return
    import zstandard

    d, fed = zstandard.ZstdDecompressor().decompressobj(), False
    with f.path.open("rb") as fh:
        for block in iter(lambda: fh.read(size), b""):
            while block:
                yield d.decompress(block)
                fed = True
                block = d.unused_data if d.eof else b""
                if d.eof:  # a frame ended: another may follow
                    d, fed = zstandard.ZstdDecompressor().decompressobj(), False
    if fed and not d.eof:
        raise EOFError("the zstd stream ends before its end marker")


def _lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    rest = b""
    for chunk in chunks:
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        yield from parts
    if rest:
        yield rest


def _parquet_rows(f: CorpusFile, text_field: str, tally: ReadTally) -> Iterator[tuple[int, str]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise PddkitError(f"{f.name} is Parquet: pip install -e '.[tables]' to read it") from None
    pf = pq.ParquetFile(f.path)
    if text_field not in pf.schema_arrow.names:
        raise PddkitError(f"corpus file {f.name} has no column {text_field!r} "
                          f"(its columns: {', '.join(pf.schema_arrow.names)}); pick one with "
                          "`text_field`")
    row = 0
    for batch in pf.iter_batches(columns=[text_field], batch_size=4096):
        for text in batch.column(0).to_pylist():
            row += 1
            if not isinstance(text, str):
                tally.skip_line(f"{f.name} row {row}", f"no text in column {text_field!r}")
                continue
            yield row, text
