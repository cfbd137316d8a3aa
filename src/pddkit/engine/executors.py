"""Executors: where the statistics passes run. `LocalExecutor` runs them in this process;
`RayExecutor` (executors_ray.py, the only module that imports ray) spreads them over
Ray actors. Both return TokenStats in the order of the texts (`token_stats`) or of token-id
sequences (`id_stats`: `infill`'s variants), and run `samia`'s sampling
(`sample`) where they run passes. `prepare(backend)` is called
on every backend as it is opened, before anything asks it for facts or a fingerprint.

`fields` (token_stats): the optional TokenStats fields the pass's methods read (Lmax,
`gapk`; tempered, `acmia`). The statistics cache takes them (an entry stored without one is
computed again); a backend computes every field it can on every call, except those
computed only on request (stats.ON_REQUEST), which it is given."""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import Protocol

from pddkit.backends.base import Backend
from pddkit.backends.caching import cache_fields
from pddkit.stats import TokenStats


class Executor(Protocol):
    def prepare(self, backend: Backend) -> Backend:
        """`backend`, made ready to run where this executor runs passes."""

    def token_stats(self, backend: Backend, texts: Sequence[str], names: Sequence[str],
                    desc: str, fields: Set[str] = frozenset()) -> list[TokenStats]:
        """TokenStats of each text under `backend`, in order."""

    def id_stats(self, backend: Backend, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                 names: Sequence[str], desc: str) -> list[TokenStats]:
        """TokenStats of token-id sequences under `backend`, in order (`infill`'s variants:
        ids, not texts; `names` name each in errors)."""

    def conditioned_stats(self, backend: Backend, prefix: Sequence[int],
                          ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                          names: Sequence[str], desc: str) -> list[TokenStats]:
        """TokenStats of each x given `prefix` ([start] + P + x, x's positions: recall's shots)."""

    def sample(self, backend: Backend, prompts: Sequence[str], names: Sequence[str], n: int,
               top_k: int, top_p: float, temperature: float, max_new_tokens: int | None,
               seeds: Sequence[int]):
        """`n` continuations of each prompt (backends.sampling.Sampled), seeded per prompt."""

    def close(self, failed: bool = False) -> None:
        """The run's passes are over (`failed`: one raised): free what runs them."""


class LocalExecutor:
    """Encode here, one batched statistics pass here."""

    name = "local"

    def prepare(self, backend: Backend) -> Backend:
        return backend

    def token_stats(self, backend: Backend, texts: Sequence[str], names: Sequence[str],
                    desc: str, fields: Set[str] = frozenset()) -> list[TokenStats]:
        enc = backend.encode(texts, names, what=desc)
        return backend.stats_for_ids(enc.ids, enc.truncated, desc=desc,
                                     **cache_fields(backend, fields))

    def id_stats(self, backend: Backend, ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                 names: Sequence[str], desc: str) -> list[TokenStats]:
        return backend.stats_for_ids(ids, truncated, desc=desc)

    def conditioned_stats(self, backend: Backend, prefix: Sequence[int],
                          ids: Sequence[Sequence[int]], truncated: Sequence[bool],
                          names: Sequence[str], desc: str) -> list[TokenStats]:
        return backend.stats_given_prefix(prefix, ids, truncated, desc=desc)

    def sample(self, backend: Backend, prompts: Sequence[str], names: Sequence[str], n: int,
               top_k: int, top_p: float, temperature: float, max_new_tokens: int | None,
               seeds: Sequence[int]):
        return backend.sample(prompts, n, top_k, top_p, temperature, max_new_tokens, seeds,
                              names=names)

    def close(self, failed: bool = False) -> None:
        """Nothing to free: the backends are the run's (closed by it)."""


def make_executor(config) -> Executor:
    """The executor config.engine names: "local", or "ray" (executors_ray.py)."""
    if config.engine == "local":
        return LocalExecutor()
    if config.engine == "ray":
        from pddkit.engine.executors_ray import RayExecutor

        return RayExecutor(address=config.ray_address, actors=config.actors,
                           gpus_per_actor=config.gpus_per_actor)
    from pddkit.errors import PddkitError

    raise PddkitError(f"unknown `engine` {config.engine!r}; known: local, ray")
