"""Calibration data in a run (SPEC 3e): the set is made before anything else sees the data
(`calibration_set`, engine/prepare.py), its texts go through the passes the calibrated methods
need, on the same backends and cache as the texts under test (the provider of
Need.CALIBRATION), and each such method fits on them before it scores the texts under test
(`fitted`, engine/score.py). The calibration texts are never scored as texts under test:
they are in no score, metric or split; calibration.jsonl lists them and results.json
counts them (`counts.calibration`), with each method's fit (`counts.calibration.fitted`)."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from pddkit.data.calibration import CalibrationSet, calibration_for
from pddkit.engine.pass_context import PassContext, observations, provider, run_providers
from pddkit.errors import PddkitError
from pddkit.methods.base import MethodCall, Need

logger = logging.getLogger(__name__)


def calibration_set(dataset, config, plan):
    """(the texts to evaluate, the calibration set or None): made when a method of the plan
    has something to fit (engine/prepare.py), from `calibration` or held out of `dataset`."""
    if Need.CALIBRATION not in plan.needs:
        return dataset, None
    # fsd fine-tunes on the non-members alone: a table of non-members only serves it
    both = any(c.spec.calibration is not None for c in calibrated_calls(plan.calls))
    dataset, cal = calibration_for(dataset, config.calibration, config.seed, config.on_invalid,
                                   both_classes=both)
    c = cal.counts()
    logger.info("calibration data: %d texts (%d members, %d non-members) from %s", c["texts"],
                c["members"], c["nonmembers"], c["source"])
    return dataset, cal


def calibrated_calls(calls) -> list[MethodCall]:
    return [c for c in calls if Need.CALIBRATION in c.needs]


def fitting_calls(calls) -> list[MethodCall]:
    """The calibrated calls that fit on the calibration texts' statistics (Calibration); fsd
    reads the texts alone (its fine-tuning, engine/fsd_pass.py)."""
    return [c for c in calibrated_calls(calls) if c.spec.calibration is not None]


@provider(Need.CALIBRATION)
def calibration_pass(ctx: PassContext) -> None:
    """The calibration texts through the target pass and the passes the calibrated methods
    need, in a context of their own (their counts, notices of their own passes' fallbacks
    and audit rows stay apart from the texts under test); their observations go to
    ctx.extras["calibration"]."""
    cal: CalibrationSet | None = ctx.calibration
    if cal is None:  # engine/prepare.py makes it whenever the plan needs it
        raise RuntimeError("the calibration pass ran without calibration data")
    calls = tuple(fitting_calls(ctx.calls))
    ctx.extras.setdefault("trail", {})["calibration.jsonl"] = cal.rows()
    if not calls:  # only fsd: it fine-tunes on the texts, and no statistics of them are needed
        ctx.counts["calibration"] = cal.counts()
        return
    needs = sorted(set().union(*(c.needs for c in calls)) - {Need.CALIBRATION},
                   key=list(Need).index)
    sub = dataclasses.replace(
        ctx, texts=[s.text for s in cal.samples],
        names=[f"calibration text {s.source or s.id}" for s in cal.samples],
        ids=[s.id for s in cal.samples], calls=calls, sets=[], spans=[], fields={}, extras={},
        counts={}, timings={}, calibration=None)
    run_providers(sub, needs)  # every provider is registered: this one runs inside run_passes
    ctx.extras["calibration"] = observations(sub)
    ctx.counts["calibration"] = {**cal.counts(), "tokens": sub.counts.get("tokens", {}),
                                 "truncated": sub.counts.get("truncated", {})}
    ctx.timings.update({f"calibration_{k}": v for k, v in sub.timings.items()})


def fitted(calls, ctx: PassContext) -> tuple[MethodCall, ...]:
    """Each call with something to fit, fitted on the calibration texts' observations and
    labels (its label kept, its hyperparameters those it scores with); the others as they
    are. What each fit chose is recorded in counts.calibration.fitted."""
    found = ctx.extras.get("calibration")
    if found is None:
        return tuple(calls)
    labels = np.asarray(ctx.calibration.labels, dtype=np.int64)
    out, record = [], {}
    for c in calls:
        if Need.CALIBRATION not in c.needs or c.spec.calibration is None:  # fsd: nothing to fit
            out.append(c)
            continue
        try:
            fit = c.spec.calibration.fit(found, labels, **c.params)
        except PddkitError as e:
            raise PddkitError(f"method {c.label} on the calibration data: {e}") from None
        out.append(MethodCall(c.spec, dict(fit.params), c.label))
        record[c.label] = dict(fit.record)
        logger.info("%s: fitted on the calibration data: %s", c.label, fit.record)
    ctx.counts.setdefault("calibration", {})["fitted"] = record
    return tuple(out)
