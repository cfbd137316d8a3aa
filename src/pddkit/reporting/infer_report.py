"""The dataset-inference report (Maini et al. 2024): the verdict, both tests' p-values, the
p-value against the number of texts, the classifier's scores and its feature weights, as
report.html (self-contained) and report.md. Everything is read from results.json's content,
so a copied folder rebuilds the same page."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pddkit.reporting.page import Config, Image, Notice, Page, Summary, write_page
from pddkit.reporting.table import Num, Table, to_text

DIRECTION = {
    "nonnegative": "counting each signal only in the direction of familiarity (its weight "
                   "cannot be negative)",
    "paper": "in either direction (Maini et al.'s unconstrained classifier: a signal on which "
             "the suspect texts look less familiar counts too)",
}


def explain(classifier: str) -> str:
    """How to read the page, for the classifier that ran."""
    return ("How to read this: a classifier learns, from half of the suspect texts and half of "
            "the reference texts, which combination of membership signals (how likely the "
            "model finds each text, its rarest and most likely tokens, ...) tells them apart, "
            f"{DIRECTION[classifier]}; it then scores the other halves. If the model was "
            "trained on the suspect texts, they score higher, and a small p-value says such a "
            "gap is unlikely by chance. The false-positive check runs the same test on two "
            "halves of the reference set, where no gap should exist: a small p-value there "
            "means the test is picking up something other than training. Both sets must come "
            "from the same source (same kind of text, same time): any other difference "
            "between them also lowers the p-value.")


def classifier_of(data: dict) -> str:
    """The classifier that ran (results.json written before there was a choice: nonnegative)."""
    return data.get("classifier", "nonnegative")


CLIP_TEXT = {
    "pooled": "pooled (both sets clipped to the 2.5-97.5% quantiles of the two together)",
    "per-set": "per set (each set clipped to its own 2.5-97.5% quantiles, the authors' way; "
               "not calibrated with heavy-tailed features)",
}


PER_SET_NOTE = ("Each set was clipped to its own 2.5-97.5% quantiles (the authors' way): with "
                "heavy-tailed features, two sets drawn from one source then come out different "
                "more often than alpha says; pooled clipping, the default, does not.")


def clip_of(data: dict) -> str:
    """The clipping that ran (results.json written before there was a choice: per-set)."""
    return data.get("clip", "per-set")


def p_text(p: float | None) -> str:
    """A p-value as the report shows it: 4 decimals, or scientific notation below 1e-4."""
    if p is None:
        return "-"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def tests_table(data: dict) -> Table:
    """The test and the false-positive check: p-value, t statistic, texts fitted and tested."""
    rows = []
    for what, key in (("suspect vs reference", "test"),
                      ("reference half vs reference half (false-positive check)",
                       "false_positive_check")):
        t = data.get(key)
        if t is None:
            continue
        rows.append((what, p_text(t["p_value"]), Num(t["t_statistic"], digits=2),
                     f"{t['n_fit']['suspect']} + {t['n_fit']['reference']}",
                     f"{t['n_test']['suspect']} + {t['n_test']['reference']}"))
    split = data.get("false_positive_check_split")
    return Table(header=("test", "p-value", "t", "texts fitted", "texts tested"),
                 rows=tuple(rows),
                 title=f"Tests (one-sided {data.get('t_test', 'Welch')} t-test, suspect > "
                       f"reference; {classifier_of(data)} classifier; {clip_of(data)} "
                       "clipping)",
                 notes=(f"alpha = {data['alpha']:g}; texts are (suspect + reference) halves.",
                        *([PER_SET_NOTE] if clip_of(data) == "per-set" else ()),
                        *([split["sentence"]] if split else ())),
                 id="tests")


WEIGHTS_NOTE = {
    "nonnegative": "Weights are constrained to be >= 0, so only features on which the suspect "
                   "texts look more familiar count; weight > 0: a higher value of the feature "
                   "points to the suspect set. ",
    "paper": "Weights are unconstrained (the paper's): weight > 0, a higher value of the "
             "feature points to the suspect set; weight < 0, a lower value does (the suspect "
             "texts look less familiar on it). ",
}


def weights_table(data: dict) -> Table:
    """The classifier's weight per feature (features z-scored, so weights compare), the
    largest in magnitude first."""
    w, gaps = data["test"]["weights"], data["test"]["gaps"]
    order = sorted(w, key=lambda k: -abs(w[k]))
    return Table(header=("feature", "weight", "suspect - reference"),
                 rows=tuple((k, Num(w[k]), Num(gaps[k], digits=2)) for k in order),
                 title="Feature weights (logistic regression on z-scored features)",
                 notes=(WEIGHTS_NOTE[classifier_of(data)] +
                        "suspect - reference: the difference of the sets' means in standard "
                        "deviations of the suspect set; every feature is higher for more "
                        "familiar text, so training moves them up.",),
                 id="weights")


def terminal_lines(data: dict, top: int = 8) -> list[str]:
    """What the command prints: the verdict, the tests and the heaviest feature weights."""
    w = weights_table(data)
    w = Table(header=w.header, rows=w.rows[:top],
              title=f"Largest feature weights (of {len(w.rows)})")
    return [data["verdict"], "", *to_text(tests_table(data)), "", *to_text(w)]


def infer_page(data: dict) -> Page:
    """The report's page from results.json's content."""
    from pddkit.reporting import infer_plots

    cfg = data["configuration"]
    less = data.get("less_familiar_p_value")
    inconclusive = ((data["p_value"] < data["alpha"] and not data["used_in_training"])
                    or (less is not None and less < data["alpha"]))
    check = data["false_positive_check_p_value"]
    blocks: list = [
        Notice((data["verdict"],), kind="warn" if inconclusive else "ok", id="verdict",
               lead="Verdict."),
        Summary((("model", str(cfg["model"])),
                 ("suspect texts", f"{data['n']['suspect']} ({cfg['suspect']})"),
                 ("reference texts", f"{data['n']['reference']} ({cfg['reference']})"),
                 ("p-value", p_text(data["p_value"])),
                 ("false-positive check p-value",
                  "not run" if check is None else p_text(check)),
                 ("alpha", f"{data['alpha']:g}"), ("classifier", classifier_of(data)),
                 ("clipping", CLIP_TEXT[clip_of(data)]),
                 ("features", str(len(data["features"]))),
                 ("seed", str(cfg["seed"])))),
        Notice((explain(classifier_of(data)),)),
        tests_table(data),
    ]
    curves = {"suspect vs reference": [(p["n"], p["p_value"]) for p in data["p_value_curve"]]}
    if data["false_positive_check_curve"]:
        curves["reference halves (false-positive check)"] = [
            (p["n"], p["p_value"]) for p in data["false_positive_check_curve"]]
    blocks.append(Image("p-value against the number of texts used", "p_value_curve.png",
                        infer_plots.p_value_curve_png(curves, data["alpha"])))
    scores = data["test"]["scores"]
    blocks.append(Image("Classifier scores of the tested halves", "scores.png",
                        infer_plots.score_histogram_png(np.asarray(scores["suspect"]),
                                                        np.asarray(scores["reference"]))))
    blocks.append(weights_table(data))
    if data["notices"]:
        blocks.append(Notice(tuple(data["notices"]), lead="Notices."))
    blocks.append(Config({"configuration": cfg, "models": data["models"], "counts": data["counts"],
                          "paper": data["paper"], "pddkit_version": data["pddkit_version"]},
                         provenance=data.get("provenance")))
    return Page("pddkit dataset inference", tuple(blocks))


def write_infer_report(out: str | Path, data: dict) -> tuple[Path, Path]:
    """report.html, report.md and their PNGs in `out`."""
    return write_page(infer_page(data), out)
