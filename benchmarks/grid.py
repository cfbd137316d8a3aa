"""Time of the vectorised hyperparameter grids (methods/grid.py) on 10,000 texts of 128
tokens: every grid point of mink, minkpp, surp (20 x 10) and dcpdd from statistics
already computed.   python benchmarks/grid.py [--texts 10000] [--tokens 128]"""

import argparse
import time

import numpy as np

from pddkit.methods import grids
from pddkit.methods.grid import Padded
from pddkit.stats import TokenStats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=10_000)
    ap.add_argument("--tokens", type=int, default=128)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    V = 50257
    log_f = np.log(rng.dirichlet(np.ones(V)))
    stats = []
    for _ in range(a.texts):
        H = (rng.random(a.tokens) * 8).astype(np.float32)
        stats.append(TokenStats(rng.integers(0, V, a.tokens),
                                -rng.exponential(3, a.tokens).astype(np.float32), H,
                                H * H + rng.random(a.tokens).astype(np.float32)))
    t0 = time.perf_counter()
    P = Padded.of(stats)
    print(f"padding {a.texts} x {a.tokens}: {time.perf_counter() - t0:.2f} s")
    for method, grid in sorted(grids().items()):
        t0 = time.perf_counter()
        grid.scores(P, log_f)
        print(f"{method:7s} {len(grid.points()):4d} grid points: "
              f"{time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
