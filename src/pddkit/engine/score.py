"""Observations (what the passes filled) -> method scores: the score table of one run (no
metrics)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from pddkit.engine.pass_context import PassContext, observations
from pddkit.methods.base import MethodCall, every_text_line, fallback_line
from pddkit.stats import Observation, TokenStats

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoreTable:
    """Every method's score per text (higher = more likely a member), and what the passes
    left for evaluation (the target statistics for validation grids, the neighbour sets
    and the probe search for saving) and for results.json (counts, timings, models)."""

    calls: tuple[MethodCall, ...]
    scores: dict[str, np.ndarray]  # call label -> [N] float64
    target: tuple[TokenStats, ...]
    log_freq: np.ndarray | None
    extras: dict
    counts: dict
    timings: dict
    models: dict
    notices: tuple[str, ...]
    observations: tuple[Observation, ...] = ()  # per text: what grids reading them need


def method_scores(call: MethodCall, obs: list[Observation]) -> np.ndarray:
    """[N] scores of one method call; a non-finite score is a method bug, never the user's."""
    scores = np.fromiter((call(o) for o in obs), dtype=np.float64, count=len(obs))
    if not np.isfinite(scores).all():
        raise RuntimeError(f"method {call.label} produced a non-finite score")
    return scores


def fallback_counts(call: MethodCall, obs: list[Observation]) -> dict[str, int]:
    """How many texts each of the method's fallbacks scored (methods/base.py), by reason."""
    out: dict[str, int] = {}
    if call.spec.fallback is None:
        return out
    for o in obs:
        why = call.fallback(o)
        if why is not None:
            out[why] = out.get(why, 0) + 1
    return out


def score(ctx: PassContext) -> ScoreTable:
    """Every method call of the run (`ctx.calls`) on the observations its passes filled
    (engine/passes.run_passes); each method fallback that scored some texts is counted
    (counts["fallbacks"]: label -> reason -> texts) and is a notice with the share of texts."""
    import time

    from pddkit.engine.calibration_pass import fitted

    t0 = time.perf_counter()
    calls = fitted(ctx.calls, ctx)  # what calibrated methods fit on the calibration texts
    obs = observations(ctx)
    scores = {c.label: method_scores(c, obs) for c in calls}
    fallbacks = {c.label: n for c in calls if (n := fallback_counts(c, obs))}
    if fallbacks:
        ctx.counts["fallbacks"] = fallbacks
        for label, per in fallbacks.items():
            for why, n in per.items():
                line = fallback_line(label, why, n, len(obs))
                logger.warning(line)
                ctx.notices.append(line)
    # per method with a fallback: how many texts fell back, of how many scored; a method
    # that fell back on every text measured its fallback, not its formula (notice + row mark)
    ctx.counts["fallback_texts"] = {
        c.label: {"fell_back": sum(fallbacks.get(c.label, {}).values()), "scored": len(obs)}
        for c in calls if c.spec.fallback is not None}
    for label, n in ctx.counts["fallback_texts"].items():
        if obs and n["fell_back"] == len(obs):
            line = every_text_line(label, len(obs))
            logger.warning(line)
            ctx.notices.append(line)
    ctx.timings["methods"] = time.perf_counter() - t0
    ctx.extras.pop("calibration", None)  # observations of texts that are never evaluated
    return ScoreTable(calls=calls, scores=scores, target=tuple(ctx.fields["target"]),
                      log_freq=ctx.fields.get("log_freq"), extras=dict(ctx.extras),
                      counts=ctx.counts, timings=ctx.timings, models=ctx.models,
                      notices=tuple(ctx.notices), observations=tuple(obs))
