"""`CachingBackend`: any backend behind the statistics store (lm-evaluation-harness's
`CachingLM`). Only id sequences no finished shard holds reach the wrapped backend.

A backend that can name what loading it would give (`load_key()`, the hf backend loaded
by name) also has its fingerprint, its facts and the texts' token ids remembered in the
cache's memo (cache/memo.py): a rerun whose statistics are all stored loads neither the
model nor its tokenizer.

Misses are computed in chunks of `chunk` texts, longest first (the order the hf
backend's own pass uses), and the store flushes only between chunks, so every shard holds
whole chunks. A run killed and started again with the same texts therefore recomputes the
same chunks in the same batches, and its statistics equal an uninterrupted run's bit for bit.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence, Set

from pddkit.backends.base import Backend, Capabilities, Encoded
from pddkit.cache.fingerprint import cache_fingerprint
from pddkit.cache.layout import text_key
from pddkit.cache.memo import Memo, text_digest
from pddkit.cache.store import StatsStore
from pddkit.stats import ON_REQUEST, TokenStats

logger = logging.getLogger(__name__)


def _batch_size(backend) -> int:
    """The wrapped backend's batch size when it has one (hf: its pass's), else 1."""
    size = getattr(backend, "batch_size", None)
    return size if isinstance(size, int) and size > 0 else 1


class CachingBackend:
    """`backend` with its statistics read from and written to `store`.

    `hits` and `misses` count texts per pass (the `desc` of stats_for_ids).
    """

    def __init__(self, backend: Backend, store: StatsStore, *, chunk: int | None = None) -> None:
        self.backend = backend
        self.store = store
        batch = _batch_size(backend)
        size = chunk if chunk is not None else store.flush_every
        self.chunk = max(batch, -(-max(1, size) // batch) * batch)  # a multiple of the batch size
        self.hits: dict[str, int] = {}
        self.misses: dict[str, int] = {}
        self.calls = 0  # calls of the wrapped backend's stats_for_ids
        self.memo = Memo(store.path)
        self._fingerprint: str | None = None
        self._facts: dict | None = None
        self._samples = None  # cache/samples.py SampleStore, opened when first sampling

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def capabilities(self) -> Capabilities:
        return self.backend.capabilities

    @property
    def kind(self) -> str:
        return getattr(self.backend, "kind", "?")

    def _load_key(self) -> str | None:
        key = getattr(self.backend, "load_key", None)
        return key() if key is not None else None

    def _encoding_key(self) -> str | None:
        """The memo key of encodings: the load key and the truncation."""
        key = self._load_key()
        if key is None:
            return None
        limit = getattr(self.backend, "max_length", None)
        return text_key(key, [-1 if limit is None else limit])

    def _remembered(self) -> dict | None:
        """The memo's facts of this backend (fingerprint included), computed and stored
        once per load key; None for a backend without one."""
        if self._facts is None:
            key = self._load_key()
            if key is None:
                return None
            facts = self.memo.get_facts(key)
            if not facts or not _is_digest(facts.get("fingerprint")):
                facts = {"fingerprint": self.backend.fingerprint(), **self.backend.facts()}
                self.memo.put_facts(key, facts)
            self._facts = facts
        return self._facts

    def fingerprint(self) -> str:
        """What entries are keyed by: the backend's fingerprint (remembered in the memo for a
        backend with a load key), the library versions and the statistics-code version."""
        if self._fingerprint is None:
            facts = self._remembered()
            own = facts["fingerprint"] if facts else self.backend.fingerprint()
            self._fingerprint = cache_fingerprint(own)
        return self._fingerprint

    def facts(self) -> dict | None:
        """What results.json reports about the model, or None when the backend tells nothing."""
        facts = self._remembered()
        if facts is not None:
            return {k: v for k, v in facts.items() if k != "fingerprint"}
        own = getattr(self.backend, "facts", None)
        return own() if own is not None else None

    def encode(self, texts: Sequence[str], names: Sequence[str], what: str = "statistics") -> Encoded:
        """Token ids of `texts`: remembered ones from the memo, the others from the backend."""
        key = self._encoding_key()
        if key is None:
            return self.backend.encode(texts, names, what=what)
        known = self.memo.encodings(key)
        digests = [text_digest(t) for t in texts]
        todo = [i for i, d in enumerate(digests) if d not in known]
        if todo:
            enc = self.backend.encode([texts[i] for i in todo], [names[i] for i in todo], what=what)
            spans = [self.backend.decode(s) if t else "" for s, t in zip(enc.ids, enc.truncated)]
            self.memo.put_encodings(key, [texts[i] for i in todo], enc.ids, enc.truncated, spans)
        found = [known[d] for d in digests]
        ids = [s.tolist() for s, _ in found]
        truncated = [t for _, t in found]
        fresh = set(todo)  # the backend has logged their truncation itself
        cut = sum(t for i, t in enumerate(truncated) if i not in fresh)
        if cut:
            logger.warning("%s: %d of %d texts were longer than the context and were truncated "
                           "(%s)", what, cut, len(texts), self.name)
        return Encoded(ids=ids, truncated=truncated)

    def decode(self, ids: Sequence[int]) -> str:
        key = self._encoding_key()
        span = self.memo.span(key, ids) if key is not None else None
        return span if span is not None else self.backend.decode(ids)

    def counts(self) -> dict[str, tuple[int, int]]:
        """desc -> (hits, misses) of every pass so far."""
        return {d: (self.hits.get(d, 0), self.misses.get(d, 0))
                for d in dict.fromkeys([*self.hits, *self.misses])}

    def prefix_fingerprint(self, prefix: Sequence[int]) -> str:
        """What statistics given `prefix` are keyed by: this backend's key and the prefix's ids."""
        from pddkit.cache.layout import ids_digest

        return text_key(self.fingerprint() + "given-prefix", [len(prefix)]) + ids_digest(prefix)

    def context_limit(self) -> int | None:
        return self.backend.context_limit()

    def tokenize(self, text: str) -> list[int]:
        return self.backend.tokenize(text)

    def stats_given_prefix(self, prefix: Sequence[int], ids: Sequence[Sequence[int]],
                           truncated: Sequence[bool], desc: str = "conditioned pass",
                           compute=None) -> list[TokenStats]:
        """TokenStats of each x given `prefix` (the shots of `recall` / `conrecall`), stored
        under the prefix's own key (prefix_fingerprint): a rerun with the same shots computes
        nothing."""
        compute = compute or (lambda i, t, d: self.backend.stats_given_prefix(prefix, i, t, desc=d))
        return self.stats_for_ids(ids, truncated, desc=desc, compute=compute,
                                  key=self.prefix_fingerprint(prefix))

    def stats_for_ids(self, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                      desc: str = "statistics", compute=None, key: str | None = None,
                      fields: Set[str] = frozenset()) -> list[TokenStats]:
        """TokenStats per id sequence, in order: stored ones read, the others computed and
        stored. Each carries the `truncated` flag given here. `compute(ids, truncated,
        desc)` computes the misses elsewhere (the Ray executor); default: the backend.
        `key`: what the entries are keyed by instead of the fingerprint (a prefix's).
        `fields`: optional TokenStats fields the caller's methods read (Lmax, `gapk`); an
        entry stored without one is a miss here, computed again and stored in its place;
        those computed only on request (stats.ON_REQUEST: `tempered`) are asked of the
        backend."""
        asked = frozenset(fields) & ON_REQUEST
        compute = compute or (lambda i, t, d: self.backend.stats_for_ids(
            i, t, desc=d, **({"fields": asked} if asked else {})))
        fp = key or self.fingerprint()
        seqs = [list(s) for s in ids]
        flags = [bool(t) for t in truncated]
        keys = [text_key(fp, s) for s in seqs]
        found = self.store.get(keys, fields)
        out: list[TokenStats | None] = [found.get(k) for k in keys]
        todo = [i for i, s in enumerate(out) if s is None]
        todo.sort(key=lambda i: -len(seqs[i]))  # stable: the hf pass's own order
        self.hits[desc] = self.hits.get(desc, 0) + len(keys) - len(todo)
        self.misses[desc] = self.misses.get(desc, 0) + len(todo)
        if todo:
            logger.info("%s: %d of %d texts from the cache, computing %d", desc,
                        len(keys) - len(todo), len(keys), len(todo))
        for c in range(0, len(todo), self.chunk):
            part = todo[c:c + self.chunk]
            self.calls += 1
            new = compute([seqs[i] for i in part], [flags[i] for i in part], desc)
            for i, st in zip(part, new):
                out[i] = st
            self.store.put_many(((keys[i], out[i]) for i in part), fingerprint=fp, model=self.name)
        return [_with_flag(st, flag) for st, flag in zip(out, flags)]

    def sample(self, prompts: Sequence[str], n: int, top_k: int, top_p: float,
               temperature: float, max_new_tokens: int | None, seeds: Sequence[int],
               names: Sequence[str] | None = None, compute=None):
        """Sampled continuations (backends/sampling.py): those the cache directory holds
        (cache/samples.py, keyed by this fingerprint, the prompt, the parameters and the
        seed), the others sampled by the backend (or `compute`, same arguments: the Ray
        executor) a chunk at a time and stored as each chunk is done. Counted under
        "sampling" in hits and misses."""
        from pddkit.backends.sampling import Sampled
        from pddkit.cache.samples import SampleStore, sample_key

        if self._samples is None:
            self._samples = SampleStore(self.store.path)
        compute = compute or self.backend.sample
        names = list(names) if names is not None else [f"prompt {i + 1}" for i in range(len(prompts))]
        fp = self.fingerprint()
        keys = [sample_key(fp, p, n, top_k, top_p, temperature, max_new_tokens, s)
                for p, s in zip(prompts, seeds)]
        out = [self._samples.get(k) for k in keys]
        todo = [i for i, t in enumerate(out) if t is None]
        self.hits["sampling"] = self.hits.get("sampling", 0) + len(keys) - len(todo)
        self.misses["sampling"] = self.misses.get("sampling", 0) + len(todo)
        notices: list[str] = []
        for c in range(0, len(todo), self.chunk):
            part = todo[c:c + self.chunk]
            got = compute([prompts[i] for i in part], n, top_k, top_p, temperature,
                          max_new_tokens, [seeds[i] for i in part], [names[i] for i in part])
            notices += got.notices
            for i, texts in zip(part, got.texts):
                out[i] = texts
            self._samples.put([(keys[i], out[i]) for i in part])
        return Sampled(tuple(out), tuple(dict.fromkeys(notices)))  # type: ignore[arg-type]

    def notices(self) -> list[str]:
        """One line per kind of unreadable cache file this backend skipped (their texts were
        misses, computed again), for the run's notices; none when all could be read."""
        out = []
        shards, memo = self.store.skipped, self.memo.skipped
        if self._samples is not None and self._samples.skipped:
            out.append(f"statistics cache {self.store.path}: {self._samples.skipped} unreadable "
                       "line(s) of samples.jsonl skipped; their prompts were sampled again")
        if shards:
            out.append(f"statistics cache {self.store.path}: {len(shards)} unreadable shard(s) "
                       f"skipped ({', '.join(shards[:3])}{', ...' if len(shards) > 3 else ''}); "
                       "their texts were computed again")
        if memo:
            out.append(f"statistics cache {self.store.path}: {len(memo)} unreadable memo file(s) "
                       "ignored; what they held was computed again")
        return out

    def close(self) -> None:
        """Write what is buffered (also done at exit)."""
        self.store.close()

    def __enter__(self) -> CachingBackend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _is_digest(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _with_flag(stats: TokenStats | None, truncated: bool) -> TokenStats:
    assert stats is not None
    if stats.truncated == truncated:
        return stats
    return dataclasses.replace(stats, truncated=truncated)  # the argmax ids (top) kept


def cache_fields(backend: Backend, fields: Set[str]) -> dict:
    """The keyword giving `fields` to the statistics cache (CachingBackend.stats_for_ids),
    or to a backend without one when some are computed only on request (stats.ON_REQUEST:
    `tempered`): none when no field is asked for, or none a bare backend needs told."""
    if not fields or not (getattr(backend, "store", None) or set(fields) & ON_REQUEST):
        return {}
    return {"fields": frozenset(fields)}
