"""Throughput of the statistics pass against a bare forward and the one-pass-per-method way.

GPT-2-small shape (12 layers, 768 wide, 50,257-token vocabulary), random weights, texts
of 112-144 tokens (mean ~128). Each variant runs in a fresh subprocess so that its peak
resident memory (ru_maxrss, model weights included) is its own.

  bare   : model(input_ids, attention_mask).logits over the same length-sorted batches
  stats  : pddkit's StatsRunner (L, H, M2 per token; serves loss, zlib, mink, minkpp, surp, dcpdd)
  naive  : how existing tools do it: one text at a time, the model run once per method
           (six methods), the full [T, V] log-softmax kept per text

    python benchmarks/stats_pass.py [--texts 256] [--naive-texts 32] [--batch-size 32]

The naive variant runs on the first --naive-texts texts and is reported per text
(it is linear in the number of texts: one model call per text and method).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

METHODS6 = ("loss", "zlib", "mink", "minkpp", "surp", "dcpdd")


def make_model(seed: int = 0):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config()).eval()  # defaults = GPT-2 small


def make_ids(n: int, seed: int = 0) -> list[list[int]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [rng.integers(0, 50256, int(rng.integers(112, 145))).tolist() for _ in range(n)]


def run_variant(mode: str, n_texts: int, batch_size: int, threads: int) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    model = make_model()
    ids = make_ids(n_texts)
    start = 50256
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if mode == "stats":
        from pddkit.backends.hf_loading import LoadedModel
        from pddkit.backends.stats_pass import StatsRunner

        class Tok:  # the runner only needs the start token here (ids are given)
            bos_token_id = eos_token_id = start

        runner = StatsRunner(LoadedModel(model, Tok(), "gpt2-small-random", "cpu", "float32"),
                             batch_size=batch_size)
        runner._checked = True  # the one-off head check is not part of the steady state
        t0 = time.perf_counter()
        runner.run_ids(ids)
        seconds = time.perf_counter() - t0
    elif mode == "bare":
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        t0 = time.perf_counter()
        with torch.inference_mode():
            for b in range(0, len(order), batch_size):
                batch = [ids[i] for i in order[b:b + batch_size]]
                T = max(len(s) for s in batch) + 1
                x = torch.full((len(batch), T), start)
                m = torch.zeros((len(batch), T), dtype=torch.long)
                for r, s in enumerate(batch):
                    x[r, :len(s) + 1] = torch.tensor([start, *s])
                    m[r, :len(s) + 1] = 1
                model(input_ids=x, attention_mask=m, use_cache=False).logits  # noqa: B018
        seconds = time.perf_counter() - t0
    elif mode == "naive":
        import zlib

        log_f = np.log(np.full(50257, 1 / 50257))
        t0 = time.perf_counter()
        with torch.inference_mode():
            for s in ids:
                for method in METHODS6:  # one model call per method, as in existing tools
                    x = torch.tensor([[start, *s]])
                    logp = torch.log_softmax(model(input_ids=x).logits[0, :-1].float(), -1)  # [T, V]
                    L = logp[torch.arange(len(s)), torch.tensor(s)].numpy()
                    if method in ("minkpp", "surp"):
                        p = logp.exp()
                        H = -(p * logp).sum(-1).numpy()
                        var = ((p * logp * logp).sum(-1) - torch.tensor(H) ** 2).numpy()
                        _ = (L + H) / np.sqrt(np.maximum(var, 1e-12))
                    elif method == "zlib":
                        _ = L.mean() / len(zlib.compress(bytes(str(s), "utf-8")))
                    elif method == "dcpdd":
                        _ = np.minimum(-np.exp(L) * log_f[s], 0.01).mean()
                    else:
                        _ = np.sort(L)[: max(1, len(L) // 5)].mean()
        seconds = time.perf_counter() - t0
    else:
        raise SystemExit(f"unknown mode {mode}")
    tokens = sum(len(s) for s in ids)
    return {"mode": mode, "texts": n_texts, "tokens": tokens, "seconds": seconds,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rss_before_pass_mb": rss0 / 1024, "threads": threads, "batch_size": batch_size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--texts", type=int, default=256)
    ap.add_argument("--naive-texts", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="runs of bare and stats, best kept")
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    if a.mode:
        n = a.naive_texts if a.mode == "naive" else a.texts
        print(json.dumps(run_variant(a.mode, n, a.batch_size, a.threads)))
        return

    def child(mode: str) -> dict:
        out = subprocess.run([sys.executable, __file__, "--mode", mode, "--texts", str(a.texts),
                              "--naive-texts", str(a.naive_texts), "--batch-size",
                              str(a.batch_size), "--threads", str(a.threads)],
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    runs: dict[str, dict] = {}
    for _ in range(a.repeats):
        for mode in ("bare", "stats"):
            r = child(mode)
            if mode not in runs or r["seconds"] < runs[mode]["seconds"]:
                runs[mode] = r
    runs["naive"] = child("naive")
    bare, stats, naive = runs["bare"], runs["stats"], runs["naive"]
    per_text = {k: v["seconds"] / v["texts"] for k, v in runs.items()}
    summary = {
        "stats_over_bare": stats["seconds"] / bare["seconds"],
        "speedup_over_naive": per_text["naive"] / per_text["stats"],
        "runs": runs,
    }
    print(f"GPT-2-small shape, random weights, {a.texts} texts, {bare['tokens']} tokens, "
          f"batch {a.batch_size}, {a.threads} threads")
    print(f"bare forward (logits only): {bare['seconds']:8.1f} s  "
          f"{bare['tokens'] / bare['seconds']:7.0f} tok/s  peak RSS {bare['peak_rss_mb']:6.0f} MB")
    print(f"statistics pass (L,H,M2):   {stats['seconds']:8.1f} s  "
          f"{stats['tokens'] / stats['seconds']:7.0f} tok/s  peak RSS {stats['peak_rss_mb']:6.0f} MB")
    print(f"naive, 6 methods ({naive['texts']} texts): {naive['seconds']:8.1f} s  "
          f"{per_text['naive']:.3f} s/text  peak RSS {naive['peak_rss_mb']:6.0f} MB")
    print(f"statistics / bare: {summary['stats_over_bare']:.3f}   "
          f"speed-up over naive (per text): {summary['speedup_over_naive']:.1f}x")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(summary, fh, indent=2)


if __name__ == "__main__":
    main()
