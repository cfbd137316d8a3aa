"""The copyrighted-book audit's false marks on real books and real (tiny) models.

Per seed (`--seeds`), a 2-layer, 64-wide GPT-2-shaped model is trained for 8 epochs on 8
short Project Gutenberg books (as in tests/test_audit.py's ground truth, the seed setting
its initialisation and batch order); every other book of ../shared/corpora/gutenberg that
shares no 13-word run with them (or with the tokenizer's two texts) is a book the model never
saw. Each book gives `--snippets` snippets of `--words` words (cut with the seed), all scored
once with `--method` (phase `prepare` writes `--out`/seed<N>/texts.json, the only step that
reads the corpus; phase `score` trains and scores into scores.json). Then, per seed,
`--splits` validation draws (phase `judge`), each judged with studies/book_rates.judge_books
as `pddkit audit` does:

- many books: `--val-books` never-seen books and 4 member books validate, the other
  never-seen books and the other 4 member books are audited; judged with book groups
  (folds of whole books, the never-seen books' spread), without groups (no verdict), and
  without groups with `assume_no_book_spread` (one pooled out-of-fold rate);
- some books: as many books, but only 8 never-seen books validate (with groups);
- few books (the issue's setting): the snippets of 1 member book and 1 never-seen book
  validate, 4 other never-seen books and 3 other member books are audited; without groups
  (no verdict) and with `assume_no_book_spread` (which is what the audit did by default
  before issue 28).

Prints, per rule, setting and mode: the audits that gave a verdict, the share of never-seen
audited books marked (with a Wilson 95% interval over all book audits), the share of draws
with any never-seen book marked, the false-discovery proportion (never-seen marked / all
marked, 0 with none marked) averaged over draws (what --fdr bounds), and the share of member
books marked; and the never-seen books' rates and book-to-book sd as the reference fitted
them.

    .venv/bin/python benchmarks/audit_sandbox.py [--shared ../shared] [--seeds 0 1 2]
        [--splits 100] [--phase all|prepare|score|judge] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
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


def prepare(shared: Path, out: Path, seeds: list[int], args) -> None:
    """Per seed, `out`/seed<N>/texts.json: the training and tokenizer texts and every kept
    book's snippets (cut with the seed), so the `score` phase needs no corpus."""
    from pddkit.data.gutenberg import strip_gutenberg
    from pddkit.data.ngrams import ngram_hashes
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
    for seed in seeds:
        cut = {k: [s.text for s in cut_snippets(Book(k, text[k], k), args.snippets, args.words,
                                                 seed)]
               for k in MEMBERS + tuple(unseen)}
        folder = out / f"seed{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "texts.json").write_text(json.dumps({
            "seed": seed, "members": list(MEMBERS), "words": args.words,
            "snippets": args.snippets, "train": [text[k] for k in MEMBERS],
            "tokenizer": [text[k] for k in TOKENIZER_TEXTS],
            "books": {k: v for k, v in cut.items() if len(v) == args.snippets}}))


def score_seed(folder: Path, args) -> Path:
    """Train the seed's model (once) and write every kept book's snippet scores."""
    import torch

    from pddkit.api import score
    from pddkit.sandbox.training import build_gpt2, save, train_bpe_tokenizer, train_causal_lm

    saved = json.loads((folder / "texts.json").read_text())
    seed = saved["seed"]
    torch.set_num_threads(args.threads)
    model_dir = folder / "model"
    if not (model_dir / "config.json").is_file():
        start = time.perf_counter()
        tok = train_bpe_tokenizer(saved["tokenizer"], vocab_size=1024)
        model = build_gpt2(tok, n_layer=2, n_embd=64, n_positions=512, seed=seed)
        train_causal_lm(model, tok, saved["train"], epochs=8, lr=3e-3, batch_size=8,
                        seed=seed, context=128)
        save(model, tok, model_dir)
        print(f"seed {seed}: trained in {time.perf_counter() - start:.0f} s")
    names = list(saved["books"])
    n = saved["snippets"]
    start = time.perf_counter()
    scores = score([t for k in names for t in saved["books"][k]], str(model_dir), args.method,
                   device=args.device, dtype="float32")
    values = np.asarray(next(iter(scores.values())), dtype=float)
    print(f"seed {seed}: {values.size} snippets of {len(names)} books scored with "
          f"{args.method} in {time.perf_counter() - start:.0f} s")
    path = folder / "scores.json"
    path.write_text(json.dumps({"seed": seed, "method": args.method, "words": saved["words"],
                                "snippets": n, "members": saved["members"],
                                "scores": {k: values[i * n:(i + 1) * n].tolist()
                                           for i, k in enumerate(names)}}))
    return path


