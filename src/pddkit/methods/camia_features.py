"""CAMIA's 75 features of one text (SPEC 3e; Chang et al., EMNLP 2025), pure numpy.

Inputs: the text's ids x_1..x_n and L_i = log P(x_i | x_0..x_{i-1}) (SPEC 2, the start
token x_0 kept), and the statistics of the repeated text x_rep = x + (" " + x) x 5: its ids
and L_rep. Python slices throughout: e = -1 is `[:-1]` (the last token left out, as the
authors' `end_time=-1` does, util_features.py:209-253), e = 200 is `[:200]`.

Families (FEATURE_NAMES lists the 75 in order):
- on L: loss_e = mean L[:e] and ppl_e = exp(-loss_e) (e in -1, 200, 300); count_above_t =
  mean(L[:200] >= t) (t in -1, -2, -3); lz_b = Lempel-Ziv complexity of L[:200] with b bins
  (b in 3, 4, 5); div_e = |set(ids[:e])| / |ids[:e]|; count_mean_e = #{L[:e] > mean L[:e]};
  loss_div_e = loss_e / div_e; ppl_div_e = ppl_e / div_e (util_features.py:390-451);
- for every family but div, f(L^(1)) - f(L^(2)) and f(L^(1)) - f(L^(3)), with L^(c) = L_rep
  at the c-th exact occurrence of x_3..x_n in x_rep and div from the text's own ids, as
  the authors pass the text's labels for the copies (run_ours_train_lr.py:195-204,260-285);
- slope_e = least-squares slope of L_rep[:e] against 0, 1, ..., and apen_e = approximate
  entropy of L_rep[:e] (m = 8, r = 0.8 std), e in 600, 800, 1000 (train_lr.py:209-232);
- above_running_mean_e: the share of t in [1, min(e, n)) (0-based) with L_t > mean(L_0..L_{t-1}),
  e in inf, 200, 300 (train_lr.py:297-320).

Sequences too short for a feature (where the authors' numpy gives NaN or raises): a mean
over an empty slice is 0 (loss 0, ppl 1), div of no ids is 1, count_above, count_mean, LZ
complexity, the running-mean share and the slope of fewer than two values are 0; approximate
entropy of N <= m + 1 values is 0, as the authors' function returns (util_features.py:121-122).
A copy difference whose occurrence is missing (x_rep cut to the model's context, a text of
two tokens or fewer, or a copy tokenised differently) is 0: `occurrences` says how many were
found and the method counts such texts (methods/camia.py)."""

from __future__ import annotations

import math

import numpy as np

ENDS = (-1, 200, 300)  # the prefixes of loss, ppl, div, count_mean and their quotients
THRESHOLDS = (-1.0, -2.0, -3.0)  # count_above, on L[:200]
LZ_BINS = (3, 4, 5)  # Lempel-Ziv complexity, on L[:200]
REP_ENDS = (600, 800, 1000)  # slope and approximate entropy, on L_rep prefixes
APEN_M, APEN_R = 8, 0.8
RUNNING_ENDS = (math.inf, 200, 300)
COPIES = 5  # x_rep = x + (" " + x) x COPIES
USED = 3  # the features read the first three occurrences (L^(1), L^(2), L^(3))
FIRST = 2  # occurrences are those of x_3..x_n: the first two tokens may tokenise otherwise


def repeated_text(text: str) -> str:
    """x followed by five copies of " " + x (run_ours_construct_mia_data.py:79-81)."""
    return text + (" " + text) * COPIES


def _end(e) -> str:
    return f"[:{e}]" if e != math.inf else "[:]"


def _names() -> tuple[str, ...]:
    single = ([f"loss{_end(e)}" for e in ENDS] + [f"ppl{_end(e)}" for e in ENDS]
              + [f"count_above{t:g}" for t in THRESHOLDS] + [f"lz{b}" for b in LZ_BINS])
    rest = ([f"count_mean{_end(e)}" for e in ENDS] + [f"loss_div{_end(e)}" for e in ENDS]
            + [f"ppl_div{_end(e)}" for e in ENDS])
    diffs = [f"{name} 1-{c}" for name in single + rest for c in (2, 3)]
    return tuple(single + [f"div{_end(e)}" for e in ENDS] + rest + diffs
                 + [f"slope{_end(e)}" for e in REP_ENDS] + [f"apen{_end(e)}" for e in REP_ENDS]
                 + [f"above_running_mean{_end(e)}" for e in RUNNING_ENDS])


FEATURE_NAMES = _names()  # the 75 features, in the order of `features`


def mean0(x: np.ndarray) -> float:
    """mean, 0 for no values."""
    return float(np.mean(x)) if len(x) else 0.0


def lempel_ziv(x: np.ndarray, bins: int) -> float:
    """The authors' binned Lempel-Ziv complexity (util_features.py:43-83): the values
    digitised on 100 edges from min(x) to 0, those indices cut into `bins` equal bins, then
    the number of distinct phrases of a left-to-right parse (each new phrase the shortest
    one not seen before) over the length; 0 for no values."""
    if len(x) == 0:
        return 0.0
    edges = np.linspace(np.min(x), 0.0, 100)
    d = np.digitize(x, bins=edges, right=True)
    cuts = np.linspace(np.min(d), np.max(d), bins + 1)[1:]
    seq = np.searchsorted(cuts, d, side="left").tolist()
    seen: set[tuple] = set()
    start, width, n = 0, 1, len(seq)
    while start + width <= n:
        phrase = tuple(seq[start:start + width])
        if phrase in seen:
            width += 1
        else:
            seen.add(phrase)
            start, width = start + width, 1
    return len(seen) / n


