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


def _params(p: dict) -> str:
    return ",".join(f"{k}={v:g}" for k, v in p.items())


def validation_table(result: RunResult) -> str:
    """Per method: default value, value chosen on validation data, and the test oracle."""
    rows = [["method", "default: AUC", "validated value", "AUC [95% CI] on test",
             "oracle (best on test)"]]
    ms = result.metrics()
    for label, v in result.validation.items():
        default = _params(v.default if v.default is not None else
                          next(m.params for m in result.methods if m.label == label))
        rows.append([label, f"{default}: {_fmt(ms[label].auc)}", _params(v.chosen),
                     f"{_fmt(v.test.auc)} [{_fmt(v.test.auc_ci.low)}, {_fmt(v.test.auc_ci.high)}]",
                     f"{_params(v.oracle)}: {_fmt(v.oracle_auc)}"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["", "hyperparameters chosen on validation data, measured on the test part:"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows[:1]]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows[1:]]
    lines.append("oracle = the value that did best on the test set itself; not a real result")
    return "\n".join(lines)
