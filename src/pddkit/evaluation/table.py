"""Plain-text metrics table for the terminal; the only place numbers are formatted."""

from __future__ import annotations

from pddkit.evaluation.metrics import FPR_TARGETS
from pddkit.evaluation.results import RunResult


def _fmt(x: float) -> str:
    return "  -  " if x != x else f"{x:.3f}"


def metrics_table(result: RunResult) -> str:
    """Rows = methods; AUC with its 95% CI and TPR at 1/5/10% FPR; best per column marked *."""
    ms = result.metrics()
    if not ms:
        return ""
    cols = ["auc", *[str(t) for t in FPR_TARGETS]]
    best = {c: result.best(c) for c in cols}
    header = ["method", "AUC [95% CI]", *[f"TPR@{t:.0%}FPR" for t in FPR_TARGETS]]
    rows = []
    for label, m in ms.items():
        auc = f"{_fmt(m.auc)}{'*' if best['auc'] == label else ' '} " \
              f"[{_fmt(m.auc_ci.low)}, {_fmt(m.auc_ci.high)}]"
        tprs = [f"{_fmt(m.tpr[t])}{'*' if best[str(t)] == label else ' '}" for t in FPR_TARGETS]
        rows.append([label, auc, *tprs])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    first = next(iter(ms.values()))
    lines.append(f"{first.n_members} members, {first.n_nonmembers} non-members; "
                 f"* = best method in column; CI: {first.n_bootstrap} bootstrap resamples")
    if result.blind is not None:
        lines.append(result.blind.sentence())
    return "\n".join(lines)
