"""How often the copyrighted-book audit marks a book the model never saw, by simulation.

Each replicate draws never-seen books whose true rates of snippets above the threshold
vary from book to book around a mean `fpr` with standard deviation `sd` (beta, normal
clipped to [0, 1], or logit-normal), 50 validation books x 100 snippets and 100 audited
books x 100 snippets, all never seen. It counts the books marked by

- the old rule (before issue 19): a book's Wilson 95% interval entirely above the
  Wilson interval of the pooled validation rate;
- the audit's rule: one-sided p-value against the never-seen validation books' spread
  (beta-binomial, parameters' uncertainty included), Benjamini-Hochberg at --fdr over the
  audited books (studies/book_rates.py), and the same with a binomial at the pooled
  rate (what the audit does without groups only when told to assume that never-seen books
  do not differ, --assume-no-book-spread; without it, it marks no book).

Prints, per setting, the share of audited books falsely marked and the share of
replicates with at least one false mark (with BH, the false-discovery rate when no book
was seen), and the power on 10 books whose true rates are 0.2 and 0.4 higher.

    .venv/bin/python benchmarks/audit_false_marks.py [--replicates 1000] [--fdr 0.05]
    .venv/bin/python benchmarks/audit_false_marks.py --scores   # through judge_books

With `--scores`, snippet scores go through the whole decision (studies/book_rates.
judge_books: the threshold chosen on validation, the never-seen rate out of fold), judged
with book groups, without them (no verdict: counted, and no book may be marked) and without
them with `assume_no_book_spread`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import expit, logit

from pddkit.evaluation.thresholds import wilson_interval
from pddkit.studies.beta_binomial import benjamini_hochberg
from pddkit.studies.book_rates import (
    judge_books,
    never_seen_tails,
    pooled_reference,
    reference_from_books,
)


def draw_rates(rng, kind: str, mean: float, sd: float, size: int) -> np.ndarray:
    if sd == 0:
        return np.full(size, mean)
    if kind == "beta":
        s = mean * (1 - mean) / sd**2 - 1
        return rng.beta(mean * s, (1 - mean) * s, size)
    if kind == "normal":
        return np.clip(rng.normal(mean, sd, size), 0, 1)
    # logit-normal: the logit's sd chosen so the rates' sd is about `sd` (delta method)
    return expit(rng.normal(logit(mean), sd / (mean * (1 - mean)), size))


def old_marks(x_val, n_val, x, n) -> np.ndarray:
    hi = wilson_interval(int(x_val.sum()), int(n_val.sum()))[1]
    return np.array([wilson_interval(int(a), int(b))[0] > hi for a, b in zip(x, n)])


def marks(table, x, fdr) -> np.ndarray:
    """Benjamini-Hochberg at `fdr` over the books' p-values (as book_rates.test_books)."""
    return benjamini_hochberg(table[x]) <= fdr


def replicate(rng, kind, fpr, sd, books, snippets, audited, fdr, lift):
    n_val = np.full(books, snippets)
    x_val = rng.binomial(n_val, draw_rates(rng, kind, fpr, sd, books))
    n = np.full(audited, snippets)
    x = rng.binomial(n, draw_rates(rng, kind, fpr, sd, audited))
    bb = reference_from_books(x_val, n_val)
    pooled = pooled_reference(int(x_val.sum()), int(n_val.sum()), "")
    bb_tails = never_seen_tails(bb, [snippets])[snippets]
    pooled_tails = never_seen_tails(pooled, [snippets])[snippets]
    # power: the same audit with 10 books at a true rate `lift` higher, the rest never seen
    power = []
    for up in lift:
        x_pow = x.copy()
        x_pow[:10] = rng.binomial(snippets, np.clip(draw_rates(rng, kind, fpr, sd, 10) + up, 0, 1))
        power.append(marks(bb_tails, x_pow, fdr)[:10].mean())
    return (old_marks(x_val, n_val, x, n), marks(bb_tails, x, fdr), marks(pooled_tails, x, fdr),
            np.array(power), bb.rho)


