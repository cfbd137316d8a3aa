"""What a cached rerun needs besides the statistics, so that it loads no model and fits
no classifier: kept in `<cache>/memo/` beside the statistics shards.

- `facts`: per *load key* (a model directory's files by name, size and mtime, the load
  options and the library versions: see backends/hf.py `load_key`), the model's
  fingerprint and what results.json says about it (tokenizer, vocabulary, dtype...). The
  files' stat signature is the memo's validity: any file that changes changes the key.
- `encodings`: per load key and `max_length`, the token ids of each text (by the sha256 of
  the text), so a rerun does not even load the tokenizer. The statistics themselves stay
  keyed by the ids (cache/store.py), so a stale memo could only cause a miss, never a
  wrong hit: a changed tokenizer changes the load key. The decoded span of each truncated
  text is kept beside its ids as UTF-8 bytes, concatenated, with offsets (a text that
  was not cut costs one offset); files written before, with fixed-width spans, are read too.
- `results`: small deterministic results keyed by the sha256 of everything they depend on
  (the blind baseline's out-of-fold scores).

Every file is written to a temporary name and renamed; unreadable files are ignored
(the memo only saves time) and counted in `Memo.skipped`.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import secrets
import zipfile
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import numpy as np

from pddkit.cache.layout import ids_digest, write_atomic

logger = logging.getLogger(__name__)

MEMO = "memo"
_UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Memo:
    """The `memo/` folder of a statistics cache directory."""

    def __init__(self, cache_dir: Path) -> None:
        self.path = Path(cache_dir) / MEMO
        self._encodings: dict[str, dict[str, tuple[np.ndarray, bool]]] = {}
        self._spans: dict[str, dict[str, str]] = {}  # key -> ids digest -> decoded text
        self.skipped: list[str] = []  # files that could not be read (ignored)

    # facts: one JSON document per key
    def get_facts(self, key: str) -> dict | None:
        try:
            data = json.loads((self.path / "facts" / f"{key}.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            self._skip(self.path / "facts" / f"{key}.json", e)
            return None
        return data if isinstance(data, dict) else None

    def put_facts(self, key: str, facts: dict) -> None:
        body = json.dumps(facts, sort_keys=True).encode("utf-8")
        self._write(self.path / "facts" / f"{key}.json", lambda f: f.write(body))

    # encodings: append-only shards per key
    def encodings(self, key: str) -> dict[str, tuple[np.ndarray, bool]]:
        """text sha256 -> (ids [T] int64, truncated) of every stored encoding under `key`."""
        if key not in self._encodings:
            found: dict[str, tuple[np.ndarray, bool]] = {}
            for shard in sorted((self.path / "encodings").glob(f"{key}-*.npz")):
                try:
                    digests, lengths, ids, cut, spans = _read_encodings(shard)
                except _UNREADABLE as e:
                    self._skip(shard, e)
                    continue
                ends = np.cumsum(lengths)  # [N]
                decoded = self._spans.setdefault(key, {})
                for d, end, n, t, span in zip(digests, ends, lengths, cut, spans):
                    found.setdefault(d, (ids[end - n:end], bool(t)))
                    if t:
                        decoded.setdefault(ids_digest(ids[end - n:end]), span)
            self._encodings[key] = found
        return self._encodings[key]

    def put_encodings(self, key: str, texts: Sequence[str], ids: Sequence[Sequence[int]],
                      truncated: Sequence[bool], spans: Sequence[str] | None = None) -> None:
        """Store the encodings of `texts`; `spans`: the decoded text of each truncated one
        ("" for the others), so a rerun needs no tokenizer to decode them either."""
        if not texts:
            return
        digests = [text_digest(t) for t in texts]
        spans = list(spans) if spans is not None else [""] * len(texts)
        encoded = [s.encode("utf-8", "surrogatepass") for s in spans]
        arrays = {"texts": np.array(digests, dtype="S64"),
                  "lengths": np.array([len(s) for s in ids], dtype=np.int64),
                  "ids": np.concatenate([np.asarray(s, dtype=np.int64) for s in ids]),
                  "truncated": np.array(truncated, dtype=bool),
                  "span_bytes": np.frombuffer(b"".join(encoded), dtype=np.uint8),  # [bytes]
                  "span_offsets": np.concatenate(  # [N+1]
                      [[0], np.cumsum([len(b) for b in encoded])]).astype(np.int64)}
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        name = f"{key}-{os.getpid()}-{secrets.token_hex(6)}.npz"
        self._write(self.path / "encodings" / name, lambda f: f.write(buf.getvalue()))
        known = self.encodings(key)
        for d, s, t in zip(digests, ids, truncated):
            known.setdefault(d, (np.asarray(s, dtype=np.int64), bool(t)))
        decoded = self._spans.setdefault(key, {})
        for s, span, t in zip(ids, spans, truncated):
            if t:
                decoded.setdefault(ids_digest(s), span)

    def span(self, key: str, ids: Sequence[int]) -> str | None:
        """The remembered decoding of a truncated id sequence under `key`, or None."""
        self.encodings(key)
        return self._spans.get(key, {}).get(ids_digest(ids))

    # results: one .npz per key (arrays) with a JSON sidecar inside
    def get_result(self, kind: str, key: str) -> tuple[dict[str, np.ndarray], dict] | None:
        try:
            with np.load(self.path / kind / f"{key}.npz", allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files if k != "_meta"}
                meta = json.loads(str(z["_meta"]))
        except FileNotFoundError:
            return None
        except _UNREADABLE as e:
            self._skip(self.path / kind / f"{key}.npz", e)
            return None
        return arrays, meta

    def put_result(self, kind: str, key: str, arrays: dict[str, np.ndarray], meta: dict) -> None:
        buf = io.BytesIO()
        np.savez(buf, _meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
        self._write(self.path / kind / f"{key}.npz", lambda f: f.write(buf.getvalue()))

    def _skip(self, path: Path, error: Exception) -> None:
        logger.warning("ignoring unreadable cache memo file %s: %s", path, error)
        self.skipped.append(str(path))

    def _write(self, path: Path, write) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, write)
        except OSError as e:  # the memo only saves time
            logger.info("could not write %s: %s", path, e)


def _read_encodings(shard: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(text digests [N] str, lengths [N], ids [sum lengths], truncated [N], spans) of one
    encodings file; ValueError when its arrays do not fit together."""
    with np.load(shard, allow_pickle=False) as z:
        digests, lengths = z["texts"].astype(str), z["lengths"]
        ids, cut = z["ids"], z["truncated"]
        if "span_bytes" in z.files:
            raw, offsets = z["span_bytes"].tobytes(), z["span_offsets"]
            if offsets.shape != (len(cut) + 1,) or int(offsets[-1]) != len(raw):
                raise ValueError("its span offsets do not fit its spans")
            spans = [raw[a:b].decode("utf-8", "surrogatepass")
                     for a, b in pairwise(offsets.tolist())]
        elif "spans" in z.files:  # written before: fixed-width unicode
            spans = [str(x) for x in z["spans"]]
        else:
            spans = [""] * len(cut)
    if not (len(digests) == len(lengths) == len(cut) == len(spans)) or int(lengths.sum()) != len(ids) \
            or bool(np.any(lengths < 0)):
        raise ValueError("its arrays do not fit together")
    return digests, lengths, ids, cut, spans


def result_key(kind: str, version: int, parts: dict) -> str:
    """sha256 of a result's kind, version and inputs (JSON-able; texts as their digests)."""
    text = json.dumps({"kind": kind, "version": version, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
