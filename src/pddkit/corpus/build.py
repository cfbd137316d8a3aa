"""Build an infini-gram index of a corpus: pddkit reads and tokenizes the documents (its
formats, its normaliser, the model's tokenizer) into infini-gram's v4 shard files, then
the `infini-gram` package's own indexing binary (`rust_indexing`: make-part, merge,
concat, as its indexing.py drives it) builds each shard's suffix array.

Split like infini-gram's indexing: document g (in file order) goes to shard g % shards;
worker I of W writes the shards s with s % W == I, so W processes or machines each build
their part of one index. Resumable: tokenizing checkpoints its files' lengths and the
next document every `checkpoint_mb` of text; a shard whose suffix array is written is
not rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pddkit.corpus.documents import ReadTally, corpus_files, read_documents
from pddkit.corpus.encode import encode_texts, vocab_size_of
from pddkit.corpus.layout import DTYPES, manifest_name, progress_name, shard_path, token_dtype_for
from pddkit.corpus.normalize import normalize_text
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

_KINDS = ("tokenized", "offset", "metadata", "metaoff")
HACK = 100_000  # bytes each make-part job reads past its range (infini-gram's indexing.py)


@dataclass(frozen=True)
class IndexSettings:
    """How to index: `normalize` (normalize.py) is recorded in the manifest and applied to
    every text checked against the index."""

    text_field: str = "text"
    normalize: bool = True
    shards: int = 1
    workers: int = 1
    worker_id: int = 0
    batch_docs: int = 256
    checkpoint_mb: int = 64
    threads: int | None = None  # suffix-array jobs at once [all cores]
    memory_gb: int = 4  # memory the suffix-array jobs may use

    def check(self) -> None:
        if self.shards < 1 or self.workers < 1:
            raise PddkitError("`shards` and `workers` must be at least 1")
        if self.shards % self.workers:
            raise PddkitError(f"`shards` ({self.shards}) must be a multiple of `workers` "
                              f"({self.workers}): each worker builds shards/workers shards")
        if not 0 <= self.worker_id < self.workers:
            raise PddkitError(f"`worker_id` must be in 0..{self.workers - 1}")
        if self.batch_docs < 1 or self.memory_gb < 1:
            raise PddkitError("`batch_docs` and `memory_gb` must be at least 1")
        if self.checkpoint_mb < 1:
            raise PddkitError("checkpoint_mb must be at least 1")

    @property
    def my_shards(self) -> list[int]:
        return list(range(self.worker_id, self.shards, self.workers))


def build_index(corpus: list[str | Path], tokenizer, tokenizer_name: str, output: str | Path,
                settings: IndexSettings = IndexSettings()) -> dict:
    """Index `corpus` (files or folders) into `output`; returns the manifest written."""
    from pddkit.cache.fingerprint import tokenizer_digest

    settings.check()
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    tally = ReadTally()
    files = corpus_files(corpus, tally)
    hashes = [_file_entry(f.path, f.name) for f in files]
    vocab = vocab_size_of(tokenizer)
    tok = {"name": tokenizer_name, "fingerprint": tokenizer_digest(tokenizer), "vocab_size": vocab,
           "eos_token_id": _eos(tokenizer)}
    # what decides the index's bytes (not batch sizes, checkpoints, threads or memory)
    kept = ("text_field", "normalize", "shards", "workers", "worker_id")
    plan = {"settings": {k: v for k, v in asdict(settings).items() if k in kept},
            "tokenizer": tok, "files": hashes, "token_dtype": token_dtype_for(vocab)}
    manifest_path = out / manifest_name(settings.worker_id, settings.workers)
    if manifest_path.exists():
        done = json.loads(manifest_path.read_text(encoding="utf-8"))
        if done.get("plan") == plan:
            logger.info("%s is already built from this corpus; nothing to do", out)
            return done
        raise PddkitError(f"{out} already holds an index built differently ({manifest_path.name}); "
                          "pick another output folder or remove it")
    progress_path = out / progress_name(settings.worker_id, settings.workers)
    state = _resume_state(progress_path, plan, out, settings)
    started = time.perf_counter()
    if not state["tokenized"]:
        _tokenize(files, tokenizer, out, settings, plan, state, tally, progress_path)
    for key, value in state["read"].items():  # read by this run or the one it resumes
        setattr(tally, key, value)
    for s in settings.my_shards:
        if not shard_path(out, "table", s).exists():
            _suffix_array(out, s, DTYPES[plan["token_dtype"]], settings)
    manifest = _manifest(out, plan, state, tally, settings, time.perf_counter() - started)
    tmp = manifest_path.with_suffix(".json.partial")
    tmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    tmp.replace(manifest_path)
    progress_path.unlink(missing_ok=True)
    return manifest


def _eos(tokenizer) -> int:
    eos = getattr(tokenizer, "eos_token_id", None)
    return int(eos) if eos is not None else 0


def _file_entry(path: Path, name: str) -> dict:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return {"name": name, "size": path.stat().st_size, "sha256": h.hexdigest()}


def _resume_state(progress_path: Path, plan: dict, out: Path, settings: IndexSettings) -> dict:
    fresh = {"plan": plan, "next_document": 0, "tokenized": False,
             "sizes": {str(s): dict.fromkeys(_KINDS, 0) for s in settings.my_shards},
             "documents": {str(s): 0 for s in settings.my_shards},
             "tokens": {str(s): 0 for s in settings.my_shards}}
    if not progress_path.exists():
        clash = [p.name for s in settings.my_shards for k in ("tokenized", "table")
                 if (p := shard_path(out, k, s)).exists()]
        if clash:
            raise PddkitError(f"{out} already holds {clash[0]} without pddkit's record of "
                              "building it; pick an empty output folder")
        _save(progress_path, fresh)  # before the first byte: a kill at once still resumes
        return fresh
    state = json.loads(progress_path.read_text(encoding="utf-8"))
    if state.get("plan") != plan:
        raise PddkitError(f"{out} holds an interrupted index of another corpus, tokenizer or "
                          f"settings ({progress_path.name}); rerun with the same ones or pick "
                          "another output folder")
    logger.info("resuming %s at document %d", out, state["next_document"])
    for s, sizes in state["sizes"].items():
        for kind, size in sizes.items():
            p = shard_path(out, kind, int(s))
            if p.exists() and p.stat().st_size > size and not state["tokenized"]:
                with p.open("r+b") as fh:  # drop what was written after the checkpoint
                    fh.truncate(size)
    return state


def _save(progress_path: Path, state: dict) -> None:
    tmp = progress_path.with_suffix(".partial")
    tmp.write_text(json.dumps(state), encoding="utf-8")
    tmp.replace(progress_path)


def _tokenize(files, tokenizer, out: Path, settings: IndexSettings, plan: dict, state: dict,
              tally: ReadTally, progress_path: Path) -> None:
    from pddkit.progress import bar

    dtype = np.dtype("<u2" if plan["token_dtype"] == "u16" else "<u4")
    sep = b"\xff" * dtype.itemsize
    mine = set(settings.my_shards)
    handles = {s: {k: shard_path(out, k, s).open("ab") for k in _KINDS} for s in mine}
    start = state["next_document"]
    batch: list[tuple[int, str, int, str]] = []  # (document number, file, line, text)
    since_checkpoint = 0
    g = 0

    def flush() -> None:
        texts = [normalize_text(t) if settings.normalize else t for _, _, _, t in batch]
        for (doc, name, line, _), ids in zip(batch, encode_texts(tokenizer, texts)):
            s = doc % settings.shards
            data = sep + np.asarray(ids, dtype=dtype).tobytes()
            meta = (json.dumps({"path": name, "linenum": line}) + "\n").encode("utf-8")
            h, sizes = handles[s], state["sizes"][str(s)]
            h["offset"].write(np.uint64(sizes["tokenized"]).tobytes())
            h["tokenized"].write(data)
            h["metaoff"].write(np.uint64(sizes["metadata"]).tobytes())
            h["metadata"].write(meta)
            sizes["tokenized"] += len(data)
            sizes["metadata"] += len(meta)
            sizes["offset"] += 8
            sizes["metaoff"] += 8
            state["documents"][str(s)] += 1
            state["tokens"][str(s)] += len(ids)
        state["next_document"] = batch[-1][0] + 1
        batch.clear()

    def checkpoint() -> None:
        for h in handles.values():
            for fh in h.values():
                fh.flush()
                os.fsync(fh.fileno())
        _save(progress_path, state)

    total = sum(f["size"] for f in plan["files"])
    with bar(total, f"tokenizing {out.name}", unit="B") as progress:
        for f, entry in zip(files, plan["files"]):
            for line, text in read_documents(f, settings.text_field, tally):
                doc, g = g, g + 1
                if doc < start or doc % settings.shards not in mine:
                    continue
                batch.append((doc, f.name, line, text))
                since_checkpoint += len(text)
                if len(batch) >= settings.batch_docs:
                    flush()
                    if since_checkpoint >= settings.checkpoint_mb << 20:
                        checkpoint()
                        since_checkpoint = 0
            progress.update(entry["size"])
        if batch:
            flush()
    state["next_document"] = g
    state["tokenized"] = True
    # what reading left out, kept for a rerun that resumes after tokenizing
    state["read"] = {"skipped_lines": tally.skipped_lines, "skipped_examples": tally.skipped_examples,
                     "replaced_lines": tally.replaced_lines, "replaced_examples": tally.replaced_examples}
    checkpoint()
    for h in handles.values():
        for fh in h.values():
            fh.close()


def rust_indexing() -> Path:
    """The suffix-array binary the infini-gram package ships."""
    try:
        import infini_gram
    except ImportError:
        raise PddkitError("corpus indexes need the infini-gram package: "
                          "pip install -e '.[corpus]'") from None
    path = Path(infini_gram.__file__).parent / "rust_indexing"
    if not path.exists():
        raise PddkitError(f"the infini-gram package has no indexing binary at {path} "
                          "(its wheels ship one for Linux x86-64)")
    return path


def _suffix_array(out: Path, s: int, width: int, settings: IndexSettings) -> None:
    """make-part over `threads` byte ranges (batched to fit `memory_gb`), merge, concat: the
    steps and arithmetic of infini-gram's indexing.py build_sa."""
    binary = rust_indexing()
    ds = shard_path(out, "tokenized", s)
    size = ds.stat().st_size
    if size == 0:
        raise PddkitError(f"shard {s} of {out} holds no documents: use fewer shards")
    ratio = math.ceil(math.log2(size) / 8)
    cpus = settings.threads or os.cpu_count() or 1
    batches = 1
    while batches * ((settings.memory_gb << 30) // (12 if width == 1 else 8)) < size:
        batches *= 2
    jobs = batches * cpus
    while jobs > 1 and size // jobs < 2 * HACK:
        jobs -= 1  # each part reads HACK bytes past its range: parts must be longer than that
    part = size // jobs
    part += (width - part % width) % width
    tmp = out / f".sa-{s}"
    shutil.rmtree(tmp, ignore_errors=True)
    parts, merged = tmp / "parts", tmp / "merged"
    parts.mkdir(parents=True)
    merged.mkdir()
    common = _args(data_file=ds, ratio=ratio, token_width=width)
    t0 = time.perf_counter()
    for first in range(0, jobs, cpus):
        running = []
        for i in range(first, min(first + cpus, jobs)):
            lo, hi = i * part, min((i + 1) * part + HACK, size)
            if lo >= size:
                continue
            running.append(subprocess.Popen(
                [str(binary), "make-part", *common,
                 *_args(parts_dir=parts, start_byte=lo, end_byte=hi)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for p in running:
            _check(p.communicate()[1], p.returncode, "make-part", s)
    table = shard_path(out, "table", s)
    partial = table.with_name(table.name + ".partial")
    for step, args in (("merge", _args(parts_dir=parts, merged_dir=merged, hacksize=HACK)),
                       ("concat", _args(merged_dir=merged, merged_file=partial))):
        # a tiny shard: one thread (with more, merge may write fewer files than concat reads)
        threads = cpus if size >= 1 << 20 else 1
        p = subprocess.run([str(binary), step, *common, *args, *_args(num_threads=threads)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _check(p.stderr, p.returncode, step, s)
    partial.replace(table)
    shutil.rmtree(tmp)
    logger.info("suffix array of shard %d (%d bytes) in %.1f s", s, size, time.perf_counter() - t0)


def _args(**values) -> list[str]:
    """rust_indexing's own command-line arguments (its flags are its names, dashed)."""
    return [a for k, v in values.items() for a in ("-" * 2 + k.replace("_", "-"), str(v))]


def _check(stderr: bytes, code: int, step: str, s: int) -> None:
    if code:
        lines = (stderr or b"").decode("utf-8", "replace").strip().splitlines()
        said = [x for x in lines if "panicked" in x or "rror" in x] or lines[-1:] or ["no message"]
        raise PddkitError(f"infini-gram's {step} failed on shard {s} (exit {code}): {said[-1]}")


def _manifest(out: Path, plan: dict, state: dict, tally: ReadTally, settings: IndexSettings,
              seconds: float) -> dict:
    from pddkit.version import __version__

    shard_files = {
        str(s): {k: shard_path(out, k, s).stat().st_size for k in ("tokenized", "table", "offset")}
        | {"documents": state["documents"][str(s)], "tokens": state["tokens"][str(s)]}
        for s in settings.my_shards}
    return {
        "format": "infini-gram v4", "pddkit_version": __version__, "plan": plan,
        "tokenizer": plan["tokenizer"], "token_dtype": plan["token_dtype"],
        "normalize": settings.normalize, "text_field": settings.text_field,
        "shards": settings.shards, "workers": settings.workers, "worker_id": settings.worker_id,
        "files": plan["files"], "shard_files": shard_files,
        "documents": sum(state["documents"].values()), "tokens": sum(state["tokens"].values()),
        "skipped_files": [{"name": n, "why": w} for n, w in tally.skipped_files],
        "skipped_lines": tally.skipped_lines, "skipped_examples": tally.skipped_examples,
        "replaced_lines": tally.replaced_lines, "replaced_examples": tally.replaced_examples,
        "seconds_this_run": round(seconds, 3),
    }
