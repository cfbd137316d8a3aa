"""samia's sampling, one text at a time against several texts per batch, on a trained model.

samia's prompts (the first half of each text's words) of the first --texts texts of a JSONL
file, continued --samples times with at most --max-new-tokens tokens by the `hf` backend's
sampler (backends/sampling.py), with batch_size 1 (one text per batch: how samia sampled
before texts were batched) and with --batch-size (batch_size // samples texts per batch);
each text seeded by its own seed. It prints both times, the speedup and whether every
continuation is the same token for token (the run fails when one differs).

    python benchmarks/sampling_batch.py --model demo-output/run/target-model \
        --data demo-output/run/window-128/windows.jsonl [--texts 200] [--samples 5] \
        [--max-new-tokens 32] [--batch-size 32] [--top-p 1.0] [--top-k 50]
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--texts", type=int, default=200)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--top-k", type=int, default=50)
    ap.add_argument("--top-p", type=float, default=1.0)
    args = ap.parse_args()

    import torch

    from pddkit.backends.hf import HFBackend
    from pddkit.backends.hf_loading import load_model

    torch.set_num_threads(1)
    with open(args.data, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()][:args.texts]
    prompts = [" ".join(t.split()[:len(t.split()) // 2]) for t in texts]
    seeds = list(range(1000, 1000 + len(prompts)))
    lm = load_model(args.model, device="cpu", dtype="float32")
    got, took = {}, {}
    for size in (1, args.batch_size):
        backend = HFBackend(lm, batch_size=size)
        start = time.perf_counter()
        got[size] = backend.sample(prompts, args.samples, args.top_k, args.top_p, 1.0,
                                   args.max_new_tokens, seeds).texts
        took[size] = time.perf_counter() - start
    same = got[1] == got[args.batch_size]
    print(json.dumps({"texts": len(prompts), "samples": args.samples,
                      "max_new_tokens": args.max_new_tokens, "top_k": args.top_k,
                      "top_p": args.top_p, "seconds_batch_1": round(took[1], 2),
                      f"seconds_batch_{args.batch_size}": round(took[args.batch_size], 2),
                      "texts_per_batch": max(1, args.batch_size // args.samples),
                      "speedup": round(took[1] / took[args.batch_size], 2),
                      "identical_continuations": same}))
    if not same:
        raise SystemExit("the batched continuations differ from one text at a time")


if __name__ == "__main__":
    main()
