"""Figures of the unlearning audit (`pddkit compare`, Shi et al. 2024 section 7):
the histogram of score ratios with the "not removed" band marked."""

from __future__ import annotations

import numpy as np

from pddkit.reporting.plots import _plt, _png


def ratio_histogram_png(ratios, band: float, method: str) -> bytes:
    """Ratios score_unlearned / score_original on a log axis (1/r and r equally far from
    1); the band (1/band, band) shaded, the chunks inside it counted in the legend."""
    plt = _plt()
    r = np.asarray(ratios, dtype=float)
    lo = min(float(r.min()), 1 / band) / 1.05
    hi = max(float(r.max()), band) * 1.05
    bins = np.geomspace(lo, hi, 41)
    inside = (r > 1 / band) & (r < band)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.axvspan(1 / band, band, color="#E69F00", alpha=0.18,
               label=f"band (1/{band:g}, {band:g}): not removed, {int(inside.sum())} of {len(r)}")
    counts, _ = np.histogram(r, bins=bins)
    ax.stairs(counts, bins, fill=True, color="#0072B2", alpha=0.75, label="chunks")
    for x in (1 / band, band):
        ax.axvline(x, color="#D55E00", linewidth=1.2, linestyle="--")
    ax.axvline(1.0, color="black", linewidth=0.7, linestyle=":")
    ax.set_xscale("log")
    ticks: list[float] = []  # by priority, none closer than 8% of the axis to another
    for t in (1.0, band, 1 / band, 2, 0.5, 5, 0.2, 10, 0.1, 1.5, 0.75, 1.25, 3, 20, 50, 100):
        if lo < t < hi and all(abs(np.log(t / u)) >= 0.08 * np.log(hi / lo) for u in ticks):
            ticks.append(t)
    ticks.sort()
    ax.set_xticks(ticks, [f"{t:.3g}" for t in ticks])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel(f"{method} ratio: unlearned / original (> 1: less likely after unlearning)")
    ax.set_ylabel("chunks")
    ax.set_title("How far unlearning moved each chunk's score")
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    return _png(fig)
