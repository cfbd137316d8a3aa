"""Every detector side by side on the ground-truth sandbox, over several seeds (issue 30 item 9).

For each seed S: `pddkit sandbox --seed S --epochs E` trains a small GPT-2-shaped target on
150 member documents of the default corpus (Python's documentation) and a reference model on
a disjoint pool (`ground truth verified` is checked by the sandbox itself); E = 2 epochs by
default, a regime where Min-K%++ sits near 0.8 AUC and `loss` near 0.6, so that a method can
show it helps (at the sandbox's default 12 epochs every method is near 1.0). Then ONE
`pddkit run` scores the W-word windows (`window-W/windows.jsonl`: id, text, label, group)
with every method at once, on that seed: the same evaluated texts for all of them. Shots for
recall / conrecall and the calibration texts (a stratified 30%, documents kept whole) are
drawn first, with the run's seed, and never evaluated.

Per method and seed: AUC and TPR at 1% FPR with pddkit's bootstrap intervals (texts), and
the paired difference of AUC from Min-K%++ with a 95% interval from a bootstrap over
DOCUMENTS (the two windows of one document are not independent draws), resampling members
and non-members separately. Across seeds: the mean and the range.

    python benchmarks/detectors_sandbox.py --root /tmp/ev [--seeds 0,1,2] [--epochs 2]
        [--window 64] [--methods ...] [--boot 1000] [--json out.json] [--markdown]
    # the costly methods on a subset of the same seeds' windows (subset()):
    python benchmarks/detectors_sandbox.py --root /tmp/ev --window 32 --tag costly --subset 80 \
        --methods loss,minkpp,emmia,decop,decop:score=prob,ngram:samples=5,max_new_tokens=48

The figures on docs/methods/index.md ("The detectors of 2025-26 on ground truth") come
from these two commands with --window 32 (2026-11-26, 2 CPU cores).

A seed's sandbox folder is reused when `ROOT/sS/summary.json` exists (the models are the
expensive part); the detection run is redone unless `--reuse-runs`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BASELINES = "loss,zlib,lowercase,mink,minkpp,maxk,surp,dcpdd,ref,recall,conrecall,pac"
NEW = "gapk,acmia,camia,emmia,fsd,decop,ngram"
CONTEXT = 512  # the sandbox models' context: a decop item (4 passages) must fit it
QUIZ_WORDING = 80  # tokens of decop's question, title, author and option letters, at most


def sandbox(root: Path, seed: int, epochs: int, env: dict) -> Path:
    """The seed's sandbox folder, trained here when it is not there yet."""
    out = root / f"s{seed}"
    if not (out / "summary.json").exists():
        cmd = [sys.executable, "-m", "pddkit", "sandbox", "--epochs", str(epochs), "--methods",
               "loss,minkpp", "--bootstrap", "200", "--seed", str(seed), "--output", str(out),
               "--overwrite"]
        subprocess.run(cmd, env=env, check=True)
    return out


