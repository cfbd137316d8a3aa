"""One sandbox sweep run with several seeds, aggregated: each method's AUC per sweep value
as the mean, standard deviation and range over the seeds, and whether a change between
two values holds on every seed.

`seed` (SandboxConfig) seeds everything a run draws: the split of documents and of
benchmark examples, the tokenizer's and both models' training texts order, the models'
initial weights, the Poisson copies of contaminants and the windows. Several sandbox
folders of one sweep that differ only in `seed` are aggregated here from their
summary.json content.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pddkit.errors import PddkitError


@dataclass(frozen=True)
class Spread:
    """One method's AUC at one sweep value over seeds."""

    values: tuple[float, ...]  # in the order of `seeds`

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values)

    @property
    def sd(self) -> float:
        """Sample standard deviation (n - 1); 0.0 for a single seed."""
        n = len(self.values)
        if n < 2:
            return 0.0
        m = self.mean
        return math.sqrt(sum((v - m) ** 2 for v in self.values) / (n - 1))

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)


@dataclass(frozen=True)
class SeedSweep:
    """A sweep aggregated over seeds: auc[value][method] is that cell's Spread."""

    knob: str | None  # None: a single run per seed
    values: tuple[str, ...]  # the sweep values as written in the run names ("1", "5e-4")
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    auc: dict  # value -> method -> Spread
    key: str  # what was evaluated: "contamination" or a window length ("32")

    def change(self, method: str, first: str, last: str) -> str:
        """"rises" / "falls" when the AUC at `last` is above / below the AUC at `first` on
        every seed (paired by seed), else "mixed"."""
        a, b = self.auc[first][method].values, self.auc[last][method].values
        if all(y > x for x, y in zip(a, b)):
            return "rises"
        if all(y < x for x, y in zip(a, b)):
            return "falls"
        return "mixed"

    def ranges_apart(self, method: str, first: str, last: str) -> bool:
        """The two values' ranges over seeds do not overlap (a stricter test than paired)."""
        a, b = self.auc[first][method], self.auc[last][method]
        return a.high < b.low or b.high < a.low

    def to_json(self) -> dict:
        return {"knob": self.knob, "values": list(self.values), "methods": list(self.methods),
                "seeds": list(self.seeds), "key": self.key,
                "auc": {v: {m: {"mean": s.mean, "sd": s.sd, "min": s.low, "max": s.high,
                                "per_seed": list(s.values)}
                            for m, s in self.auc[v].items()} for v in self.values}}


def _cells(summary: dict, key: str) -> dict[str, dict[str, float]]:
    out = {}
    for run in summary["runs"]:
        value = run["name"].split("=", 1)[1] if summary.get("sweep") else run["name"]
        entry = run.get("contamination") if key == "contamination" else run["windows"].get(key)
        if entry is None:
            raise PddkitError(f"run {run['name']} has no {key} evaluation")
        out[value] = dict(entry["auc"])
    return out


def aggregate(summaries: Sequence[dict], key: str = "contamination") -> SeedSweep:
    """Aggregate sandbox summaries (summary.json content) of one sweep over their seeds.
    They must differ in `seed` only, each seed once; a method or value missing from one
    of them is one sentence, never dropped."""
    if not summaries:
        raise PddkitError("no sandbox summaries to aggregate")
    seeds = tuple(int(s["config"]["seed"]) for s in summaries)
    if len(set(seeds)) != len(seeds):
        raise PddkitError(f"the summaries' seeds repeat ({', '.join(map(str, seeds))}): each "
                          "seed must be given once")
    base = {k: v for k, v in summaries[0]["config"].items() if k != "seed"}
    for s, seed in zip(summaries[1:], seeds[1:]):
        other = {k: v for k, v in s["config"].items() if k != "seed"}
        diff = sorted(k for k in base.keys() | other.keys() if base.get(k) != other.get(k))
        if diff or s.get("sweep") != summaries[0].get("sweep"):
            raise PddkitError(f"the sandbox of seed {seed} differs from that of seed {seeds[0]} "
                              f"in more than the seed ({', '.join(diff) or 'sweep'})")
    cells = [_cells(s, key) for s in summaries]
    values = tuple(cells[0])
    methods = tuple(next(iter(cells[0].values())))
    for c, seed in zip(cells, seeds):
        for v in values:
            missing = [m for m in methods if m not in c.get(v, {})]
            if v not in c or missing:
                raise PddkitError(f"the sandbox of seed {seed} has no AUC for "
                                  f"{', '.join(missing) or 'any method'} at {v}")
    sweep = summaries[0].get("sweep")
    auc = {v: {m: Spread(tuple(float(c[v][m]) for c in cells)) for m in methods} for v in values}
    return SeedSweep(None if not sweep else sweep["knob"], values, methods, seeds, auc, key)
