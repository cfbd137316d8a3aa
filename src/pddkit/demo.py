"""`make demo`: a small ground-truth run, offline, in a few minutes on 2 CPU cores.

Docstrings of the Python standard library (on every machine with Python) are split at
random into members, non-members and a reference pool. A small GPT-2-shaped model is
trained on the members, a reference model on the pool, a frequency table counted on the
pool; then `pddkit run` scores members against non-members with all eight methods.
The fuller sandbox (windows, sweeps, blind baseline, reports) is `pddkit sandbox`.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
from pathlib import Path

from pddkit.cli import _setup_logging
from pddkit.cli import main as cli_main

logger = logging.getLogger(__name__)


def build(out: Path, n_members: int, epochs: int, seed: int) -> list[str]:
    from pddkit.runner.frequency import build_frequency_table
    from pddkit.sandbox.corpus import stdlib_docstrings
    from pddkit.sandbox.training import build_gpt2, save, train_bpe_tokenizer, train_causal_lm

    docs = [d for d in stdlib_docstrings(min_words=40) if len(d.split()) <= 150]
    random.Random(seed).shuffle(docs)
    if len(docs) < 4 * n_members:
        raise SystemExit(f"only {len(docs)} docstrings; need {4 * n_members}")
    members, nonmembers = docs[:n_members], docs[n_members:2 * n_members]
    pool = docs[2 * n_members:4 * n_members]
    logger.info("%d members, %d non-members, %d reference-pool documents", len(members),
                len(nonmembers), len(pool))
    tok = train_bpe_tokenizer(members + pool, vocab_size=2048)  # never sees non-members
    target = build_gpt2(tok, n_layer=4, n_embd=128, n_head=4, n_positions=256, seed=seed)
    logger.info("training the target model on the members (%d epochs)", epochs)
    train_causal_lm(target, tok, members, epochs=epochs, lr=2e-3, batch_size=16, seed=seed)
    ref = build_gpt2(tok, n_layer=4, n_embd=128, n_head=4, n_positions=256, seed=seed + 1)
    logger.info("training the reference model on the pool")
    train_causal_lm(ref, tok, pool, epochs=max(1, epochs // 2), lr=2e-3, batch_size=16,
                    seed=seed + 1)
    save(target, tok, out / "target-model")
    save(ref, tok, out / "reference-model")
    (out / "pool.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in pool))
    build_frequency_table(tok, str(out / "target-model"), [out / "pool.jsonl"]).save(
        out / "freq.npz")
    rows = [{"id": f"member-{i}", "text": t, "label": 1} for i, t in enumerate(members)]
    rows += [{"id": f"nonmember-{i}", "text": t, "label": 0} for i, t in enumerate(nonmembers)]
    (out / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [str(out / "target-model"), str(out / "reference-model"), str(out / "freq.npz"),
            str(out / "data.jsonl")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--output", default="demo-output")
    ap.add_argument("--members", type=int, default=200)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    _setup_logging(0, False)
    out = Path(a.output)
    out.mkdir(parents=True, exist_ok=True)
    target, ref, freq, data = build(out, a.members, a.epochs, a.seed)
    return cli_main(["run", "--model", target, "--ref-model", ref, "--freq", freq,
                     "--data", data, "--methods", "all", "--output", str(out / "results"),
                     "--device", "cpu"])


if __name__ == "__main__":
    sys.exit(main())
