"""Dataset inference under the null: suspect and validation texts drawn from one
distribution, so a calibrated test gives p < 0.05 in 5% of draws. Per cell (features x
texts per set x classifier x clipping x test), the share of seeded draws with p < 0.05 and
its exact (Clopper-Pearson) binomial 95% interval.

Features:
  - `gaussian`: 20 independent standard normal features;
  - `lognormal`: 20 features of which 5 are exp(sigma z) (sigma 1.5 by default;
    perplexity-type features are heavy-tailed), 15 standard normal;
  - `real`: the 24 features `pddkit infer` computes, under a sandbox model (pddkit's toy
    training: a BPE tokenizer and a 2-layer, 64-wide GPT-2 trained 6 epochs on 500
    40-word chunks of Jane Austen's first Gutenberg books) on a pool of chunks of the same
    books it never saw (a chunk sharing a 13-word run with a trained one is dropped). Each
    draw deals 2n texts of the pool at random into the two sets; where the pool holds fewer
    than 2n texts, each set gets half the pool (the cell says how many).

Tests: `test` = `compare_sets(suspect, validation)`; `check` = the false-positive check,
`false_positive_test(validation)`: two halves of the validation set (n/2 texts each, text
by text), as `decide` runs it at n texts per set. Both classifiers (`nonnegative`,
`paper`) and both clippings (`pooled`, `per-set`) run on the same draws.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/infer_null.py [--draws 200]
        [--sizes 100,1000,4000] [--features gaussian,lognormal,real] [--sigma 1.5]
        [--pool 8000] [--work DIR] [--jsonl cells.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

SHARED = Path(os.environ.get("PDDKIT_SHARED", Path(__file__).resolve().parents[2] / "shared"))
WORDS = 40  # words per chunk (text) of the real pool
MEMBERS, TOKENIZER_TEXTS = 500, 400
N_FEATURES, N_LOGNORMAL = 20, 5
KINDS = ("gaussian", "lognormal", "real")
CLASSIFIERS = ("nonnegative", "paper")
CLIPS = ("pooled", "per-set")


def synthetic(kind: str, n: int, draw: int, sigma: float):
    """(suspect, validation), n x 20 each, from one distribution; seeded by (kind, n, draw)."""
    import numpy as np

    rng = np.random.default_rng([KINDS.index(kind), n, draw])
    X = rng.standard_normal((2 * n, N_FEATURES))
    if kind == "lognormal":
        X[:, :N_LOGNORMAL] = np.exp(sigma * X[:, :N_LOGNORMAL])
    return X[:n], X[n:]


def austen_chunks(shared: Path, need: int) -> list[str]:
    """40-word chunks of Jane Austen's books in name order, until `need` distinct ones."""
    from pddkit.data.gutenberg import strip_gutenberg

    chunks: set[str] = set()
    for f in sorted((shared / "corpora" / "gutenberg" / "Austen, Jane").glob("*.txt")):
        w = strip_gutenberg(f.read_text(encoding="utf-8", errors="replace")).split()
        chunks |= {" ".join(w[i:i + WORDS]) for i in range(0, len(w) - WORDS + 1, WORDS)}
        if len(chunks) >= need:
            break
    out = sorted(chunks)
    random.Random(0).shuffle(out)
    return out


