"""Token frequency tables for DC-PDD (Zhang et al., "Pretraining Data Detection for Large
Language Models: A Divergence-based Calibration Method", arXiv 2409.14781): counts of ids
over a reference corpus.

Saved as `.npz` holding `counts` (int64, length = len(tokenizer)) and `meta` (a JSON
string: tokenizer name, vocabulary size and fingerprint, total tokens, sources). Loading
needs no pickle. A table built with another vocabulary is refused.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pddkit import progress
from pddkit.cache.fingerprint import vocab_fingerprint
from pddkit.data.jsonl import text_of_line
from pddkit.errors import PddkitError
from pddkit.version import __version__

logger = logging.getLogger(__name__)

CORPUS_SUFFIXES = (".txt", ".jsonl")


@dataclass(frozen=True)
class FrequencyTable:
    counts: np.ndarray  # [|V|] int64
    tokenizer: str
    vocab_fingerprint: str
    sources: list = field(default_factory=list)
    documents: int = 0
    undecodable_lines: int = 0
    skipped_lines: int = 0

    @property
    def vocab_size(self) -> int:
        return int(self.counts.shape[0])

    @property
    def total_tokens(self) -> int:
        return int(self.counts.sum())

    def log_freq(self) -> np.ndarray:
        """[|V|] log f(v), f(v) = (c_v + 1) / (N + |V|) (add-one smoothing)."""
        c = self.counts.astype(np.float64)
        return np.log((c + 1.0) / (self.total_tokens + self.vocab_size))

    def meta(self) -> dict:
        return {
            "format": "pddkit-frequency-table/1",
            "pddkit_version": __version__,
            "tokenizer": self.tokenizer,
            "vocab_size": self.vocab_size,
            "vocab_fingerprint": self.vocab_fingerprint,
            "total_tokens": self.total_tokens,
            "documents": self.documents,
            "sources": self.sources,
            "undecodable_lines": self.undecodable_lines,
            "skipped_lines": self.skipped_lines,
        }

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as fh:  # a file handle keeps numpy from appending ".npz"
            np.savez_compressed(fh, counts=self.counts, meta=np.array(json.dumps(self.meta())))
        return path

    @staticmethod
    def check_file(path: str | Path) -> Path:
        """One sentence, before any model loads, for a `freq` path that does not exist or
        is not a table `pddkit freq build` wrote (an .npz archive of `counts` and `meta`);
        reads the archive's index only."""
        import zipfile

        path = Path(path)
        if not path.is_file():
            raise PddkitError(f"`freq` {path} does not exist (a frequency table is expected)")
        how = "build one from a corpus with `pddkit freq build`"
        if not zipfile.is_zipfile(path):
            raise PddkitError(f"`freq` {path} is not a pddkit frequency table (an .npz file of "
                              f"token counts): {how}")
        try:
            with zipfile.ZipFile(path) as z:
                names = set(z.namelist())
        except (OSError, zipfile.BadZipFile):
            names = set()
        missing = [k for k in ("counts", "meta") if f"{k}.npy" not in names]
        if missing:
            raise PddkitError(f"`freq` {path} is an .npz archive without "
                              f"{' and '.join(missing)}, so not a pddkit frequency table: {how}")
        return path

    @classmethod
    def load(cls, path: str | Path) -> FrequencyTable:
        path = cls.check_file(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                counts = z["counts"].astype(np.int64)
                meta = json.loads(str(z["meta"]))
        except (OSError, ValueError, KeyError):
            raise PddkitError(f"`freq` {path} is a damaged pddkit frequency table (its counts "
                              "or its meta cannot be read): build it again with "
                              "`pddkit freq build`") from None
        if counts.ndim != 1 or (counts < 0).any():
            raise PddkitError(f"{path} holds no valid count vector")
        return cls(counts, meta.get("tokenizer", "?"), meta.get("vocab_fingerprint", ""),
                   meta.get("sources", []), meta.get("documents", 0),
                   meta.get("undecodable_lines", 0), meta.get("skipped_lines", 0))

    def check_tokenizer(self, tokenizer, model_name: str, path: str | Path) -> None:
        """Refuse a table built with another vocabulary (one sentence naming both)."""
        self.check_vocab(len(tokenizer), vocab_fingerprint(tokenizer), model_name, path)

    def check_vocab(self, size: int, fingerprint: str | None, model_name: str,
                    path: str | Path) -> None:
        """As check_tokenizer, from the vocabulary's size and `vocab_fingerprint`."""
        if self.vocab_size != size or (
            self.vocab_fingerprint and fingerprint and self.vocab_fingerprint != fingerprint
        ):
            raise PddkitError(
                f"frequency table {path} was built with tokenizer {self.tokenizer} "
                f"(vocabulary {self.vocab_size}), not the tokenizer of {model_name} "
                f"(vocabulary {size}); rebuild it with the tokenizer of {model_name} (`pddkit freq build`)"
            )


@dataclass
class _Tally:
    undecodable: int = 0
    skipped: int = 0
    documents: int = 0


def _corpus_files(paths: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.suffix in CORPUS_SUFFIXES and f.is_file())
            if not found:
                raise PddkitError(f"corpus folder {p} holds no .txt or .jsonl files")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise PddkitError(f"corpus path {p} does not exist")
    return files


def _lines(path: Path, tally: _Tally) -> Iterator[tuple[int, str]]:
    with path.open("rb") as fh:
        for no, raw in enumerate(fh, start=1):
            try:
                yield no, raw.decode("utf-8")
            except UnicodeDecodeError:
                tally.undecodable += 1
                yield no, raw.decode("utf-8", errors="replace")


def _documents(path: Path, tally: _Tally, block_chars: int) -> Iterator[str]:
    """JSONL: one document per line. Text: one document per file, streamed in blocks."""
    if path.suffix == ".jsonl":
        for no, line in _lines(path, tally):
            if not line.strip():
                continue
            text = text_of_line(line)
            if text is None:
                tally.skipped += 1
                logger.warning("%s line %d has no text; left out of the counts", path, no)
                continue
            tally.documents += 1
            yield text
        return
    tally.documents += 1
    buf = ""
    for _, line in _lines(path, tally):
        buf += line
        if len(buf) >= block_chars:
            # cut between the last non-space character and the whitespace after it: a
            # boundary of every GPT-2-style pre-tokenizer, so counts equal whole-file counts
            end = len(buf.rstrip())
            if end:
                yield buf[:end]
                buf = buf[end:]
    if buf:
        yield buf


def build_frequency_table(tokenizer, tokenizer_name: str, corpus: Iterable[str | Path],
                          batch_docs: int = 256, block_chars: int = 1 << 14) -> FrequencyTable:
    """Count token ids (add_special_tokens=False, no truncation) over text/JSONL files."""
    files = _corpus_files(corpus)
    V = len(tokenizer)
    counts = np.zeros(V, dtype=np.int64)
    tally = _Tally()
    total_bytes = sum(f.stat().st_size for f in files)
    bar = progress.bar(total=total_bytes, desc="counting tokens", unit="B")

    def flush(batch: list[str]) -> None:
        ids = tokenizer(batch, add_special_tokens=False, verbose=False)["input_ids"]
        flat = np.fromiter((t for seq in ids for t in seq), dtype=np.int64)
        if flat.size and (flat.max() >= V or flat.min() < 0):
            raise PddkitError(f"tokenizer {tokenizer_name} produced ids outside its vocabulary")
        counts[:] += np.bincount(flat, minlength=V)

    for f in files:
        batch: list[str] = []
        for doc in _documents(f, tally, block_chars):
            batch.append(doc)
            if len(batch) >= batch_docs:
                flush(batch)
                batch = []
        if batch:
            flush(batch)
        bar.update(f.stat().st_size)
    bar.close()
    if tally.undecodable:
        logger.warning("%d lines were not valid UTF-8 and were decoded with replacement",
                       tally.undecodable)
    return FrequencyTable(counts, tokenizer_name, vocab_fingerprint(tokenizer),
                          sources=[str(f) for f in files], documents=tally.documents,
                          undecodable_lines=tally.undecodable, skipped_lines=tally.skipped)
