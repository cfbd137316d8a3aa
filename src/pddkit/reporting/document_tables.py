"""The document level's tables, from results.json's "documents" block: the metrics over
documents beside each method's text-level AUC, and the curve of document AUC against the
number of texts per document (as in Meeus et al., "SoK: Membership Inference Attacks on
LLMs are Rushing Nowhere (and How to Fix It)", arXiv 2406.17975)."""

from __future__ import annotations

from pddkit.evaluation.metrics import FPR_TARGETS
from pddkit.reporting.table import Num, Table, best_cells, fmt

_HOW = {"mean": "mean of its texts' scores",
        "share": "share of its texts at or above a threshold fitted on the calibration half",
        "classifier": "random forest over its normalised token probabilities, scored by the "
                      "forest of the fold it was held out of"}
POOLED, PER_FOLD = "pooled", "mean of folds"  # the classifier's two AUCs, as the tables name them


def _folds(r: dict) -> int:
    return len((r.get("per_fold") or {}).get("folds") or [])


def _range(lo: float | None, hi: float | None) -> str:
    return "" if lo is None or hi is None else f" (range {fmt(lo)}-{fmt(hi)})"


def _classifier_notes(doc: dict) -> list[str]:
    """How the classifier's two AUCs are made, with each fold's AUC."""
    out = []
    for r in doc["rows"].values():
        pf = r.get("per_fold")
        if not pf:
            continue
        each = ", ".join(f"{fmt(f['auc'])} ({f['members']}+{f['nonmembers']})"
                         for f in pf["folds"])
        out.append(f"classifier, {POOLED}: the out-of-fold probabilities of its {_folds(r)} "
                   "forests ranked together (bootstrap interval over documents); "
                   f"{PER_FOLD}: each held-out fold's AUC under the forest fitted without it, "
                   f"as the authors evaluate, averaged (range: lowest and highest fold). Per "
                   f"fold (members+non-members): {each}.")
    return out


def _summary(doc: dict) -> str:
    t = doc["texts_per_document"]
    per = (f"{t['min']}" if t["min"] == t["max"] else f"{t['min']}-{t['max']}, median {t['median']:g}")
    who = (f" ({doc['members']} members, {doc['nonmembers']} non-members)"
           if "members" in doc else "")
    return f"{doc['documents']} documents{who}, {doc['texts']} texts ({per} per document)"


def _text_auc(results: dict, method: str) -> Num:
    m = (results["methods"].get(method) or {}).get("metrics")
    return Num(None if m is None else m["auc"])


def documents_table(results: dict, terminal: bool = False) -> Table | None:
    """Rows = document rows (aggregation, method); the method's text-level AUC, then AUC
    [95% CI] and TPR at 1/5/10% FPR over documents; best per column marked, blind excluded."""
    doc = results.get("documents")
    if not doc or not any(r["metrics"] for r in doc["rows"].values()):
        return None
    rows, baseline, per_fold = [], set(), set()
    for r in doc["rows"].values():
        m = r["metrics"]
        tprs = [Num(m[f"tpr@{t:g}"], None if terminal else tuple(m[f"tpr@{t:g}_ci"]))
                for t in FPR_TARGETS]
        pf = r.get("per_fold")
        text = Num(None) if r["aggregation"] == "classifier" else _text_auc(results, r["method"])
        if r["method"] == "blind":
            baseline.add(len(rows))
        rows.append((r["aggregation"], f"{r['method']}, {POOLED}" if pf else r["method"], text,
                     Num(m["auc"], tuple(m["auc_ci"])), *tprs, str(r["documents"])))
        if pf:  # the authors' AUC: per held-out fold, averaged; no TPR or interval per fold
            per_fold.add(len(rows))
            rows.append((r["aggregation"], f"{r['method']}, {PER_FOLD} ({_folds(r)})", Num(None),
                         Num(pf["auc_mean"], suffix=_range(pf["auc_min"], pf["auc_max"])),
                         *(Num(None) for _ in FPR_TARGETS), str(r["documents"])))
    tpr = [f"TPR@{t:.0%}FPR" if terminal else f"TPR@{t:.0%} FPR [95% CI]" for t in FPR_TARGETS]
    notes = [f"{_summary(doc)}."]
    for agg in doc["aggregations"]:
        notes.append(f"{agg}: a document's score is the {_HOW[agg]}.")
    if "calibration_documents" in doc:
        notes.append(f"share: thresholds fitted on {doc['calibration_documents']} calibration "
                     f"documents, metrics on the other {doc['evaluation_documents']}.")
    notes += _classifier_notes(doc)
    notes.append("text AUC: the same method over single texts (all evaluated texts, for share "
                 "rows too, whose document AUC is on the evaluation half only). "
                 + ("* = best detection row in column (blind excluded)." if terminal else
                    "▲ best detection row in the column; intervals: 95% percentile bootstrap "
                    "over documents."))
    return Table(header=("aggregation", "method", "text AUC",
                         "doc AUC [95% CI]", *tpr, "documents"),
                 rows=tuple(rows), title="Document level" + (":" if terminal else ""),
                 best=best_cells(rows, range(2, 4 + len(FPR_TARGETS)),
                                 exclude=baseline | per_fold),
                 mark="*" if terminal else " ▲", baseline=frozenset(baseline),
                 notes=tuple(notes), id="documents")


def curve_table(results: dict, terminal: bool = False) -> Table | None:
    """Rows = document rows; columns = texts per document used (1, 2, 4, ...): document AUC
    of a seeded random subset of each document's texts (the SoK's figure, as numbers)."""
    doc = results.get("documents")
    rows_in = [r for r in (doc or {}).get("rows", {}).values() if r["curve"]]
    if not rows_in:
        return None
    ks = [p["texts_per_document"] for p in rows_in[0]["curve"]]
    rows, base, folds = [], set(), set()
    for r in rows_in:
        pooled = "auc_per_fold_mean" in r["curve"][0]
        if r["method"] == "blind":
            base.add(len(rows))
        rows.append((r["aggregation"], f"{r['method']}, {POOLED}" if pooled else r["method"],
                     *(Num(p["auc"]) for p in r["curve"])))
        if pooled:
            folds.add(len(rows))
            rows.append((r["aggregation"], f"{r['method']}, {PER_FOLD}",
                         *(Num(p["auc_per_fold_mean"]) for p in r["curve"])))
    rows = tuple(rows)
    baseline = frozenset(base)
    notes = ("Each document scored from a seeded random subset of k of its texts "
             "(all of them when it has fewer); no intervals.",)
    if folds:
        notes += (f"classifier: {POOLED} = AUC of the out-of-fold probabilities ranked "
                  f"together; {PER_FOLD} = mean of each held-out fold's AUC (the authors').",)
    return Table(header=("aggregation", "method", *(f"{k} text{'s' if k > 1 else ''}" for k in ks)),
                 rows=rows, title="Document AUC by texts per document" + (":" if terminal else ""),
                 best=best_cells(rows, range(2, 2 + len(ks)), exclude=baseline | folds),
                 mark="*" if terminal else " ▲", baseline=baseline,
                 notes=notes, id="documents-curve")
