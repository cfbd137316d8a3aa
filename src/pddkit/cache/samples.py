"""Sampled continuations in the statistics cache directory (`samia`): one JSON line per
prompt, keyed by the backend's cache fingerprint, the prompt, the sampling parameters and
the seed, appended and flushed after each chunk of prompts (CachingBackend.sample), so that
a run killed while sampling resumes without sampling again the chunks it finished. A line cut by
the kill (or otherwise unreadable) is skipped and counted; its prompt is sampled again."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pddkit.errors import PddkitError

FILE_NAME = "samples.jsonl"


def sample_key(fingerprint: str, prompt: str, n: int, top_k: int, top_p: float,
               temperature: float, max_new_tokens: int | None, seed: int) -> str:
    blob = json.dumps(["samples", 1, fingerprint, prompt, int(n), int(top_k), float(top_p),
                       float(temperature), max_new_tokens, int(seed)])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class SampleStore:
    """key -> continuations, read once from `directory`/samples.jsonl and appended to."""

    def __init__(self, directory: str | os.PathLike, file_name: str = FILE_NAME) -> None:
        self.path = Path(directory) / file_name
        self.skipped = 0  # unreadable lines
        self._known: dict[str, tuple[str, ...]] = {}
        if self.path.is_file():
            with open(self.path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                        key, texts = row["key"], row["texts"]
                        if not isinstance(key, str) or not all(isinstance(t, str) for t in texts):
                            raise ValueError
                    except (ValueError, KeyError, TypeError):
                        self.skipped += 1
                        continue
                    self._known[key] = tuple(texts)

    def get(self, key: str) -> tuple[str, ...] | None:
        return self._known.get(key)

    def put(self, rows: list[tuple[str, tuple[str, ...]]]) -> None:
        """Append `rows` (key, continuations) and flush them to disk now."""
        if not rows:
            return
        lines = "".join(json.dumps({"key": k, "texts": list(t)}, ensure_ascii=False) + "\n"
                        for k, t in rows)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                if f.tell() > 0:  # a line cut by a kill must not swallow the next one
                    f.write("\n")
                f.write(lines)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise PddkitError(f"cannot write to cache directory {self.path.parent}: "
                              f"{e.strerror or e}") from None
        self._known.update((k, tuple(t)) for k, t in rows)