class Tally:
    """Marks of never-seen and member books over the draws of one setting and mode."""

    def __init__(self) -> None:
        self.given, self.draws, self.unseen_marked, self.unseen = 0, 0, 0, 0
        self.any_false, self.fdp, self.members_marked, self.members = 0, [], 0, 0

    def add(self, test, n_unseen: int) -> None:
        self.draws += 1
        marked = np.array([bool(m) for m in test.marked])  # None (no verdict): not marked
        self.given += test.given
        false, true = int(marked[:n_unseen].sum()), int(marked[n_unseen:].sum())
        self.unseen_marked += false
        self.unseen += n_unseen
        self.any_false += false > 0
        self.fdp.append(false / max(false + true, 1))
        self.members_marked += true
        self.members += marked.size - n_unseen

    def merge(self, other: Tally) -> None:
        for name in ("given", "draws", "unseen_marked", "unseen", "any_false", "fdp",
                     "members_marked", "members"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def line(self) -> str:
        from pddkit.evaluation.thresholds import wilson_interval

        lo, hi = wilson_interval(self.unseen_marked, self.unseen)
        fdp = np.array(self.fdp)
        se = fdp.std(ddof=1) / np.sqrt(fdp.size) if fdp.size > 1 else 0.0
        return (f"verdicts {self.given}/{self.draws}; never-seen marked "
                f"{self.unseen_marked}/{self.unseen} = {100 * self.unseen_marked / self.unseen:.2f}% "
                f"[{100 * lo:.2f}, {100 * hi:.2f}]; draws with any {self.any_false}/{self.draws}; "
                f"mean FDP {100 * fdp.mean():.2f}% (se {100 * se:.2f}); members marked "
                f"{self.members_marked}/{self.members}")


def judge_seed(path: Path, args) -> dict[str, dict[str, Tally]]:
    from pddkit.studies.book_rates import judge_books

    saved = json.loads(path.read_text())
    by_book = {k: np.asarray(v) for k, v in saved["scores"].items()}
    members = [k for k in by_book if k in saved["members"]]
    unseen = [k for k in by_book if k not in saved["members"]]
    rng = np.random.default_rng([saved["seed"], 28])
    out: dict[str, dict[str, Tally]] = {}
    for rule in args.rules:
        tally = {key: Tally() for key in ("many/groups", "many/none", "many/assumed",
                                          "some/groups", "few/none", "few/assumed")}
        rates, sds = [], []
        for split in range(args.splits):
            order, pick = rng.permutation(len(unseen)), rng.permutation(len(members))
            # many books: val_books never-seen + 4 member books validate
            val_books = [members[i] for i in pick[:4]] + [unseen[i] for i in order[:args.val_books]]
            audited = [unseen[i] for i in order[args.val_books:]] + [members[i] for i in pick[4:]]
            n_unseen = len(order) - args.val_books
            val = np.concatenate([by_book[k] for k in val_books])
            y = np.concatenate([np.full(by_book[k].size, int(k in members)) for k in val_books])
            groups = np.concatenate([[k] * by_book[k].size for k in val_books])
            scores = [by_book[k] for k in audited]
            common = {"rule": rule, "fdr": args.fdr, "seed": split}
            judged = judge_books(val, y, scores, val_groups=groups, **common)
            tally["many/groups"].add(judged.test, n_unseen)
            sds.append(judged.reference.between_book_sd)
            rates.append(np.mean(np.array(judged.above[:n_unseen]) / judged.snippets[:n_unseen]))
            tally["many/none"].add(judge_books(val, y, scores, **common).test, n_unseen)
            tally["many/assumed"].add(judge_books(val, y, scores, assume_no_book_spread=True,
                                                  **common).test, n_unseen)
            # some books: 8 never-seen + 4 member books validate (groups), the rest audited
            val_books = [members[i] for i in pick[:4]] + [unseen[i] for i in order[:8]]
            audited = [unseen[i] for i in order[8:]] + [members[i] for i in pick[4:]]
            val = np.concatenate([by_book[k] for k in val_books])
            y = np.concatenate([np.full(by_book[k].size, int(k in members)) for k in val_books])
            groups = np.concatenate([[k] * by_book[k].size for k in val_books])
            tally["some/groups"].add(judge_books(val, y, [by_book[k] for k in audited],
                                                 val_groups=groups, **common).test,
                                     len(order) - 8)
            # few books: 1 member + 1 never-seen book validate, 4 + 3 audited
            val_books = [members[pick[0]], unseen[order[0]]]
            audited = [unseen[i] for i in order[1:5]] + [members[i] for i in pick[1:4]]
            val = np.concatenate([by_book[k] for k in val_books])
            y = np.repeat([1, 0], [by_book[k].size for k in val_books])
            scores = [by_book[k] for k in audited]
            tally["few/none"].add(judge_books(val, y, scores, **common).test, 4)
            tally["few/assumed"].add(judge_books(val, y, scores, assume_no_book_spread=True,
                                                 **common).test, 4)
        print(f"seed {saved['seed']}, rule {rule}: {args.splits} draws; many books: "
              f"{args.val_books} never-seen + 4 member books validate, "
              f"{len(unseen) - args.val_books} + {len(members) - 4} audited; never-seen "
              f"audited books' mean rate {np.mean(rates):.3f}, book-to-book sd (fitted) "
              f"{np.mean(sds):.3f}")
        for key, t in tally.items():
            print(f"  {key:13s} {t.line()}")
        out[rule] = tally
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    ap.add_argument("--out", type=Path, default=Path("/tmp/pddkit-audit-sandbox"))
    ap.add_argument("--phase", choices=["all", "prepare", "score", "judge"], default="all")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--method", default="mink")
    ap.add_argument("--words", type=int, default=64)
    ap.add_argument("--snippets", type=int, default=48)
    ap.add_argument("--val-books", type=int, default=40)
    ap.add_argument("--splits", type=int, default=100)
    ap.add_argument("--rules", nargs="+", default=["fpr=0.2", "accuracy"])
    ap.add_argument("--fdr", type=float, default=0.05)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per training")
    args = ap.parse_args()
    start = time.perf_counter()
    if args.phase in ("all", "prepare"):
        prepare(args.shared, args.out, args.seeds, args)
    if args.phase in ("all", "score"):
        for seed in args.seeds:
            score_seed(args.out / f"seed{seed}", args)
    if args.phase in ("all", "judge"):
        total: dict[str, dict[str, Tally]] = {}
        for seed in args.seeds:
            for rule, tally in judge_seed(args.out / f"seed{seed}" / "scores.json", args).items():
                merged = total.setdefault(rule, {key: Tally() for key in tally})
                for key, t in tally.items():
                    merged[key].merge(t)
        if len(args.seeds) > 1:
            for rule, tally in total.items():
                print(f"all {len(args.seeds)} seeds, rule {rule}:")
                for key, t in tally.items():
                    print(f"  {key:13s} {t.line()}")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
