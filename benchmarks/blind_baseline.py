"""The blind baseline on the shared data, with design and report sets kept apart.

Design sets (changes to the baseline are chosen on these): ArxivMIA's dev split (400
abstracts) and WikiMIA-64. Report sets (held out from those choices): ArxivMIA's test
split (1,600 abstracts, disjoint from dev) and WikiMIA-32, -128 and -256. (Before this
split the stack's earlier design was chosen on all 2,000 ArxivMIA abstracts, test
included: the report figures are held out for the citation-year feature, not for that.)

Per set: the old word + character TF-IDF logistic regression alone, the stack without
the citation-year feature, the stack as it ships (with it), and the citation feature's
gain with a paired stratified bootstrap CI (both scored on the same resampled texts);
AUC with 95% bootstrap CI, TPR at 1% FPR, seconds, and the verdict's p-value.
`--greedy` adds the opt-in sixth base model (greedy rare word selection).

    .venv/bin/python benchmarks/blind_baseline.py [--shared ../shared] [--bootstrap 1000]
        [--sets design|report|all] [--greedy]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline, make_union

from pddkit.blind.baseline import BlindBaseline
from pddkit.blind.greedy import GRID
from pddkit.blind.verdict import verdict_for
from pddkit.evaluation.metrics import compute_metrics

DESIGN = (("ArxivMIA-dev", "arxivmia/arxiv_mia_dev.jsonl"),
          ("WikiMIA-64", "wikimia/WikiMIA_length64.jsonl"))
REPORT = (("ArxivMIA-test", "arxivmia/arxiv_mia_test.jsonl"),
          ("WikiMIA-32", "wikimia/WikiMIA_length32.jsonl"),
          ("WikiMIA-128", "wikimia/WikiMIA_length128.jsonl"),
          ("WikiMIA-256", "wikimia/WikiMIA_length256.jsonl"))


def old_scores(texts, y, seed=0):
    """The first baseline: word 1-2 + char_wb 3-5 TF-IDF, LR C=1, 5-fold out-of-fold."""
    scores = np.zeros(len(texts))
    for train, test in StratifiedKFold(5, shuffle=True, random_state=seed).split(texts, y):
        model = make_pipeline(make_union(
            TfidfVectorizer(analyzer="word", ngram_range=(1, 2), sublinear_tf=True, max_features=50000),
            TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True,
                            max_features=50000, lowercase=False)),
            LogisticRegression(C=1.0, max_iter=2000))
        model.fit([texts[i] for i in train], y[train])
        scores[test] = model.predict_proba([texts[i] for i in test])[:, 1]
    return scores


def paired_gain(new, old, y, n_bootstrap, seed=0):
    """AUC(new) - AUC(old) and its 95% CI: members and non-members resampled separately
    (SPEC section 4's stratified bootstrap), both score vectors on each resample."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    diffs = []
    for _ in range(n_bootstrap):
        i = np.concatenate([rng.choice(pos, len(pos)), rng.choice(neg, len(neg))])
        diffs.append(roc_auc_score(y[i], new[i]) - roc_auc_score(y[i], old[i]))
    low, high = np.percentile(diffs, [2.5, 97.5])
    return f"{roc_auc_score(y, new) - roc_auc_score(y, old):+.3f} [{low:+.3f}, {high:+.3f}]"


def fmt(scores, y, n_bootstrap):
    m = compute_metrics(scores, y, n_bootstrap=n_bootstrap)
    return f"{m.auc:.3f} [{m.auc_ci.low:.3f}, {m.auc_ci.high:.3f}] TPR@1% {m.tpr[0.01]:.3f}"


def timed(f, *args):
    t0 = time.perf_counter()
    out = f(*args)
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared"))
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--sets", choices=("design", "report", "all"), default="all")
    ap.add_argument("--greedy", action="store_true", help="also the stack with greedy selection")
    args = ap.parse_args()
    data = Path(args.shared) / "data"
    sets = [(n, p, "design") for n, p in DESIGN] if args.sets != "report" else []
    sets += [(n, p, "report") for n, p in REPORT] if args.sets != "design" else []
    print("design sets: " + ", ".join(n for n, _ in DESIGN) + " (changes chosen here); "
          "report sets: " + ", ".join(n for n, _ in REPORT) + " (held out from those choices)")
    print(f"{'data':14s} {'role':6s} {'n':>5s}  {'old TF-IDF AUC [95% CI]':38s} {'s':>4s}  "
          f"{'stack, no citations':38s} {'s':>4s}  {'stack (default)':38s} {'s':>4s}  "
          f"{'citation gain, paired':24s} verdict")
    for name, rel, role in sets:
        rows = [json.loads(line) for line in (data / rel).open()]
        texts = [r.get("text", r.get("input")) for r in rows]
        y = np.array([r["label"] for r in rows])
        old, t_old = timed(old_scores, texts, y)
        plain, t_plain = timed(BlindBaseline(citations=False).cross_val_scores, texts, y)
        new, t_new = timed(BlindBaseline().cross_val_scores, texts, y)
        m = compute_metrics(new, y, n_bootstrap=1)
        v = verdict_for(m.auc, m.n_members, m.n_nonmembers)
        print(f"{name:14s} {role:6s} {len(y):5d}  {fmt(old, y, args.bootstrap):38s} {t_old:4.0f}  "
              f"{fmt(plain, y, args.bootstrap):38s} {t_plain:4.0f}  "
              f"{fmt(new, y, args.bootstrap):38s} {t_new:4.0f}  "
              f"{paired_gain(new, plain, y, args.bootstrap):24s} "
              f"[{v.low:.3f}, {v.high:.3f}] p={v.p:.1e} warn={v.warn}", flush=True)
        if args.greedy:
            greedy, t_greedy = timed(BlindBaseline(greedy=GRID).cross_val_scores, texts, y)
            print(f"  + greedy     {fmt(greedy, y, args.bootstrap):38s} {t_greedy:4.0f}  "
                  f"gain over default {paired_gain(greedy, new, y, args.bootstrap)}", flush=True)
        for field in sorted({r["field"] for r in rows if "field" in r}):
            sel = np.array([r.get("field") == field for r in rows])
            print(f"  {field:12s} {'':6s} {sel.sum():5d}  {fmt(old[sel], y[sel], args.bootstrap):38s} "
                  f"{'':4s}  {fmt(plain[sel], y[sel], args.bootstrap):38s} {'':4s}  "
                  f"{fmt(new[sel], y[sel], args.bootstrap):38s}  (same out-of-fold scores, this field)")


if __name__ == "__main__":
    main()
