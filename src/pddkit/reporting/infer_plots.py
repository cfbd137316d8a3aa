"""Figures of the dataset-inference report (Maini et al. 2024): the p-value against the
number of texts used, and the classifier's scores of the tested halves."""

from __future__ import annotations

import numpy as np

from pddkit.reporting.plots import OKABE_ITO, _plt, _png

P_FLOOR = 1e-300  # a p-value of 0 (underflow) drawn at the bottom of the log axis


def p_value_curve_png(curves: dict[str, list[tuple[int, float]]], alpha: float) -> bytes:
    """p-value (log scale) against texts per set (log scale), one line per test, with the
    `alpha` threshold as a horizontal line."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    lowest = alpha
    for (name, points), colour in zip(curves.items(), OKABE_ITO):
        if not points:
            continue
        n = [x for x, _ in points]
        p = [max(y, P_FLOOR) if y is not None else 1.0 for _, y in points]
        lowest = min(lowest, *p)
        ax.plot(n, p, marker="o", markersize=4, linewidth=1.6, color=colour, label=name)
    ax.axhline(alpha, color="#D55E00" if len(curves) < 2 else "black", linewidth=1.0,
               linestyle="--", label=f"alpha = {alpha:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(min(lowest / 3, alpha / 10), 1.5)
    ax.set_xlabel("texts per set (half fit the classifier, half are tested)")
    ax.set_ylabel("p-value (one-sided Welch t-test)")
    ax.set_title("p-value against the number of texts used")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower left")
    fig.subplots_adjust(left=0.13, right=0.97, bottom=0.13, top=0.92)
    return _png(fig, tight=False)


def score_histogram_png(suspect: np.ndarray, reference: np.ndarray) -> bytes:
    """The classifier's log-odds of the tested halves: suspect vs reference texts."""
    plt = _plt()
    s, r = np.asarray(suspect, dtype=float), np.asarray(reference, dtype=float)
    lo, hi = float(min(s.min(), r.min())), float(max(s.max(), r.max()))
    if hi - lo <= 1e-9 * max(1.0, abs(hi)):
        lo, hi = lo - 0.5, hi + 0.5
    bins = np.linspace(lo, hi, 31)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for values, what, colour in ((s, "suspect", "#D55E00"), (r, "reference", "#0072B2")):
        counts, _ = np.histogram(values, bins=bins)
        ax.stairs(counts, bins, fill=True, alpha=0.55, color=colour,
                  label=f"{what} (mean {values.mean():.2f})")
    ax.set_xlabel("classifier score (log-odds; higher = more member-like)")
    ax.set_ylabel("texts")
    ax.set_title("scores of the tested halves")
    ax.legend(fontsize=8)
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.15, top=0.9)
    return _png(fig, tight=False)
