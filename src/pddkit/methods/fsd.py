"""FSD, Fine-tuned Score Deviation (Zhang et al., "Fine-tuning can Help Detect Pretraining Data
from Large Language Models", ICLR 2025; SPEC 3e): the target is LoRA-tuned on a few
non-members (the calibration non-members; resources/fsd_tuning.py), which lowers the
non-members' scores more than the members'; the score is the base method's score under the
target minus its score under the tuned model,

    fsd(x) = s(x; theta) - s(x; theta_ft),

with s any single-pass method (`base`, loss by default; higher = member, SPEC section 1).
The authors subtract fine-tuned minus base on "lower = member" scores (eval.py:110-114),
which is this difference with s negated: the same sign. `space=ppl` takes the difference
of perplexities instead, s = -exp(-mean L) (eval.py:48, their "ppl"), for bases whose
score is a mean log-probability (loss, mink).

`base` names the method and, after a colon, its own hyperparameters separated by
semicolons: `fsd:base=mink:k=0.1`, `"fsd:base=surp:entropy_threshold=2.5;k=30"`. The
tuning hyperparameters (r, alpha, dropout, lr, epochs, batch, warmup, weight_decay, length)
are fsd's own; the seed is the run's."""

from __future__ import annotations

import math
from dataclasses import replace

from pddkit.errors import PddkitError
from pddkit.methods.base import METHODS, MethodCall, Need, register_method
from pddkit.params import bind_params
from pddkit.stats import Observation, TokenStats

SPACES = ("score", "ppl")
PPL_BASES = ("loss", "mink")  # scores that are a mean log-probability: exp(-s) is a perplexity
# exp(-s) of a mean log-probability below -EXP_LIMIT nats would overflow float64 (no model
# gives one: it is a per-token probability of e^-709)
EXP_LIMIT = 709.0


def base_call(base: str) -> MethodCall:
    """`base` ("mink", "mink:k=0.1", "surp:entropy_threshold=2.5;k=30") -> its MethodCall;
    one sentence for a method that is unknown or not a single pass of the target."""
    name, _, raw = str(base).strip().partition(":")
    name = name.strip().lower()
    try:
        spec = METHODS.get(name)
    except PddkitError:
        raise PddkitError(f"base={name!r} is not a method: fsd's base is a single-pass method "
                          f"({', '.join(single_pass())})") from None
    given = {}
    for part in filter(None, (p.strip() for p in raw.split(";"))):
        key, eq, value = part.partition("=")
        if not eq:
            raise PddkitError(f"base={base!r}: {part!r} is not key=value (the base's "
                              "hyperparameters are separated by ';')")
        given[key.strip()] = value.strip()
    call = MethodCall(spec, bind_params(f"fsd's base {spec.name}", spec.defaults, given),
                      spec.name)
    if spec.name in single_pass() and call.needs:  # acmia without beta: it would fit one
        raise PddkitError(f"base={spec.name} chooses a hyperparameter on calibration data, which "
                          "fsd's base cannot: give it (fsd:base=acmia:beta=0.5)")
    if spec.name not in single_pass():
        raise PddkitError(f"base={spec.name} is not a single-pass method (it needs "
                          f"{_needs_of(call)}): fsd's base is one of {', '.join(single_pass())}"
                          " (with hyperparameters that leave nothing to fit)")
    return call


def _needs_of(call: MethodCall) -> str:
    if call.spec.name == "fsd":
        return "a fine-tuned model itself"
    if not call.spec.reads_target:
        return "sampled texts, not the target statistics"
    return " and ".join(n.with_article for n in sorted(call.needs, key=list(Need).index))


def single_pass() -> list[str]:
    """The methods fsd can take as its base: those reading the target pass alone."""
    return [s.name for s in METHODS
            if s.name != "fsd" and s.reads_target and not s.needs]


def tuned_stats(obs: Observation, key: tuple) -> TokenStats:
    """The text's statistics under the fine-tuned target (engine/fsd_pass.py)."""
    ft = obs.finetuned
    if ft is None:
        raise PddkitError("fsd reads the statistics of the fine-tuned target, which this "
                          "observation does not hold: score it in a run (pddkit run) with "
                          "calibration data")
    return ft if isinstance(ft, TokenStats) else ft[key]


def reads_of(params: dict) -> frozenset[str]:
    """The optional target fields fsd reads with `params`: its base's (gapk: Lmax)."""
    return base_call(params["base"]).reads


@register_method("fsd", needs=(Need.CALIBRATION, Need.FINETUNED), requires=("local_model",),
                 named_only=True, reads_with=reads_of, paper="Zhang et al. 2025",
                 cost="one LoRA training on the calibration non-members, then the base "
                      "method's pass once more per text under the tuned model",
                 summary="base score minus the base score after LoRA-tuning the model on "
                         "calibration non-members")
def fsd(obs: Observation, *, base: str = "loss", space: str = "score", r: int = 16,
        alpha: int = 32, dropout: float = 0.05, lr: float = 1e-3, epochs: int = 3, batch: int = 8,
        warmup: int = 10, weight_decay: float = 5e-4, length: int = 1024) -> float:
    from pddkit.resources.fsd_tuning import TuningSettings

    call = base_call(base)
    if space not in SPACES:
        raise PddkitError(f"space must be one of {', '.join(SPACES)}, not {space!r}")
    if space == "ppl" and call.spec.name not in PPL_BASES:
        raise PddkitError(f"space=ppl takes perplexities of mean log-probabilities: its base is "
                          f"one of {', '.join(PPL_BASES)}, not {call.spec.name}")
    settings = TuningSettings(r, alpha, dropout, lr, epochs, batch, warmup, weight_decay, length)
    settings.check()
    tuned = replace(obs, target=tuned_stats(obs, settings.key()))
    before, after = call(obs), call(tuned)
    if space == "ppl":  # s = -exp(-s): -ppl_base + ppl_ft
        return math.exp(min(-after, EXP_LIMIT)) - math.exp(min(-before, EXP_LIMIT))
    return before - after
