"""The blind baseline on the shared data: the stacked baseline (evaluation/blind.py) against
the old word + character TF-IDF logistic regression alone, and the stack with the opt-in
sixth base model (greedy rare word selection, evaluation/blind_greedy.py), AUC with 95%
bootstrap CI and seconds per data set, and the stacked baseline's gain over the old one with
a paired stratified bootstrap CI (both scored on the same resampled texts).

    .venv/bin/python benchmarks/blind_baseline.py [--shared ../shared] [--bootstrap 1000]
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

from pddkit.evaluation.blind import BlindBaseline
from pddkit.evaluation.blind_greedy import GRID
from pddkit.evaluation.metrics import compute_metrics


def old_scores(texts, y, seed=0):
    """The previous baseline: word 1-2 + char_wb 3-5 TF-IDF, LR C=1, 5-fold out-of-fold."""
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared"))
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    data = Path(args.shared) / "data"
    sets = [(f"WikiMIA-{n}", data / "wikimia" / f"WikiMIA_length{n}.jsonl") for n in (32, 64, 128, 256)]
    sets.append(("ArxivMIA", data / "arxivmia" / "arxiv_mia.jsonl"))
    print(f"{'data':12s} {'n':>5s}  {'old TF-IDF AUC [95% CI]':38s} {'s':>5s}  "
          f"{'new stacked AUC [95% CI]':38s} {'s':>5s}  {'stacked + greedy AUC [95% CI]':38s} {'s':>5s}")
    for name, path in sets:
        rows = [json.loads(line) for line in path.open()]
        texts = [r.get("text", r.get("input")) for r in rows]
        y = np.array([r["label"] for r in rows])
        t0 = time.perf_counter()
        old = old_scores(texts, y)
        t_old = time.perf_counter() - t0
        t0 = time.perf_counter()
        new = BlindBaseline().cross_val_scores(texts, y)
        t_new = time.perf_counter() - t0
        t0 = time.perf_counter()
        greedy = BlindBaseline(greedy=GRID).cross_val_scores(texts, y)
        t_greedy = time.perf_counter() - t0
        print(f"{name:12s} {len(y):5d}  {fmt(old, y, args.bootstrap):38s} {t_old:5.1f}  "
              f"{fmt(new, y, args.bootstrap):38s} {t_new:5.1f}  "
              f"{fmt(greedy, y, args.bootstrap):38s} {t_greedy:5.1f}  "
              f"gain {paired_gain(new, old, y, args.bootstrap)}", flush=True)
        for field in sorted({r["field"] for r in rows if "field" in r}):
            sel = np.array([r.get("field") == field for r in rows])
            print(f"  {field:10s} {sel.sum():5d}  {fmt(old[sel], y[sel], args.bootstrap):38s} {'':5s}  "
                  f"{fmt(new[sel], y[sel], args.bootstrap):38s} {'':5s}  "
                  f"{fmt(greedy[sel], y[sel], args.bootstrap):38s}  (same out-of-fold scores, this field)")


if __name__ == "__main__":
    main()
