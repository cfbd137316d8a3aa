"""PAC, Polarized Augment Calibration (Ye et al. 2024, "Data Contamination Calibration for
Black-box LLMs", ACL Findings, arXiv 2405.11930; the authors' code yyy01/PAC `attack.py`):
the polarised distance PD of a text's token log-probabilities (its most likely tokens
against its least likely) is calibrated by that of its word-swapped copies; with the sign of
the authors' AUC, a text whose copies are more polarised than itself is more likely a
member.

Cost per text: `n_aug` word-swapped copies (resources/augment.py) in the batched
statistics pass (per distinct swap rate; calls that differ only in n_aug share them).
Needs only L, so it runs on a served model's prompt log-probabilities (`openai`).

`skip_first=true` leaves each sequence's first token out of PD (the text's and every
copy's), as the authors' code does with a tokenizer that puts no BOS before a text (GPT-2,
Pythia): it scores `input_ids[0][1:]` of `tokenizer.encode(text)` (src/prob.py:24,32), and
its API path drops the first echoed log-probability. Every difference from the authors'
code, marked by whether it changes scores: docs/methods/pac.md."""

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


def _check(n_aug: int, swap: float, high: float, low: float, skip_first: bool = False) -> None:
    from pddkit.resources.augment import check

    check(n_aug, swap)
    if not isinstance(skip_first, (bool, np.bool_)):
        raise PddkitError(f"skip_first must be true or false, not {skip_first!r}")
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


def _scored(L, skip_first: bool) -> np.ndarray:
    """The log-probabilities PD reads: all of them, or (skip_first) all but the first, as
    long as one is left."""
    return L[1:] if skip_first and len(L) > 1 else L


def pac_fallback(obs: Observation, *, n_aug: int = 5, swap: float = 0.3, high: float = 0.05,
                 low: float = 0.3, skip_first: bool = False) -> str | None:
    """A text of one word (no single space) has no two positions to swap; with skip_first,
    a text of one token keeps that token (nothing would be left)."""
    from pddkit.resources.augment import one_word

    if one_word(obs.text):
        return "are one word (no swap possible): their copies equal the text, scored 0"
    if skip_first and len(obs.target) == 1:
        return "have one token: skip_first would leave none, so PD reads that token"
    return None


@register_method("pac", needs=(Need.AUGMENTATIONS,), paper="Ye et al. 2024",
                 fallback=pac_fallback, named_only=True,
                 cost="+n_aug passes over the texts (word-swapped copies)",
                 summary="-(PD(text) - mean PD(word-swapped copy)), PD = mean top-high L - mean bottom-low L")
def pac(obs: Observation, *, n_aug: int = 5, swap: float = 0.3, high: float = 0.05,
        low: float = 0.3, skip_first: bool = False) -> float:
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

    `skip_first=True`: PD over each sequence's L_2..L_n (module docstring)."""
    _check(n_aug, swap, high, low, skip_first)
    from pddkit.resources.augment import one_word

    if one_word(obs.text):
        return 0.0
    copies = _copies(obs, n_aug, swap)
    if not copies:
        raise PddkitError("pac needs the augmented copies' statistics")
    own = polarized_distance(_scored(obs.target.L, skip_first), high, low)
    return -(own - float(np.mean([polarized_distance(_scored(c.L, skip_first), high, low)
                                  for c in copies])))
