"""The shared key/value paths against the plain passes they replace: time, peak memory, and
the largest difference of the scores (so that the shared path is shown right in the dtype it
runs in, bf16 on a GPU, not only fast).

  --path prefix : recall / conrecall's conditioned pass, LL(x | P). shared: the prefix's
                  key/value cache computed once and expanded across each batch of texts
                  (backends/prefix_pass.py shared_prefix_stats, what HFBackend.
                  stats_given_prefix runs); plain: [start] + P + x run whole for every text
                  (plain_prefix_stats, its fallback). Score: recall's LL(x | P) / LL(x).
  --path infill : infill's variants (x with x_i set to the argmax, cut after i + lookahead).
                  shared: each text's cache kept and cropped per batch of its variants, only
                  the windows run (backends/infill_windows.py windows_of_text, what
                  HFBackend.infill_stats runs); plain: every variant run whole through the
                  statistics pass (the fallback). Score: infill's (k=0.2, corrected).

Random-init model of --shape (benchmarks/stats_pass.py's SHAPES) in --dtype; texts, and the
prefix, are random token ids (random weights: the argmax is never the text's token, so
every position has a variant, infill's worst case). Each variant (shared, plain) runs in its
own process, so its peak memory is its own (torch.cuda.max_memory_allocated after
reset_peak_memory_stats on a GPU, ru_maxrss on the CPU, weights included in both); the
target pass and a warm-up of the path on two texts run before the clock and the peak start.
After its timed pass the shared process runs pddkit's own one-off check of the path
(HFBackend's: within backends/kv_agreement.py's tolerance for the dtype of the plain pass
on a small sample, else the run falls back to the plain pass), and reports whether it would
keep the shared path in this dtype on this device. After its timed pass the plain process
casts the model to float32 (the same weights) and runs the plain path on the first
--reference-texts texts again: the scores in float32, which both bf16 paths are compared with.

    python benchmarks/kv_paths.py --path prefix --shape llama-3.2-1b --device cuda \\
        --dtype bfloat16 --texts 256 --prefix-tokens 1024 --min-tokens 224 --max-tokens 288
    python benchmarks/kv_paths.py --path infill --shape llama-3.2-1b --device cuda \\
        --dtype bfloat16 --texts 32 --min-tokens 112 --max-tokens 144

Throughput is in the texts' own tokens per second (what a user's texts go through at);
`tokens_run` counts the tokens each path feeds the model.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

K, LOOKAHEAD = 0.2, 5  # infill's defaults (methods/infill.py)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def prefix_scores(target, cond) -> tuple[np.ndarray, np.ndarray]:
    """([N] LL(x | P), [N] recall's LL(x | P) / LL(x)): means of the float32 L in float64, the
    denominator floored as methods/recall.py does."""
    own = np.array([np.mean(t.L, dtype=np.float64) for t in target])
    given = np.array([np.mean(c.L, dtype=np.float64) for c in cond])
    return given, given / np.minimum(own, -1e-12)


def infill_scores(target, rows, stats) -> np.ndarray:
    """[N] infill scores (k=0.2, lookahead 5, corrected) from each text's target statistics
    and the statistics of its variants."""
    from pddkit.methods.infill import infill_ratios
    from pddkit.methods.mink import mean_of_lowest

    return np.array([mean_of_lowest(infill_ratios(t, [(i, s) for (i, _), s in zip(r, st)],
                                                  LOOKAHEAD)[0], K)
                     for t, r, st in zip(target, rows, stats)])


def run_path(path: str, runner, ids, prefix, target, rows, batch_size: int, shared: bool):
    """The conditioned (prefix) or variant (infill) statistics of every text by one path:
    a list of TokenStats (prefix) or of lists of TokenStats (infill, per text)."""
    import torch

    with torch.inference_mode():
        if path == "prefix":
            from pddkit.backends.prefix_pass import plain_prefix_stats, shared_prefix_stats

            flags = [False] * len(ids)
            if shared:
                return shared_prefix_stats(runner, prefix, ids, flags, batch_size)
            return plain_prefix_stats(runner, prefix, ids, flags)
        if shared:
            from pddkit.backends.infill_windows import windows_of_text

            return [windows_of_text(runner, t, r, batch_size) for t, r in zip(target, rows)]
        flat = runner.run_ids([list(seq) for r in rows for _, seq in r])
        out, at = [], 0
        for r in rows:
            out.append(flat[at:at + len(r)])
            at += len(r)
        return out


def pddkit_check(path: str, runner, ids, prefix, target, rows, batch_size: int) -> bool:
    """The check HFBackend runs once per model before it uses a shared path (on its sample:
    the two shortest texts, or the first text's first four variants), which falls back to
    the plain pass when the shared statistics are not within that tolerance of it."""
    if path == "prefix":
        from pddkit.backends.prefix_pass import shared_prefix_works

        return bool(shared_prefix_works(runner, prefix, ids, batch_size))
    from pddkit.backends.infill_windows import shared_cache_works

    first = next(t for t, r in enumerate(rows) if r)  # as HFBackend.infill_stats
    return bool(shared_cache_works(runner, target[first], rows[first], batch_size))


def measure(path: str, variant: str, shape: str, device: str, dtype: str, n_texts: int,
            min_tokens: int, max_tokens: int, prefix_tokens: int, batch_size: int,
            threads: int, reference_texts: int, arrays: str) -> dict:
    """One variant in this process: times it, writes its per-text arrays to `arrays` (.npz),
    returns its figures."""
    import torch
    from stats_pass import make_ids, make_model, make_runner, versions

    from pddkit.backends.kv_agreement import dtype_atol
    from pddkit.engine.infill_pass import variants

    torch.set_num_threads(threads)
    cuda = device.startswith("cuda")
    model, vocab = make_model(shape, device, dtype)
    runner = make_runner(model, vocab, shape, device, dtype, batch_size)
    ids = make_ids(n_texts, vocab, min_tokens, max_tokens, seed=1)
    prefix = make_ids(1, vocab, prefix_tokens, prefix_tokens, seed=2)[0] if path == "prefix" else None
    target = runner.run_ids(ids)  # what both paths read (and the warm-up of the plain pass)
    rows = [variants(t.ids, t.top, LOOKAHEAD) for t in target] if path == "infill" else None
    shortest = sorted(range(n_texts), key=lambda i: len(ids[i]))[:2]
    run_path(path, runner, [ids[i] for i in shortest], prefix, [target[i] for i in shortest],
             None if rows is None else [rows[i] for i in shortest], batch_size,
             variant == "shared")  # warm-up: kernels chosen, caches allocated
    _sync(device)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    got = run_path(path, runner, ids, prefix, target, rows, batch_size, variant == "shared")
    _sync(device)
    seconds = time.perf_counter() - t0
    peak = (torch.cuda.max_memory_allocated() / 2**20 if cuda
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    text_tokens = sum(len(s) for s in ids)
    variants_n = None
    if path == "prefix":
        run = (len(prefix) + text_tokens if variant == "shared"
               else sum(len(prefix) + len(s) + 1 for s in ids))  # + 1: the start token
        given, score = prefix_scores(target, got)
        out = {"given": given, "score": score,
               "L": np.concatenate([s.L for s in got]), "H": np.concatenate([s.H for s in got])}
    else:
        variants_n = sum(len(r) for r in rows)
        if variant == "shared":  # engine/infill_pass.py's count: each text's prefix once, the windows
            run = sum(max(i for i, _ in r) + sum(len(seq) - i for i, seq in r) for r in rows if r)
        else:
            run = sum(len(seq) + 1 for r in rows for _, seq in r)
        score = infill_scores(target, rows, got)
        out = {"score": score, "variant_at": np.array([(t, i) for t, r in enumerate(rows)
                                                        for i, _ in r], dtype=np.int64).reshape(-1, 2),
               # the window of each variant: the positions the shared path runs
               "L": np.concatenate([s.L[i:] for r, st in zip(rows, got) for (i, _), s in zip(r, st)]),
               "H": np.concatenate([s.H[i:] for r, st in zip(rows, got) for (i, _), s in zip(r, st)])}
    figures = {"path": path, "variant": variant, "shape": shape, "device": device,
               "dtype": dtype, "vocab": vocab, "texts": n_texts, "text_tokens": text_tokens,
               "tokens_run": int(run), "seconds": seconds,
               "text_tokens_per_s": text_tokens / seconds, "tokens_run_per_s": run / seconds,
               "peak_mb": peak, "peak_of": "torch.cuda.max_memory_allocated" if cuda
               else "ru_maxrss (the process)", "batch_size": batch_size, "threads": threads,
               "prefix_tokens": prefix_tokens if path == "prefix" else None,
               "variants": variants_n,
               "pddkit_check_atol": dtype_atol(getattr(torch, dtype)),  # HFBackend's, this dtype
               **versions()}
    if cuda:
        figures["gpu"] = torch.cuda.get_device_name()
    if variant == "shared":  # after the clock: would pddkit's one-off check keep this path?
        figures["pddkit_check_keeps_shared"] = pddkit_check(path, runner, ids, prefix, target,
                                                            rows, batch_size)
    if variant == "plain" and reference_texts > 0:  # the same weights in float32, after the clock
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        model.float()
        first = list(range(min(reference_texts, n_texts)))
        sub = [ids[i] for i in first]
        ref_target = runner.run_ids(sub)
        # the same variants as the timed run (its argmax), so that the same numbers are compared
        sub_rows = None if rows is None else [rows[i] for i in first]
        ref = run_path(path, runner, sub, prefix, ref_target, sub_rows, batch_size, False)
        out["ref_score"] = prefix_scores(ref_target, ref)[1] if path == "prefix" else \
            infill_scores(ref_target, sub_rows, ref)
        figures["reference_texts"] = len(first)
    np.savez(arrays, **out)
    return figures


def _max_abs(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def compare(path: str, check_atol: float, shared: dict, plain: dict) -> dict:
    """The shared path's scores and statistics against the plain pass's, and both against
    the float32 reference."""
    n = len(plain["ref_score"]) if "ref_score" in plain else 0
    if "variant_at" in plain and not np.array_equal(plain["variant_at"], shared["variant_at"]):
        # each process takes the argmax of its own target pass: the same numbers on one device
        raise SystemExit("kv_paths.py: the two processes' target passes chose other argmax "
                         "tokens, so their infill variants differ and cannot be compared")
    out = {"max_abs_diff_score": _max_abs(shared["score"], plain["score"]),
           "score_sd_across_texts": float(np.std(plain["score"], ddof=1)),
           "max_abs_diff_L": _max_abs(shared["L"], plain["L"]),
           "max_abs_diff_H": _max_abs(shared["H"], plain["H"]),
           "check_atol": check_atol}
    # pddkit's one-off check (HFBackend) keeps the shared path iff L and H agree within
    # check_atol on its sample; here over every text and position
    out["within_check_atol"] = max(out["max_abs_diff_L"], out["max_abs_diff_H"]) <= check_atol
    if path == "prefix":
        out["max_abs_diff_LL_given_prefix"] = _max_abs(shared["given"], plain["given"])
    if n:
        out["reference_texts"] = n
        out["shared_vs_float32_max_abs_diff_score"] = _max_abs(shared["score"][:n], plain["ref_score"])
        out["plain_vs_float32_max_abs_diff_score"] = _max_abs(plain["score"][:n], plain["ref_score"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--path", choices=("prefix", "infill"), required=True)
    ap.add_argument("--shape", default="tiny-llama")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--texts", type=int, default=16)
    ap.add_argument("--min-tokens", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--prefix-tokens", type=int, default=64, help="--path prefix: P's length")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reference-texts", type=int, default=2,
                    help="texts scored again in float32 after the plain pass (0: none)")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--arrays", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.path == "prefix" and a.prefix_tokens < 1:
        ap.error("--prefix-tokens must be at least 1")
    common = dict(shape=a.shape, device=a.device, dtype=a.dtype, n_texts=a.texts,
                  min_tokens=a.min_tokens, max_tokens=a.max_tokens, prefix_tokens=a.prefix_tokens,
                  batch_size=a.batch_size, threads=a.threads, reference_texts=a.reference_texts)
    if a.variant:
        print(json.dumps(measure(a.path, a.variant, arrays=a.arrays, **common)))
        return
    import tempfile  # this process imports no torch (its start costs seconds): the variants do

    runs, arrays = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in ("shared", "plain"):
            file = str(Path(tmp) / f"{variant}.npz")
            argv = [sys.executable, __file__, "--variant", variant, "--arrays", file]
            for k, v in vars(a).items():
                if k not in ("variant", "arrays", "json"):
                    argv += [f"--{k.replace('_', '-')}", str(v)]
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"kv_paths.py --path {a.path} --variant {variant} failed:\n"
                                 f"{done.stderr[-4000:]}")
            runs[variant] = json.loads(done.stdout.strip().splitlines()[-1])
            with np.load(file) as f:
                arrays[variant] = {k: f[k] for k in f.files}
    shared, plain = runs["shared"], runs["plain"]
    check_atol = plain["pddkit_check_atol"]
    summary = {"path": a.path, "shape": a.shape, "dtype": a.dtype, "device": a.device,
               "speedup": plain["seconds"] / shared["seconds"],
               "pddkit_check_keeps_shared": shared["pddkit_check_keeps_shared"],
               "peak_ratio": shared["peak_mb"] / plain["peak_mb"],
               **compare(a.path, check_atol, arrays["shared"], arrays["plain"]), "runs": runs}
    where = shared.get("gpu", f"cpu, {a.threads} threads")
    print(f"{a.path} path, {a.shape} shape, random weights, {a.dtype}, {where}: {a.texts} texts, "
          f"{shared['text_tokens']} text tokens, batch {a.batch_size}")
    for name in ("plain", "shared"):
        r = runs[name]
        print(f"{name:7s}: {r['seconds']:8.2f} s  {r['text_tokens_per_s']:9.0f} text tok/s  "
              f"{r['tokens_run']:9d} tokens run  peak {r['peak_mb']:8.0f} MB")
    print(f"speed-up {summary['speedup']:.2f}x; max |score shared - plain| "
          f"{summary['max_abs_diff_score']:.3g} (scores' sd across texts "
          f"{summary['score_sd_across_texts']:.3g}); max |L| diff {summary['max_abs_diff_L']:.3g}, "
          f"|H| {summary['max_abs_diff_H']:.3g}; pddkit's check (atol {check_atol:g} on its "
          f"sample) {'keeps' if summary['pddkit_check_keeps_shared'] else 'REFUSES'} the shared path")
    if "reference_texts" in summary:
        print(f"against float32 on {summary['reference_texts']} texts: shared "
              f"{summary['shared_vs_float32_max_abs_diff_score']:.3g}, plain "
              f"{summary['plain_vs_float32_max_abs_diff_score']:.3g}")
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
