"""Whole-process cost of each SPEC 3b / 3e method against a loss-only run on the same texts.

GPT-2-small shape (12 layers, 768 wide, the real 50,257-token GPT-2 BPE from
../shared/tokenizers/gpt2), random weights saved to a temporary folder; N labelled
Gutenberg paragraphs cut to 100 words (~130 tokens), and 14 other paragraphs (7 labelled
member, 7 non-member) as `--prefix-data`, so that every variant scores exactly the same
texts (drawn shots would leave texts out). Each variant is its own process, timed from
start to exit (Python start-up, imports and model loading included), blind baseline and
report off for all (they cost the same in every variant):

  loss      : pddkit run --methods loss
  recall    : --methods recall            (7 non-member shots, the prefix's KV cache once)
  conrecall : --methods conrecall         (7 member and 7 non-member shots: two prefixes)
  pac       : --methods pac               (5 word-swapped copies per text)
  samia     : --methods samia:max_new_tokens=M  (10 samples per text; M caps the continuation)
  infill    : --methods infill            (one pass per position whose token is not the argmax)
  gapk      : --methods gapk              (the same single pass; one more float per token, Lmax)
  acmia     : --methods acmia             (the same pass; 52 temperatures summed over the
              vocabulary per distinct token; beta chosen on a held-out 30%, which still goes
              through the pass, so the same texts are computed)
  ngram     : --methods ngram:start=0,max_new_tokens=M  (20 samples per text at top-p 0.95;
              start=0 because 5 of the first 32 paragraphs hold two sentences only; the
              coverage scan of every continuation against the text's next sentences is CPU)

Random weights are the worst case for `infill`: their argmax almost never equals the next
token, so nearly every position costs a pass (a trained model's argmax is right on 30-60% of
tokens). Shared cloud cores are noisy (+-15% between two runs of one command): loss and
each variant alternate --repeats times; the median of the per-pair ratios is reported.

    python benchmarks/method_costs.py [--texts 64] [--threads 2] [--repeats 2]
        [--methods recall,conrecall,pac,samia,infill,gapk,acmia,ngram] [--samia-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path


def setup(root: Path, n: int) -> tuple[Path, Path, Path]:
    """(model folder, texts, prefix data): run_overhead.py's model and paragraphs, n + 14 of
    them, the last 14 as labelled shots (7 member, 7 non-member)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from run_overhead import setup as model_and_texts

    model_dir, rows, _ = model_and_texts(root, n + 14)
    lines = rows.read_text().splitlines()
    data, prefix = root / "texts.jsonl", root / "shots.jsonl"
    data.write_text("".join(x + "\n" for x in lines[:n]))
    prefix.write_text("".join(x + "\n" for x in lines[n:n + 14]))
    return model_dir, data, prefix


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--methods", default="recall,conrecall,pac,samia,infill,gapk,acmia,ngram")
    ap.add_argument("--samia-tokens", type=int, default=64)
    args = ap.parse_args()
    env = {**os.environ, "PDDKIT_PROGRESS": "0", "OMP_NUM_THREADS": str(args.threads)}
    spell = {"samia": f"samia:max_new_tokens={args.samia_tokens}",
             "ngram": f"ngram:start=0,max_new_tokens={args.samia_tokens}"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir, data, prefix = setup(root, args.texts)

        def run(methods: str, out: str) -> list[str]:
            return [sys.executable, "-m", "pddkit", "run", "--model", str(model_dir),
                    "--data", str(data), "--prefix-data", str(prefix), "--methods", methods,
                    "--device", "cpu", "--no-blind", "--no-report", "--output", str(root / out)]

        for name in args.methods.split(","):
            pairs = []
            from run_overhead import timed

            for i in range(args.repeats):  # alternating, so that both see the same noise
                base = timed(run("loss", f"loss-{name}-{i}"), env)
                pairs.append((base, timed(run(spell.get(name, name), f"{name}-{i}"), env)))
            res = json.loads((root / f"{name}-0" / "results.json").read_text())
            stages = ", ".join(f"{k} {v:.1f}" for k, v in res["timings_s"].items())
            rows.append((name, statistics.median(b for b, _ in pairs),
                         statistics.median(v for _, v in pairs),
                         statistics.median(v / b for b, v in pairs), pairs, stages,
                         res["counts"].get("infill") if name == "infill" else None))
    print(f"{args.texts} texts of 100 words, GPT-2-small shape (random weights), "
          f"{args.threads} threads, whole processes; medians of {args.repeats} alternating runs")
    print(f"{'method':10s} {'loss s':>7s} {'method s':>9s}  ratio (median of pairs)")
    for name, base, own, ratio, pairs, stages, extra in rows:
        print(f"{spell.get(name, name):10s} {base:7.1f} {own:9.1f}  {ratio:.2f} x loss-only")
        print("    pairs: " + ", ".join(f"({b:.1f}, {v:.1f})" for b, v in pairs))
        print(f"    stages: {stages}")
        if extra:
            print(f"    infill counts: {extra}")


if __name__ == "__main__":
    main()
