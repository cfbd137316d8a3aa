"""PAC, Polarized Augment Calibration (Ye et al. 2024, "Data Contamination Calibration for
Black-box LLMs", ACL Findings, arXiv 2405.11930; the authors' code yyy01/PAC `attack.py`):
the polarised distance PD of a text's token log-probabilities (its most likely tokens
against its least likely) is calibrated by that of its word-swapped copies; with the sign of
the authors' AUC, a text whose copies are more polarised than itself is more likely a
member.

Cost per text: `n_aug` word-swapped copies (resources/augment.py) in the batched
statistics pass (per distinct swap rate; calls that differ only in n_aug share them).
Needs only L, so it runs on a served model's prompt log-probabilities (`openai`)."""

from collections.abc import Mapping

import numpy as np

from pddkit.errors import PddkitError
from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation, TokenStats


def polarized_distance(L: np.ndarray, high: float, low: float) -> float:
    """PD = mean of the max(1, floor(high*n)) largest L_i - mean of the max(1, floor(low*n))
    smallest L_i, over the text's own n tokens."""
    s = np.sort(np.asarray(L, dtype=np.float64))
    n = len(s)
    far = max(1, int(np.floor(high * n)))
    near = max(1, int(np.floor(low * n)))
    return float(s[n - far:].mean() - s[:near].mean())


def _check(n_aug: int, swap: float, high: float, low: float) -> None:
    from pddkit.resources.augment import check

    check(n_aug, swap)
    for name, v in (("high", high), ("low", low)):
        if not 0 < v <= 1:
            raise PddkitError(f"{name} must be in (0, 1], not {v}")


def _copies(obs: Observation, n_aug: int, swap: float) -> tuple[TokenStats, ...]:
    """The augmented copies' statistics the score averages over: the first n_aug."""
    from pddkit.resources.augment import AugmentParams

    aug = obs.augmented
    if isinstance(aug, Mapping):
        aug = aug[AugmentParams(float(swap))]
    return tuple(aug[:n_aug])


def pac_fallback(obs: Observation, *, n_aug: int = 5, swap: float = 0.3, high: float = 0.05,
                 low: float = 0.3) -> str | None:
    """A text of one word (no single space) has no two positions to swap."""
    from pddkit.resources.augment import one_word

    if not one_word(obs.text):
        return None
    return "are one word (no swap possible): their copies equal the text, scored 0"


@register_method("pac", needs=(Need.AUGMENTATIONS,), paper="Ye et al. 2024",
                 fallback=pac_fallback, named_only=True,
                 cost="+n_aug passes over the texts (word-swapped copies)",
                 summary="-(PD(text) - mean PD(word-swapped copy)), PD = mean top-high L - mean bottom-low L")
def pac(obs: Observation, *, n_aug: int = 5, swap: float = 0.3, high: float = 0.05,
        low: float = 0.3) -> float:
    """Score = -(PD(x) - mean_a PD(x_a)) over the first n_aug copies x_a, each x
    with max(1, floor(swap * #words)) swaps of two distinct word positions (words: x split
    on single spaces). The reference code's sign (it reports PAC = PD(x) - mean PD(x_a)
    and its AUC uses -PAC), ratio_far = high, ratio_local = low, int() as floor.

    `obs.augmented` maps AugmentParams(swap) to the copies' statistics (the pipeline draws
    each distinct swap rate once, for its largest n_aug); a plain tuple (hand-made
    observations) is used for any swap. A one-word text (no swap possible) scores 0, its
    copies being the text itself (counted: pac_fallback). x is the scored span (the
    decoded kept tokens of a text cut to the context), so the copies permute the words
    the target pass scored.

    Where pddkit differs from the reference code: the augmentations (resources/augment.py:
    seeded per text, every swap of two distinct positions)."""
    _check(n_aug, swap, high, low)
    from pddkit.resources.augment import one_word

    if one_word(obs.text):
        return 0.0
    copies = _copies(obs, n_aug, swap)
    if not copies:
        raise PddkitError("pac needs the augmented copies' statistics")
    own = polarized_distance(obs.target.L, high, low)
    return -(own - float(np.mean([polarized_distance(c.L, high, low) for c in copies])))
