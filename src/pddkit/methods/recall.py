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

Where pddkit differs from the reference code (each a deliberate choice):
- the shots never meet the evaluation: the reference ReCaLL and Con-ReCall code removes
  its shots (and as many texts of the other class) from WikiMIA as pddkit does; Nikkei's
  fast-mia draws them from the texts it evaluates and keeps scoring them, a label leak;
- whole shots are dropped from the front per text, only for texts that need it (the
  reference trims once against the average text length, so long texts may overflow the
  context); texts keeping the same shots share one prefix, computed once; a text with no
  room for the last shot alone is scored with an empty prefix (counted by the fallback);
- nothing is inserted between prefix and text: the reference code inserts the target's
  own BOS token after the prefix for Llama tokenizers; pddkit feeds [start] + P + x;
- LL(x | P) averages over the text's tokens only; the SoK benchmark's port averages over
  prefix and text together.
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
_TINY = 1e-12  # LL(x) of a text whose every token had probability 1
NO_ROOM = ("leave no room in the context for a single shot: scored with an empty prefix "
           "(LL(x | P) = LL(x)); a smaller `max_length` leaves room")
ZERO_LL = f"have a mean log-probability of 0: the ratio's denominator is floored at -{_TINY:g}"
GAMMA_GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def _check(shots: int) -> None:
    if isinstance(shots, bool) or not isinstance(shots, (int, np.integer)) or shots < 1:
        raise PddkitError(f"shots must be a whole number of at least 1, not {shots!r}")


def _ll(st) -> float:
    return float(np.mean(st.L, dtype=np.float64))


def _given(obs: Observation, role: str, shots: int) -> float:
    """LL(x | P); a text with no room in the context for a single shot (None) keeps its own
    LL(x) (an empty prefix: counted by the fallbacks)."""
    cond = obs.conditioned
    if cond is None:
        raise PddkitError("recall needs the text's statistics given the shots")
    st = cond[(role, int(shots))]
    return _ll(obs.target if st is None else st)


def _own(obs: Observation) -> float:
    return min(_ll(obs.target), -_TINY)


def _no_room(obs: Observation, roles: tuple[str, ...], shots: int) -> bool:
    return obs.conditioned is not None and any(
        obs.conditioned[(role, int(shots))] is None for role in roles)


def recall_fallback(obs: Observation, *, shots: int = 7) -> str | None:
    """A text with no room in the context for the last shot alone: an empty prefix (score
    1); LL(x) = 0 (every token certain): the denominator floored at -_TINY."""
    if _no_room(obs, SHOT_ROLES["recall"], shots):
        return NO_ROOM
    return None if _ll(obs.target) < -_TINY else ZERO_LL


def conrecall_grid(observations, params, *, gamma) -> np.ndarray:
    """[N, G] conrecall at every gamma of the grid, the call's own `shots`."""
    k = int(params.get("shots", 7))
    own = np.array([_own(o) for o in observations])
    nm = np.array([_given(o, "nonmember", k) for o in observations])
    m = np.array([_given(o, "member", k) for o in observations])
    return np.stack([(nm - g * m) / own for g in gamma], axis=1)


def conrecall_fallback(obs: Observation, *, shots: int = 7, gamma: float = 0.5) -> str | None:
    """As recall_fallback, for either prefix (member or non-member shots)."""
    if _no_room(obs, SHOT_ROLES["conrecall"], shots):
        return NO_ROOM
    return None if _ll(obs.target) < -_TINY else ZERO_LL


@register_method("recall", needs=(Need.SHOTS,), paper="Xie et al. 2024", named_only=True,
                 fallback=recall_fallback,
                 cost="+1 pass over the texts (the shots' prefix computed once)",
                 summary="LL(x | non-member shots) / LL(x)")
def recall(obs: Observation, *, shots: int = 7) -> float:
    """LL(x | P_nm) / LL(x): LL(x) is the mean log-probability of x's tokens, LL(x | P) the
    same with the prefix P before x, P_nm the first `shots` non-member shots (whole shots
    dropped from the front when the context is short). Higher = member: a non-member prefix
    lowers a member's log-likelihood more."""
    _check(shots)
    return _given(obs, "nonmember", shots) / _own(obs)


@register_method("conrecall", needs=(Need.SHOTS,), paper="Wang et al. 2024", named_only=True,
                 fallback=conrecall_fallback,
                 grid=Grid({"gamma": GAMMA_GRID}, conrecall_grid, per_text=True),
                 cost="+2 passes over the texts (member and non-member prefixes, each once)",
                 summary="(LL(x | non-member shots) - gamma LL(x | member shots)) / LL(x); "
                         "needs labelled shots")
def conrecall(obs: Observation, *, shots: int = 7, gamma: float = 0.5) -> float:
    """(LL(x | P_nm) - gamma * LL(x | P_m)) / LL(x), LL and P_nm as in `recall`, P_m the
    first `shots` member shots (needs labelled shots: members among them). `gamma` is
    chosen like any other hyperparameter (`val_fraction`, `val_data`)."""
    _check(shots)
    if not np.isfinite(gamma):
        raise PddkitError(f"gamma must be a finite number, not {gamma!r}")
    return (_given(obs, "nonmember", shots) - gamma * _given(obs, "member", shots)) / _own(obs)