def approximate_entropy(x: np.ndarray, m: int = APEN_M, r: float = APEN_R,
                        dist: np.ndarray | None = None) -> float:
    """|Phi_m - Phi_{m+1}| with tolerance r * std(x) (util_features.py:86-132), the
    Chebyshev distance between runs of length m: Phi_k = mean_i log(C_i^k) with C_i^k the
    share of runs j within the tolerance of run i (i itself included); 0 for N <= m + 1.
    `dist`: |x_i - x_j| of a longer sequence that x begins (shared by several prefixes)."""
    x = np.asarray(x, dtype=np.float64)
    N = len(x)
    if N <= m + 1:
        return 0.0
    if dist is None:
        dist = np.abs(x[:, None] - x[None, :])
    close = dist[:N, :N] <= r * float(np.std(x))  # [N, N] |x_i - x_j| within the tolerance
    k = N - m  # runs of length m + 1; N - m + 1 runs of length m
    near = close[:k + 1, :k + 1].copy()
    for s in range(1, m):  # run i near run j: every one of their m values within tolerance
        near &= close[s:s + k + 1, s:s + k + 1]
    phi_m = float(np.mean(np.log(near.sum(axis=0) / (k + 1))))
    longer = near[:k, :k] & close[m:m + k, m:m + k]
    phi_m1 = float(np.mean(np.log(longer.sum(axis=0) / k)))
    return abs(phi_m - phi_m1)


def slope(x: np.ndarray) -> float:
    """The least-squares slope of x against 0..len-1 (numpy.polyfit's degree-1
    coefficient); 0 for fewer than two values."""
    if len(x) < 2:
        return 0.0
    t = np.arange(len(x), dtype=np.float64)
    t -= t.mean()
    return float(np.dot(t, x - np.mean(x)) / np.dot(t, t))


def above_running_mean(L: np.ndarray, e: float) -> float:
    """The share of t in [1, min(e, n)) with L_t above the mean of L_0..L_{t-1}; 0 if none."""
    stop = int(min(e, len(L)))
    if stop <= 1:
        return 0.0
    prior = np.cumsum(L[:stop - 1]) / np.arange(1, stop)  # mean L[:t] for t = 1..stop-1
    return float(np.mean(L[1:stop] > prior))


def occurrences(ids: np.ndarray, rep_ids: np.ndarray) -> list[int]:
    """The starts of every exact occurrence (overlapping ones too) of ids[2:] in rep_ids,
    as find_sublist_indices finds them (util_features.py:306-338,454-472); none when ids[2:]
    is empty. The features read the first three: where all six copies are scored and
    found, these are the first three of the authors' `all_si[:-2]` (the last two dropped)."""
    pattern = np.asarray(ids[FIRST:])
    k = len(pattern)
    if k == 0 or k > len(rep_ids):
        return []
    starts = np.flatnonzero(rep_ids[:len(rep_ids) - k + 1] == pattern[0])
    found = [int(s) for s in starts if np.array_equal(rep_ids[s:s + k], pattern)]
    return found


def _family(L: np.ndarray, div: list[float]) -> list[float]:
    """loss, ppl, count_above, lz, count_mean, loss_div, ppl_div of one L (21 values)."""
    loss = [mean0(L[:e]) for e in ENDS]
    ppl = [math.exp(-v) for v in loss]
    head = L[:200]
    above = [mean0(head >= t) for t in THRESHOLDS]
    lz = [lempel_ziv(head, b) for b in LZ_BINS]
    count_mean = [float(np.sum(L[:e] > np.mean(L[:e]))) if len(L[:e]) else 0.0 for e in ENDS]
    return (loss + ppl + above + lz + count_mean + [a / d for a, d in zip(loss, div)]
            + [p / d for p, d in zip(ppl, div)])


def features(ids, L, rep_ids, L_rep) -> np.ndarray:
    """[75] float64: the features of FEATURE_NAMES for one text (module docstring)."""
    ids = np.asarray(ids, dtype=np.int64)
    L = np.asarray(L, dtype=np.float64)
    rep_ids = np.asarray(rep_ids, dtype=np.int64)
    L_rep = np.asarray(L_rep, dtype=np.float64)
    div = [len(set(ids[:e].tolist())) / len(ids[:e]) if len(ids[:e]) else 1.0 for e in ENDS]
    own = _family(L, div)
    starts = occurrences(ids, rep_ids)
    k = len(ids) - FIRST
    copies = [_family(L_rep[s:s + k], div) for s in starts[:USED]]
    diffs = []
    for j in range(len(own)):
        for c in (1, 2):  # L^(1) - L^(2), L^(1) - L^(3); 0 where a copy is missing
            diffs.append(copies[0][j] - copies[c][j] if len(copies) > c else 0.0)
    head = L_rep[:max(REP_ENDS)]
    dist = np.abs(head[:, None] - head[None, :])  # shared by the three prefixes
    rep = ([slope(L_rep[:e]) for e in REP_ENDS]
           + [approximate_entropy(L_rep[:e], dist=dist) for e in REP_ENDS]
           + [above_running_mean(L, e) for e in RUNNING_ENDS])
    out = np.array(own[:12] + div + own[12:] + diffs + rep, dtype=np.float64)
    assert out.shape == (len(FEATURE_NAMES),)
    return out
