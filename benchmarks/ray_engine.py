"""The Ray engine against the local one: one statistics pass over N texts, GPT-2-small
shape (random weights, the real GPT-2 BPE from ../shared/tokenizers/gpt2), one actor with
`--threads` torch threads, on this machine. Ray's start-up is timed apart; the local pass
runs before and after the Ray pass (the ratios use their mean: the machine may be shared).

    python benchmarks/ray_engine.py [--texts 256] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

SHARED = Path(os.environ.get("PDDKIT_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    os.environ["PDDKIT_PROGRESS"] = "0"
    import numpy as np
    import ray
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from pddkit.backends.hf import HFBackend
    from pddkit.data.gutenberg import strip_gutenberg
    from pddkit.engine.executors import LocalExecutor
    from pddkit.engine.executors_ray import RayExecutor
    from pddkit.sandbox.corpus import paragraphs
    from pddkit.sandbox.training import gpt2_tokenizer

    torch.set_num_threads(args.threads)
    tok = gpt2_tokenizer(SHARED / "tokenizers" / "gpt2")
    texts: list[str] = []
    for f in sorted((SHARED / "corpora" / "gutenberg").rglob("*.txt")):
        texts += [" ".join(p.split()[:100]) for p in
                  paragraphs(strip_gutenberg(f.read_text(encoding="utf-8", errors="replace")), 100)]
        if len(texts) >= args.texts:
            break
    texts = texts[:args.texts]
    names = [f"t{i}" for i in range(len(texts))]
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        GPT2LMHeadModel(GPT2Config(vocab_size=len(tok))).save_pretrained(tmp)
        tok.save_pretrained(tmp)
        backend = HFBackend.load(tmp, device="cpu", dtype="float32", batch_size=8)
        t0 = time.perf_counter()
        local = LocalExecutor().token_stats(backend, texts, names, "local")
        t_local = time.perf_counter() - t0
        t0 = time.perf_counter()
        ray.init(num_cpus=args.threads, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
        t_start = time.perf_counter() - t0
        t0 = time.perf_counter()
        remote = RayExecutor(actors=1, threads=args.threads).token_stats(backend, texts, names, "ray")
        t_ray = time.perf_counter() - t0
        ray.shutdown()
        t0 = time.perf_counter()  # the local pass again: the machine is shared, load drifts
        LocalExecutor().token_stats(backend, texts, names, "local")
        t_local2 = time.perf_counter() - t0
    equal = all(all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("L", "H", "M2", "var"))
                for a, b in zip(local, remote))
    tokens = sum(len(s) for s in local)
    print(f"{len(texts)} texts, {tokens} tokens, GPT-2-small shape, CPU, {args.threads} threads")
    print(f"local engine (before, after Ray)   {t_local:7.1f} s, {t_local2:.1f} s   load average "
          f"{os.getloadavg()[0]:.1f}")
    t_local = (t_local + t_local2) / 2
    print(f"ray engine, 1 actor (pass)         {t_ray:7.1f} s   {t_ray / t_local:.2f} x local")
    print(f"ray engine incl. ray.init          {t_ray + t_start:7.1f} s   "
          f"{(t_ray + t_start) / t_local:.2f} x local")
    print(f"statistics equal bit for bit: {equal}")


if __name__ == "__main__":
    main()
