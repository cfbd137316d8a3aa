"""Throughput of `pddkit corpus index` (MB of text per second) and `pddkit corpus check`
(texts per second) on a corpus of at least 1 GB, as whole processes.

The corpus is made from the Gutenberg books in ../shared: each document is 20-60
sentences drawn at random (seeded) from all 160 books, written as JSONL files of about
100 MB. The texts checked are 64-word windows copied from corpus documents (overlap 1) and
the same windows with their words shuffled (overlap near 0).

    python benchmarks/corpus_throughput.py --root /tmp/corpus-bench --gb 1.0 [--markdown]

The tokenizer is the real GPT-2 vocabulary from ../shared (50,257 tokens, 16-bit ids).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

SHARED = Path(os.environ.get("PDDKIT_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
PDDKIT = [sys.executable, "-m", "pddkit"]


def gpt2_tokenizer(out: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2TokenizerFast

    src = SHARED / "tokenizers" / "gpt2"
    tk = Tokenizer(models.BPE.from_file(str(src / "vocab.json"), str(src / "merges.txt")))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    GPT2TokenizerFast(tokenizer_object=tk, bos_token="<|endoftext|>",
                      eos_token="<|endoftext|>").save_pretrained(out)
    return out


def sentences() -> list[str]:
    from pddkit.data.gutenberg import strip_gutenberg

    out: list[str] = []
    for book in sorted((SHARED / "corpora" / "gutenberg").rglob("*.txt")):
        text = strip_gutenberg(book.read_text(encoding="utf-8", errors="replace"))
        text = re.sub(r"\s+", " ", text)
        out += [s for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 4]
    return out


def make_corpus(folder: Path, gb: float, seed: int) -> tuple[int, list[str]]:
    """JSONL files of about 100 MB until `gb` GB; returns the bytes written and a sample
    of documents (for the windows checked)."""
    folder.mkdir(parents=True, exist_ok=True)
    pool, rng = sentences(), random.Random(seed)
    target, written, part, sample = int(gb * 1e9), 0, 0, []
    while written < target:
        path = folder / f"part-{part:03d}.jsonl"
        size = 0
        with path.open("w", encoding="utf-8") as fh:
            while size < 100_000_000 and written + size < target:
                doc = " ".join(rng.choice(pool) for _ in range(rng.randint(20, 60)))
                line = json.dumps({"text": doc}) + "\n"
                fh.write(line)
                size += len(line.encode("utf-8"))
                if rng.random() < 0.002 and len(sample) < 5000:
                    sample.append(doc)
        written += size
        part += 1
    return written, sample


def windows(sample: list[str], n: int, seed: int) -> list[dict]:
    rng, rows = random.Random(seed), []
    for i in range(n):
        words = rng.choice(sample).split()
        lo = rng.randrange(0, max(1, len(words) - 64))
        w = words[lo:lo + 64]
        if i % 2:
            rng.shuffle(w)
        rows.append({"id": f"t{i}", "text": " ".join(w), "label": 1 - i % 2})
    return rows


def timed(cmd: list[str], log: Path) -> float:
    t0 = time.perf_counter()
    with log.open("w") as fh:
        subprocess.run(cmd, check=True, stdout=fh, stderr=subprocess.STDOUT,
                       env=os.environ | {"PDDKIT_PROGRESS": "0"})
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    root = args.root
    root.mkdir(parents=True, exist_ok=True)
    tok = gpt2_tokenizer(root / "gpt2")
    corpus = root / "corpus"
    t0 = time.perf_counter()
    size, sample = make_corpus(corpus, args.gb, args.seed)
    made = time.perf_counter() - t0
    index = root / "index"
    index_s = timed([*PDDKIT, "corpus", "index", "--corpus", str(corpus), "--tokenizer", str(tok),
                     "--output", str(index)], root / "index.log")
    sa = sum(float(m) for m in re.findall(r"suffix array of shard \d+ \(\d+ bytes\) in ([\d.]+) s",
                                          (root / "index.log").read_text()))
    manifest = json.loads((index / "pddkit-index.json").read_text())
    data = root / "texts.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in windows(sample, args.texts, args.seed)))
    check_s = timed([*PDDKIT, "corpus", "check", "--index", str(index), "--data", str(data),
                     "--output", str(root / "check"), "--overwrite"], root / "check.log")
    small = root / "texts-10.jsonl"
    small.write_text("".join(data.read_text().splitlines(keepends=True)[:10]))
    start_s = timed([*PDDKIT, "corpus", "check", "--index", str(index), "--data", str(small),
                     "--output", str(root / "check10"), "--overwrite"], root / "check10.log")
    index_bytes = sum(p.stat().st_size for p in index.iterdir() if p.is_file())
    fig = {
        "corpus_bytes": size, "documents": manifest["documents"], "tokens": manifest["tokens"],
        "index_bytes": index_bytes, "index_seconds": round(index_s, 1),
        "index_mb_per_s": round(size / 1e6 / index_s, 2),
        "suffix_array_seconds": round(sa, 1),
        "tokenize_mb_per_s": round(size / 1e6 / (index_s - sa), 2),
        "check_texts": args.texts, "check_seconds": round(check_s, 1),
        "check_10_texts_seconds": round(start_s, 1),
        "check_texts_per_s_beyond_startup": round((args.texts - 10) / max(check_s - start_s, 1e-9), 1),
        "corpus_made_seconds": round(made, 1), "cpus": os.cpu_count(),
    }
    (root / "figures.json").write_text(json.dumps(fig, indent=1))
    if args.markdown:
        print(f"| corpus | {size / 1e9:.2f} GB, {manifest['documents']:,} documents, "
              f"{manifest['tokens']:,} tokens |\n"
              f"| index (whole process) | {index_s:.0f} s: {fig['index_mb_per_s']} MB/s "
              f"(tokenizing {fig['tokenize_mb_per_s']} MB/s; suffix array {sa:.0f} s) |\n"
              f"| index size on disk | {index_bytes / 1e9:.2f} GB |\n"
              f"| check {args.texts} texts (whole process) | {check_s:.1f} s; 10 texts "
              f"{start_s:.1f} s; {fig['check_texts_per_s_beyond_startup']} texts/s beyond "
              "start-up |")
    else:
        print(json.dumps(fig, indent=1))


if __name__ == "__main__":
    main()
