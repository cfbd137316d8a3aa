"""Neighbour texts for the neighbourhood attack (Mattern et al. 2023, "Membership inference
attacks against language models via neighbourhood comparison", sec. 3).

For each whole-word token of a text, dropout (p=0.7) is applied to that token's input
embedding and the masked LM's top candidates at that position are read (the original
token excluded); all positions of a text go through the masked LM in one batch. The N
most probable single-word swaps over all positions are the neighbours.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pddkit import progress
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MaskModel:
    model: object  # transformers AutoModelForMaskedLM, eval mode
    tokenizer: object
    name: str


def load_mask_model(name: str, *, device: str = "cpu", local_files_only: bool = False,
                    trust_remote_code: bool = False) -> MaskModel:
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from pddkit.runner.loading import _looks_local

    if _looks_local(name) and not Path(name).expanduser().exists():
        raise PddkitError(f"mask model path {name} does not exist")
    try:
        tok = AutoTokenizer.from_pretrained(name, local_files_only=local_files_only,
                                            trust_remote_code=trust_remote_code)
        model = AutoModelForMaskedLM.from_pretrained(name, local_files_only=local_files_only,
                                                     trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PddkitError(f"{name} is not a fill-mask (masked LM) model pddkit can load: "
                          f"{first}") from None
    if tok.mask_token_id is None or not getattr(tok, "is_fast", False):
        raise PddkitError(f"{name} is not a fill-mask model: its tokenizer has no mask token "
                          "or no offsets (a fast tokenizer is needed)")
    return MaskModel(model.to(device).eval(), tok, name)


def _seed(text: str, seed: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{text}".encode()).digest()[:8], "little")


def _word_positions(text: str, offsets: list[tuple[int, int]]) -> list[int]:
    """Token positions that cover one whole alphabetic word."""
    out = []
    for p, (s, e) in enumerate(offsets):
        if e <= s or not text[s:e].isalpha():
            continue
        if (s > 0 and text[s - 1].isalnum()) or (e < len(text) and text[e].isalnum()):
            continue
        out.append(p)
    return out


def neighbors_of(mm: MaskModel, text: str, n_neighbors: int = 25, top_k: int = 10,
                 dropout: float = 0.7, seed: int = 0, source: str = "text") -> list[str]:
    """The `n_neighbors` most probable single-word swaps of `text` (deterministic)."""
    import torch

    tok = mm.tokenizer
    enc = tok(text, return_offsets_mapping=True, truncation=True)
    device = next(mm.model.parameters()).device
    ids = torch.tensor([enc["input_ids"]], device=device)  # [1, T]
    positions = _word_positions(text, [tuple(o) for o in enc["offset_mapping"]])
    if not positions:
        raise PddkitError(f"{source} has no word the masked LM {mm.name} can replace")
    gen = torch.Generator().manual_seed(_seed(text, seed) % 2**63)
    with torch.inference_mode():
        emb = mm.model.get_input_embeddings()(ids)  # [1, T, d]
        batch = emb.repeat(len(positions), 1, 1)  # [P, T, d] one copy per position
        keep = (torch.rand(len(positions), emb.shape[-1], generator=gen) >= dropout).float()
        keep = keep.to(device)  # drawn on the CPU generator: the same masks on every device
        rows = torch.arange(len(positions), device=device)
        pos = torch.tensor(positions, device=device)
        batch[rows, pos] = batch[rows, pos] * keep / (1 - dropout)  # dropout on that token only
        mask = torch.ones(batch.shape[:2], dtype=torch.long, device=device)
        logits = mm.model(inputs_embeds=batch, attention_mask=mask).logits
        probs = torch.softmax(logits[rows, pos].float(), -1)  # [P, V]
        probs[rows, ids[0, pos]] = 0.0  # never the original token
        top_p, top_i = probs.topk(min(top_k, probs.shape[-1]), dim=-1)  # [P, k]
    swaps = []
    for r, p in enumerate(positions):
        s, e = enc["offset_mapping"][p]
        original = text[s:e]
        for prob, cand in zip(top_p[r].tolist(), top_i[r].tolist()):
            word = tok.decode([cand]).strip()
            if word.isalpha() and word.lower() != original.lower():
                swaps.append((-prob, p, word, s, e))
    swaps.sort()  # most probable first; ties by position, then word
    out, seen = [], set()
    for _, _, word, s, e in swaps:
        nb = text[:s] + word + text[e:]
        if nb not in seen:
            seen.add(nb)
            out.append(nb)
        if len(out) == n_neighbors:
            break
    if not out:
        raise PddkitError(f"{source} has no word the masked LM {mm.name} can replace")
    return out


def generate(mm: MaskModel, texts: Sequence[str], names: Sequence[str], n_neighbors: int,
             top_k: int, dropout: float, seed: int) -> tuple[list[list[str]], int]:
    """Neighbours of every text, and how many texts were longer than the masked LM's
    context: their neighbours stay whole texts, but only words within its first
    `model_max_length` tokens are replaced (counted and reported, not silent)."""
    out = [neighbors_of(mm, t, n_neighbors, top_k, dropout, seed, source=n)
           for t, n in progress.track(zip(texts, names), len(texts), "neighbours", "text")]
    limit = mm.tokenizer.model_max_length
    lengths = [len(ids) for ids in mm.tokenizer(list(texts), verbose=False)["input_ids"]]
    cut = sum(n > limit for n in lengths)
    if cut:
        logger.warning("neighbor: %d of %d texts are longer than the %d-token context of the "
                       "masked LM %s; only words within it are replaced", cut, len(texts), limit,
                       mm.name)
    return out, cut


def load(path: str | Path, ids: Sequence[str]) -> list[list[str]]:
    """Neighbours saved by an earlier run (OUTPUT/neighbors.jsonl), matched by text id."""
    path = Path(path)
    if not path.is_file():
        raise PddkitError(f"neighbours file {path} does not exist")
    by_id = {}
    for no, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            obj = json.loads(line)
            by_id[str(obj["id"])] = list(obj["neighbors"])
        except (json.JSONDecodeError, KeyError, TypeError):
            raise PddkitError(f"{path} line {no} is not an {{id, neighbors}} object") from None
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise PddkitError(f"{path} has no neighbours for {len(missing)} of the texts "
                          f"(first: id {missing[0]})")
    return [by_id[i] for i in ids]
