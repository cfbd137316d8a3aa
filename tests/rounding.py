"""Tolerances for comparing float32 computations of a model's statistics, derived from the
rounding of that very arithmetic: the model's plain float32 forward and float32 softmax
(written here, one text at a time, not pddkit's pass) against the same weights run in
float64 measure how far float32 rounding moves L, H and var on these texts and this
machine; methods' scores get the first-order propagation of those bounds through their
formulas.

A float32 computation of the same function that rounds otherwise (pddkit's batched pass,
another batch shape or padding side, an adapter applied beside its weight instead of merged
into it) lies about the measured distance from the float64 value; two such computations
differ by at most twice that. ROUNDING_FACTOR = 4 covers the two, with a factor 2 for
another computation's maximum over the same tokens coming out larger than the measured
one's. No bound is taken below 4 float32 spacings of the largest value (a float32 result
cannot be closer).
"""

from __future__ import annotations

import contextlib
import copy
import zlib
from dataclasses import dataclass

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)  # 2^-23: the float32 spacing at 1
ROUNDING_FACTOR = 4


@dataclass(frozen=True)
class Exact:
    """float64 statistics of one text: L, H and var per position."""

    L: np.ndarray
    H: np.ndarray
    var: np.ndarray


@dataclass(frozen=True)
class Bounds:
    """|difference| allowed between two float32 computations: L and H absolute, var
    relative to the float64 variance."""

    L: float
    H: float
    var_rel: float


def float64_stats(model, start_id: int, seqs) -> list[Exact]:
    """Independent: the model's own forward on [start] + ids, weights cast to float64, and
    the full softmax in float64, one text at a time."""
    import torch

    m = copy.deepcopy(model).double().eval()
    out = []
    with torch.no_grad(), float64_default():
        for ids in seqs:
            x = torch.tensor([[start_id, *[int(t) for t in ids]]])
            logp = torch.log_softmax(m(input_ids=x).logits[0, :-1].double(), -1)
            p = logp.exp()
            H = -(p * logp).sum(-1)
            var = (p * (logp + H[:, None]) ** 2).sum(-1)
            L = logp[torch.arange(len(ids)), torch.tensor([int(t) for t in ids])]
            out.append(Exact(L.numpy(), H.numpy(), var.numpy()))
    return out


@contextlib.contextmanager
def float64_default():
    """torch's default dtype float64 for a float64 forward: transformers 4.4x builds some
    models' causal masks (OPT) with the default dtype and float64's minimum, which does
    not fit a float32 tensor."""
    import torch

    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


def float32_stats(model, start_id: int, seqs) -> list[Exact]:
    """The model's plain float32 forward on [start] + ids, one text at a time, and its
    softmax statistics in float32 (var as sum p (log p + H)^2), returned as float64."""
    import torch

    out = []
    with torch.no_grad():
        for ids in seqs:
            x = torch.tensor([[start_id, *[int(t) for t in ids]]])
            logp = torch.log_softmax(model(input_ids=x).logits[0, :-1].float(), -1)
            p = logp.exp()
            H = -(p * logp).sum(-1)
            var = (p * (logp + H[:, None]) ** 2).sum(-1)
            L = logp[torch.arange(len(ids)), torch.tensor([int(t) for t in ids])]
            out.append(Exact(*(a.double().numpy() for a in (L, H, var))))
    return out


def forward_bounds(model, start_id: int, seqs) -> tuple[list[Exact], Bounds]:
    """(float64 statistics of `seqs`, the bounds any float32 computation of them is held to,
    against those or against another float32 computation): float32_stats measured against
    float64_stats (module docstring)."""
    exact = float64_stats(model, start_id, seqs)
    return exact, measured_bounds(float32_stats(model, start_id, seqs), exact)


def measured_bounds(stats32, exact: list[Exact]) -> Bounds:
    """ROUNDING_FACTOR x the largest float32-vs-float64 distance of `stats32` (statistics of
    one float32 computation of the same texts), floored at 4 spacings of the largest value."""
    def bound(name: str, relative: bool = False) -> float:
        worst, spacing = 0.0, 0.0
        for s, e in zip(stats32, exact):
            got, want = np.asarray(getattr(s, name), np.float64), getattr(e, name)
            diff = np.abs(got - want) / (np.abs(want) if relative else 1.0)
            worst = max(worst, float(diff.max()))
            spacing = max(spacing, EPS32 * (1.0 if relative else float(np.abs(want).max())))
        return ROUNDING_FACTOR * max(worst, spacing)

    return Bounds(L=bound("L"), H=bound("H"), var_rel=bound("var", relative=True))


def zscore_bound(e: Exact, b: Bounds) -> np.ndarray:
    """Per position, first order: z = (L + H) / sqrt(var) moves by at most
    (dL + dH) / sd + |z| dvar / (2 var)."""
    sd = np.sqrt(e.var)
    z = (e.L + e.H) / sd
    return (b.L + b.H) / sd + np.abs(z) * b.var_rel / 2


def score_bound(method: str, e: Exact, b: Bounds, text: str, lower: Exact | None = None) -> float:
    """How far `method`'s score of one text may move when its statistics move within `b`
    (first order): means, order statistics and percentiles of L move by at most dL."""
    name = method.split(":")[0]
    if name in ("loss", "mink", "maxk"):
        return b.L
    if name == "zlib":  # mean L / Z, Z the text's zlib size in bytes
        return b.L / len(zlib.compress(text.encode("utf-8")))
    if name == "minkpp":  # a mean of the lowest z: at most the largest move of a z
        return float(zscore_bound(e, b).max())
    if name == "lowercase":  # -(a / c), a and c mean log-probabilities
        assert lower is not None
        a, c = float(np.mean(e.L)), float(np.mean(lower.L))
        return (b.L + abs(a / c) * b.L) / abs(c)
    if name == "surp":
        assert_surp_set_is_stable(e, b, text)
        return b.L
    raise AssertionError(f"no bound written for {method}")


def assert_surp_set_is_stable(e: Exact, b: Bounds, text: str, threshold: float = 2.0,
                              k: float = 40.0) -> None:
    """surp is a mean of L over S = {H < threshold, L < t}, t the k-th percentile of L
    (linear): it moves by at most dL only while S is the same set in both computations.
    So no H lies within dH of the threshold, and no L within 2 dL of t (t moves by dL at
    most), except the one or two order statistics t is made of: t = a + (b - a) f moves
    with them, so a < t holds in both while (b - a) f > 2 dL, and t < b while
    (b - a)(1 - f) > 2 dL (f = 0: t is a, never below itself)."""
    L = e.L
    n = len(L)
    order = np.argsort(L, kind="stable")
    pos = (n - 1) * k / 100.0
    lo, f = int(np.floor(pos)), pos - np.floor(pos)
    hi = min(lo + 1, n - 1)
    t = L[order[lo]] + (L[order[hi]] - L[order[lo]]) * f
    makers = {int(order[lo])} if f == 0 else {int(order[lo]), int(order[hi])}
    others = np.array([i for i in range(n) if i not in makers], dtype=int)
    assert np.all(np.abs(e.H - threshold) > b.H), f"{text!r}: an entropy at surp's threshold"
    assert others.size == 0 or np.all(np.abs(L[others] - t) > 2 * b.L), \
        f"{text!r}: a log-probability at surp's percentile"
    gap = L[order[hi]] - L[order[lo]]
    if f > 0 and hi != lo:
        assert gap * f > 2 * b.L and gap * (1 - f) > 2 * b.L, \
            f"{text!r}: surp's percentile between two almost equal log-probabilities"