def simulate_calls(args) -> None:
    print(f"{args.books} validation books x {args.snippets} snippets, {args.audited} audited "
          f"never-seen books, mean rate {args.fpr}, {args.replicates} replicates, "
          f"BH at {args.fdr}")
    print(f"{'rates':>12} {'sd':>5} | {'old: books':>10} {'runs':>6} | {'beta-bin: books':>15} "
          f"{'runs':>6} | {'assumed: books':>15} {'runs':>6} | power "
          + " ".join(f"+{up}" for up in args.lift) + " | fitted sd")
    for kind in args.kinds:
        for sd in args.sds:
            rng = np.random.default_rng([args.seed, int(1000 * sd), args.kinds.index(kind)])
            got = [replicate(rng, kind, args.fpr, sd, args.books, args.snippets, args.audited,
                             args.fdr, args.lift) for _ in range(args.replicates)]
            old, bb, binom, power = (np.array([g[i] for g in got]) for i in range(4))
            fitted_sd = np.mean([np.sqrt(g[4] * args.fpr * (1 - args.fpr)) for g in got])
            print(f"{kind:>12} {sd:5.2f} | {old.mean():10.4f} {old.any(1).mean():6.3f} | "
                  f"{bb.mean():15.4f} {bb.any(1).mean():6.3f} | {binom.mean():15.4f} "
                  f"{binom.any(1).mean():6.3f} | "
                  + " ".join(f"{v:.3f}" for v in power.mean(0)) + f" | {fitted_sd:.3f}")


def simulate_scores(args) -> None:
    """Through judge_books: snippet scores N(book effect, 1), members shifted by 1.5;
    the book effect's sd chosen so never-seen books' rates vary by about `sd`; the
    threshold chosen on validation (accuracy), the never-seen rate out of fold; judged with
    groups (folds of whole books, the fitted spread), without (no verdict) and without
    groups assuming no spread (one pooled rate)."""
    from scipy.stats import norm

    print(f"scores through judge_books, {args.replicates} replicates, {args.books} + "
          f"{args.books} validation books x {args.snippets} snippets, {args.audited} audited "
          f"never-seen books, BH at {args.fdr}")
    for sd in args.sds:
        rng = np.random.default_rng([args.seed, int(1000 * sd), 7])
        got = {"groups": ([], []), "assumed": ([], [])}
        verdicts_without = 0
        t = norm.ppf(1 - args.fpr)
        tau = sd / norm.pdf(t)  # rate = Phi(b - t): sd ~ phi(t) tau
        for _ in range(args.replicates):
            b_val = rng.normal(0, tau, 2 * args.books)
            labels = np.repeat(np.r_[np.ones(args.books, int), np.zeros(args.books, int)],
                               args.snippets)
            scores = np.repeat(b_val, args.snippets) + rng.normal(size=labels.size) + 1.5 * labels
            groups = np.repeat(np.arange(2 * args.books), args.snippets).astype(str)
            audited = [rng.normal(b, 1, args.snippets) for b in rng.normal(0, tau, args.audited)]
            seed = int(rng.integers(1 << 31))
            for key, kw in (("groups", {"val_groups": groups}),
                            ("assumed", {"assume_no_book_spread": True})):
                j = judge_books(scores, labels, audited, fdr=args.fdr, seed=seed, **kw)
                marked = np.array(j.test.marked)
                got[key][0].append(marked.mean())
                got[key][1].append(marked.any())
            without = judge_books(scores, labels, audited, fdr=args.fdr, seed=seed).test
            assert not any(without.marked), "no groups, no assumption: no book is marked"
            verdicts_without += without.given
        print(f"sd {sd:.2f}: books falsely marked / runs with a false mark: with groups "
              f"{np.mean(got['groups'][0]):.4f} / {np.mean(got['groups'][1]):.3f}; without "
              f"groups, assuming no spread {np.mean(got['assumed'][0]):.4f} / "
              f"{np.mean(got['assumed'][1]):.3f}; without groups or the assumption: "
              f"{verdicts_without} verdicts, 0 marks")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--books", type=int, default=50)
    ap.add_argument("--snippets", type=int, default=100)
    ap.add_argument("--audited", type=int, default=100)
    ap.add_argument("--fpr", type=float, default=0.2)
    ap.add_argument("--sds", type=float, nargs="+", default=[0.0, 0.05, 0.10])
    ap.add_argument("--kinds", nargs="+", default=["beta", "normal", "logit-normal"])
    ap.add_argument("--fdr", type=float, default=0.05)
    ap.add_argument("--lift", type=float, nargs="+", default=[0.2, 0.4],
                    help="power on 10 books whose true rates are this much higher")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scores", action="store_true", help="simulate scores through judge_books")
    args = ap.parse_args()
    start = time.perf_counter()
    (simulate_scores if args.scores else simulate_calls)(args)
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
