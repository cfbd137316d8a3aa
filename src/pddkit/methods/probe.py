"""Linear probe on hidden states (Liu et al. 2024, sec. 3.5): the probe's member
probability P for the target model's activation, as log(P / (1 - P)) so that confident
texts do not tie at P = 1.0 in float64 (the ranking, hence every metric, is P's).
Computed by resources/probe/: proxy fine-tuning, per-layer logistic regression.
Cost per text: one extra forward with hidden states."""

from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation


@register_method("probe", needs=(Need.PROBE,), requires=("hidden_states", "local_model"),
                 paper="Liu et al. 2024",
                 summary="log-odds of P(member) from a logistic probe on the prompt's last-token activation")
def probe(obs: Observation) -> float:
    assert obs.probe is not None
    return float(obs.probe)
