"""Throughput of the statistics pass against a bare forward and the one-pass-per-method way.

Random-init models of real shapes (--shape): gpt2-small (12 layers, 768 wide, 50,257-token
vocabulary; the default, CPU-sized), pythia-1.4b (24 x 2048, 50,304), llama-7b
(32 x 4096, 32,000), llama-3.2-1b (16 x 2048, 32/8 heads, 128,256, tied head) and
llama-3.1-8b (32 x 4096, 32/8 heads, 128,256), and tiny-llama (benchmarks/gpu.sh --smoke),
in --dtype (bf16 for the GPU shapes), statistics always in float32.
Texts of --min-tokens..--max-tokens random tokens (default 112-144, mean ~128). Each variant
runs in a fresh subprocess so that its peak memory is its own: resident memory (ru_maxrss,
weights included) on CPU, torch.cuda.max_memory_allocated on a GPU.

  bare   : model(input_ids, attention_mask).logits over the same length-sorted batches
  stats  : pddkit's StatsRunner (L, H, M2 per token; serves loss, zlib, mink, minkpp, surp, dcpdd)
  naive  : how existing tools do it: one text at a time, the model run once per method
           (six methods), the full [T, V] log-softmax kept per text

    python benchmarks/stats_pass.py [--texts 256] [--naive-texts 32] [--batch-size 32]
    python benchmarks/stats_pass.py --device cuda --shape llama-7b --dtype bfloat16 \
        --texts 1024 --batch-size 32 --min-tokens 480 --max-tokens 544 --naive-texts 16

The naive variant runs on the first --naive-texts texts and is reported per text
(it is linear in the number of texts: one model call per text and method); --naive-texts 0
leaves it out (benchmarks/gpu.sh, which measures bare against stats only).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

METHODS6 = ("loss", "zlib", "mink", "minkpp", "surp", "dcpdd")


SHAPES = {  # name -> (config class, config keyword arguments); vocabulary as released
    "gpt2-small": ("GPT2Config", {}),
    "pythia-1.4b": ("GPTNeoXConfig", dict(hidden_size=2048, num_hidden_layers=24,
                                          num_attention_heads=16, intermediate_size=8192,
                                          vocab_size=50304, rotary_pct=0.25,
                                          max_position_embeddings=2048)),
    "llama-7b": ("LlamaConfig", dict(hidden_size=4096, num_hidden_layers=32,
                                     num_attention_heads=32, intermediate_size=11008,
                                     vocab_size=32000, max_position_embeddings=4096)),
    # Llama 3 shapes (grouped-query attention, 128,256-token vocabulary); their "llama3" rope
    # scaling is left out: it changes the rotary frequencies, not a shape or a cost
    "llama-3.2-1b": ("LlamaConfig", dict(hidden_size=2048, num_hidden_layers=16,
                                         num_attention_heads=32, num_key_value_heads=8,
                                         intermediate_size=8192, vocab_size=128256,
                                         tie_word_embeddings=True, rope_theta=500000.0,
                                         max_position_embeddings=131072)),
    "llama-3.1-8b": ("LlamaConfig", dict(hidden_size=4096, num_hidden_layers=32,
                                         num_attention_heads=32, num_key_value_heads=8,
                                         intermediate_size=14336, vocab_size=128256,
                                         tie_word_embeddings=False, rope_theta=500000.0,
                                         max_position_embeddings=131072)),
    # benchmarks/gpu.sh --smoke: the Llama 3 layout at toy size on the CPU (tied head,
    # grouped-query attention). Initialised with std 0.02 * sqrt(2048 / 64) so that its
    # logits spread as llama-3.2-1b's do (a logit is a sum over the width of unit-scale
    # hidden values times weights of std `initializer_range`: std 0.02 * sqrt(2048) = 0.9)
    "tiny-llama": ("LlamaConfig", dict(hidden_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2,
                                       intermediate_size=256, vocab_size=1000,
                                       tie_word_embeddings=True, rope_theta=500000.0,
                                       max_position_embeddings=4096,
                                       initializer_range=0.02 * (2048 / 64) ** 0.5)),
}


def make_model(shape: str, device: str, dtype: str, seed: int = 0):
    """Random weights of the named shape, built directly on `device` in `dtype`."""
    import torch
    import transformers

    cls, kwargs = SHAPES[shape]
    config = getattr(transformers, cls)(**kwargs)
    torch.manual_seed(seed)
    old = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        with torch.device(device):
            model = transformers.AutoModelForCausalLM.from_config(config)
    finally:
        torch.set_default_dtype(old)
    return model.eval(), config.vocab_size


def make_ids(n: int, vocab: int, lo: int, hi: int, seed: int = 0) -> list[list[int]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab - 1, int(rng.integers(lo, hi + 1))).tolist() for _ in range(n)]


def make_runner(model, vocab: int, shape: str, device: str, dtype: str, batch_size: int):
    """pddkit's StatsRunner over `model`, its start token the last id (the texts are ids,
    drawn below it), the one-off head check done (it is no part of the steady state)."""
    from pddkit.backends.hf_loading import LoadedModel
    from pddkit.backends.stats_pass import StatsRunner

    class Tok:  # the runner only needs the start token here (ids are given)
        bos_token_id = eos_token_id = vocab - 1

    runner = StatsRunner(LoadedModel(model, Tok(), f"{shape}-random", device, dtype),
                         batch_size=batch_size)
    runner._checked = True
    return runner


def versions() -> dict:
    import platform

    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version()}


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_variant(mode: str, n_texts: int, batch_size: int, threads: int, shape: str = "gpt2-small",
                device: str = "cpu", dtype: str = "float32", min_tokens: int = 112,
                max_tokens: int = 144) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    model, vocab = make_model(shape, device, dtype)
    ids = make_ids(n_texts, vocab, min_tokens, max_tokens)
    start = vocab - 1
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    if mode == "stats":
        runner = make_runner(model, vocab, shape, device, dtype, batch_size)
        _sync(device)
        t0 = time.perf_counter()
        runner.run_ids(ids)
        _sync(device)
        seconds = time.perf_counter() - t0
    elif mode == "bare":
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        _sync(device)
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
                _ = model(input_ids=x.to(device), attention_mask=m.to(device),
                          use_cache=False).logits
        _sync(device)
        seconds = time.perf_counter() - t0
    elif mode == "naive":
        import zlib

        log_f = np.log(np.full(vocab, 1 / vocab))
        _sync(device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            for s in ids:
                for method in METHODS6:  # one model call per method, as in existing tools
                    x = torch.tensor([[start, *s]], device=device)
                    logp = torch.log_softmax(model(input_ids=x).logits[0, :-1].float(), -1)  # [T, V]
                    L = logp[torch.arange(len(s)), torch.tensor(s)].cpu().numpy()
                    if method in ("minkpp", "surp"):
                        p = logp.exp()
                        H = -(p * logp).sum(-1).cpu().numpy()
                        var = ((p * logp * logp).sum(-1).cpu() - torch.tensor(H) ** 2).numpy()
                        _ = (L + H) / np.sqrt(np.maximum(var, 1e-12))
                    elif method == "zlib":
                        _ = L.mean() / len(zlib.compress(bytes(str(s), "utf-8")))
                    elif method == "dcpdd":
                        _ = np.minimum(-np.exp(L) * log_f[s], 0.01).mean()
                    else:
                        _ = np.sort(L)[: max(1, len(L) // 5)].mean()
        _sync(device)
        seconds = time.perf_counter() - t0
    else:
        raise SystemExit(f"unknown mode {mode}")
    tokens = sum(len(s) for s in ids)
    out = {"mode": mode, "texts": n_texts, "tokens": tokens, "seconds": seconds,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "rss_before_pass_mb": rss0 / 1024, "threads": threads, "batch_size": batch_size,
           "shape": shape, "device": device, "dtype": dtype, "vocab": vocab, **versions()}
    if cuda:
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
        out["gpu"] = torch.cuda.get_device_name()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--texts", type=int, default=256)
    ap.add_argument("--naive-texts", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="runs of bare and stats, best kept")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="gpt2-small")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    ap.add_argument("--dtype", default="float32", help="float32, bfloat16, float16")
    ap.add_argument("--min-tokens", type=int, default=112)
    ap.add_argument("--max-tokens", type=int, default=144)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    if a.mode:
        n = a.naive_texts if a.mode == "naive" else a.texts
        print(json.dumps(run_variant(a.mode, n, a.batch_size, a.threads, a.shape, a.device,
                                     a.dtype, a.min_tokens, a.max_tokens)))
        return

    def child(mode: str) -> dict:
        out = subprocess.run([sys.executable, __file__, "--mode", mode, "--texts", str(a.texts),
                              "--naive-texts", str(a.naive_texts), "--batch-size",
                              str(a.batch_size), "--threads", str(a.threads), "--shape", a.shape,
                              "--device", a.device, "--dtype", a.dtype, "--min-tokens",
                              str(a.min_tokens), "--max-tokens", str(a.max_tokens)],
                             capture_output=True, text=True)
        if out.returncode != 0:  # the child's own error, not a bare CalledProcessError
            raise SystemExit(f"stats_pass.py --mode {mode} failed:\n{out.stderr[-4000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    runs: dict[str, dict] = {}
    for _ in range(a.repeats):
        for mode in ("bare", "stats"):
            r = child(mode)
            if mode not in runs or r["seconds"] < runs[mode]["seconds"]:
                runs[mode] = r
    if a.naive_texts > 0:
        runs["naive"] = child("naive")
    bare, stats = runs["bare"], runs["stats"]
    per_text = {k: v["seconds"] / v["texts"] for k, v in runs.items()}
    summary = {"stats_over_bare": stats["seconds"] / bare["seconds"], "runs": runs}
    if "naive" in runs:
        summary["speedup_over_naive"] = per_text["naive"] / per_text["stats"]
    where = bare.get("gpu", f"cpu, {a.threads} threads")
    mem = "peak_gpu_mb" if "peak_gpu_mb" in bare else "peak_rss_mb"
    what = "peak GPU mem" if mem == "peak_gpu_mb" else "peak RSS"
    print(f"{a.shape} shape, random weights, {a.dtype}, {where}: {a.texts} texts, "
          f"{bare['tokens']} tokens, batch {a.batch_size}")
    print(f"bare forward (logits only): {bare['seconds']:8.1f} s  "
          f"{bare['tokens'] / bare['seconds']:7.0f} tok/s  {what} {bare[mem]:6.0f} MB")
    print(f"statistics pass (L,H,M2):   {stats['seconds']:8.1f} s  "
          f"{stats['tokens'] / stats['seconds']:7.0f} tok/s  {what} {stats[mem]:6.0f} MB")
    if "naive" in runs:
        naive = runs["naive"]
        print(f"naive, 6 methods ({naive['texts']} texts): {naive['seconds']:8.1f} s  "
              f"{per_text['naive']:.3f} s/text  {what} {naive[mem]:6.0f} MB")
        print(f"speed-up over naive (per text): {summary['speedup_over_naive']:.1f}x")
    print(f"statistics / bare: {summary['stats_over_bare']:.3f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(summary, fh, indent=2)


if __name__ == "__main__":
    main()
