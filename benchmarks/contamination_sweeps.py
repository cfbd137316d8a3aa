"""The README's three benchmark-contamination sweeps, each with several training seeds:
contamination-repeats=1,2,4,8, lr=5e-4,1e-3,2e-3 and background=0,60,180 on the default
corpus (Python's documentation), with 160 question + answer examples made from Poe's and
Wilde's paragraphs (`qa_examples` in tests/test_contamination.py) as the benchmark. Each
(sweep, seed) is one `pddkit sandbox` folder under --out (reused when its summary.json is
there); the AUC of inserted contaminants vs never-inserted examples is aggregated per
sweep value and method over the seeds (pddkit.sandbox.seeds): a Markdown table of mean,
sd and range, whether each method's change from the first to the last value holds on
every seed, and a plot with error bars (the range over seeds) per sweep.

    .venv/bin/python benchmarks/contamination_sweeps.py [--seeds 0,1,2] [--sweeps repeats,lr,background]
        [--out /tmp/contamination-sweeps] [--figures docs/figures] [--shared ../shared]

Each sandbox equals `pddkit sandbox --contaminate bench.jsonl --members 30 --reference 60
--background 60 --epochs 3 --context 256 --windows 32 --methods
loss,zlib,lowercase,mink,minkpp,ref,surp,dcpdd --seed S` with, per sweep, `--sweep
contamination-repeats=1,2,4,8`; `--contamination-repeats 2 --sweep lr=5e-4,1e-3,2e-3`
(its lr=2e-3 run is the repeats sweep's R=2 run of the same seed, reused);
`--contamination-repeats 2 --sweep background=0,60,180`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METHODS = "loss,zlib,lowercase,mink,minkpp,ref,surp,dcpdd"
SWEEPS = {  # name -> (sweep, contamination_repeats, title of the plot's x axis)
    "repeats": ("contamination-repeats=1,2,4,8", 1, "mean copies per contaminant (R)"),
    "lr": ("lr=5e-4,1e-3", 2, "learning rate"),  # + 2e-3: the repeats sweep's R=2 run
    "background": ("background=0,60,180", 2, "background documents"),
}


def write_bench(path: Path, shared: Path, n: int = 160) -> Path:
    """The benchmark file: tests/test_contamination.py's qa_examples (one definition)."""
    os.environ.setdefault("PDDKIT_SHARED", str(shared))
    sys.path.insert(0, str(ROOT / "tests"))
    from test_contamination import qa_examples

    rows = [json.dumps({"id": f"q{i}", "text": t}) for i, t in enumerate(qa_examples(n))]
    path.write_text("\n".join(rows) + "\n")
    return path


def run_one(name: str, seed: int, bench: Path, out: Path) -> dict:
    from pddkit.sandbox.experiment import SandboxConfig, run_sandbox

    folder = out / name / f"seed-{seed}"
    if (folder / "summary.json").is_file():
        return json.loads((folder / "summary.json").read_text())
    sweep, repeats, _ = SWEEPS[name]
    cfg = SandboxConfig(members=30, reference=60, background=60, epochs=3, context=256,
                        windows=(32,), methods=METHODS, seed=seed, contaminate=str(bench),
                        contamination_repeats=repeats)
    t = time.perf_counter()
    summary = run_sandbox(cfg, folder, sweep=sweep)
    print(f"{name} seed {seed}: {time.perf_counter() - t:.0f} s", flush=True)
    return summary


def with_borrowed_lr(lr: dict, repeats: dict) -> dict:
    """The lr sweep's lr=2e-3 run is the repeats sweep's R=2 run of the same seed (the
    same split, tokenizer, reference model, draws and training: the default lr is 2e-3),
    appended instead of trained again."""
    import copy

    run = copy.deepcopy(next(r for r in repeats["runs"] if r["name"] == "contamination-repeats=2"))
    run["name"] = "lr=0.002"
    out = copy.deepcopy(lr)
    out["runs"].append(run)
    out["sweep"]["values"].append(0.002)
    return out


