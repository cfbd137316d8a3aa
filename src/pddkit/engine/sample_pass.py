"""The provider of Need.SAMPLES (SPEC 3b): not built yet (issue 20)."""

from pddkit.engine.passes import PassContext, provider
from pddkit.errors import PddkitError
from pddkit.methods.base import Need


@provider(Need.SAMPLES)
def sample_provider(ctx: PassContext) -> None:
    raise PddkitError("not built yet")
