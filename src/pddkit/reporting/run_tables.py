"""The tables of a run, built from its results.json form (RunResult.to_dict() or the file):
one builder each for the terminal and the report, which differ only in how much they show."""

from __future__ import annotations

from pddkit.evaluation.metrics import FPR_TARGETS, false_positives_allowed, nonmembers_needed
from pddkit.reporting.table import Num, Table, best_cells

FEW = "†"  # marks a TPR@FPR column whose rate allows no false positive with these non-members


def counted(n: int, noun: str) -> str:
    """`n` and `noun`, in the plural unless n is 1 ("1 member", "30 non-members")."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def params(p: dict) -> str:
    return ",".join(f"{k}={v:g}" for k, v in p.items())


def metrics_table(results: dict, terminal: bool = False) -> Table:
    """Rows = methods with metrics; AUC with its 95% CI and TPR at 1/5/10% FPR (with CIs in
    the report); the best detection method per column marked (* in the terminal, ▲ in the
    report), never the blind baseline, whose row is a baseline row."""
    methods = {k: v["metrics"] for k, v in results["methods"].items() if v["metrics"]}
    keys = ["auc", *[f"tpr@{t:g}" for t in FPR_TARGETS]]
    first = next(iter(methods.values()), None)
    few = () if first is None else few_nonmembers(first["n_nonmembers"])
    tpr = [(f"TPR@{t:.0%}FPR" if terminal else f"TPR@{t:.0%} FPR [95% CI]")
           + (FEW if t in few else "") for t in FPR_TARGETS]
    every = fell_back_on_every_text(results)
    rows = tuple((f"{name} {EVERY_TEXT_MARK}" if name in every else name,
                  *(Num(m[k], tuple(m[k + "_ci"]) if k == "auc" or not terminal else None)
                    for k in keys))
                 for name, m in methods.items())
    names = list(methods)
    baseline = frozenset(i for i, n in enumerate(names) if n == "blind")
    best = best_cells(rows, range(1, len(keys) + 1), exclude=baseline)
    blind = ("blind" in methods) and results.get("blind_baseline") is not None
    if terminal:
        notes = () if first is None else (
            f"{counted(first['n_members'], 'member')}, "
            f"{counted(first['n_nonmembers'], 'non-member')}; * = best detection method in "
            f"column{' (blind baseline excluded)' if 'blind' in methods else ''}; "
            f"CI: 95% bootstrap over the texts, {first['n_bootstrap']} resamples"
            + ("; blind's CI holds its out-of-fold scores fixed, the wider interval of its "
               "verdict below allows for refitting the classifier too" if blind else ""),)
    else:
        notes = ("▲ best detection method in the column"
                 + ("; blind is the model-free baseline, not a detection method"
                    if "blind" in methods else "")
                 + ". Intervals: 95% percentile bootstrap over the texts"
                 + ("; blind's holds its out-of-fold scores fixed, and the verdict above "
                    "gives the wider 95% interval allowing for the classifier's refitting on "
                    "every fold." if blind else "."),)
    if few:
        notes = (*notes, few_nonmembers_note(first["n_nonmembers"], few, terminal))
    notes = (*notes, *inverted_notes(methods), *every_text_notes(results, every, methods))
    return Table(header=("method", "AUC [95% CI]", *tpr), rows=rows,
                 title="" if terminal else "Metrics", best=best,
                 mark="*" if terminal else " ▲", baseline=baseline, notes=notes, id="metrics")


EVERY_TEXT_MARK = "(fallback on every text)"


def fell_back_on_every_text(results: dict) -> set[str]:
    """The methods that scored every text by a fallback of their formula (counts'
    fallback_texts, written by the engine): their row measures the fallback."""
    per = (results.get("counts") or {}).get("fallback_texts") or {}
    return {k for k, v in per.items() if v["scored"] and v["fell_back"] == v["scored"]}


def every_text_notes(results: dict, every: set[str], methods: dict) -> tuple[str, ...]:
    """One note per method marked EVERY_TEXT_MARK: what its row measured instead."""
    counts = results.get("counts") or {}
    reasons = counts.get("fallbacks") or {}
    return tuple(
        f"{k} {EVERY_TEXT_MARK}: none of its {counts['fallback_texts'][k]['scored']} texts "
        f"was scored by {k}'s formula as written, so this row measures the fallback: "
        + "; ".join(f"{n} {why}" for why, n in reasons.get(k, {}).items())
        for k in methods if k in every)


def few_nonmembers(n_nonmembers: int) -> tuple[float, ...]:
    """The FPR targets at which `n_nonmembers` non-members allow no false positive."""
    return tuple(t for t in FPR_TARGETS if false_positives_allowed(t, n_nonmembers) == 0)


def few_nonmembers_note(n_nonmembers: int, few: tuple[float, ...], terminal: bool) -> str:
    """The note under a table whose TPR@FPR columns `few` allow no false positive: the
    rule, and what the numbers shown then are."""
    def name(t: float) -> str:
        return f"TPR@{t:.0%}FPR" if terminal else f"TPR@{t:.0%} FPR"

    def join(items: list[str]) -> str:
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

    one = len(few) == 1
    floors = " = ".join(f"floor({t:.0%} x {n_nonmembers})" for t in few)
    needed = join([f"{nonmembers_needed(t)}" for t in few])
    return (f"{FEW} {join([name(t) for t in few])} with {counted(n_nonmembers, 'non-member')}: "
            f"no false positive allowed ({floors} = 0; allowing one takes {needed} non-members), so "
            f"{'it is' if one else 'each is'} the share of members scoring above the "
            "highest-scoring non-member.")


def inverted_notes(methods: dict) -> tuple[str, ...]:
    """One note per detection method whose AUC's 95% interval lies wholly below 0.5: on this
    data its scores rank non-members above members, the opposite of its assumption."""
    low = [(k, m) for k, m in methods.items()  # no interval (no bootstrap): nothing to say
           if k != "blind" and m["auc_ci"][1] is not None and m["auc_ci"][1] < 0.5]
    return tuple(
        f"{k}: AUC {m['auc']:.3f} [{m['auc_ci'][0]:.3f}, {m['auc_ci'][1]:.3f}] is significantly "
        "below 0.5: on this data its scores rank non-members above members, the opposite of "
        "the direction the method assumes (its signal is inverted here: something differs "
        "between the two sides; reading it reversed is a choice made after seeing the labels)"
        for k, m in low)


def subset_table(results: dict, terminal: bool = False) -> Table | None:
    """Rows = methods; columns = the pooled AUC, then each subset's AUC (with 95% CIs in the
    report), as the papers lay out per-domain and per-length tables; None without subsets.
    A subset with one class shows no AUC. The blind row's subset columns are its own fits
    within each subset."""
    subsets = results.get("subsets") or {}
    methods = {k: v for k, v in results["methods"].items() if v["metrics"]}
    if not subsets or not methods:
        return None
    names = list(subsets)

    def num(m: dict | None) -> Num:
        if m is None:
            return Num(None)
        return Num(m["auc"], None if terminal else tuple(m["auc_ci"]))

    rows = tuple((label, num(v["metrics"]), *(num((v.get("subsets") or {}).get(n)) for n in names))
                 for label, v in methods.items())
    baseline = frozenset(i for i, n in enumerate(methods) if n == "blind")
    best = best_cells(rows, range(1, len(names) + 2), exclude=baseline)
    sizes = ", ".join(f"{n} {c['members']}/{c['nonmembers']}" for n, c in subsets.items())
    notes = [f"members/non-members per subset: {sizes}."]
    for n, c in subsets.items():
        if not c.get("auc_defined", True):
            what = "members" if c["members"] else "non-members" if c["nonmembers"] else "no texts"
            notes.append(f"{n} has {'' if what == 'no texts' else 'only '}{what}: no AUC (shown as "
                         f"{'-' if terminal else '–'}).")
    if "blind" in methods:
        notes.append("blind: fitted within each subset (its own cross-validation on that "
                     "subset's texts), so its column asks whether that subset alone separates "
                     "members from non-members without a model.")
    notes.append("* = best detection method in column (blind baseline excluded)." if terminal
                  else "▲ best detection method in the column. Intervals: 95% percentile "
                  "bootstrap.")
    on = results.get("metrics_on", "all texts")
    title = "AUC per subset" + ("" if on == "all texts" else f" ({on})")
    return Table(header=("method", "AUC, all" if terminal else "AUC, all [95% CI]", *names),
                 rows=rows, title=title + (":" if terminal else ""), best=best,
                 mark="*" if terminal else " ▲", baseline=baseline, notes=tuple(notes),
                 id="subsets")


def blind_subset_warning(results: dict) -> str | None:
    """One sentence naming the subsets where the blind baseline, fitted within the subset,
    warns (blind/verdict.py); None when none does."""
    per = (results.get("blind_baseline") or {}).get("subsets") or {}
    hits = [f"{n} (AUC {v['auc']:.3f}" + (f", p = {v['p']:.2g})" if "p" in v else ")")
            for n, v in per.items() if v and v["warn"]]
    if not hits:
        return None
    return (f"Warning: within subset{'s' if len(hits) > 1 else ''} {', '.join(hits)} the blind "
            "baseline (no model, fitted on that subset alone) is above chance for its number "
            "of texts: there members and non-members differ without any model, so the "
            "detection AUCs there prove little.")


def validation_table(results: dict) -> Table:
    """Per validated method: its default value and that value's test AUC, the value chosen
    on validation data and its test AUC, and the oracle (the best value on the test set)."""
    rows = []
    for name, v in results["methods"].items():
        val = v.get("validation")
        if not val:
            continue
        default = val.get("default") or v["params"]
        rows.append((name, Num((v["metrics"] or {}).get("auc"), prefix=f"{params(default)}: "),
                     params(val["chosen"]), Num(val["test"]["auc"], tuple(val["test"]["auc_ci"])),
                     Num(val["oracle"]["auc"], prefix=f"{params(val['oracle']['params'])}: ",
                         suffix=" (oracle)")))
    return Table(header=("method", "default value: test AUC", "chosen on validation",
                         "test AUC [95% CI]", "oracle (best on test)"),
                 rows=tuple(rows), title="Hyperparameters chosen on validation data",
                 notes=("Metrics on the test part. The oracle is the value that did best on the "
                        "test set itself: shown for comparison, not a real result.",),
                 id="validation")


def corpus_sentence(results: dict) -> str | None:
    """'labels checked against the corpus (index ...): K contradicted (...)', from
    results.json's `corpus_check`; None without one."""
    check = results.get("corpus_check")
    if not check:
        return None
    c, n = check["counts"], check["n"]
    where = (f"index {check['index']}, tokenizer {check['tokenizer']}"
             + ("" if check["built_by_pddkit"] else
                " as given for this public index, texts queried as given"))
    short = (f"; {counted(c['too_short'], 'text')} shorter than {n} tokens "
             f"{'has' if c['too_short'] == 1 else 'have'} no {n}-gram and "
             f"{'was' if c['too_short'] == 1 else 'were'} not checked" if c["too_short"] else "")
    if c["too_short_members"] is None:  # unlabelled: nothing to contradict
        return (f"texts measured against the corpus ({where}): the share of their {n}-grams "
                f"found is in scores.jsonl; no labels to check{short}")
    reasons = [f"{c['nonmembers_found']} non-member{'' if c['nonmembers_found'] == 1 else 's'} "
               f"with at least {check['max_overlap'] * 100:g}% of {n}-grams found"]
    if check["whole_training_set"]:
        reasons.append(f"{c['members_not_found']} member{'' if c['members_not_found'] == 1 else 's'}"
                       f" with none found")
    return (f"labels checked against the corpus ({where}): {c['contradicted']} contradicted "
            f"({', '.join(reasons)}) of {c['checked']} checked{short}")


