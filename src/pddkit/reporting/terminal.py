"""What `pddkit run` prints: the scored line, the metrics and validation tables (the
report's tables, rendered as text) and, for unlabelled texts, score statistics and the
texts most likely to be members."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pddkit.evaluation.ranking import detection_methods, member_ranking, score_stats
from pddkit.evaluation.results import RunResult
from pddkit.reporting import run_tables
from pddkit.reporting.blind_verdict_text import blind_sentence
from pddkit.reporting.table import Num, Table, to_text


def summary(result: RunResult, texts: Sequence[str] | None = None) -> str:
    """What `pddkit run` prints (`pddkit.summary(result)`): the scored line, then the
    metrics table (AUC with its 95% CI, TPR at 1/5/10% FPR, the blind baseline's verdict)
    for labelled texts or score statistics and the likeliest members for unlabelled ones
    (`texts`, in `result.ids` order, add a preview of each), then the validation and
    document-level tables when the run has them."""
    parts = [scored_line(result)]
    parts.append(metrics_table(result) if result.labelled
                 else unlabelled_summary(result, top=10, texts=texts))
    if result.corpus is not None:
        parts.append(corpus_lines(result))
    if result.validation:
        parts.append(validation_table(result))
    if result.documents is not None:
        parts.append(documents_table(result))
    return "\n".join(p for p in parts if p)


def metrics_table(result: RunResult) -> str:
    """Rows = methods; AUC with its 95% CI and TPR at 1/5/10% FPR; best per column marked *;
    the blind baseline's verdict below; then, when the data set has subsets, the AUC per
    subset beside the pooled one (and the blind baseline's warning per subset)."""
    if not result.metrics():
        return ""
    results = result.to_dict()
    lines = to_text(run_tables.metrics_table(results, terminal=True))
    if result.blind is not None:
        lines.append(blind_sentence(result.blind))
    per_subset = run_tables.subset_table(results, terminal=True)
    if per_subset is not None:
        lines += ["", *to_text(per_subset)]
        warning = run_tables.blind_subset_warning(results)
        if warning:
            lines.append(warning)
    return "\n".join(lines)


def validation_table(result: RunResult) -> str:
    """Per method: default value, value chosen on validation data, and the test oracle."""
    table = replace(run_tables.validation_table(result.to_dict()),
                    title="hyperparameters chosen on validation data, measured on the test part:",
                    notes=("oracle = the value that did best on the test set itself; not a real "
                           "result",))
    return "\n".join(["", *to_text(table)])


def corpus_lines(result: RunResult) -> str:
    """The corpus check: 'labels checked against the corpus (...): K contradicted', then,
    when some texts the metrics are on were contradicted, the metrics with them left out
    beside those on all texts."""
    results = result.to_dict()
    lines = ["", run_tables.corpus_sentence(results)]
    table = run_tables.corpus_table(results, terminal=True)
    if table is not None:
        lines += to_text(table)
    return "\n".join(lines)


def documents_table(result: RunResult) -> str:
    """The document level: metrics over documents, then the AUC by texts per
    document; unlabelled: the number of documents scored (their scores are in documents.jsonl)."""
    from pddkit.reporting.document_tables import curve_table
    from pddkit.reporting.document_tables import documents_table as doc_table

    results = result.to_dict()
    lines = [""]
    for table in (doc_table(results, terminal=True), curve_table(results, terminal=True)):
        if table is not None:
            lines += [*to_text(table), ""]
    if len(lines) == 1:
        d = results["documents"]
        lines.append(f"document level: {d['documents']} documents scored (mean of their texts' "
                     "scores); no labels, so no metrics")
    return "\n".join(lines).rstrip()


def scored_line(result: RunResult) -> str:
    """'scored N texts with M methods (...)'; the blind baseline is not counted."""
    c = result.counts
    n = len(detection_methods(result))
    cut = c.get("split_words")
    line = (f"scored {c.get('samples', len(result.ids))} texts"
            + (f" cut from {cut['documents']} documents" if cut else "")
            + f" with {n} method{'' if n == 1 else 's'}")
    extra = [f"{(c.get('truncated') or {}).get('target', 0)} truncated",
             f"{c.get('skipped', 0)} skipped"]
    if cut:  # rows were documents cut into texts: what was skipped is documents
        extra[1] = (f"{cut['documents_too_short']} documents shorter than one text skipped"
                    + (f", {c['skipped'] - cut['documents_too_short']} invalid lines skipped"
                       if c.get("skipped", 0) > cut["documents_too_short"] else ""))
    if "blind" in {m.label for m in result.methods}:
        extra.append("plus the blind baseline")
    return f"{line} ({', '.join(extra)})"


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
    stats = Table(header=("method", "mean", "median", "min", "max"),
                  rows=tuple((k, *(Num(x) for x in score_stats(scores[k]))) for k in labels),
                  title=f"scores of {len(result.ids)} unlabelled texts "
                        "(higher = more likely a member):", mark="")
    order, mean = member_ranking(result)
    k = min(top, len(order))
    how = (f"mean rank over {len(labels)} methods" if len(labels) > 1
           else f"the {labels[0]} score")
    ranked = Table(header=("#", "id", "mean rank", *(["text"] if texts is not None else [])),
                   rows=tuple((str(pos), str(result.ids[i]), Num(r, digits=1),
                               *([_preview(texts[i])] if texts is not None else []))
                              for pos, (i, r) in enumerate(zip(order[:k], mean[:k]), 1)),
                   title=f"top {k} of {len(order)} texts most likely to be members, by {how} "
                         "(rank 1 = highest score):", mark="")
    return "\n".join([*to_text(stats), "", *to_text(ranked)])


def blind_summary(result: RunResult, name: str) -> str:
    """What `pddkit blind` prints of its result on data set `name`: counts and folds, the
    AUC and TPRs with their bootstrap intervals (a TPR whose rate allows no false positive
    with these non-members marked, as in a run's table), the verdict, each subset's."""
    from pddkit.blind.verdict import verdict

    m, params, c = result.methods[0].metrics, result.methods[0].params, result.counts
    sample = params.get("sample")
    lines = [f"blind baseline on {name}: {c['members']} members, {c['nonmembers']} non-members, "
             + (f"fitted on a stratified sample of {sample['texts']}, " if sample else "")
             + f"{params['folds']} outer folds"
             + (" grouped by document" if params["grouped_by_document"] else "")
             + f", {result.timings['blind_baseline']:.1f} s"]
    few = run_tables.few_nonmembers(m.n_nonmembers)
    tprs = "  ".join(f"TPR@{t:.0%}{run_tables.FEW if t in few else ''} {m.tpr[t]:.3f} "
                     f"[{m.tpr_ci[t].low:.3f}, {m.tpr_ci[t].high:.3f}]" for t in sorted(m.tpr))
    lines.append(f"AUC {m.auc:.3f} [{m.auc_ci.low:.3f}, {m.auc_ci.high:.3f}] (bootstrap of these "
                 f"scores)  {tprs}")
    if few:
        lines.append(run_tables.few_nonmembers_note(m.n_nonmembers, few, terminal=True))
    lines.append(blind_sentence(result.blind))
    per_units = params.get("subset_units") or {}
    for sub_name, sub in result.methods[0].subsets.items():  # fitted within each subset
        if sub is None:
            lines.append(f"  subset {sub_name}: no AUC (one class, or too few texts to "
                         "cross-validate)")
            continue
        v = verdict(sub, per_units.get(sub_name))
        lines.append(f"  subset {sub_name}: AUC {sub.auc:.3f} [{v.low:.3f}, {v.high:.3f}], "
                     f"p = {v.p:.3g}" + (": a shift" if v.warn else ": a small shift" if v.shift
                                         else ""))
    return "\n".join(lines)
