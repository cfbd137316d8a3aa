"""`traps generate`: trap sequences of exactly L tokens whose perplexity under the
generating model covers a range, spread evenly over perplexity buckets (Meeus et al.,
"Copyright Traps for Large Language Models", ICML 2024, arXiv 2402.09363; the authors'
src/scripts/gen_traps.py and src/utils.py).

As the authors do:
- sequences start from the start token alone and are sampled over a sweep of temperatures
  (a batch per temperature, sweeps repeated until the buckets are full); the perplexity is
  the model's own at temperature 1 over the L sampled tokens (start token as context);
- the perplexity range is cut into `buckets` equal-width buckets, [lo, hi) (the authors:
  integer perplexities 1..100, ten buckets [1, 11), ..., [91, 101)); each bucket gets
  `count / buckets` traps, and a sample landing in a full bucket is passed over;
- a candidate is rejected when its token set's Jaccard similarity |A & B| / |A | B| with
  any trap already kept exceeds `jaccard` (their `jaccard_similarity(a, b) > threshold`:
  the code compares the similarity, although its help text says "distance"), so every
  pair of traps kept has similarity at most `jaccard`;
- with `retokenize`, a sequence is kept only if decoding it and encoding the text again
  gives exactly its ids (their batch_decode / batch_encode_plus comparison), so a trap's
  text is exactly its ids.

Where pddkit differs, and why:
- the perplexity comes from the sampling pass's own logits (their compute_perplexity runs
  a second, teacher-forced pass in float16): equal up to float rounding (tested);
- the temperatures are a list (default 0.5, 0.75, ..., 4.0, the endpoint included; the
  authors' np.arange(0.5, 4, 0.5) stops at 3.5);
- buckets are filled evenly, not each integer perplexity unit (the authors also give every
  integer perplexity count/100 traps, which forces `count` to be a multiple of 100);
- sampling never draws a special token or an id the tokenizer lacks (their model.generate
  may end a sample at EOS and pad the rest); the perplexity still uses the full softmax;
- without `retokenize` a sequence is still kept only if its text encodes to L tokens (the
  authors then keep everything);
- de-duplication spans all lengths of one call (the authors run one length per call);
- sampling is bounded by `max_tries` samples per length (theirs loops until done), and an
  unreachable count is one sentence saying what was reached; a temperature none of whose
  samples so far landed in a bucket still open is drawn only every RECHECK-th sweep (on a
  small model most of the default sweep lies far above perplexity 101);
- half of each (length, bucket) cell is marked MEMBER (to be inserted) and half HELD_OUT,
  seeded (the authors' inject_traps.py inserts every trap of the folder it is given, so
  their non-member traps are sequences kept out of that folder).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
from array import array
from collections.abc import Sequence

import numpy as np

from pddkit.errors import PddkitError
from pddkit.studies.traps.folder import HELD_OUT, MEMBER, Trap, TrapFolder

logger = logging.getLogger(__name__)

DEFAULT_TEMPERATURES = tuple(0.5 + 0.25 * i for i in range(15))  # 0.5, 0.75, ..., 4.0
PAPER = "Meeus et al. 2024"
RECHECK = 8  # every 8th sweep draws every temperature, useful so far or not


def check_generate_options(*, lengths: Sequence[int], count: int,
                           ppl_range: tuple[float, float] = (1.0, 101.0), buckets: int = 10,
                           temperatures: Sequence[float] = DEFAULT_TEMPERATURES,
                           jaccard: float = 0.2, batch_size: int = 128,
                           max_tries: int = 100_000) -> None:
    """One sentence for an option generate_traps refuses, before any model loads.

    `count` traps per length must be a multiple of `buckets` (each bucket gets
    count / buckets); a bucket's traps are split in halves, and when a bucket holds an odd
    number the extra trap is a member in every other (length, bucket) cell (0, 2, 4, ...)
    and held out in the others, so members and held-out traps differ by at most one."""
    if not lengths or any(not isinstance(n, int) or n < 1 for n in lengths):
        raise PddkitError(f"`lengths` must be token counts of at least 1, not {list(lengths)}")
    if len(set(lengths)) != len(lengths):
        raise PddkitError(f"`lengths` names a length twice: {list(lengths)}")
    if not isinstance(buckets, int) or buckets < 1:
        raise PddkitError(f"`buckets` must be at least 1, not {buckets}")
    if not isinstance(count, int) or count < buckets or count % buckets:
        low = max(buckets, count // buckets * buckets if isinstance(count, int) else buckets)
        high = low if low > count else low + buckets
        raise PddkitError(f"`count` {count} is not a positive multiple of `buckets` {buckets} "
                          f"(each bucket gets count / buckets traps): use {low}"
                          + (f" or {high}" if high != low else ""))
    lo, hi = (float(x) for x in ppl_range)
    if not (math.isfinite(lo) and math.isfinite(hi) and 1.0 <= lo < hi):
        raise PddkitError(f"`ppl_range` must be two perplexities 1 <= low < high, not "
                          f"{list(ppl_range)}")
    if not temperatures or any(not (t > 0 and math.isfinite(t)) for t in temperatures):
        raise PddkitError(f"`temperatures` must be positive numbers, not {list(temperatures)}")
    if not 0.0 <= jaccard <= 1.0:
        raise PddkitError(f"`jaccard` is a Jaccard similarity between 0 and 1, not {jaccard}")
    if batch_size < 1:
        raise PddkitError(f"`batch_size` must be at least 1, not {batch_size}")
    if max_tries < 1:
        raise PddkitError(f"`max_tries` must be at least 1, not {max_tries}")


def bucket_edges(ppl_range: tuple[float, float], buckets: int) -> list[float]:
    """The buckets+1 edges of equal-width buckets over [low, high)."""
    lo, hi = (float(x) for x in ppl_range)
    return [lo + (hi - lo) * i / buckets for i in range(buckets)] + [hi]


def bucket_of(ppl: float, edges: Sequence[float]) -> int | None:
    """The 0-based bucket of a perplexity, None outside [edges[0], edges[-1])."""
    if not edges[0] <= ppl < edges[-1]:
        return None
    b = int((ppl - edges[0]) / (edges[-1] - edges[0]) * (len(edges) - 1))
    b = min(max(b, 0), len(edges) - 2)
    while b > 0 and ppl < edges[b]:  # float rounding near an edge: the edges decide
        b -= 1
    while b < len(edges) - 2 and ppl >= edges[b + 1]:
        b += 1
    return b


def jaccard_similarity(a, b) -> float:
    """|A & B| / |A | B| of the token sets of two sequences (the authors' definition)."""
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a or b else 1.0


def generate_traps(model, tokenizer, *, lengths: Sequence[int], count: int,
                   ppl_range: tuple[float, float] = (1.0, 101.0), buckets: int = 10,
                   temperatures: Sequence[float] = DEFAULT_TEMPERATURES, jaccard: float = 0.2,
                   retokenize: bool = True, seed: int = 0, batch_size: int = 128,
                   max_tries: int = 100_000, model_name: str | None = None) -> TrapFolder:
    """`count` traps of each length in `lengths` (tokens of `tokenizer`), sampled from
    `model` (a transformers causal LM, on its device) and spread evenly over `buckets`
    equal-width perplexity buckets of `ppl_range`; half of each bucket MEMBER, half
    HELD_OUT (see check_generate_options for odd halves). `max_tries` bounds the samples
    drawn per length; `batch_size` is the samples per temperature and sweep. The same
    seed, options, model, device and batch size give the same traps."""
    import torch

    from pddkit.backends.hf_tokenizers import start_token_id
    from pddkit.backends.model_config import context_length
    from pddkit.cache.fingerprint import tokenizer_digest
    from pddkit.progress import bar
    from pddkit.provenance import Provenance, now

    started = now()
    check_generate_options(lengths=lengths, count=count, ppl_range=ppl_range, buckets=buckets,
                           temperatures=temperatures, jaccard=jaccard, batch_size=batch_size,
                           max_tries=max_tries)
    context = context_length(model)
    if context is not None and max(lengths) + 1 > context:
        raise PddkitError(f"`lengths` {max(lengths)} does not fit the model's context of "
                          f"{context} tokens (the start token included)")
    edges = bucket_edges(ppl_range, buckets)
    start = start_token_id(tokenizer)
    device = next(model.parameters()).device
    banned = _banned_ids(model, tokenizer, device)  # [V] bool
    dedup = _Dedup(jaccard)
    traps: list[Trap] = []
    counts: dict[str, dict] = {}
    cell = 0  # (length, bucket) cells so far, for the odd halves
    with bar(len(lengths) * count, "traps", unit="trap") as progress:
        for length in sorted(lengths):
            gen = torch.Generator(device=device)
            gen.manual_seed(_digest(seed, "sample", length))
            kept, tally = _fill(model, tokenizer, length, count // buckets, edges, temperatures,
                                dedup, start, banned, gen, retokenize, batch_size, max_tries,
                                progress)
            if any(len(k) < count // buckets for k in kept):
                raise PddkitError(_unreached(length, count, kept, edges, tally))
            length_traps = _with_roles(kept, length, seed, cell)
            cell += buckets
            traps += length_traps
            members = sum(t.role == MEMBER for t in length_traps)
            counts[str(length)] = {**tally, "kept": len(length_traps), "members": members,
                                   "held_out": len(length_traps) - members,
                                   "kept_per_bucket": [len(k) for k in kept]}
            logger.info("length %d: %d traps from %d samples", length, len(length_traps),
                        tally["sampled"])
    name = model_name or getattr(model, "name_or_path", None) or \
        getattr(getattr(model, "config", None), "_name_or_path", None) or type(model).__name__
    manifest = {
        "study": "traps generate", "paper": PAPER, "model": str(name),
        "tokenizer": {"name": str(getattr(tokenizer, "name_or_path", "") or ""),
                      "vocab_size": len(tokenizer), "fingerprint": tokenizer_digest(tokenizer)},
        "start_token_id": start,
        "options": {"lengths": sorted(lengths), "count": count,
                    "ppl_range": [float(x) for x in ppl_range], "buckets": buckets,
                    "temperatures": [float(t) for t in temperatures], "jaccard": jaccard,
                    "retokenize": retokenize, "seed": seed, "batch_size": batch_size,
                    "max_tries": max_tries},
        "bucket_edges": edges,
        "never_sampled_ids": int(banned.sum()),
        "counts": counts,
        "provenance": Provenance.collect(started, devices=[str(device)]).to_dict(),
    }
    return TrapFolder(tuple(traps), manifest)


def _digest(*parts) -> int:
    blob = json.dumps([str(p) for p in parts]).encode("utf-8")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") >> 1


def _banned_ids(model, tokenizer, device):
    """[V] bool over the model's output ids: special tokens and ids past the tokenizer's."""
    import torch

    width = int(model.get_output_embeddings().weight.shape[0]) if hasattr(
        model, "get_output_embeddings") and model.get_output_embeddings() is not None \
        else int(model.config.vocab_size)
    banned = torch.zeros(width, dtype=torch.bool, device=device)  # [V]
    banned[min(len(tokenizer), width):] = True
    special = [i for i in (getattr(tokenizer, "all_special_ids", None) or []) if 0 <= i < width]
    banned[special] = True
    return banned


def _fill(model, tokenizer, length, per_bucket, edges, temperatures, dedup, start, banned,
          gen, retokenize, batch_size, max_tries, progress):
    """Sweeps over the temperatures until every bucket holds `per_bucket` traps or
    `max_tries` samples were drawn: per bucket, (ids, text, perplexity, temperature). A
    temperature none of whose samples so far landed in a bucket still open is drawn only
    every RECHECK-th sweep."""
    buckets = len(edges) - 1
    kept: list[list[tuple]] = [[] for _ in range(buckets)]
    tally = {"sampled": 0, "rejected_retokenization": 0, "rejected_perplexity_range": 0,
             "rejected_bucket_full": 0, "rejected_jaccard": 0, "skipped_temperature_batches": 0}
    landed = np.zeros((len(temperatures), buckets + 1), dtype=np.int64)  # last: out of range
    seen = [math.inf, -math.inf]
    sweep = 0
    while tally["sampled"] < max_tries and any(len(k) < per_bucket for k in kept):
        for ti, temp in enumerate(temperatures):
            rows = min(batch_size, max_tries - tally["sampled"])
            open_ = [len(k) < per_bucket for k in kept] + [False]
            if rows <= 0 or not any(open_):
                break
            if sweep % RECHECK and landed[ti].any() and not landed[ti][open_].any():
                tally["skipped_temperature_batches"] += 1
                continue
            ids, ppls = _sample(model, start, rows, length, float(temp), banned, gen)
            texts = tokenizer.batch_decode(ids, skip_special_tokens=False,
                                           clean_up_tokenization_spaces=False)
            again = tokenizer(texts, add_special_tokens=False)["input_ids"]
            tally["sampled"] += rows
            for seq, text, back, ppl in zip(ids, texts, again, ppls):
                seen = [min(seen[0], ppl), max(seen[1], ppl)]
                if (list(back) != seq) if retokenize else (len(back) != length):
                    tally["rejected_retokenization"] += 1
                    continue
                b = bucket_of(ppl, edges) if math.isfinite(ppl) else None
                landed[ti, buckets if b is None else b] += 1
                if b is None:
                    tally["rejected_perplexity_range"] += 1
                elif len(kept[b]) >= per_bucket:
                    tally["rejected_bucket_full"] += 1
                elif dedup.too_similar(seq):
                    tally["rejected_jaccard"] += 1
                else:
                    dedup.add(seq)
                    kept[b].append((tuple(seq), text, float(ppl), float(temp)))
                    progress.update(1)
        sweep += 1
    tally["perplexity_seen"] = seen if tally["sampled"] else None
    return kept, tally


def _sample(model, start: int, rows: int, length: int, temperature: float, banned, gen):
    """`rows` sequences of `length` tokens after the start token at `temperature`, one
    token per step with the key/value cache, and each one's perplexity at temperature 1
    from the same logits: (ids per row, perplexity per row)."""
    import torch

    device = banned.device
    cache_arg = _cache_argument(model)
    with torch.inference_mode():
        prefix = torch.full((rows, 1), start, dtype=torch.long, device=device)  # [n, 1]
        mask = torch.ones((rows, length + 1), dtype=torch.long, device=device)  # [n, L + 1]
        out = model(input_ids=prefix, attention_mask=mask[:, :1], use_cache=True)
        nll = torch.zeros(rows, dtype=torch.float32, device=device)  # [n]
        drawn = []
        for step in range(length):
            logits = out.logits[:, -1, :].float()  # [n, V]
            logp = torch.log_softmax(logits, dim=-1)  # [n, V] at temperature 1
            scaled = (logits / temperature).masked_fill(banned, float("-inf"))  # [n, V]
            token = torch.multinomial(scaled.softmax(-1), 1, generator=gen)  # [n, 1]
            nll -= logp.gather(1, token)[:, 0]
            drawn.append(token)
            if step + 1 == length:
                break
            cache = _cache_of(out)
            if cache is not None:
                out = model(input_ids=token, attention_mask=mask[:, :step + 2], use_cache=True,
                            **{cache_arg: cache})
            else:  # a model without a cache: the whole prefix again
                out = model(input_ids=torch.cat([prefix, *drawn], 1),
                            attention_mask=mask[:, :step + 2], use_cache=False)
        ids = torch.cat(drawn, 1)  # [n, L]
        ppl = torch.exp(nll / length)  # [n]
    return ids.cpu().tolist(), ppl.cpu().tolist()


def _cache_argument(model) -> str:
    """The forward's key/value cache argument: `cache` (transformers 5.x) or the older name."""
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _cache_of(out):
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


class _Dedup:
    """Token sets of the traps kept, with an inverted index (token -> kept traps holding
    it): a candidate's intersections with all kept traps in one bincount, never a Python
    loop over pairs."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.sizes = array("q")  # set size per kept trap
        self.postings: dict[int, array] = {}

    def too_similar(self, seq) -> bool:
        n = len(self.sizes)
        tokens = set(seq)
        hits = [np.frombuffer(self.postings[t], dtype=np.int64)
                for t in tokens if t in self.postings]
        if not n or not hits:
            return 0.0 > self.threshold
        inter = np.bincount(np.concatenate(hits), minlength=n)  # [n]
        del hits  # the arrays may grow again once no view of them is alive
        union = len(tokens) + np.frombuffer(self.sizes, dtype=np.int64) - inter  # [n]
        return bool((inter / union > self.threshold).any())

    def add(self, seq) -> None:
        tokens = set(seq)
        index = len(self.sizes)
        self.sizes.append(len(tokens))
        for t in tokens:
            self.postings.setdefault(t, array("q")).append(index)


def _with_roles(kept, length: int, seed: int, first_cell: int) -> list[Trap]:
    """Traps of one length, numbered by bucket then acceptance; in each bucket a seeded
    half MEMBER, the rest HELD_OUT (an odd bucket's extra trap: MEMBER in even cells)."""
    traps = []
    for b, rows in enumerate(kept):
        n = len(rows)
        members = n // 2 + (n % 2 if (first_cell + b) % 2 == 0 else 0)
        order = list(range(n))
        random.Random(_digest(seed, "roles", length, b)).shuffle(order)
        member = set(order[:members])
        for j, (ids, text, ppl, temp) in enumerate(rows):
            traps.append(Trap(id=f"L{length}-{len(traps):05d}", text=text, token_ids=ids,
                              length=length, perplexity=ppl, bucket=b, temperature=temp,
                              role=MEMBER if j in member else HELD_OUT))
    return traps


def _unreached(length: int, count: int, kept, edges, tally) -> str:
    need = count // (len(edges) - 1)
    short = [f"{b} ({edges[b]:g}-{edges[b + 1]:g}) got {len(k)}"
             for b, k in enumerate(kept) if len(k) < need]
    seen = tally["perplexity_seen"]
    span = f", perplexities {seen[0]:.1f} to {seen[1]:.1f} seen" if seen else ""
    return (f"length {length}: {sum(map(len, kept))} of {count} traps after "
            f"{tally['sampled']} samples ({tally['rejected_retokenization']} failed "
            f"retokenization, {tally['rejected_jaccard']} too similar{span}); "
            f"bucket{'s' if len(short) > 1 else ''} {', '.join(short)} of {need} each: widen "
            "`temperatures` or `ppl_range`, lower `count`, or raise `max_tries`")
