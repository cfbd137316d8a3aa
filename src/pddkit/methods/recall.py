"""ReCaLL (Xie et al. 2024, "ReCaLL: Membership Inference via Relative Conditional
Log-Likelihoods", EMNLP, arXiv 2406.15968; the authors' code ruoyuxie/recall `src/run.py`)
and Con-ReCall (Wang et al. 2024, "Con-ReCall: Detecting Pre-training Data in LLMs via
Contrastive Decoding", COLING 2025, arXiv 2409.03363; WangCheng0116/CON-RECALL `run.py`):
how much a prefix of non-member shots (and, for Con-ReCall, member shots) changes the text's
log-likelihood.

Cost per text: one extra pass over its tokens per prefix (recall: one; conrecall: two),
each prefix's key/value cache computed once (per group of texts keeping the same shots)
and shared by the texts
(backends/prefix_pass.py). The shots: data/shots.py; the prefix and its trimming to the
context: engine/shots_pass.py.

`variant="reference"` counts tokens as the authors' code does (`get_ll`,
`get_conditional_ll`, which concatenate `tokenizer(P)` and `tokenizer(x)` with the
tokenizer's own special tokens): with a tokenizer that puts a BOS before a text (Llama,
Mistral, OPT), that BOS is fed again between P and x and log p(BOS | start, P) is averaged
into LL(x | P) with x's n tokens; with one that does not (GPT-2, Pythia), LL(x) leaves out
x_1, which their unconditional pass has no token to predict from. Every difference from the
authors' code, marked by whether it changes scores: docs/methods/recall.md.
"""

from __future__ import annotations

import numpy as np

from pddkit.errors import PddkitError
from pddkit.methods.base import Need, register_method
from pddkit.methods.grid import Grid
from pddkit.stats import Observation

# the shots each method reads, by role (engine/shots_pass.py builds one prefix per role
# and number of shots)
SHOT_ROLES = {"recall": ("nonmember",), "conrecall": ("member", "nonmember")}
VARIANTS = ("pddkit", "reference")
_TINY = 1e-12  # LL(x) of a text whose every token had probability 1
NO_ROOM = ("leave no room in the context for a single shot: scored with an empty prefix "
           "(LL(x | P) = LL(x)); a smaller `max_length` leaves room")
ZERO_LL = f"have a mean log-probability of 0: the ratio's denominator is floored at -{_TINY:g}"
ONE_TOKEN = ("have one token: variant=reference leaves x_1 out of LL(x) for a tokenizer "
             "without BOS, which would leave nothing; LL(x) is that token's")
GAMMA_GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def shot_key(role: str, shots: int, variant: str = "pddkit") -> tuple:
    """The key of Observation.conditioned: (role, shots), with the variant after them when
    it is not the default. The reference variant's statistics hold, before x's n tokens,
    the special ids the tokenizer puts before a text (engine/shots_pass.py)."""
    return (role, int(shots)) if variant == "pddkit" else (role, int(shots), variant)


def _check(shots: int, variant: str = "pddkit") -> None:
    if isinstance(shots, bool) or not isinstance(shots, (int, np.integer)) or shots < 1:
        raise PddkitError(f"shots must be a whole number of at least 1, not {shots!r}")
    if variant not in VARIANTS:
        raise PddkitError(f"variant must be one of {', '.join(VARIANTS)}, not {variant!r}")


def _mean(L) -> float:
    return float(np.mean(L, dtype=np.float64))


def _stats(obs: Observation, role: str, shots: int, variant: str):
    cond = obs.conditioned
    if cond is None:
        raise PddkitError("recall needs the text's statistics given the shots")
    return cond[shot_key(role, shots, variant)]


def _inserted(obs: Observation, roles: tuple[str, ...], shots: int, variant: str) -> int | None:
    """How many ids the reference variant fed between prefix and text (the tokenizer's
    BOS: 1, or 0), read from the conditioned statistics' length; None when no prefix had
    room (the score is then LL(x) / LL(x), whatever LL(x) is)."""
    for role in roles:
        st = _stats(obs, role, shots, variant)
        if st is not None:
            return len(st) - len(obs.target)
    return None


def _own_ll(obs: Observation, roles: tuple[str, ...], shots: int, variant: str) -> float:
    """LL(x): the mean of x's L; with variant=reference and a tokenizer that puts no BOS
    before a text, the mean of L_2..L_n (the authors' unconditional pass scores no x_1)."""
    L = obs.target.L
    if variant == "reference" and len(L) > 1 and _inserted(obs, roles, shots, variant) == 0:
        L = L[1:]
    return _mean(L)


