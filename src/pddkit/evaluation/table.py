"""Plain-text metrics table for the terminal; the only place numbers are formatted."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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
                 "* = best detection method in column (blind baseline excluded); "
                 f"CI: {first.n_bootstrap} bootstrap resamples")
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


def _columns(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(rows[0], widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows[1:]]
    return lines


def detection_methods(result: RunResult) -> list[str]:
    """Labels of the detection methods: the blind baseline is not one."""
    return [m.label for m in result.methods if m.label != "blind"]


def scored_line(result: RunResult) -> str:
    """'scored N texts with M methods (...)'; the blind baseline is not counted."""
    c = result.counts
    n = len(detection_methods(result))
    line = (f"scored {c.get('samples', len(result.ids))} texts with {n} "
            f"method{'' if n == 1 else 's'}")
    extra = [f"{(c.get('truncated') or {}).get('target', 0)} truncated",
             f"{c.get('skipped', 0)} skipped"]
    if "blind" in {m.label for m in result.methods}:
        extra.append("plus the blind baseline")
    return f"{line} ({', '.join(extra)})"


def member_ranking(result: RunResult) -> tuple[np.ndarray, np.ndarray]:
    """Text indices from most to least likely member, and their mean rank over the
    detection methods (rank 1 = highest score; ties share their average rank; NaN last)."""
    from scipy.stats import rankdata

    labels = detection_methods(result)
    scores = result.scores()
    ranks = np.array([rankdata(-np.nan_to_num(np.asarray(scores[k], dtype=float),
                                              nan=-np.inf)) for k in labels])
    mean = ranks.mean(axis=0)
    order = np.argsort(mean, kind="stable")
    return order, mean[order]


def _preview(text: str, n: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def unlabelled_summary(result: RunResult, top: int = 10,
                       texts: Sequence[str] | None = None) -> str:
    """Per method mean/median/min/max of its scores, then the `top` texts most likely to be
    members by mean rank over the methods; `texts` (in result.ids order) adds a preview."""
    labels = detection_methods(result)
    if not labels or not result.ids:
        return ""
    scores = result.scores()
    rows = [["method", "mean", "median", "min", "max"]]
    for k in labels:
        s = np.asarray(scores[k], dtype=float)
        ok = s[~np.isnan(s)]
        stats = ((ok.mean(), np.median(ok), ok.min(), ok.max()) if ok.size
                 else (np.nan,) * 4)
        rows.append([k, *(_fmt(float(x)) for x in stats)])
    lines = [f"scores of {len(result.ids)} unlabelled texts (higher = more likely a member):",
             *_columns(rows)]
    order, mean = member_ranking(result)
    k = min(top, len(order))
    how = (f"mean rank over {len(labels)} methods" if len(labels) > 1
           else f"the {labels[0]} score")
    rows = [["#", "id", "mean rank", *(["text"] if texts is not None else [])]]
    for pos, (i, r) in enumerate(zip(order[:k], mean[:k]), 1):
        rows.append([str(pos), str(result.ids[i]), f"{r:.1f}",
                     *([_preview(texts[i])] if texts is not None else [])])
    lines += ["", f"top {k} of {len(order)} texts most likely to be members, by {how} "
                  "(rank 1 = highest score):", *_columns(rows)]
    return "\n".join(lines)