def table(agg) -> str:
    head = f"| method | {' | '.join(agg.values)} | first -> last, per seed |"
    lines = [head, "|" + "---|" * (len(agg.values) + 2)]
    for m in agg.methods:
        cells = [f"{s.mean:.3f} ± {s.sd:.3f} ({s.low:.3f}-{s.high:.3f})"
                 for s in (agg.auc[v][m] for v in agg.values)]
        change = agg.change(m, agg.values[0], agg.values[-1])
        apart = " (ranges apart)" if agg.ranges_apart(m, agg.values[0], agg.values[-1]) else ""
        lines.append(f"| {m} | {' | '.join(cells)} | {change}{apart} |")
    return "\n".join(lines)


def plot(agg, xlabel: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    x = [float(v) for v in agg.values]
    fig, ax = plt.subplots(figsize=(7.6, 4.2))
    log = agg.knob in ("contamination-repeats", "lr")
    span = (max(x) / min(x)) if log else (max(x) - min(x)) or 1.0
    for i, m in enumerate(agg.methods):
        s = [agg.auc[v][m] for v in agg.values]
        mean = np.array([c.mean for c in s])
        err = np.array([[c.mean - c.low for c in s], [c.high - c.mean for c in s]])
        shift = (i - (len(agg.methods) - 1) / 2) * 0.005  # side by side, so bars stay apart
        xs = [v * span ** shift if log else v + shift * span for v in x]
        ax.errorbar(xs, mean, yerr=err, marker="o", markersize=4, capsize=2, label=m,
                    linestyle="--" if m == "blind" else "-")
    if log:
        ax.set_xscale("log")
    ax.set_xticks(x, list(agg.values))
    ax.minorticks_off()
    ax.axhline(0.5, color="grey", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("AUC, inserted contaminants vs never-inserted examples")
    ax.set_title(f"mean over seeds {', '.join(map(str, agg.seeds))} (bars: min-max)", fontsize=10)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--sweeps", default="repeats,lr,background")
    ap.add_argument("--out", default="/tmp/contamination-sweeps", type=Path)
    ap.add_argument("--figures", default=None, type=Path,
                    help="write contamination_<sweep>.png here (e.g. docs/figures)")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"), type=Path)
    args = ap.parse_args()

    from pddkit.sandbox.seeds import aggregate

    seeds = [int(s) for s in args.seeds.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    bench = write_bench(args.out / "bench.jsonl", args.shared)
    report = {}  # sweep -> aggregate, also written to OUT/aggregate_<sweep>.json
    for name in args.sweeps.split(","):
        summaries = [run_one(name, s, bench, args.out) for s in seeds]
        if name == "lr":
            summaries = [with_borrowed_lr(lr, run_one("repeats", s, bench, args.out))
                         for lr, s in zip(summaries, seeds)]
        agg = aggregate(summaries)
        report[name] = {**agg.to_json(),
                        "seconds": [round(s["seconds"]) for s in summaries],
                        "ground_truth": [s["ground_truth"]["line"] for s in summaries],
                        "inserted": [[r["contamination"]["texts"] -
                                      (s["contamination"]["heldout"]
                                       + r["contamination"]["drawn_zero_times"])
                                      for r in s["runs"]] for s in summaries],
                        "drawn_zero": [[r["contamination"]["drawn_zero_times"] for r in s["runs"]]
                                       for s in summaries]}
        print(f"\n## {name} ({SWEEPS[name][0]}), seeds {args.seeds}: AUC mean ± sd (min-max)\n")
        print(table(agg))
        print("inserted per run and seed:", report[name]["inserted"])
        if args.figures:
            plot(agg, SWEEPS[name][2], args.figures / f"contamination_{name}.png")
        (args.out / f"aggregate_{name}.json").write_text(json.dumps(report[name], indent=1) + "\n")


if __name__ == "__main__":
    main()