def _given(obs: Observation, role: str, shots: int, variant: str, own: float) -> float:
    """LL(x | P) (with variant=reference, the mean over the inserted BOS and x's tokens); a
    text with no room in the context for a single shot keeps its own LL(x) (an empty
    prefix: counted by the fallbacks)."""
    st = _stats(obs, role, shots, variant)
    return own if st is None else _mean(st.L)


def _denominator(own: float) -> float:
    return min(own, -_TINY)


def _fallback(obs: Observation, roles: tuple[str, ...], shots: int, variant: str) -> str | None:
    if obs.conditioned is not None and any(
            _stats(obs, role, shots, variant) is None for role in roles):
        return NO_ROOM
    if variant == "reference" and len(obs.target) == 1 and _inserted(obs, roles, shots, variant) == 0:
        return ONE_TOKEN
    return None if _own_ll(obs, roles, shots, variant) < -_TINY else ZERO_LL


def recall_fallback(obs: Observation, *, shots: int = 7, variant: str = "pddkit") -> str | None:
    """A text with no room in the context for the last shot alone: an empty prefix (score
    1); LL(x) = 0 (every token certain): the denominator floored at -_TINY; variant=reference
    without BOS on a one-token text: LL(x) over that token."""
    return _fallback(obs, SHOT_ROLES["recall"], shots, variant)


def conrecall_grid(observations, params, *, gamma) -> np.ndarray:
    """[N, G] conrecall at every gamma of the grid, the call's own `shots` and `variant`."""
    k, variant = int(params.get("shots", 7)), params.get("variant", "pddkit")
    roles = SHOT_ROLES["conrecall"]
    own = [_own_ll(o, roles, k, variant) for o in observations]
    nm = np.array([_given(o, "nonmember", k, variant, a) for o, a in zip(observations, own)])
    m = np.array([_given(o, "member", k, variant, a) for o, a in zip(observations, own)])
    den = np.array([_denominator(a) for a in own])
    return np.stack([(nm - g * m) / den for g in gamma], axis=1)


def conrecall_fallback(obs: Observation, *, shots: int = 7, gamma: float = 0.5,
                       variant: str = "pddkit") -> str | None:
    """As recall_fallback, for either prefix (member or non-member shots)."""
    return _fallback(obs, SHOT_ROLES["conrecall"], shots, variant)


@register_method("recall", needs=(Need.SHOTS,), requires=("first_token",), paper="Xie et al. 2024",
                 named_only=True,
                 fallback=recall_fallback,
                 cost="+1 pass over the texts (the shots' prefix computed once)",
                 summary="LL(x | non-member shots) / LL(x)")
def recall(obs: Observation, *, shots: int = 7, variant: str = "pddkit") -> float:
    """LL(x | P_nm) / LL(x): LL(x) is the mean log-probability of x's tokens, LL(x | P) the
    same with the prefix P before x, P_nm the first `shots` non-member shots (whole shots
    dropped from the front when the context is short). Higher = member: a non-member prefix
    lowers a member's log-likelihood more. `variant="reference"`: the authors' token
    counting (module docstring)."""
    _check(shots, variant)
    roles = SHOT_ROLES["recall"]
    own = _own_ll(obs, roles, shots, variant)
    return _given(obs, "nonmember", shots, variant, own) / _denominator(own)


@register_method("conrecall", needs=(Need.SHOTS,), requires=("first_token",),
                 paper="Wang et al. 2024", named_only=True,
                 fallback=conrecall_fallback,
                 grid=Grid({"gamma": GAMMA_GRID}, conrecall_grid, per_text=True),
                 cost="+2 passes over the texts (member and non-member prefixes, each once)",
                 summary="(LL(x | non-member shots) - gamma LL(x | member shots)) / LL(x); "
                         "needs labelled shots")
def conrecall(obs: Observation, *, shots: int = 7, gamma: float = 0.5,
              variant: str = "pddkit") -> float:
    """(LL(x | P_nm) - gamma * LL(x | P_m)) / LL(x), LL and P_nm as in `recall`, P_m the
    first `shots` member shots (needs labelled shots: members among them). `gamma` is
    chosen like any other hyperparameter (`val_fraction`, `val_data`). `variant`: as in
    `recall`."""
    _check(shots, variant)
    if not np.isfinite(gamma):
        raise PddkitError(f"gamma must be a finite number, not {gamma!r}")
    roles = SHOT_ROLES["conrecall"]
    own = _own_ll(obs, roles, shots, variant)
    nm = _given(obs, "nonmember", shots, variant, own)
    return (nm - gamma * _given(obs, "member", shots, variant, own)) / _denominator(own)
