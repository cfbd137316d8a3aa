"""The figures of README's dataset-inference ground truth (`pddkit infer`), for both
classifiers, from the same data and model as tests/test_infer.py's `world` fixture:

40-word chunks of the first three Project Gutenberg books under ../shared/corpora/gutenberg
dealt out at random (seed 0) into 500 members, 500 non-members and 400 tokenizer texts
(checked to share no 13-word run); a 2-layer, 64-wide GPT-2-shaped model trained for 6
epochs on the members only; one engine pass scores the 24 features. Printed, per classifier
(`nonnegative`, the default, and `paper`, Maini et al.'s) and clipping (`pooled`, the
default, and `per-set`, the authors'):

  - members vs non-members: the p-value, the false-positive check's, the p-value curve;
  - two halves of the non-members, text by text (seeds 0..S-1): how many p > 0.05 and the
    lowest p-values (what the slow test `test_ground_truth_nonmember_halves` checks);
  - the same check by book (`group` = the book a chunk comes from; three books, so a half
    is one or two whole books): what the document-aware check says on this data.

    .venv/bin/python benchmarks/infer_ground_truth.py [--seeds 40] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

SHARED = Path(os.environ.get("PDDKIT_SHARED", Path(__file__).resolve().parents[2] / "shared"))
WORDS = 40


def world_texts(shared: Path) -> tuple[list[str], list[str], list[str], list[str]]:
    """(members, non-members, tokenizer pool, book of each non-member) as the test builds them."""
    from pddkit.data.gutenberg import strip_gutenberg

    book_of: dict[str, str] = {}
    for f in sorted((shared / "corpora" / "gutenberg").glob("*/*.txt"))[:3]:
        w = strip_gutenberg(f.read_text(encoding="utf-8", errors="replace")).split()
        for i in range(0, len(w) - WORDS + 1, WORDS):
            book_of.setdefault(" ".join(w[i:i + WORDS]), f.stem)
    chunks = sorted(book_of)
    random.Random(0).shuffle(chunks)
    members, nonmembers, pool = chunks[:500], chunks[500:1000], chunks[1000:1400]
    return members, nonmembers, pool, [book_of[t] for t in nonmembers]


def check_no_shared_runs(*parts: list[str]) -> None:
    from pddkit.data.ngrams import ngram_hashes

    sets = [set().union(*map(ngram_hashes, p)) for p in parts]
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            if not sets[i].isdisjoint(sets[j]):
                raise SystemExit(f"roles {i} and {j} share a 13-word run: no ground truth")


def p_list(ps) -> str:
    return ", ".join(f"{p:.3g}" for p in sorted(ps)[:3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=SHARED)
    ap.add_argument("--seeds", type=int, default=40, help="seeds of the null (false-positive) runs")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()

    import numpy as np
    import torch
    from sklearn.metrics import roc_auc_score

    from pddkit.sandbox.training import build_gpt2, save, train_bpe_tokenizer, train_causal_lm
    from pddkit.studies.dataset_inference import (
        CLASSIFIERS,
        CLIPS,
        decide,
        false_positive_test,
        reference_halves,
    )
    from pddkit.studies.infer import infer_dataset

    torch.set_num_threads(args.threads)
    members, nonmembers, pool, books = world_texts(args.shared)
    check_no_shared_runs(members, nonmembers, pool)
    t0 = time.perf_counter()
    tok = train_bpe_tokenizer(pool, vocab_size=1024)
    model = build_gpt2(tok, n_layer=2, n_embd=64, n_positions=256, seed=0)
    history = train_causal_lm(model, tok, members, epochs=6, lr=3e-3, batch_size=16, seed=0)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = save(model, tok, Path(tmp) / "model")
        result = infer_dataset(str(model_dir), members, nonmembers, device="cpu",
                               dtype="float32", batch_size=32, seed=0)
    t2 = time.perf_counter()
    f = result.features
    print(f"world: {len(members)} members, {len(nonmembers)} non-members, {len(pool)} tokenizer "
          f"texts; final training loss {history[-1]:.2f} nats; training {t1 - t0:.0f} s, "
          f"scoring {t2 - t1:.0f} s ({args.threads} torch thread(s))")
    y = np.r_[np.ones(len(f.suspect)), np.zeros(len(f.reference))]
    aucs = {k: roc_auc_score(y, np.r_[f.suspect[:, j], f.reference[:, j]])
            for j, k in enumerate(f.names)}
    best = max(aucs, key=aucs.get)
    print(f"best single feature: {best} AUC {aucs[best]:.3f} ({len(f.names)} features)")
    groups = tuple(books)
    seeds = range(args.seeds)
    print("by book, seed 0: " + reference_halves(len(groups), 0, groups)[2].sentence())
    for classifier, clip in ((c, k) for c in CLASSIFIERS for k in CLIPS):
        d = decide(f, seed=0, classifier=classifier, clip=clip)
        print(f"\n[{classifier}, {clip} clipping] {CLASSIFIERS[classifier]}; {CLIPS[clip]}")
        print(f"  members vs non-members: p = {d.test.p_value:.2g}; false-positive check "
              f"(text by text) p = {d.check.p_value:.2g}; used in training: {d.used_in_training}")
        print("  p-value curve: " + ", ".join(f"{c.n}: {c.p_value:.2g}" for c in d.curve))
        below = [c.n for c in d.curve if all(x.p_value < 0.05 for x in d.curve if x.n >= c.n)]
        print(f"  below 0.05 from {below[0] if below else '-'} texts per set on")
        ps = [false_positive_test(f.reference, f.names, s, classifier=classifier,
                                  clip=clip).p_value for s in seeds]
        print(f"  non-member halves, text by text, seeds 0-{args.seeds - 1}: p > 0.05 for "
              f"{sum(p > 0.05 for p in ps)} of {len(ps)} (lowest {p_list(ps)})")
        ps = [false_positive_test(f.reference, f.names, s, groups=groups,
                                  classifier=classifier, clip=clip).p_value for s in seeds]
        print(f"  non-member halves, by book ({len(set(groups))} books), seeds 0-"
              f"{args.seeds - 1}: p > 0.05 for {sum(p > 0.05 for p in ps)} of {len(ps)} "
              f"(lowest {p_list(ps)})")


if __name__ == "__main__":
    main()
