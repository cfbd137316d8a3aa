"""The provider of Need.SHOTS (SPEC 3b): not built yet (issue 20)."""

from pddkit.engine.passes import PassContext, provider
from pddkit.errors import PddkitError
from pddkit.methods.base import Need


@provider(Need.SHOTS)
def shots_provider(ctx: PassContext) -> None:
    raise PddkitError("not built yet")