def real_features(shared: Path, pool_size: int, work: Path, threads: int):
    """The pool's feature matrix (texts x 24) and names, scored once and kept in `work`."""
    import numpy as np

    cached = work / f"real_features_{pool_size}.npz"
    if cached.exists():
        z = np.load(cached, allow_pickle=False)
        print(f"real features read from {cached}")
        return z["X"], tuple(z["names"].tolist())
    import torch

    from pddkit.data.ngrams import ngram_hashes
    from pddkit.sandbox.training import build_gpt2, save, train_bpe_tokenizer, train_causal_lm
    from pddkit.studies.infer import infer_dataset

    torch.set_num_threads(threads)
    chunks = austen_chunks(shared, MEMBERS + TOKENIZER_TEXTS + pool_size + pool_size // 10)
    members, tok_texts = chunks[:MEMBERS], chunks[MEMBERS:MEMBERS + TOKENIZER_TEXTS]
    trained = set().union(*map(ngram_hashes, members))
    rest = chunks[MEMBERS + TOKENIZER_TEXTS:]
    pool = [c for c in rest if trained.isdisjoint(ngram_hashes(c))][:pool_size]
    print(f"real pool: {len(pool)} unseen chunks ({len(rest) - len(pool)} of the rest left "
          f"out: a 13-word run shared with a trained chunk, or beyond {pool_size})")
    t0 = time.perf_counter()
    tok = train_bpe_tokenizer(tok_texts, vocab_size=1024)
    model = build_gpt2(tok, n_layer=2, n_embd=64, n_positions=256, seed=0)
    loss = train_causal_lm(model, tok, members, epochs=6, lr=3e-3, batch_size=16, seed=0)[-1]
    model_dir = save(model, tok, work / "model")
    half = len(pool) // 2
    res = infer_dataset(str(model_dir), pool[:half], pool[half:], device="cpu", dtype="float32",
                        batch_size=32, false_positive_check=False)
    X = np.vstack([res.features.suspect, res.features.reference])
    print(f"sandbox model: final training loss {loss:.2f} nats; {len(pool)} texts scored, "
          f"{X.shape[1]} features, {time.perf_counter() - t0:.0f} s")
    np.savez(cached, X=X, names=np.array(res.features.names))
    return X, res.features.names


def run_cell_draws(kind: str, n: int, draws: int, sigma: float, X_real, names) -> dict:
    """{(classifier, clip, test): [p per draw]} and the texts per set actually used."""
    import numpy as np

    from pddkit.studies.dataset_inference import compare_sets, false_positive_test

    ps: dict = {(c, k, t): [] for c in CLASSIFIERS for k in CLIPS for t in ("test", "check")}
    n_used = n if kind != "real" else min(n, len(X_real) // 2)
    for d in range(draws):
        if kind == "real":
            perm = np.random.default_rng([KINDS.index(kind), n, d]).permutation(len(X_real))
            S, V = X_real[perm[:n_used]], X_real[perm[n_used:2 * n_used]]
        else:
            S, V = synthetic(kind, n, d, sigma)
        for c in CLASSIFIERS:
            for k in CLIPS:
                ps[c, k, "test"].append(compare_sets(S, V, names, d, classifier=c, clip=k).p_value)
                ps[c, k, "check"].append(
                    false_positive_test(V, names, d, classifier=c, clip=k).p_value)
    return {"n": n_used, "ps": ps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--sizes", default="100,1000,4000", help="texts per set, comma-separated")
    ap.add_argument("--features", default=",".join(KINDS))
    ap.add_argument("--sigma", type=float, default=1.5, help="lognormal features: exp(sigma z)")
    ap.add_argument("--pool", type=int, default=8000, help="unseen texts scored for `real`")
    ap.add_argument("--shared", type=Path, default=SHARED)
    ap.add_argument("--work", type=Path, default=Path("infer_null_work"),
                    help="folder for the sandbox model and the real features (reused)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads while scoring")
    ap.add_argument("--jsonl", type=Path, default=None, help="one JSON line per cell")
    args = ap.parse_args()

    import numpy as np
    from scipy.stats import binomtest

    kinds = [k for k in args.features.split(",") if k]
    if unknown := set(kinds) - set(KINDS):
        raise SystemExit(f"--features: {', '.join(sorted(unknown))} not among {', '.join(KINDS)}")
    sizes = [int(s) for s in args.sizes.split(",")]
    X_real, real_names = None, None
    if "real" in kinds:
        args.work.mkdir(parents=True, exist_ok=True)
        X_real, real_names = real_features(args.shared, args.pool, args.work, args.threads)
    out = args.jsonl.open("w") if args.jsonl else None
    print(f"{args.draws} draws per cell; share of p < 0.05 [exact binomial 95% interval]")
    print(f"{'features':<22}{'n/set':>6}  {'classifier':<12}{'clip':<9}{'test':>22}{'check':>22}")
    for kind in kinds:
        names = real_names if kind == "real" else tuple(f"f{i}" for i in range(N_FEATURES))
        label = f"lognormal (sigma {args.sigma:g})" if kind == "lognormal" else kind
        for n in sizes:
            t0 = time.perf_counter()
            got = run_cell_draws(kind, n, args.draws, args.sigma, X_real, names)
            secs = time.perf_counter() - t0
            for c in CLASSIFIERS:
                for k in CLIPS:
                    cells = []
                    for t in ("test", "check"):
                        ps = np.asarray(got["ps"][c, k, t])
                        hits = int((ps < 0.05).sum())
                        ci = binomtest(hits, len(ps)).proportion_ci(0.95, method="exact")
                        cells.append(f"{hits / len(ps):6.1%} [{ci.low:5.1%}, {ci.high:5.1%}]")
                        if out:
                            out.write(json.dumps({
                                "features": kind, "sigma": args.sigma if kind == "lognormal"
                                else None, "n_per_set": got["n"], "classifier": c, "clip": k,
                                "test": t, "draws": len(ps), "below_0.05": hits,
                                "share": hits / len(ps), "ci95": [ci.low, ci.high],
                                "median_p": float(np.median(ps))}) + "\n")
                    print(f"{label:<22}{got['n']:>6}  {c:<12}{k:<9}{cells[0]:>22}{cells[1]:>22}")
            print(f"  ({secs:.0f} s for {args.draws} draws)", flush=True)
    if out:
        out.close()


if __name__ == "__main__":
    main()
