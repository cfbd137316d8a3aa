"""Method registry: a method is a pure function `fn(obs, *, hyper=default) -> float`.

Higher score = more likely a member (SPEC section 1). A method declares the inputs it
needs beyond the target model's statistics; the runner computes the union of all needs
once.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from pddkit.errors import PddkitError
from pddkit.params import bind_params, parse_spec, split_spec_list
from pddkit.registry import Registry
from pddkit.stats import Observation

logger = logging.getLogger(__name__)


class Need(str, Enum):
    """What a method needs beyond the target model's L, H, M2."""

    LOWERCASE = "lowercase pass"  # a second target pass over text.lower()
    REFERENCE = "reference model"  # --ref-model
    FREQUENCY = "frequency table"  # --freq
    NEIGHBORS = "masked LM for neighbours"  # --mask-model (neighbor)
    PROBE = "probe"  # --probe-data or --probe-load

    @property
    def option(self) -> str:
        return {"lowercase pass": "", "reference model": "--ref-model",
                "frequency table": "--freq", "masked LM for neighbours": "--mask-model",
                "probe": "--probe-data or --probe-load"}[self.value]


# what a backend must give for a method that `requires` it (backends.base.Capabilities
# field names; plain strings so methods never import backends)
REQUIREMENTS = {
    "full_distribution": "the full next-token distribution (H, M2), not only token log-probabilities",
    "hidden_states": "hidden states",
    "local_model": "a local model it can fine-tune",
}


@dataclass(frozen=True)
class MethodSpec:
    name: str
    fn: Callable[..., float]
    needs: frozenset[Need]
    defaults: dict
    paper: str
    summary: str
    requires: frozenset[str] = frozenset()  # backend capabilities the method reads


@dataclass(frozen=True)
class MethodCall:
    """A method with bound hyperparameters; `label` names its score column."""

    spec: MethodSpec
    params: dict = field(default_factory=dict)
    label: str = ""

    def __call__(self, obs: Observation) -> float:
        return float(self.spec.fn(obs, **self.params))


METHODS: Registry[MethodSpec] = Registry("method")


def _load_builtin() -> None:
    import pddkit.methods  # noqa: F401  (registers the built-in methods)


METHODS.set_loader(_load_builtin)


def register_method(name: str, *, needs: tuple[Need, ...] = (), requires: tuple[str, ...] = (),
                    paper: str, summary: str):
    """Decorator: register `fn(obs, *, hyper=default) -> float` under `name`. `requires`
    names the backend capabilities it reads (REQUIREMENTS)."""
    unknown = set(requires) - set(REQUIREMENTS)
    if unknown:
        raise ValueError(f"method {name} requires unknown capabilities {sorted(unknown)}")

    def deco(fn: Callable[..., float]) -> Callable[..., float]:
        sig = inspect.signature(fn)
        defaults = {k: p.default for k, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY}
        METHODS.add(name, MethodSpec(name, fn, frozenset(needs), defaults, paper, summary,
                                     frozenset(requires)))
        return fn

    return deco


def _unmet(spec: MethodSpec, capabilities) -> str | None:
    """The notice for a method the backend cannot serve, or None."""
    if capabilities is None:
        return None
    missing = sorted(r for r in spec.requires if not getattr(capabilities, r))
    if not missing:
        return None
    what = " and ".join(REQUIREMENTS[m] for m in missing)
    return f"skipping {spec.name}: it reads {what}, which this backend does not give"


def resolve_methods(text: str, available: set[Need], notices: list[str] | None = None,
                    capabilities=None) -> list[MethodCall]:
    """`"all"` or `"loss,mink:k=0.1"` -> MethodCalls.

    `all` keeps the methods whose needs `available` meets and logs one line per method
    skipped (also appended to `notices`); a method named explicitly with an unmet need is
    an error. A method reading what the backend cannot give (`capabilities`, an object
    with boolean attributes; None = everything) is skipped with a notice, named or not:
    never approximated.
    """
    calls: list[MethodCall] = []

    def skip(line: str) -> None:
        logger.warning(line)
        if notices is not None:
            notices.append(line)

    for spec_text in split_spec_list(text):
        name, raw = parse_spec(spec_text)
        if name == "all":
            if raw:
                raise PddkitError("'all' takes no parameters")
            for spec in METHODS:
                missing = spec.needs - available
                if missing:
                    need = sorted(missing)[0]
                    skip(f"skipping {spec.name}: it needs a {need.value} ({need.option})")
                elif _unmet(spec, capabilities):
                    skip(_unmet(spec, capabilities))
                else:
                    calls.append(MethodCall(spec, dict(spec.defaults)))
            continue
        spec = METHODS.get(name)
        params = bind_params(f"method {name}", spec.defaults, raw)
        if _unmet(spec, capabilities):
            skip(_unmet(spec, capabilities))
            continue
        missing = spec.needs - available
        if missing:
            need = sorted(missing)[0]
            raise PddkitError(f"method {name} needs a {need.value}: pass {need.option}")
        calls.append(MethodCall(spec, params))
    if not calls:
        raise PddkitError(f"--methods {text!r} selects no method")
    return _label(calls)


def _label(calls: list[MethodCall]) -> list[MethodCall]:
    """Column name: the method name, or name:k=v,... when a name occurs more than once."""
    counts: dict[str, int] = {}
    for c in calls:
        counts[c.spec.name] = counts.get(c.spec.name, 0) + 1
    out, seen = [], set()
    for c in calls:
        label = c.spec.name
        if counts[label] > 1:
            label += ":" + ",".join(f"{k}={v}" for k, v in c.params.items())
        if label in seen:
            continue  # the same method asked for twice with the same values
        seen.add(label)
        out.append(MethodCall(c.spec, c.params, label))
    return out


def n_lowest(k: float, n: int) -> int:
    """m = max(1, floor(k * n)) of Min-K% and Min-K%++ (SPEC section 3)."""
    if not 0 < k <= 1:
        raise PddkitError(f"k must be in (0, 1], not {k}")
    return max(1, math.floor(k * n))
