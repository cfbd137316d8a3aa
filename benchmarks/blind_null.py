"""The blind baseline's out-of-fold AUC under random labels (no shift by construction):
its spread against the Mann-Whitney null spread sqrt((n1 + n0 + 1) / (12 n1 n0)) of a
plain AUC on the same counts, and how often each warning rule fires.

Calibration sets (the inflation factor of blind/verdict.py, NULL_INFLATION, was
chosen on these): `wiki64` (160 WikiMIA-64 texts), `wiki32-40` (40 WikiMIA-32 texts),
`gutenberg` (160 paragraphs of five Gutenberg authors). Held-out sets (measured after
the choice, to report its false-fire rate): `arxiv160` (160 ArxivMIA dev abstracts),
`arxiv400`, `wiki128-unbal` (40 vs 120 WikiMIA-128 texts), `grouped` (20 documents of 8
Gutenberg paragraphs each, labels drawn per document, grouped folds).

Large sets (the check of the factor at 1,000 and 5,000 texts): `mixed1000`, `mixed5000`
(Project Gutenberg paragraphs with at most 4% WikiMIA / ArxivMIA texts, as
benchmarks/blind_scale.py draws them; their labels are thrown away and random ones drawn,
half members). The rule that chose NULL_INFLATION, applied to a set's spread:
`rule_factor` = its sd / Mann-Whitney ratio times the upper 95% bound of a spread
estimated from that many draws (chi-square), rounded up to 0.05.

    .venv/bin/python benchmarks/blind_null.py [--sets wiki64,gutenberg] [--perms 40]
        [--jsonl aucs.jsonl] [--draws draws.jsonl]
    .venv/bin/python benchmarks/blind_null.py --summarise draws.jsonl   # the table again
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from pddkit.blind.baseline import BlindBaseline
from pddkit.blind.verdict import NULL_INFLATION, null_sd, verdict_for
from pddkit.data.gutenberg import strip_gutenberg
from pddkit.sandbox.corpus import paragraphs

CALIBRATION = ("wiki64", "wiki32-40", "gutenberg")
HELD_OUT = ("arxiv160", "arxiv400", "wiki128-unbal", "grouped")
LARGE = ("mixed1000", "mixed5000")  # the factor checked at 1,000 and 5,000 texts


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
    if name in LARGE:  # blind_scale.py's texts, its labels thrown away
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from blind_scale import texts_and_labels

        n = int(name[5:])
        return texts_and_labels(n, shared, seed)[0], None, n // 2
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


def null_aucs(texts, groups, n_members: int, perms: int, seed: int,
              each=None) -> list[float]:
    """Out-of-fold AUCs of the blind baseline under `perms` random labelings with
    `n_members` members (members drawn per document when there are groups), drawn from
    numpy's default_rng(seed) in turn; `each(draw, auc, seconds)` after every draw."""
    model = _Cached()
    rng = np.random.default_rng(seed)
    units = sorted(set(groups)) if groups is not None else list(range(len(texts)))
    aucs = []
    for draw in range(perms):
        member = set(rng.choice(len(units), n_members, replace=False).tolist())
        if groups is None:
            y = np.array([int(i in member) for i in range(len(texts))])
        else:
            y = np.array([int(units.index(g) in member) for g in groups])
        t0 = time.perf_counter()
        aucs.append(float(roc_auc_score(y, model.cross_val_scores(texts, y, groups))))
        if each is not None:
            each(draw, aucs[-1], time.perf_counter() - t0)
    return aucs


def sd_bounds(sd: float, draws: int) -> tuple[float, float]:
    """95% interval of a standard deviation estimated from `draws` values (chi-square)."""
    from scipy.stats import chi2

    k = draws - 1
    return sd * math.sqrt(k / chi2.ppf(0.975, k)), sd * math.sqrt(k / chi2.ppf(0.025, k))


def rule_factor(ratio: float, draws: int) -> float:
    """The rule that chose NULL_INFLATION: the ratio times the upper (one-sided) 95% bound
    of a spread estimated from `draws` values, rounded up to 0.05 (1.31 x 1.18 -> 1.55 at
    60 draws)."""
    from scipy.stats import chi2

    upper = math.sqrt((draws - 1) / chi2.ppf(0.05, draws - 1))
    return math.ceil(round(ratio * upper / 0.05, 9)) * 0.05


