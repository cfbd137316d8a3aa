"""Reference-model calibration (Carlini et al. 2021, sec. 6.2; Watson et al. 2022).

`form="difference"` (SPEC 3, the default): mean L_target - mean L_ref, as the Min-K% and
Min-K%++ code compute it (detect-pretrain-code src/run.py:98, mink-plus-plus run_ref.py:111).
`form="ratio"`: the ratio of the two log-perplexities Carlini et al.'s code ranks by
(LM_Memorization extraction.py:178, log PPL_ref / log PPL_target), written as
mean L_ref / mean L_target (higher = member). A target mean of 0 (every token certain) is
floored at -_TINY, a counted fallback."""

import numpy as np

from pddkit.errors import PddkitError
from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation

FORMS = ("difference", "ratio")
_TINY = 1e-12  # the ratio's denominator is at most -_TINY (a target certain of every token)


def _means(obs: Observation, form: str) -> tuple[float, float]:
    if form not in FORMS:
        raise PddkitError(f"form must be one of {', '.join(FORMS)}, not {form!r}")
    assert obs.reference is not None
    return (float(np.mean(obs.target.L, dtype=np.float64)),
            float(np.mean(obs.reference.L, dtype=np.float64)))


def ref_fallback(obs: Observation, *, form: str = "difference") -> str | None:
    """form=ratio on a text whose target mean log-probability is 0: the denominator is
    floored at -_TINY."""
    target, _ = _means(obs, form)
    if form != "ratio" or target < -_TINY:
        return None
    return (f"have a target mean log-probability of 0 (form=ratio): the ratio's denominator is "
            f"floored at -{_TINY:g}")


@register_method("ref", needs=(Need.REFERENCE,), paper="Carlini et al. 2021",
                 fallback=ref_fallback,
                 summary="mean L_target - mean L_ref, each model with its own tokenizer "
                         "(form=ratio: mean L_ref / mean L_target)")
def ref(obs: Observation, *, form: str = "difference") -> float:
    target, reference = _means(obs, form)
    if form == "difference":
        return target - reference
    return reference / min(target, -_TINY)
