"""Figures of the copyright-traps report (Meeus et al. 2024): AUC against the number of
repeats, one line per trap length (their Table 2 drawn), and AUC against the perplexity
bucket, one line per length x repeats (their Figure 3)."""

from __future__ import annotations

import numpy as np

from pddkit.reporting.plots import _plt, _png, method_styles


def auc_by_repeats_png(repeats: list[int], series: dict[str, list], method: str,
                       epochs: int | None = None) -> bytes:
    """`series`: line label -> per repeat count (auc, low, high) or None (no AUC there);
    intervals as whiskers where there are some. With `epochs`, each tick also gives the
    exposures (repeats x epochs)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    pos = np.arange(len(repeats))
    styles = method_styles(series)
    for name, points in series.items():
        x = [p for p, v in zip(pos, points) if v is not None and v[0] is not None]
        y = [v[0] for v in points if v is not None and v[0] is not None]
        ax.plot(x, y, marker="o", label=name, **styles[name])
        for p, v in zip(pos, points):
            if v is not None and v[0] is not None and v[1] is not None:
                ax.plot([p, p], [v[1], v[2]], color=styles[name]["color"], linewidth=1.0)
    ax.axhline(0.5, color="black", linewidth=0.6, linestyle=":")
    if epochs is None:
        ax.set_xticks(pos, [str(r) for r in repeats])
        ax.set_xlabel("times each trap was inserted (exposures unknown: epochs not given)")
    else:
        ax.set_xticks(pos, [f"{r}\n({r * epochs})" for r in repeats])
        ax.set_xlabel("times each trap was inserted (in brackets: times seen, x "
                      f"{epochs} epoch{'' if epochs == 1 else 's'})")
    ax.set_ylim(0, 1)
    ax.set_ylabel("AUC (95% interval where shown)")
    ax.set_title(f"{method}: inserted vs held-out traps, by trap length")
    ax.legend(fontsize=8, loc="upper left", frameon=False)
    ax.grid(alpha=0.3)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.17, top=0.92)
    return _png(fig, tight=False)


def auc_by_bucket_png(buckets: list[str], series: dict[str, list], method: str) -> bytes:
    """`series`: line label (length x repeats) -> AUC per bucket, None where undefined."""
    plt = _plt()
    width, height = 7.6, 4.4
    fig, ax = plt.subplots(figsize=(width, height))
    pos = np.arange(len(buckets))
    styles = method_styles(series)
    for name, ys in series.items():
        x = [p for p, v in zip(pos, ys) if v is not None]
        ax.plot(x, [v for v in ys if v is not None], marker="o", label=name, **styles[name])
    ax.axhline(0.5, color="black", linewidth=0.6, linestyle=":")
    ax.set_xticks(pos, buckets, fontsize=7, rotation=30)
    ax.set_ylim(0, 1)
    ax.set_xlabel("perplexity bucket (under the generating model)")
    ax.set_ylabel("AUC")
    ax.set_title(f"{method}: AUC by perplexity bucket")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    ax.grid(alpha=0.3)
    fig.subplots_adjust(left=0.9 / width, right=1 - 1.6 / width, bottom=0.9 / height,
                        top=1 - 0.4 / height)
    return _png(fig, tight=False)
