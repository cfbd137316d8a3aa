"""Figures for reports (matplotlib, no display needed): ROC curves, score histograms, AUC
against a swept knob, the SURP validation heatmap."""

from __future__ import annotations

import io

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig, tight: bool = True) -> bytes:
    """PNG bytes of `fig`, closed; `tight` crops to what is drawn (a second draw: figures
    laid out by tight_layout() do without)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight" if tight else None)
    _plt().close(fig)
    return buf.getvalue()


# Okabe-Ito without black (kept for the blind baseline); 7 colours and 4 line styles are
# coprime, so the first 28 methods each get their own (colour, style) pair
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")
LINESTYLES = ("-", "--", "-.", ":")
BLIND_STYLE = {"color": "#000000", "linestyle": (0, (5, 2, 1, 2, 1, 2))}


def method_styles(names) -> dict[str, dict]:
    """Colour-blind-safe colour and line style per method; the blind baseline in black."""
    out, i = {}, 0
    for name in names:
        if name == "blind":
            out[name] = dict(BLIND_STYLE)
            continue
        out[name] = {"color": OKABE_ITO[i % len(OKABE_ITO)],
                     "linestyle": LINESTYLES[i % len(LINESTYLES)]}
        i += 1
    return out


def roc_figure(labels: np.ndarray, scores: dict[str, np.ndarray], loglog: bool):
    """The ROC figure (open; roc_png renders and closes it): legend with each AUC,
    outside the axes on the right. The figure is sized for its legend (fixed margins in
    inches), so it is drawn once, not twice as a tight bounding box would."""
    from pddkit.evaluation.metrics import roc_points, weighted_roc

    plt = _plt()
    styles = method_styles(scores)
    curves = {}
    for name, s in scores.items():
        s = np.asarray(s, dtype=float)
        auc = float(weighted_roc(s, np.asarray(labels), np.ones((1, len(s))))[0][0])  # the table's AUC
        curves[f"{name} (AUC {auc:.3f})"] = (name, roc_points(s, np.asarray(labels)))
    ncol = 1 if len(scores) <= 16 else 2
    longest = max((len(k) for k in curves), default=10)
    legend_in = ncol * (0.6 + 0.047 * longest)  # handle + text at 8 pt, per column
    axes_in, left_in, right_in, height_in = 5.3, 0.75, 0.25, 5.0
    width_in = left_in + axes_in + 0.2 + legend_in + right_in
    fig, ax = plt.subplots(figsize=(width_in, height_in))
    fig.subplots_adjust(left=left_in / width_in, right=(left_in + axes_in) / width_in,
                        bottom=0.6 / height_in, top=1 - 0.4 / height_in)
    for label, (name, (fpr, tpr)) in curves.items():
        ax.plot(fpr, tpr, label=label, linewidth=1.6, **styles[name])
    n_neg = int((labels == 0).sum())
    chance = {"color": "#999999", "linewidth": 0.6, "linestyle": ":"}
    if loglog:
        lo = min(0.01, 1.0 / max(n_neg, 1))  # down to one false positive
        grid = np.logspace(np.log10(lo), 0, 50)
        ax.plot(grid, grid, **chance)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, 1)
        ax.set_ylim(lo, 1.05)
        ax.set_title("ROC (log-log: low false-positive rates)")
    else:
        ax.plot([0, 1], [0, 1], **chance)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.01)
        ax.set_title("ROC")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              ncol=ncol, handlelength=3.2, frameon=False)
    ax.grid(alpha=0.3)
    return fig


def roc_png(labels: np.ndarray, scores: dict[str, np.ndarray], loglog: bool) -> bytes:
    """One ROC curve per method; log-log axes show the low-FPR regime."""
    return _png(roc_figure(labels, scores, loglog), tight=False)


def histograms_png(labels: np.ndarray, scores: dict[str, np.ndarray]) -> bytes:
    """Score distributions of members vs non-members, one panel per method."""
    plt = _plt()
    n = len(scores)
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.9 * rows), squeeze=False)
    for ax, (name, s) in zip(axes.ravel(), scores.items()):
        lo, hi = float(s.min()), float(s.max())
        pad = 1e-9 * max(1.0, abs(hi))
        if hi - lo <= pad:  # (nearly) constant scores: one visible bar, not an error
            lo, hi = lo - pad, hi + pad
        bins = np.linspace(lo, hi, 31)
        for cls, what, colour in ((1, "members", "#D55E00"), (0, "non-members", "#0072B2")):
            counts, _ = np.histogram(s[labels == cls], bins=bins)  # one artist, not 30 bars
            ax.stairs(counts, bins, fill=True, alpha=0.55, label=what, color=colour)
        ax.set_title(name, fontsize=10)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("scores: members vs non-members (higher = member)", fontsize=10)
    inch = 2.9 * rows  # fixed margins in inches, not tight_layout's extra draws
    fig.subplots_adjust(left=0.05, right=0.985, bottom=0.35 / inch, top=1 - 0.55 / inch,
                        wspace=0.2, hspace=0.75 / 2.9 + 0.2)
    return _png(fig, tight=False)


def lines_png(x_label: str, x_values: list, series: dict[str, list[float]], title: str) -> bytes:
    """AUC (y) against a swept knob (x), one line per method."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    pos = np.arange(len(x_values))
    styles = method_styles(series)
    for name, ys in series.items():
        ax.plot(pos, ys, label=name, marker=None if name == "blind" else "o", **styles[name])
    ax.axhline(0.5, color="black", linewidth=0.6, linestyle=":")
    ax.set_xticks(pos, [str(v) for v in x_values])
    ax.set_xlabel(x_label)
    ax.set_ylabel("AUC")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              handlelength=3.2, frameon=False)
    ax.grid(alpha=0.3)
    return _png(fig)


def heatmap_png(values: np.ndarray, rows: list, cols: list, row_label: str, col_label: str,
                title: str) -> bytes:
    """Validation AUC over a 2-D grid (SURP: entropy threshold x percentile k)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 6))
    im = ax.imshow(values, cmap="viridis", aspect="auto", origin="lower")
    ax.set_xticks(range(len(cols)), [f"{c:g}" for c in cols], fontsize=7)
    ax.set_yticks(range(len(rows)), [f"{r:g}" for r in rows], fontsize=7)
    ax.set_xlabel(col_label)
    ax.set_ylabel(row_label)
    best = np.unravel_index(np.nanargmax(values), values.shape)
    ax.scatter([best[1]], [best[0]], marker="*", s=140, color="red", label="best on validation")
    ax.legend(fontsize=7, loc="upper right")
    fig.colorbar(im, ax=ax, label="validation AUC")
    ax.set_title(title)
    return _png(fig)
