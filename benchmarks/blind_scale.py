"""How the blind baseline's cost grows with the number of texts: wall time and peak memory
of `BlindBaseline().cross_val_scores` (the out-of-fold scores every labelled run computes)
at 1k, 10k and 100k texts, each size in its own process (so each peak is its own) on one
BLAS thread, as a run's baseline runs.

The texts look like real data: Project Gutenberg paragraphs (../shared/corpora/gutenberg,
8 words or more, at most 128, books taken round-robin across the authors), labelled with
a mild shift (each book's paragraphs are members with probability 0.42 or 0.58, by book),
mixed with WikiMIA and ArxivMIA texts under their own labels (../shared/data: 4% of the
texts at most, all of them at 100k). The seconds cover the baseline only, not reading the
corpus; the peak is the whole process's (Python, the corpus, the baseline).

    .venv/bin/python benchmarks/blind_scale.py [--sizes 1000,10000,100000] [--repeats 1]
        [--shared ../shared] [--json results.jsonl] [--max-texts N] [--plot curve.png]

`--shared` is a folder holding data/wikimia/WikiMIA_length*.jsonl,
data/arxivmia/arxiv_mia.jsonl and corpora/gutenberg/AUTHOR/*.txt (the project's ../shared).
The figure in the docs: --sizes 1000,10000,100000 --json runs.jsonl --plot blind_scale.png.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

SIZES = (1000, 10000, 100000)
MEMBER_SHARE = (0.42, 0.58)  # a book's chance of member per paragraph, alternating by book
BENCHMARK_SHARE = 0.04       # at most this share of the texts comes from WikiMIA / ArxivMIA
MAX_WORDS = 128


def _benchmark_texts(shared: Path) -> list[tuple[str, int]]:
    """(text, label) of WikiMIA (every length) and ArxivMIA (all 2,000 abstracts)."""
    data = shared / "data"
    files = [(p, "input") for p in sorted((data / "wikimia").glob("WikiMIA_length*.jsonl"))]
    files.append((data / "arxivmia" / "arxiv_mia.jsonl", "text"))
    out = []
    for path, field in files:
        for line in path.open(encoding="utf-8"):
            row = json.loads(line)
            out.append((row[field], int(row["label"])))
    return out


def _books(shared: Path) -> list[Path]:
    """Every book, round-robin across the authors (first book of each, then second, ...)."""
    authors = [sorted(a.glob("*.txt")) for a in sorted((shared / "corpora" / "gutenberg").iterdir())
               if a.is_dir()]
    order = []
    for i in range(max(len(b) for b in authors)):
        order += [b[i] for b in authors if i < len(b)]
    return order


def texts_and_labels(n: int, shared: Path, seed: int = 0) -> tuple[list[str], list[int]]:
    """`n` distinct texts and their labels (see the module docstring), seeded."""
    from pddkit.data.gutenberg import strip_gutenberg
    from pddkit.sandbox.corpus import paragraphs

    rng = random.Random(seed)
    bench = _benchmark_texts(shared)
    rng.shuffle(bench)
    bench = bench[: min(len(bench), int(BENCHMARK_SHARE * n))]
    seen = {t for t, _ in bench}
    pool: list[tuple[str, int]] = []
    for b, path in enumerate(_books(shared)):
        share = MEMBER_SHARE[b % 2]
        text = strip_gutenberg(path.read_text(encoding="utf-8", errors="replace"))
        for para in paragraphs(text, 8):
            para = " ".join(para.split()[:MAX_WORDS])
            if para not in seen:
                seen.add(para)
                pool.append((para, int(rng.random() < share)))
        if len(pool) >= 1.15 * (n - len(bench)):
            break
    if len(pool) + len(bench) < n:
        raise SystemExit(f"the shared corpus holds {len(pool) + len(bench)} texts, fewer than {n}")
    rows = rng.sample(pool, n - len(bench)) + bench
    rng.shuffle(rows)
    return [t for t, _ in rows], [y for _, y in rows]


def measure(n: int, shared: Path, seed: int, max_texts: int | None) -> dict:
    """One size, in this process: seconds and peak memory of the out-of-fold scores."""
    import resource
    import time

    import numpy as np
    from sklearn.metrics import roc_auc_score
    from threadpoolctl import threadpool_limits

    from pddkit.blind.baseline import BlindBaseline

    texts, labels = texts_and_labels(n, shared, seed)
    y = np.asarray(labels)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    model = BlindBaseline(seed=seed, max_texts=max_texts)
    with threadpool_limits(1):
        t0, c0 = time.perf_counter(), time.process_time()
        scores = model.cross_val_scores(texts, y)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    scored = np.isfinite(scores)
    return {"n": n, "seconds": seconds, "cpu_seconds": cpu, "peak_mb": peak,
            "rss_before_fit_mb": before,
            "members": int(y.sum()), "scored": int(scored.sum()),
            "auc": float(roc_auc_score(y[scored], scores[scored])),
            "neighbour_search": model.neighbour_search_, "max_texts": max_texts}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="numbers of texts, comma-separated")
    ap.add_argument("--repeats", type=int, default=1, help="runs per size (timings are noisy)")
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-texts", type=int, default=None,
                    help="the baseline's stratified subsample (--blind-max-texts)")
    ap.add_argument("--json", default=None, help="append one JSON line per run here")
    ap.add_argument("--plot", default=None,
                    help="draw seconds and peak memory against texts (log-log) from the --json "
                         "file's runs (without --max-texts) into this PNG; with --sizes none, "
                         "only draw")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:  # one size, in its own process: its own peak
        print(json.dumps(measure(args.child, Path(args.shared), args.seed, args.max_texts)))
        return
    if args.sizes != "none":
        _check_data(Path(args.shared))
        _measure_sizes(args)
    if args.plot:
        if not args.json:
            raise SystemExit("--plot draws the runs of the --json file: give --json too")
        _plot([json.loads(line) for line in Path(args.json).read_text().splitlines()], args.plot)


def _check_data(shared: Path) -> None:
    """The texts this script reads: one sentence naming what is missing."""
    need = [shared / "data" / "wikimia", shared / "data" / "arxivmia" / "arxiv_mia.jsonl",
            shared / "corpora" / "gutenberg"]
    missing = [str(p) for p in need if not p.exists()]
    if missing:
        raise SystemExit(f"blind_scale.py reads WikiMIA, ArxivMIA and Project Gutenberg books "
                         f"under --shared {shared}, which lacks {', '.join(missing)}: give "
                         "--shared DIR holding data/wikimia/WikiMIA_length*.jsonl, "
                         "data/arxivmia/arxiv_mia.jsonl and corpora/gutenberg/AUTHOR/*.txt")


def _plot(rows: list[dict], path: str) -> None:
    """Seconds and peak memory against the number of texts, log-log, with n and n log n
    guides through the smallest size (the median of repeated runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [r for r in rows if r.get("max_texts") is None]
    ns = sorted({r["n"] for r in rows})
    secs = [float(np.median([r["seconds"] for r in rows if r["n"] == n])) for n in ns]
    mem = [float(np.median([r["peak_mb"] for r in rows if r["n"] == n])) for n in ns]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6))
    x = np.array(ns, dtype=float)
    a.loglog(ns, secs, "o-", label="blind baseline (one core)")
    a.loglog(x, secs[0] * x / x[0], ":", color="grey", label="∝ n")
    a.loglog(x, secs[0] * x * np.log(x) / (x[0] * np.log(x[0])), "--", color="grey",
             label="∝ n log n")
    a.set(xlabel="texts", ylabel="seconds", title="time")
    a.legend(fontsize=8)
    b.loglog(ns, mem, "o-", color="C1")
    b.set(xlabel="texts", ylabel="peak MB (whole process)", title="memory")
    for ax in (a, b):
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def _measure_sizes(args) -> None:
    print(f"{'texts':>7s} {'seconds':>8s} {'CPU s':>8s} {'peak MB':>8s} {'AUC':>6s}  neighbour search",
          flush=True)
    for n in [int(s) for s in args.sizes.split(",")]:
        for _ in range(args.repeats):
            cmd = [sys.executable, __file__, "--child", str(n), "--shared", args.shared,
                   "--seed", str(args.seed)]
            if args.max_texts is not None:
                cmd += ["--max-texts", str(args.max_texts)]
            env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                                  env={**__import__("os").environ, **env})
            if done.returncode != 0:
                raise SystemExit(f"{n} texts failed: {done.stderr.strip().splitlines()[-1:]}")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{row['n']:7d} {row['seconds']:8.1f} {row['cpu_seconds']:8.1f} "
                  f"{row['peak_mb']:8.0f} {row['auc']:6.3f}  {row['neighbour_search']}", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
