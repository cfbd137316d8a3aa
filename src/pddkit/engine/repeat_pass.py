"""The provider of Need.REPEATED (`camia`): each text's scored span x repeated,
x_rep = x + (" " + x) x 5 (six copies; methods/camia_features.py), scored by the target
model like any text: through the run's executor (batched by length; on the Ray engine's
actors too) and the statistics cache (a rerun computes nothing it has).

x_rep is six times as long as x. Where it is longer than the model's context, the
statistics pass cuts it to the context as it cuts any text (SPEC 2): the copies that do
not fit are not scored, the cut texts are counted (`truncated.repeated` in results.json)
and a notice says how many; camia then reads the copies that were scored, and counts the
texts with fewer than three (its fallback). The authors score long inputs in windows of
the context with stride context/2 instead (models_without_debugging.py:183-191), which
pddkit's statistics pass does not do (docs/methods/camia.md)."""

from __future__ import annotations

import logging

from pddkit.engine.pass_context import PassContext, provider
from pddkit.methods.base import Need
from pddkit.methods.camia_features import repeated_text

logger = logging.getLogger(__name__)


@provider(Need.REPEATED)
def repeat_provider(ctx: PassContext) -> None:
    texts = [repeated_text(span) for span in ctx.spans]
    names = [f"the repeated text (six copies) of {name}" for name in ctx.names]
    stats = ctx.stats(ctx.target, texts, names, "repeated-text pass")
    ctx.fields["repeated"] = stats
    cut = sum(st.truncated for st in stats)
    ctx.counts.setdefault("truncated", {})["repeated"] = cut
    ctx.counts.setdefault("tokens", {})["repeated"] = int(sum(len(st) for st in stats))
    if cut:
        # the calibration pass runs the passes again on the calibration texts, in a context
        # of its own without calibration data (engine/calibration_pass.py)
        fitting = ctx.calibration is None and any(Need.CALIBRATION in c.needs for c in ctx.calls)
        what = "calibration texts" if fitting else "texts"
        line = (f"camia: the repeated text (six copies) of {cut} of {len(stats)} {what} "
                f"({cut / len(stats):.0%}) is longer than the model's context and was cut to "
                "it; the copies past the cut are not scored")
        logger.warning(line)
        ctx.notices.append(line)
