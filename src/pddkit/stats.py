"""Per-token statistics: the log-probability L of each text token, the entropy H of the
model's distribution there, its second moment M2 of the log-probability and its variance
var of the log-probability, computed in float32 over the whole vocabulary; the only model
output single-pass methods see.

var = M2 - H^2 mathematically (SPEC section 2), but that difference cancels in float32
wherever the variance is small against H^2 (a near-uniform distribution over many tokens:
H^2 ~ 100, var ~ 1e-4, and float32's spacing at 100 is 8e-6): a backend computes var
directly, as sum_v P(v) (log P(v) + H)^2, in the same pass, and readers of the variance
(minkpp, infill, gapk) read `var`, never M2 - H^2.

Lmax, the largest log-probability at each position (gapk), is optional (OPTIONAL_FIELDS):
a backend with the full distribution gives it, the statistics cache stores it where an
entry has it, and a method that reads it says so (register_method's `reads`), so that an
entry stored without it is computed again for that method only.

`tempered` (acmia) is optional too, and one per text rather than per token: [2, 52] float64,
the means over the first occurrence of each distinct id of the tempered log-probability
L_i^b = b L_i - logsumexp_v(b log P_i(v)) (row 0) and of its normalised form
b (L_i - E_q[log P_i]) / (b sd_q(log P_i) + 1e-10), q = softmax(b log P_i) (row 1), at each
inverse temperature b of ACMIA_BETAS (SPEC 3e). A backend computes it only when a pass asks
for it (ON_REQUEST): it costs 52 sums over the vocabulary per position."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

# TokenStats fields a backend may leave None and a method may read (register_method's
# `reads`): the statistics cache serves an entry stored without one as a miss only to a
# pass whose methods read it
OPTIONAL_FIELDS = ("Lmax", "tempered")
# optional fields held once per text, with their shape (the others: one float per token)
PER_TEXT_SHAPES = {"tempered": (2, 52)}
# optional fields a backend computes only when a pass asks for them (their cost is not small)
ON_REQUEST = frozenset({"tempered"})
# ACMIA's inverse temperatures (SPEC 3e; com_pro_dis.py:220-224): b_0 = 0 and
# b_j = 2^(0.1 (j - 26)), j = 1..51 (b_26 = 1); the columns of TokenStats.tempered
ACMIA_BETAS = (0.0, *(2.0 ** (0.1 * (j - 26)) for j in range(1, 52)))


@dataclass(frozen=True)
class TokenStats:
    """Statistics of one text under one model, over its n text positions (no start token).

    ids[i] = x_{i+1}; L = log P(x_i); H = entropy of P_i (nats); M2 = E_{P_i}[(log P)^2];
    var = E_{P_i}[(log P + H)^2], the variance of log P under P_i (= M2 - H^2);
    Lmax = max_v log P_i(v) = log P_i(argmax), so L <= Lmax, with equality where x_i is
    the argmax.

    A backend gives `var` computed without cancellation. Hand-made statistics (tests,
    examples) may leave it out: it is then M2 - H^2 computed in float64 from the values
    given, exact for the numbers a person writes, and as inexact as float32 allows for a
    model's float32 M2 (never what a backend gives)."""

    ids: np.ndarray  # [n] int64
    L: np.ndarray  # [n] float32
    H: np.ndarray  # [n] float32
    M2: np.ndarray  # [n] float32
    truncated: bool = False  # the text was cut to the model's context
    top: np.ndarray | None = None  # [n] int64 argmax id of P_i (infill); None if not computed
    var: np.ndarray | None = None  # [n] float32; None given: M2 - H^2 (float64), see above
    # [n] float32 max_v log P_i(v) (gapk); None where not computed (a backend giving only L,
    # or a cache entry stored before pddkit kept it)
    Lmax: np.ndarray | None = None
    # [2, 52] float64 per text (acmia; module docstring); None where not computed
    tempered: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.var is None:
            derived = np.asarray(self.M2, np.float64) - np.asarray(self.H, np.float64) ** 2
            object.__setattr__(self, "var", derived.astype(np.float32))

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @classmethod
    def from_lists(cls, ids, L, H=None, M2=None, truncated: bool = False,
                   var=None, Lmax=None, tempered=None) -> TokenStats:
        """Hand-made statistics (tests, examples): H and M2 default to zeros, var to
        M2 - H^2 (float64), Lmax and tempered to None."""
        n = len(ids)
        zeros = [0.0] * n
        return cls(
            ids=np.asarray(ids, dtype=np.int64),
            L=np.asarray(L, dtype=np.float32),
            H=np.asarray(zeros if H is None else H, dtype=np.float32),
            M2=np.asarray(zeros if M2 is None else M2, dtype=np.float32),
            truncated=truncated,
            var=None if var is None else np.asarray(var, dtype=np.float32),
            Lmax=None if Lmax is None else np.asarray(Lmax, dtype=np.float32),
            tempered=None if tempered is None else np.asarray(tempered, dtype=np.float64),
        )


@dataclass(frozen=True)
class Observation:
    """Everything a method may read about one text; fields a run did not compute are None."""

    text: str  # the scored span: the whole text, or the decoded tokens kept when truncated
    target: TokenStats
    lower: TokenStats | None = None  # target model on text.lower()
    reference: TokenStats | None = None  # reference model, its own tokenizer
    log_freq: np.ndarray | None = None  # [|V|] log f(v) of the frequency table (DC-PDD)
    # target model on neighbour texts, best first: per (top_k, dropout, seed) of `neighbor`
    # (resources.neighbor_sets.NeighborParams), or one tuple for any parameters (hand-made)
    neighbors: Mapping[tuple, tuple[TokenStats, ...]] | tuple[TokenStats, ...] | None = None
    probe: float | None = None  # member probability of the linear probe (resources/probe/)
    # SPEC 3b. The text's statistics given a prefix of shots, per (role, shots) with role
    # "member" / "nonmember" and shots the number asked for (engine/shots_pass.py)
    conditioned: Mapping[tuple, TokenStats] | None = None
    # pac: the augmented copies' statistics, per augmentation parameters (engine/augment_pass.py)
    augmented: Mapping[tuple, tuple[TokenStats, ...]] | tuple[TokenStats, ...] | None = None
    # samia: sampled continuations' texts, per sampling parameters (engine/sample_pass.py)
    samples: Mapping[tuple, tuple[str, ...]] | tuple[str, ...] | None = None
    # infill: per position i (0-based) whose token is not the argmax, the statistics of the
    # text with x_i replaced by the argmax, cut after i + lookahead (engine/infill_pass.py)
    infill: tuple[tuple[int, TokenStats], ...] | None = None
    # fsd: the target with its LoRA adapter tuned on the calibration non-members, per
    # tuning settings (resources/fsd_tuning.py TuningSettings.key), or one for any (hand-made)
    finetuned: Mapping[tuple, TokenStats] | TokenStats | None = None
    # camia: the target model on x + (" " + x) x 5 of the scored span (engine/repeat_pass.py)
    repeated: TokenStats | None = None
    # emmia: the text's EM-MIA score per (init, iters, prefix_score), computed from every
    # text's conditional scores given every other (engine/emmia_pass.py; methods/emmia.py)
    emmia: Mapping[tuple, float] | None = None
    # decop: per (chat, order of the options), the letter answered (None: no letter) and the
    # four letters' probabilities (None: a server giving the letter only) (engine/decop_pass.py)
    quiz: Mapping[tuple, tuple] | None = None
