"""The blind baseline's out-of-fold AUC under random labels (no shift by construction):
its spread against the Mann-Whitney null spread sqrt((n1 + n0 + 1) / (12 n1 n0)) of a
plain AUC on the same counts, and how often each warning rule fires.

Calibration sets (the inflation factor of evaluation/blind_verdict.py, NULL_INFLATION, was
chosen on these): `wiki64` (160 WikiMIA-64 texts), `wiki32-40` (40 WikiMIA-32 texts),
`gutenberg` (160 paragraphs of five Gutenberg authors). Held-out sets (measured after
the choice, to report its false-fire rate): `arxiv160` (160 ArxivMIA dev abstracts),
`arxiv400`, `wiki128-unbal` (40 vs 120 WikiMIA-128 texts), `grouped` (20 documents of 8
Gutenberg paragraphs each, labels drawn per document, grouped folds).

    .venv/bin/python benchmarks/blind_null.py [--sets wiki64,gutenberg] [--perms 40]
        [--jsonl aucs.jsonl]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from pddkit.evaluation.blind import BlindBaseline
from pddkit.evaluation.blind_verdict import NULL_INFLATION, null_sd, verdict_for
from pddkit.sandbox.corpus import paragraphs, strip_gutenberg

CALIBRATION = ("wiki64", "wiki32-40", "gutenberg")
HELD_OUT = ("arxiv160", "arxiv400", "wiki128-unbal", "grouped")


class _Cached(BlindBaseline):
    """The same classifier; the label-free features computed once for all permutations."""

    def _features(self, texts):
        key = id(texts[0]), len(texts)
        if getattr(self, "_key", None) != key:
            self._key, self._feats = key, super()._features(texts)
        return self._feats


def _jsonl(path: Path, field: str) -> list[str]:
    return [json.loads(line)[field] for line in path.open()]


def _gutenberg(shared: Path, per_author: int, seed: int) -> list[list[str]]:
    """Per author, runs of consecutive paragraphs (64 words at most), in book order."""
    out = []
    for author in sorted((shared / "corpora" / "gutenberg").iterdir()):
        paras: list[str] = []
        for f in sorted(author.glob("*.txt")):
            text = strip_gutenberg(f.read_text(encoding="utf-8", errors="replace"))
            paras += [" ".join(p.split()[:64]) for p in paragraphs(text, 40)]
            if len(paras) >= 20 * per_author:
                break
        out.append(paras)
    return out


def load(name: str, shared: Path, seed: int):
    """(texts, groups or None, number of members) of one set; labels are drawn later."""
    rng = random.Random(seed)
    data = shared / "data"
    if name == "wiki64":
        return rng.sample(_jsonl(data / "wikimia" / "WikiMIA_length64.jsonl", "input"), 160), None, 80
    if name == "wiki32-40":
        return rng.sample(_jsonl(data / "wikimia" / "WikiMIA_length32.jsonl", "input"), 40), None, 20
    if name == "wiki128-unbal":
        return rng.sample(_jsonl(data / "wikimia" / "WikiMIA_length128.jsonl", "input"), 160), None, 40
    if name in ("arxiv160", "arxiv400"):
        n = int(name[5:])
        return rng.sample(_jsonl(data / "arxivmia" / "arxiv_mia_dev.jsonl", "text"), n), None, n // 2
    books = _gutenberg(shared, 40, seed)
    if name == "gutenberg":
        pool = [p for b in books for p in rng.sample(b, min(len(b), 40))]
        return rng.sample(pool, 160), None, 80
    if name == "grouped":  # 20 documents: 8 consecutive paragraphs each, 4 per author
        texts, groups = [], []
        for a, b in enumerate(books):
            for d in range(4):
                start = rng.randrange(0, len(b) - 8)
                texts += b[start:start + 8]
                groups += [f"{a}-{d}"] * 8
        return texts, groups, 10
    raise SystemExit(f"unknown set {name!r}")


def null_aucs(texts, groups, n_members: int, perms: int, seed: int) -> list[float]:
    """Out-of-fold AUCs of the blind baseline under `perms` random labelings with
    `n_members` members (members drawn per document when there are groups)."""
    model = _Cached()
    rng = np.random.default_rng(seed)
    units = sorted(set(groups)) if groups is not None else list(range(len(texts)))
    aucs = []
    for _ in range(perms):
        member = set(rng.choice(len(units), n_members, replace=False).tolist())
        if groups is None:
            y = np.array([int(i in member) for i in range(len(texts))])
        else:
            y = np.array([int(units.index(g) in member) for g in groups])
        aucs.append(float(roc_auc_score(y, model.cross_val_scores(texts, y, groups))))
    return aucs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared"))
    ap.add_argument("--sets", default=",".join(CALIBRATION + HELD_OUT))
    ap.add_argument("--perms", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jsonl", default=None, help="append each set's AUCs here")
    args = ap.parse_args()
    print(f"warning rule: evaluation/blind_verdict.py, null inflation {NULL_INFLATION}")
    print(f"{'set':14s} {'role':11s} {'n1/n0 (units)':>14s} {'mean':>6s} {'sd':>6s} "
          f"{'sd/MW':>6s} {'max':>6s} {'>=0.60':>7s} {'warns':>6s} {'s':>6s}")
    for name in args.sets.split(","):
        texts, groups, n1 = load(name, Path(args.shared), args.seed)
        units = len(set(groups)) if groups is not None else len(texts)
        t0 = time.perf_counter()
        aucs = np.array(null_aucs(texts, groups, n1, args.perms, args.seed))
        seconds = time.perf_counter() - t0
        mw = null_sd(n1, units - n1, inflation=1.0)
        warns = sum(verdict_for(a, n1, units - n1).warn for a in aucs)
        role = "calibration" if name in CALIBRATION else "held out"
        print(f"{name:14s} {role:11s} {f'{n1}/{units - n1}':>14s} {aucs.mean():6.3f} "
              f"{aucs.std(ddof=1):6.3f} {aucs.std(ddof=1) / mw:6.2f} {aucs.max():6.3f} "
              f"{(aucs >= 0.60).sum():3d}/{len(aucs):<3d} {warns:2d}/{len(aucs):<3d} {seconds:6.0f}",
              flush=True)
        if args.jsonl:
            with open(args.jsonl, "a") as f:
                f.write(json.dumps({"set": name, "n1": n1, "n0": units - n1, "aucs": aucs.tolist()}) + "\n")


if __name__ == "__main__":
    main()