def corpus_table(results: dict, terminal: bool = False) -> Table | None:
    """Rows = methods with metrics; the AUC (and TPR at 1% FPR) on all texts beside those
    with the contradicted texts left out; None when no label was contradicted where the
    metrics are (both would be the same)."""
    check = results.get("corpus_check")
    if not check or not check["counts"]["left_out_of_metrics"]:
        return None
    methods = {k: v for k, v in results["methods"].items()
               if v["metrics"] and "metrics_without_contradicted" in v}
    if not methods:
        return None

    def cells(m: dict | None) -> tuple[Num, Num]:
        if m is None:
            return Num(None), Num(None)
        return Num(m["auc"], tuple(m["auc_ci"]) if not terminal else None), Num(m["tpr@0.01"])

    rows = tuple((k, *cells(v["metrics"]), *cells(v["metrics_without_contradicted"]))
                 for k, v in methods.items())
    first = next(v["metrics_without_contradicted"] for v in methods.values())
    left = check["counts"]["left_out_of_metrics"]
    on = results.get("metrics_on", "all texts")
    notes = (f"{counted(left, 'contradicted text')} left out of the second pair of columns"
             + ("" if first is None else f" ({counted(first['n_members'], 'member')}, "
                f"{counted(first['n_nonmembers'], 'non-member')} left)")
             + ("" if on == "all texts" else f"; both on the {on}")
             + ". The contradicted texts are marked in scores.jsonl (column 'contradicted')."
             + ("" if first is not None else " One class has no text left: no metrics."),)
    baseline = frozenset(i for i, k in enumerate(methods) if k == "blind")
    ci = "" if terminal else " [95% CI]"
    return Table(header=("method", f"AUC, all texts{ci}", "TPR@1%FPR, all",
                         f"AUC, contradicted left out{ci}", "TPR@1%FPR, left out"),
                 rows=rows, title="Metrics on all texts and with the labels the corpus "
                 "contradicts left out" + (":" if terminal else ""),
                 baseline=baseline, notes=notes, id="corpus-check")
