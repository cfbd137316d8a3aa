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
  fsd       : --methods fsd --calibration FILE  (16 more paragraphs as calibration
              non-members: a LoRA adapter trained on them, 2 batches of 8 x 3 epochs, then
              the texts through the tuned copy; the same texts are scored)
  camia     : --methods camia             (one more pass over each text repeated six times,
              ~6n tokens, and 75 features per text; fitted on a held-out 30%, which goes
              through both passes, so the same texts are computed)
  emmia     : --methods emmia             (every text given each of the N texts as its prefix:
              N^2 conditional passes, each prefix's KV cache once; init minkpp from the
              target pass; the EM loop on the CPU)
  decop     : --methods decop --paraphrases FILE  (24 quiz items of the text and 3 stand-in
              "paraphrases" of the same length, its words rotated, reversed and sorted: the
              cost of the quiz, not of writing paraphrases; no target pass)
  ngram     : --methods ngram:start=0,max_new_tokens=M  (20 samples per text at top-p 0.95;
              start=0 because 5 of the first 32 paragraphs hold two sentences only; the
              coverage scan of every continuation against the text's next sentences is CPU)

Random weights are the worst case for `infill`: their argmax almost never equals the next
token, so nearly every position costs a pass (a trained model's argmax is right on 30-60% of
tokens). Shared cloud cores are noisy (+-15% between two runs of one command): loss and
each variant alternate --repeats times; the median of the per-pair ratios is reported.

    python benchmarks/method_costs.py [--texts 64] [--threads 2] [--repeats 2]
        [--methods recall,conrecall,pac,samia,infill,gapk,acmia,fsd,camia,emmia,decop,ngram]
        [--samia-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

FSD_TEXTS = 16  # fsd's calibration non-members: two batches of 8


def setup(root: Path, n: int) -> tuple[Path, Path, Path, Path]:
    """(model folder, texts, prefix data, fsd's calibration): run_overhead.py's model and
    paragraphs, n + 14 + 16 of them, 14 as labelled shots (7 member, 7 non-member), the last
    16 as fsd's calibration non-members (label 0)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from run_overhead import setup as model_and_texts

    model_dir, rows, _ = model_and_texts(root, n + 14 + FSD_TEXTS)
    lines = rows.read_text().splitlines()
    data, prefix, cal = root / "texts.jsonl", root / "shots.jsonl", root / "fsd-calibration.jsonl"
    prefix.write_text("".join(x + "\n" for x in lines[n:n + 14]))
    cal.write_text("".join(json.dumps({"text": json.loads(x)["text"], "label": 0}) + "\n"
                           for x in lines[n + 14:n + 14 + FSD_TEXTS]))
    rows = [{**json.loads(x), "id": f"p{i}", "title": "A Book", "author": "An Author"}
            for i, x in enumerate(lines[:n])]  # decop's question names a title and an author
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    para = root / "paraphrases.jsonl"  # decop: stand-ins of the text's length (docstring)
    para.write_text("".join(json.dumps({"id": r["id"], "paraphrases": [
        " ".join(w[len(w) // 3:] + w[:len(w) // 3]), " ".join(w[::-1]), " ".join(sorted(w))]})
        + "\n" for r in rows for w in [r["text"].split()]))
    return model_dir, data, prefix, cal


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--methods",
                    default="recall,conrecall,pac,samia,infill,gapk,acmia,fsd,camia,emmia,decop,"
                            "ngram")
    ap.add_argument("--samia-tokens", type=int, default=64)
    args = ap.parse_args()
    env = {**os.environ, "PDDKIT_PROGRESS": "0", "OMP_NUM_THREADS": str(args.threads)}
    spell = {"samia": f"samia:max_new_tokens={args.samia_tokens}",
             "ngram": f"ngram:start=0,max_new_tokens={args.samia_tokens}"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir, data, prefix, cal = setup(root, args.texts)

        def run(methods: str, out: str) -> list[str]:
            extra = ["--calibration", str(cal)] if methods.startswith("fsd") else []
            if "decop" in methods:
                extra += ["--paraphrases", str(root / "paraphrases.jsonl")]
            return [sys.executable, "-m", "pddkit", "run", "--model", str(model_dir),
                    "--data", str(data), "--prefix-data", str(prefix), "--methods", methods,
                    "--device", "cpu", "--no-blind", "--no-report", "--output", str(root / out),
                    *extra]

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
