"""Figures of the case studies (matplotlib, no display needed; Okabe-Ito colours, fixed
margins in inches as in plots.py). Each function is self-contained and returns PNG bytes."""

from __future__ import annotations

import numpy as np

from pddkit.reporting.plots import OKABE_ITO, _plt, _png


def _short(name: str, n: int = 42) -> str:
    return name if len(name) <= n else name[:n - 1] + "…"


def book_rates_png(books: list[str], rates: list[float], lows: list[float],
                   highs: list[float], expected: float, flagged: list[bool] | None = None) -> bytes:
    """Copyrighted-book audit (Shi et al. 2024): one horizontal bar per book (ranked, top
    first), its Wilson 95% interval as whiskers, and the rate expected for a never-seen
    book (the validation FPR) as a dashed line. Flagged books in vermillion."""
    plt = _plt()
    n = len(books)
    flagged = flagged or [False] * n
    bar_in, top_in, bottom_in, left_in, axes_in, right_in = 0.28, 0.5, 0.65, 3.3, 5.0, 0.3
    height = top_in + bottom_in + bar_in * max(n, 2)
    width = left_in + axes_in + right_in
    fig, ax = plt.subplots(figsize=(width, height))
    fig.subplots_adjust(left=left_in / width, right=(left_in + axes_in) / width,
                        bottom=bottom_in / height, top=1 - top_in / height)
    y = np.arange(n)[::-1]  # the first book at the top
    r, lo, hi = (100 * np.asarray(v, dtype=float) for v in (rates, lows, highs))
    colours = [OKABE_ITO[3] if f else OKABE_ITO[0] for f in flagged]
    ax.barh(y, r, height=0.7, color=colours, alpha=0.85)
    ax.errorbar(r, y, xerr=np.vstack([r - lo, hi - r]), fmt="none", ecolor="#333333",
                elinewidth=1.0, capsize=2.5)
    ax.axvline(100 * expected, color="#000000", linestyle="--", linewidth=1.2,
               label=f"expected for a never-seen book ({100 * expected:.1f}%)")
    ax.set_yticks(y, [_short(b) for b in books], fontsize=8)
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlabel("contamination rate: % of snippets above the threshold (95% interval)")
    ax.legend(fontsize=8, loc="lower right", bbox_to_anchor=(1.0, 1.0), frameon=False,
              borderaxespad=0.2)  # above the axes: never over a bar
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("per-book contamination rate", fontsize=10, loc="left")
    return _png(fig, tight=False)


def rate_histogram_png(rates: list[float], expected: float) -> bytes:
    """Distribution of the books' contamination rates (Shi et al. 2024, their Figure 4),
    with the never-seen rate marked."""
    plt = _plt()
    width, height = 6.0, 3.8
    fig, ax = plt.subplots(figsize=(width, height))
    fig.subplots_adjust(left=0.75 / width, right=1 - 0.25 / width, bottom=0.65 / height,
                        top=1 - 0.45 / height)
    bins = np.linspace(0, 100, 21)
    counts, _ = np.histogram(100 * np.asarray(rates, dtype=float), bins=bins)
    ax.stairs(counts, bins, fill=True, color=OKABE_ITO[0], alpha=0.8, label="books")
    ax.axvline(100 * expected, color="#000000", linestyle="--", linewidth=1.2,
               label="expected for a never-seen book")
    ax.set_xlim(0, 100)
    ax.set_ylim(0, max(int(counts.max()), 1) * 1.3)  # room for the legend
    ax.set_xlabel("contamination rate (%)")
    ax.set_ylabel("books")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=8, loc="upper center", frameon=False)
    ax.set_title("distribution of contamination rates", fontsize=10)
    ax.grid(alpha=0.3)
    return _png(fig, tight=False)
