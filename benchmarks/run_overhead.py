"""Whole-process cost of `pddkit run` against a bare forward pass, and of a cached rerun.

GPT-2-small shape (12 layers, 768 wide, the real 50,257-token GPT-2 BPE from
../shared/tokenizers/gpt2), random weights saved to a temporary folder; N labelled
Gutenberg paragraphs cut to 100 words (~130 tokens). Each variant is its own process,
timed from start to exit (Python start-up, imports and model loading included):

  bare    : load the model, tokenise, one batched forward (logits) per batch of 8
  bare, heap kept: the same with the C heap tuned as the pddkit executable tunes it
            (pddkit/cli/heap.py: freed memory kept for the next large array)
  run     : pddkit run --methods loss,zlib,mink,minkpp,surp,dcpdd (the six single-pass
            methods): statistics pass, metrics, blind baseline, report
  cached  : the same with --cache DIR (first run: the weights are hashed, shards written)
  rerun   : the cached command again into a new folder: every statistic from the cache

Shared cloud cores are noisy (+-15% between two runs of one command), so bare and run
alternate --repeats times and the median of the per-pair ratios is reported beside each.

    python benchmarks/run_overhead.py [--texts 96] [--threads 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHARED = Path(os.environ.get("PDDKIT_SHARED", Path(__file__).resolve().parents[2] / "shared"))
METHODS6 = "loss,zlib,mink,minkpp,surp,dcpdd"

BARE = r"""
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
torch.set_num_threads(int(sys.argv[3]))
model = AutoModelForCausalLM.from_pretrained(sys.argv[1]).eval()
tok = AutoTokenizer.from_pretrained(sys.argv[1])
import json
texts = [json.loads(x)["text"] for x in open(sys.argv[2])]
ids = [[tok.bos_token_id] + tok(t, add_special_tokens=False)["input_ids"] for t in texts]
ids.sort(key=len, reverse=True)
with torch.inference_mode():
    for b in range(0, len(ids), 8):
        batch = ids[b:b + 8]
        T = max(map(len, batch))
        x = torch.full((len(batch), T), tok.bos_token_id)
        m = torch.zeros((len(batch), T), dtype=torch.long)
        for r, s in enumerate(batch):
            x[r, :len(s)] = torch.tensor(s)
            m[r, :len(s)] = 1
        model(input_ids=x, attention_mask=m).logits
"""


# the bare forward with the C heap tuned as the pddkit executable tunes it (cli/heap.py), so
# that the ratio can be read without that gain
SRC = str(Path(__file__).resolve().parents[1] / "src")
HEAP = f"""
import sys
sys.path.insert(0, {SRC!r})
from pddkit.cli.heap import keep_freed_memory
keep_freed_memory()
"""


def setup(root: Path, n: int) -> tuple[Path, Path, Path]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from pddkit.data.gutenberg import strip_gutenberg
    from pddkit.sandbox.corpus import paragraphs
    from pddkit.sandbox.training import gpt2_tokenizer

    tok = gpt2_tokenizer(SHARED / "tokenizers" / "gpt2")
    torch.manual_seed(0)
    model_dir = root / "gpt2-small-random"
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok))).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    books = sorted((SHARED / "corpora" / "gutenberg").rglob("*.txt"))
    texts: list[str] = []
    for f in books:
        for p in paragraphs(strip_gutenberg(f.read_text(encoding="utf-8", errors="replace")), 100):
            texts.append(" ".join(p.split()[:100]))
        if len(texts) >= n:
            break
    data = root / "texts.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": i % 2}) + "\n"
                            for i, t in enumerate(texts[:n])))
    freq = root / "freq.npz"
    subprocess.run([sys.executable, "-m", "pddkit", "freq", "build", "--tokenizer", str(model_dir),
                    "--output", str(freq), *map(str, books[:20])], check=True,
                   stdout=subprocess.DEVNULL)
    return model_dir, data, freq


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    env = {**os.environ, "PDDKIT_PROGRESS": "0", "OMP_NUM_THREADS": str(args.threads)}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir, data, freq = setup(root, args.texts)
        run = [sys.executable, "-m", "pddkit", "run", "--model", str(model_dir), "--data", str(data),
               "--freq", str(freq), "--methods", METHODS6, "--device", "cpu"]
        pairs, kept = [], []
        for i in range(args.repeats):  # alternating, so that all see the same noise
            bare = timed([sys.executable, "-c", BARE, str(model_dir), str(data),
                          str(args.threads)], env)
            pairs.append((bare, timed([*run, "--output", str(root / f"plain{i}")], env)))
            kept.append(timed([sys.executable, "-c", HEAP + BARE, str(model_dir), str(data),
                               str(args.threads)], env))
        bare, plain = (statistics.median(x) for x in zip(*pairs))
        ratio = statistics.median(p / b for b, p in pairs)
        bare_kept = statistics.median(kept)
        ratio_kept = statistics.median(p / k for (_, p), k in zip(pairs, kept))
        run += ["--cache", str(root / "cache")]
        reruns = []
        for i in range(args.repeats):
            shutil.rmtree(root / "cache", ignore_errors=True)
            first = timed([*run, "--output", str(root / f"first{i}")], env)
            reruns.append((first, timed([*run, "--output", str(root / f"again{i}")], env)))
        first, again = (statistics.median(x) for x in zip(*reruns))
        rerun_ratio = statistics.median(a / f for f, a in reruns)
        t0 = json.loads((root / "plain0" / "results.json").read_text())["timings_s"]
        t1 = json.loads((root / "first0" / "results.json").read_text())["timings_s"]
        t2 = json.loads((root / "again0" / "results.json").read_text())
    print(f"{args.texts} texts, GPT-2-small shape (random weights), {args.threads} threads, "
          f"whole processes; medians of {args.repeats} alternating runs")
    print(f"{'variant':34s} {'seconds':>8s}  ratio (median of pairs)")
    print(f"{'bare forward (load + logits)':34s} {bare:8.1f}  1.00")
    print(f"{'bare forward, heap kept':34s} {bare_kept:8.1f}  "
          f"{statistics.median(k / b for (b, _), k in zip(pairs, kept)):.3f} x bare")
    print(f"{'pddkit run, six methods':34s} {plain:8.1f}  {ratio:.3f} x bare, "
          f"{ratio_kept:.3f} x bare with the heap kept")
    print(f"{'pddkit run --cache, first run':34s} {first:8.1f}  {first / bare:.2f} x bare")
    print(f"{'pddkit run --cache again':34s} {again:8.1f}  {rerun_ratio:.3f} x first run")
    print("pairs (bare, run): " + ", ".join(f"({b:.1f}, {p:.1f})" for b, p in pairs))
    print("pairs (first, rerun): " + ", ".join(f"({f:.1f}, {a:.1f})" for f, a in reruns))
    print("run, seconds per stage: " + ", ".join(f"{k} {v:.1f}" for k, v in t0.items()))
    print("first cached run, seconds per stage: " + ", ".join(f"{k} {v:.1f}" for k, v in t1.items()))
    print("rerun, seconds per stage: " + ", ".join(f"{k} {v:.1f}" for k, v in t2["timings_s"].items()))
    print(f"rerun cache counts: {t2['counts'].get('cache')}")


if __name__ == "__main__":
    main()
