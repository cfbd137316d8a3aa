"""The document level's tables, from results.json's "documents" block: the metrics over
documents beside each method's text-level AUC, and the curve of document AUC against the
number of texts per document (as in Meeus et al., "SoK: Membership Inference Attacks on
LLMs are Rushing Nowhere (and How to Fix It)", arXiv 2406.17975)."""

from __future__ import annotations

from pddkit.evaluation.metrics import FPR_TARGETS
from pddkit.reporting.table import Num, Table, best_cells

_HOW = {"mean": "mean of its texts' scores",
        "share": "share of its texts at or above a threshold fitted on the calibration half",
        "classifier": "random forest over its normalised token probabilities, scored by the "
                      "forest of the fold it was held out of"}


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
    rows, baseline = [], set()
    for i, r in enumerate(doc["rows"].values()):
        m = r["metrics"]
        tprs = [Num(m[f"tpr@{t:g}"], None if terminal else tuple(m[f"tpr@{t:g}_ci"]))
                for t in FPR_TARGETS]
        text = Num(None) if r["aggregation"] == "classifier" else _text_auc(results, r["method"])
        rows.append((r["aggregation"], r["method"], text, Num(m["auc"], tuple(m["auc_ci"])),
                     *tprs, str(r["documents"])))
        if r["method"] == "blind":
            baseline.add(i)
    tpr = [f"TPR@{t:.0%}FPR" if terminal else f"TPR@{t:.0%} FPR [95% CI]" for t in FPR_TARGETS]
    notes = [f"{_summary(doc)}."]
    for agg in doc["aggregations"]:
        notes.append(f"{agg}: a document's score is the {_HOW[agg]}.")
    if "calibration_documents" in doc:
        notes.append(f"share: thresholds fitted on {doc['calibration_documents']} calibration "
                     f"documents, metrics on the other {doc['evaluation_documents']}.")
    notes.append("text AUC: the same method over single texts (all evaluated texts, for share "
                 "rows too, whose document AUC is on the evaluation half only). "
                 + ("* = best detection row in column (blind excluded)." if terminal else
                    "▲ best detection row in the column; intervals: 95% percentile bootstrap "
                    "over documents."))
    return Table(header=("aggregation", "method", "text AUC",
                         "doc AUC [95% CI]", *tpr, "documents"),
                 rows=tuple(rows), title="Document level" + (":" if terminal else ""),
                 best=best_cells(rows, range(2, 4 + len(FPR_TARGETS)), exclude=baseline),
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
    rows = tuple((r["aggregation"], r["method"], *(Num(p["auc"]) for p in r["curve"]))
                 for r in rows_in)
    baseline = frozenset(i for i, r in enumerate(rows_in) if r["method"] == "blind")
    return Table(header=("aggregation", "method", *(f"{k} text{'s' if k > 1 else ''}" for k in ks)),
                 rows=rows, title="Document AUC by texts per document" + (":" if terminal else ""),
                 best=best_cells(rows, range(2, 2 + len(ks)), exclude=baseline),
                 mark="*" if terminal else " ▲", baseline=baseline,
                 notes=("Each document scored from a seeded random subset of k of its texts "
                        "(all of them when it has fewer); no intervals.",), id="documents-curve")
