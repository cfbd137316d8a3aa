"""ACMIA's tempered statistics (SPEC 3e), accumulated by the statistics pass from the same
logits as L, H, M2: per position and inverse temperature, the tempered log-probability and
its normalised form; and which positions are their id's first occurrence (the set F whose
mean ACMIA takes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pddkit.stats import ACMIA_BETAS

# the tempered sums run over row groups whose [rows, 10, V] float32 block of exponentials
# stays this small, so that its squarings and reductions work in the CPU's cache
TEMPERED_BYTES = 4 * 2**20
FLOAT32_MAX = float(np.finfo(np.float32).max)
D_FLOOR = -1e4  # log p - Lmax below this (only masked entries of the vocabulary) is floored


def tempered_chunk(logits, targets):
    """[C, V] logits, [C] target ids -> (Lb, norm), each [C, 52] float32: per position and
    inverse temperature b of ACMIA_BETAS (SPEC 3e), with d = log p - Lmax (<= 0),
    e = exp(b d) and S = sum_v e (>= 1):
      Lb   = b L - logsumexp_v(b log p)  = b (L - Lmax) - log S
      norm = (Lb - mu) / (sigma + 1e-10) = b ((L - Lmax) - m) / (b sqrt(v) + 1e-10)
    where m = sum e d / S = E_q[log p] - Lmax and v = sum e d^2 / S - m^2 = Var_q[log p],
    q = softmax(b log p): mu = sum q log q = b E_q[log p] - logsumexp and sigma = b sd_q,
    the same numbers without the cancellation of two values near -logsumexp (the moments
    are taken about the mode, d = 0, not about zero). NaN in norm becomes 0 and it is
    clipped to the float32 range (Main_file.py:275).

    The grid doubles b every 10 steps (b_(j+10) = 2 b_j), so exp(b_(j+10) d) = exp(b_j d)^2:
    10 exponentials per position (b_1..b_10) and squarings for the other 41, each block of
    10 reduced (one batched product with [1, d, d^2]) before it is squared in place. Besides
    the logits, [C, V] x 4 and [C, 10, V] float32 are alive."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)  # [C, V]
    L = logp.gather(1, targets[:, None])[:, 0]  # [C]
    Lmax = logp.max(-1).values  # [C]
    # [C, V] log p - Lmax in place of log p; a masked entry (a -inf logit) floored at
    # -1e4, where exp(b d) is 0 for every b > 0 and 0 * d stays 0 (never 0 * -inf)
    d = logp.sub_(Lmax[:, None]).clamp_(min=D_FLOOR)
    moments = torch.stack((d, d * d), 1)  # [C, 2, V] (read transposed: the faster product)
    sums = torch.empty((d.shape[0], len(ACMIA_BETAS), 3), device=d.device)  # [C, 52, 3]
    sums[:, 0, 0] = d.shape[1]  # b = 0: e = 1 everywhere
    sums[:, 0, 1:] = moments.sum(2)
    betas = torch.tensor(ACMIA_BETAS, dtype=torch.float32, device=d.device)  # [52]
    e = torch.mul(betas[None, 1:11, None], d[:, None, :]).exp_()  # [C, 10, V] b_1..b_10
    for lo in range(1, len(ACMIA_BETAS), 10):
        if lo > 1:
            e.square_()  # b_lo.. = 2 x the previous block's
        n = min(10, len(ACMIA_BETAS) - lo)
        sums[:, lo:lo + n, 0] = e[:, :n].sum(-1)  # [C, n] S
        sums[:, lo:lo + n, 1:] = torch.bmm(e[:, :n], moments.transpose(1, 2))  # [C, n, 2]
    S = sums[..., 0]  # [C, 52]
    m = sums[..., 1] / S  # [C, 52]
    v = (sums[..., 2] / S - m * m).clamp_(min=0.0)  # [C, 52]
    gap = (L - Lmax)[:, None]  # [C, 1] <= 0
    Lb = betas * gap - torch.log(S)  # [C, 52]
    norm = betas * (gap - m) / (betas * v.sqrt() + 1e-10)  # [C, 52]
    return Lb, torch.nan_to_num(norm, nan=0.0, posinf=FLOAT32_MAX, neginf=-FLOAT32_MAX)



def first_occurrences(seqs: Sequence[Sequence[int]]) -> np.ndarray:
    """[P] bool over the positions of `seqs` laid end to end: the first occurrence of each
    distinct id within its own sequence (F of SPEC 3e; numpy.unique's return_index)."""
    out = []
    for s in seqs:
        mask = np.zeros(len(s), dtype=bool)
        mask[np.unique(np.asarray(s, dtype=np.int64), return_index=True)[1]] = True
        out.append(mask)
    return np.concatenate(out) if out else np.zeros(0, dtype=bool)
