"""What a cached rerun needs besides the statistics, so that it loads no model and fits
no classifier: kept in `<cache>/memo/` beside the statistics shards.

- `facts`: per *load key* (a model directory's files by name, size and mtime, the load
  options and the library versions: see backends/hf.py `load_key`), the model's
  fingerprint and what results.json says about it (tokenizer, vocabulary, dtype...). The
  files' stat signature is the memo's validity: any file that changes changes the key.
- `encodings`: per load key and `max_length`, the token ids of each text (by the sha256 of
  the text), so a rerun does not even load the tokenizer. The statistics themselves stay
  keyed by the ids (cache/store.py), so a stale memo could only cause a miss, never a
  wrong hit: a changed tokenizer changes the load key.
- `results`: small deterministic results keyed by the sha256 of everything they depend on
  (the blind baseline's out-of-fold scores).

Every file is written to a temporary name and renamed; unreadable files are ignored
(the memo only saves time).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pddkit.cache.store import ids_digest, write_atomic

logger = logging.getLogger(__name__)

MEMO = "memo"


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Memo:
    """The `memo/` folder of a statistics cache directory."""

    def __init__(self, cache_dir: Path) -> None:
        self.path = Path(cache_dir) / MEMO
        self._encodings: dict[str, dict[str, tuple[np.ndarray, bool]]] = {}
        self._spans: dict[str, dict[str, str]] = {}  # key -> ids digest -> decoded text

    # facts: one JSON document per key
    def get_facts(self, key: str) -> dict | None:
        try:
            data = json.loads((self.path / "facts" / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
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
                    with np.load(shard, allow_pickle=False) as z:
                        digests, lengths = z["texts"].astype(str), z["lengths"]
                        ids, cut = z["ids"], z["truncated"]
                        spans = z["spans"] if "spans" in z.files else np.full(len(cut), "")
                except (OSError, ValueError, KeyError, EOFError):
                    continue
                ends = np.cumsum(lengths)  # [N]
                decoded = self._spans.setdefault(key, {})
                for d, end, n, t, span in zip(digests, ends, lengths, cut, spans):
                    found.setdefault(d, (ids[end - n:end], bool(t)))
                    if t:
                        decoded.setdefault(ids_digest(ids[end - n:end]), str(span))
            self._encodings[key] = found
        return self._encodings[key]

    def put_encodings(self, key: str, texts: Sequence[str], ids: Sequence[Sequence[int]],
                      truncated: Sequence[bool], spans: Sequence[str] | None = None) -> None:
        """Store the encodings of `texts`; `spans`: the decoded text of each truncated one
        ("" for the others), so a rerun needs no tokenizer to decode them either."""
        if not texts:
            return
        digests = [text_digest(t) for t in texts]
        arrays = {"texts": np.array(digests, dtype="S64"),
                  "lengths": np.array([len(s) for s in ids], dtype=np.int64),
                  "ids": np.concatenate([np.asarray(s, dtype=np.int64) for s in ids]),
                  "truncated": np.array(truncated, dtype=bool),
                  "spans": np.array(list(spans) if spans is not None else [""] * len(texts),
                                    dtype=str)}
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        name = f"{key}-{os.getpid()}-{secrets.token_hex(6)}.npz"
        self._write(self.path / "encodings" / name, lambda f: f.write(buf.getvalue()))
        known = self.encodings(key)
        for d, s, t in zip(digests, ids, truncated):
            known.setdefault(d, (np.asarray(s, dtype=np.int64), bool(t)))
        decoded = self._spans.setdefault(key, {})
        for s, span, t in zip(ids, arrays["spans"], truncated):
            if t:
                decoded.setdefault(ids_digest(s), str(span))

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
        except (OSError, ValueError, KeyError, EOFError):
            return None
        return arrays, meta

    def put_result(self, kind: str, key: str, arrays: dict[str, np.ndarray], meta: dict) -> None:
        buf = io.BytesIO()
        np.savez(buf, _meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
        self._write(self.path / kind / f"{key}.npz", lambda f: f.write(buf.getvalue()))

    def _write(self, path: Path, write) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, write)
        except OSError as e:  # the memo only saves time
            logger.info("could not write %s: %s", path, e)


def result_key(kind: str, version: int, parts: dict) -> str:
    """sha256 of a result's kind, version and inputs (JSON-able; texts as their digests)."""
    text = json.dumps({"kind": kind, "version": version, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
