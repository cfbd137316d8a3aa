"""The copyrighted-book audit's false marks on real books and a real (tiny) model.

A 2-layer, 64-wide GPT-2-shaped model is trained for 8 epochs on 8 short Project Gutenberg
books (as in tests/test_audit.py's ground truth); every other book of ../shared/corpora/
gutenberg that shares no 13-word run with them (or with the tokenizer's two texts) is a
book the model never saw. Each book gives `--snippets` snippets of `--words` words, all
scored once with `--method`. Then, `--splits` times, the never-seen books are split at
random into `--val-books` validation books and the rest, audited beside the 4 member
books not used for validation (4 member books validate). Per split, marks by

- the old rule (before issue 19): folds of texts, a book's Wilson interval entirely above
  the Wilson interval of the pooled validation false-positive rate;
- the audit's rule (evaluation/book_rates.judge_books): folds of whole books, p-values
  against the never-seen validation books' spread, Benjamini-Hochberg at --fdr;
- the same without groups (a binomial at the pooled rate).

Prints the mean rates of never-seen and member audited books, the never-seen books'
between-book sd the reference found, the share of never-seen audited books marked (mean
over splits), the share of splits with any never-seen book marked, and the member books
marked.

    .venv/bin/python benchmarks/audit_sandbox.py [--shared ../shared] [--splits 200]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

MEMBERS = ("Poe, Edgar Allan/The Cask of Amontillado.txt",
           "Poe, Edgar Allan/The Masque of the Red Death.txt",
           "Carroll, Lewis/Feeding the Mind.txt",
           "Doyle, Arthur Conan/The Cabman's StoryThe Mysteries of a London 'Growler'.txt",
           "Doyle, Arthur Conan/The Adventure of the Dying Detective.txt",
           "Wilde, Oscar/For Love of the King: A Burmese Masque.txt",
           "Wilde, Oscar/Impressions of America.txt",
           "Carroll, Lewis/Eight or Nine Wise Words about Letter-Writing.txt")
TOKENIZER_TEXTS = ("Wilde, Oscar/The Canterville Ghost.txt",
                   "Doyle, Arthur Conan/The Adventure of Wisteria Lodge.txt")


def build(shared: Path, out: Path, words: int, snippets: int, seed: int):
    """(model directory, {book: snippet texts}, member names)."""
    import torch

    from pddkit.data.ngrams import ngram_hashes
    from pddkit.sandbox.corpus import strip_gutenberg
    from pddkit.sandbox.training import build_gpt2, save, train_bpe_tokenizer, train_causal_lm
    from pddkit.studies.audit import Book, cut_snippets

    root = shared / "corpora" / "gutenberg"
    text = {p.relative_to(root).as_posix(): strip_gutenberg(p.read_text(encoding="utf-8",
                                                                         errors="replace"))
            for p in sorted(root.rglob("*.txt"))}
    seen = set().union(*(ngram_hashes(text[k]) for k in MEMBERS + TOKENIZER_TEXTS))
    unseen = [k for k in text if k not in MEMBERS + TOKENIZER_TEXTS
              and seen.isdisjoint(ngram_hashes(text[k]))]
    print(f"{len(text)} books: {len(MEMBERS)} trained on, {len(unseen)} never seen (no "
          f"13-word run shared), {len(text) - len(MEMBERS) - len(unseen)} left out")
    torch.set_num_threads(1)
    model_dir = out / "model"
    if not (model_dir / "config.json").is_file():
        start = time.perf_counter()
        tok = train_bpe_tokenizer([text[k] for k in TOKENIZER_TEXTS], vocab_size=1024)
        model = build_gpt2(tok, n_layer=2, n_embd=64, n_positions=512, seed=seed)
        train_causal_lm(model, tok, [text[k] for k in MEMBERS], epochs=8, lr=3e-3,
                        batch_size=8, seed=seed, context=128)
        save(model, tok, model_dir)
        print(f"trained in {time.perf_counter() - start:.0f} s")
    cut = {k: [s.text for s in cut_snippets(Book(k, text[k], k), snippets, words, seed)]
           for k in MEMBERS + tuple(unseen)}
    return model_dir, {k: v for k, v in cut.items() if len(v) == snippets}


def old_rule(val_scores, y, book_scores, rule, seed):
    from pddkit.evaluation.thresholds import Threshold, wilson_interval

    th = Threshold(rule, seed=seed).fit(val_scores, y)
    hi = th.summary().expected_fpr_ci[1]
    return np.array([wilson_interval(int((s > th.threshold_).sum()), s.size)[0] > hi
                     for s in book_scores])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    ap.add_argument("--out", type=Path, default=Path("/tmp/pddkit-audit-sandbox"))
    ap.add_argument("--method", default="mink")
    ap.add_argument("--words", type=int, default=64)
    ap.add_argument("--snippets", type=int, default=16)
    ap.add_argument("--val-books", type=int, default=40)
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--rules", nargs="+", default=["accuracy", "fpr=0.2"])
    ap.add_argument("--fdr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from pddkit.api import score
    from pddkit.evaluation.book_rates import judge_books

    model_dir, snips = build(args.shared, args.out, args.words, args.snippets, args.seed)
    names = list(snips)
    texts = [t for k in names for t in snips[k]]
    start = time.perf_counter()
    scores = score(texts, str(model_dir), args.method, device="cpu", dtype="float32")
    values = np.asarray(next(iter(scores.values())), dtype=float)
    print(f"{len(texts)} snippets of {len(names)} books scored with {args.method} in "
          f"{time.perf_counter() - start:.0f} s")
    by_book = {k: values[i * args.snippets:(i + 1) * args.snippets] for i, k in enumerate(names)}
    members = [k for k in names if k in MEMBERS]
    unseen = [k for k in names if k not in MEMBERS]
    rng = np.random.default_rng(args.seed)
    for rule in args.rules:
        got = {"old": [], "grouped": [], "pooled": []}
        member_marks = {"old": [], "grouped": [], "pooled": []}
        sds, rates_unseen, rates_members = [], [], []
        for split in range(args.splits):
            order = rng.permutation(len(unseen))
            val_unseen = [unseen[i] for i in order[:args.val_books]]
            audited_unseen = [unseen[i] for i in order[args.val_books:]]
            pick = rng.permutation(len(members))
            val_members = [members[i] for i in pick[:4]]
            audited = audited_unseen + [members[i] for i in pick[4:]]
            val_books = val_members + val_unseen
            val_scores = np.concatenate([by_book[k] for k in val_books])
            y = np.repeat([int(k in MEMBERS) for k in val_books], args.snippets)
            groups = np.repeat(val_books, args.snippets)
            book_scores = [by_book[k] for k in audited]
            n = len(audited_unseen)
            marks = {"old": old_rule(val_scores, y, book_scores, rule, split)}
            judged = judge_books(val_scores, y, book_scores, val_groups=groups, rule=rule,
                                 fdr=args.fdr, seed=split)
            sds.append(judged.reference.between_book_sd)
            rate = np.array(judged.above) / np.array(judged.snippets)
            rates_unseen.append(rate[:n].mean())
            rates_members.append(rate[n:].mean())
            marks["grouped"] = np.array(judged.test.marked)
            marks["pooled"] = np.array(judge_books(val_scores, y, book_scores, rule=rule,
                                                   fdr=args.fdr, seed=split).test.marked)
            for key, m in marks.items():
                got[key].append(m[:n])
                member_marks[key].append(m[n:].mean())
        print(f"rule {rule}: {args.splits} splits, {args.val_books} never-seen + 4 member books "
              f"validate, {len(unseen) - args.val_books} never-seen + {len(members) - 4} member "
              f"books audited; mean rate of never-seen books {np.mean(rates_unseen):.3f}, "
              f"of member books {np.mean(rates_members):.3f}; never-seen books' between-book "
              f"sd (fitted) {np.mean(sds):.3f}")
        for key, label in (("old", "old rule (Wilson above pooled Wilson)"),
                           ("grouped", f"audit (book spread, BH {args.fdr})"),
                           ("pooled", f"pooled binomial (no groups), BH {args.fdr}")):
            m = np.array(got[key])
            print(f"  {label:42s} never-seen marked {m.mean():.4f}, splits with any "
                  f"{m.any(1).mean():.3f}, members marked {np.mean(member_marks[key]):.3f}")


if __name__ == "__main__":
    main()