def summarise(name: str, n1: int, n0: int, aucs: np.ndarray, seconds: float) -> str:
    """One line of the table: the spread against Mann-Whitney's (with its 95% interval),
    the rule's factor from this set, and how often each rule fires."""
    mw = null_sd(n1, n0, inflation=1.0)
    sd = aucs.std(ddof=1)
    lo, hi = sd_bounds(sd, len(aucs))
    warns = sum(verdict_for(a, n1, n0).warn for a in aucs)
    shifts = sum(verdict_for(a, n1, n0).shift for a in aucs)
    role = ("calibration" if name in CALIBRATION else "held out" if name in HELD_OUT
            else "large")
    return (f"{name:14s} {role:11s} {f'{n1}/{n0}':>14s} {len(aucs):>5d} {aucs.mean():6.3f} "
            f"{sd:6.4f} {sd / mw:6.2f} {f'[{lo / mw:.2f}, {hi / mw:.2f}]':>12s} "
            f"{rule_factor(sd / mw, len(aucs)):6.2f} {aucs.max():6.3f} "
            f"{(aucs >= 0.60).sum():3d}/{len(aucs):<3d} {shifts:3d}/{len(aucs):<3d} "
            f"{warns:3d}/{len(aucs):<3d} {seconds:6.0f}")


HEADER = (f"{'set':14s} {'role':11s} {'n1/n0 (units)':>14s} {'draws':>5s} {'mean':>6s} "
          f"{'sd':>6s} {'sd/MW':>6s} {'95% CI':>12s} {'rule':>6s} {'max':>6s} "
          f"{'>=0.60':>7s} {'p<.025':>7s} {'warns':>7s} {'s':>6s}")


def summarise_file(path: str) -> None:
    """The table again from a --draws file (one line per draw), as far as it got."""
    sets: dict[str, dict] = {}
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        s = sets.setdefault(row["set"], {"n1": row["n1"], "n0": row["n0"], "aucs": [], "s": 0.0})
        s["aucs"].append(row["auc"])
        s["s"] += row["seconds"]
    print(HEADER)
    for name, s in sets.items():
        print(summarise(name, s["n1"], s["n0"], np.array(s["aucs"]), s["s"]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared"))
    ap.add_argument("--sets", default=",".join(CALIBRATION + HELD_OUT))
    ap.add_argument("--perms", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0, help="draws the texts (and the labels)")
    ap.add_argument("--label-seed", type=int, default=None,
                    help="draws the labels, when not --seed: more draws on the same texts")
    ap.add_argument("--jsonl", default=None, help="append each set's AUCs here")
    ap.add_argument("--draws", default=None, help="append one line per draw here")
    ap.add_argument("--summarise", default=None, help="print the table of a --draws file")
    args = ap.parse_args()
    if args.summarise:
        summarise_file(args.summarise)
        return
    label_seed = args.seed if args.label_seed is None else args.label_seed
    print(f"warning rule: blind/verdict.py, null inflation {NULL_INFLATION}; "
          f"texts drawn with seed {args.seed}, labels from numpy default_rng({label_seed}), "
          "folds seeded 0")
    print(HEADER, flush=True)
    for name in args.sets.split(","):
        texts, groups, n1 = load(name, Path(args.shared), args.seed)
        units = len(set(groups)) if groups is not None else len(texts)

        def each(draw: int, auc: float, seconds: float, name=name, n1=n1, units=units) -> None:
            if args.draws:
                with open(args.draws, "a") as f:
                    f.write(json.dumps({"set": name, "draw": draw, "seed": args.seed,
                                        "label_seed": label_seed, "n1": n1, "n0": units - n1,
                                        "auc": auc, "seconds": seconds}) + "\n")

        t0 = time.perf_counter()
        aucs = np.array(null_aucs(texts, groups, n1, args.perms, label_seed, each))
        print(summarise(name, n1, units - n1, aucs, time.perf_counter() - t0), flush=True)
        if args.jsonl:
            with open(args.jsonl, "a") as f:
                f.write(json.dumps({"set": name, "n1": n1, "n0": units - n1, "aucs": aucs.tolist()}) + "\n")


if __name__ == "__main__":
    main()
