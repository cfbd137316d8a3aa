"""The provider of Need.INFILL (SPEC 3b): not built yet (issue 20)."""

from pddkit.engine.passes import PassContext, provider
from pddkit.errors import PddkitError
from pddkit.methods.base import Need


@provider(Need.INFILL)
def infill_provider(ctx: PassContext) -> None:
    raise PddkitError("not built yet")