def subset(folder: Path, window: int, n: int, seed: int, tag: str) -> tuple[Path, Path]:
    """(data, paraphrases) for the costly methods (emmia: N^2 passes; ngram; decop): the
    windows whose text splits into a prompt and a reference for `ngram` (sentences 1-3 and
    at least one more, data/sentences.py) and whose decop item (four passages of its length)
    fits the context: properties of the text's form, cut alike from member and non-member
    documents; then whole documents in seeded order until `n`
    windows. Each window gets decop's `title` (its document's name) and `author`, and three
    stand-in "paraphrases": its words rotated by a third, reversed and sorted (the same
    length and words; not paraphrases: no model here can write one)."""
    from pddkit.data.sentences import prompt_and_reference

    rows = [json.loads(x) for x in (folder / "run" / f"window-{window}" / "windows.jsonl")
            .read_text().splitlines()]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder / "run" / "target-model"))
    fit = [r for r in rows if prompt_and_reference(r["text"]) is not None
           and 4 * len(tok(r["text"]).input_ids) + QUIZ_WORDING <= CONTEXT]
    docs = sorted({r["group"] for r in fit})
    order = np.random.default_rng(seed).permutation(len(docs))
    kept: list[dict] = []
    for d in order:
        if len(kept) >= n:
            break
        kept += [r for r in fit if r["group"] == docs[d]]
    data, para = folder / f"subset-{window}{tag}.jsonl", folder / f"paraphrases-{window}{tag}.jsonl"
    data.write_text("".join(json.dumps({**r, "title": r["group"].split(":")[-1].split("#")[0],
                                        "author": "the Python documentation"}) + "\n"
                            for r in kept))
    para.write_text("".join(json.dumps({"id": r["id"], "paraphrases": [
        " ".join(w[len(w) // 3:] + w[:len(w) // 3]), " ".join(w[::-1]), " ".join(sorted(w))]})
        + "\n" for r in kept for w in [r["text"].split()]))
    return data, para


def detect(folder: Path, seed: int, window: int, methods: str, boot: int, env: dict,
           extra: list[str], reuse: bool, tag: str = "", data: Path | None = None) -> Path:
    """One `pddkit run` of every method on the seed's W-word windows (or `data`)."""
    out = folder / f"detect-{window}{tag}"
    if reuse and (out / "results.json").exists():
        return out
    data = data or folder / "run" / f"window-{window}" / "windows.jsonl"
    cmd = [sys.executable, "-m", "pddkit", "run", "--model", str(folder / "run" / "target-model"),
           "--data", str(data),
           "--ref-model", str(folder / "reference-model"), "--freq", str(folder / "freq.npz"),
           "--methods", methods, "--seed", str(seed), "--bootstrap", str(boot), "--device",
           "cpu", "--no-blind", "--no-report", "--overwrite", "--output", str(out), *extra]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True)
    print(f"seed {seed}: detection run {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return out


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Mann-Whitney AUC, ties one half (scipy's ranks: an independent check of pddkit's)."""
    from scipy.stats import rankdata

    ranks = rankdata(scores)
    pos = labels == 1
    n1, n0 = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def paired_difference(rows: list[dict], groups: dict[str, str], method: str, base: str,
                      boot: int, seed: int) -> tuple[float, float, float]:
    """AUC(method) - AUC(base) on the same texts, and a 95% interval from a bootstrap over
    documents, members' and non-members' documents resampled separately."""
    y = np.array([r["label"] for r in rows])
    a = np.array([r[method] for r in rows], dtype=float)
    b = np.array([r[base] for r in rows], dtype=float)
    doc = np.array([groups.get(r["id"], r["id"]) for r in rows])
    point = auc(a, y) - auc(b, y)
    rng = np.random.default_rng(seed)
    by_class = []
    for cls in (0, 1):
        docs = np.unique(doc[y == cls])
        members = {d: np.flatnonzero((doc == d) & (y == cls)) for d in docs}
        by_class.append((docs, members))
    diffs = []
    for _ in range(boot):
        idx = np.concatenate([np.concatenate([m[d] for d in rng.choice(docs, len(docs))])
                              for docs, m in by_class])
        diffs.append(auc(a[idx], y[idx]) - auc(b[idx], y[idx]))
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return point, float(lo), float(hi)


def markdown(table: dict, seeds: list[int]) -> str:
    """The methods page's table: per method, the mean AUC over seeds and its range, the mean
    TPR at 1% FPR, and per seed AUC - minkpp with its interval over documents."""
    head = ("| method | AUC, mean (range) | TPR@1%FPR, mean | AUC − minkpp per seed [95% CI] |\n"
            "|---|---|---|---|")
    lines = [head]
    for label, per in table.items():
        aucs = [per[s]["auc"] for s in seeds if s in per]
        tprs = [per[s]["tpr1"] for s in seeds if s in per]
        diffs = "; ".join(f"{d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]" for s in seeds
                          if s in per and (d := per[s].get("vs_minkpp")))
        lines.append(f"| `{label}` | {np.mean(aucs):.3f} ({min(aucs):.3f}–{max(aucs):.3f}) | "
                     f"{np.mean(tprs):.3f} | {diffs or '(the baseline)'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--methods", default=f"{BASELINES},{NEW}")
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reuse-runs", action="store_true")
    ap.add_argument("--tag", default="", help="suffix of the run folders (detect-W-TAG)")
    ap.add_argument("--subset", type=int, default=0,
                    help="score only this many windows (whole documents, seeded; see subset())")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", action="store_true", help="also print the docs' table")
    ap.add_argument("--run-args", default="", help="more `pddkit run` flags, one string")
    args = ap.parse_args()
    env = {**os.environ, "PDDKIT_PROGRESS": "0", "OMP_NUM_THREADS": str(args.threads)}
    seeds = [int(s) for s in args.seeds.split(",")]
    table: dict[str, dict[int, dict]] = {}
    runs = {}
    for seed in seeds:
        folder = sandbox(args.root, seed, args.epochs, env)
        tag = f"-{args.tag}" if args.tag else ""
        extra, data = args.run_args.split(), None
        if args.subset:
            data, para = subset(folder, args.window, args.subset, seed, tag)
            extra += ["--paraphrases", str(para)] if "decop" in args.methods else []
        out = detect(folder, seed, args.window, args.methods, args.boot, env, extra,
                     args.reuse_runs, tag, data)
        res = json.loads((out / "results.json").read_text())
        rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
        windows = folder / "run" / f"window-{args.window}" / "windows.jsonl"
        groups = {w["id"]: w["group"] for w in map(json.loads, windows.read_text().splitlines())}
        runs[seed] = {"counts": res["counts"], "skipped": res.get("skipped"),
                      "timings_s": res["timings_s"], "notices": res["notices"]}
        for label, m in res["methods"].items():
            met = m["metrics"]
            entry = {"auc": met["auc"], "auc_ci": met["auc_ci"], "tpr1": met["tpr@0.01"],
                     "tpr1_ci": met["tpr@0.01_ci"], "n": met["n_members"] + met["n_nonmembers"]}
            entry["check_auc"] = auc(np.array([r[label] for r in rows], dtype=float),
                                     np.array([r["label"] for r in rows]))
            if label != "minkpp" and "minkpp" in res["methods"]:
                entry["vs_minkpp"] = paired_difference(rows, groups, label, "minkpp", args.boot,
                                                       seed)
            table.setdefault(label, {})[seed] = entry
    print(f"\nsandbox: default corpus, {args.epochs} epochs, {args.window}-word windows, seeds "
          f"{args.seeds}; per seed AUC [95% CI], TPR@1%FPR; AUC - minkpp [95% CI, documents]")
    print(f"{'method':10s} {'mean AUC':>8s} {'range':>13s}  {'mean TPR@1%':>11s}  per seed")
    for label, per in table.items():
        aucs = [per[s]["auc"] for s in seeds if s in per]
        tprs = [per[s]["tpr1"] for s in seeds if s in per]
        cells = []
        for s in seeds:
            if s not in per:
                cells.append("-")
                continue
            e = per[s]
            d = e.get("vs_minkpp")
            vs = f"; {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]" if d else ""
            cells.append(f"{e['auc']:.3f} [{e['auc_ci'][0]:.3f}, {e['auc_ci'][1]:.3f}], "
                         f"{e['tpr1']:.3f}{vs}")
        print(f"{label:10s} {np.mean(aucs):8.3f} {min(aucs):6.3f}-{max(aucs):.3f}  "
              f"{np.mean(tprs):11.3f}  " + " | ".join(cells))
    if args.markdown:
        print(markdown(table, seeds))
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "methods": table, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
