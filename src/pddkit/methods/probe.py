"""Linear probe on hidden states (Liu et al. 2024): the probe's member probability for the
target model's activation (computed by runner/probe.py: proxy fine-tuning, per-layer
logistic regression). Cost per text: one extra forward with hidden states."""

from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation


@register_method("probe", needs=(Need.PROBE,), paper="Liu et al. 2024",
                 summary="P(member) of a logistic probe on the prompt's last-token activation")
def probe(obs: Observation) -> float:
    assert obs.probe is not None
    return float(obs.probe)
