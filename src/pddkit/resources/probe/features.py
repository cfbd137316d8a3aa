"""The probe's features (Liu et al., "Probing Language Models for Pre-training Data Detection",
ACL 2024, arXiv 2406.01333, sec. 3.4): each text in PROMPT, and the hidden states of the
prompt's last token at every layer.

Standardisation (`STANDARDIZE`): "per_set" (default, as the authors' code, probing-lm-data
run_probe.py, does it) standardises each set of activations (the probe's training rows,
the held-out auxiliary rows, the validation texts, the texts under test) with its own
mean and std, label-free; "train" scales every set with the probe's training rows'
statistics (`mean_`, `scale_`), so a text's score does not depend on the other texts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import numpy as np

from pddkit import progress
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

PROMPT = "Here is a statement: {text}\nIs the above statement correct? Answer:"
STANDARDIZE = ("per_set", "train")
EPS = 1e-6  # added to every std, so a constant feature scales to 0, not to inf

def standardize_set(X: np.ndarray) -> np.ndarray:
    """[N, d] -> [N, d] z-scores of a set of activations with its own mean and std."""
    return (X - X.mean(0)) / (X.std(0) + EPS)


def check_mode(mode: str) -> None:
    if mode not in STANDARDIZE:
        raise PddkitError(f"probe standardisation must be one of {', '.join(STANDARDIZE)}, "
                          f"not {mode!r}")


def encode_prompts(model, tokenizer, texts: Sequence[str], name: str = "model",
                   warn: bool = True) -> tuple[list[list[int]], int]:
    """Token ids of every text in PROMPT, and how many texts were cut: a prompt longer
    than the model's context keeps its end (the question the probe reads) and loses the
    tail of the text."""
    from pddkit.backends.model_config import context_length

    limit = context_length(model)
    ids = tokenizer([PROMPT.format(text=t) for t in texts], verbose=False)["input_ids"]
    cut = 0
    for i, seq in enumerate(ids):
        if limit is None or len(seq) <= limit:
            continue
        text_ids = tokenizer(texts[i], add_special_tokens=False, verbose=False)["input_ids"]
        keep = len(text_ids) - (len(seq) - limit)
        while keep > 0:
            seq = tokenizer(PROMPT.format(text=tokenizer.decode(text_ids[:keep])),
                            verbose=False)["input_ids"]
            if len(seq) <= limit:
                break
            keep -= len(seq) - limit
        if keep <= 0:
            raise PddkitError(f"the probe's prompt alone does not fit the {limit}-token context "
                              f"of {name}")
        ids[i], cut = seq, cut + 1
    if cut and warn:
        logger.warning("probe: %d of %d texts were cut to fit the prompt into the %d-token "
                       "context of %s", cut, len(texts), limit, name)
    return ids, cut


def pad_ids(seqs: Sequence[Sequence[int]], pad: int):
    """Right-padded [B, T] ids and attention mask."""
    import torch

    T = max(len(s) for s in seqs)
    x = torch.full((len(seqs), T), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for r, s in enumerate(seqs):
        x[r, :len(s)] = torch.tensor(s)
        mask[r, :len(s)] = 1
    return x, mask


def last_token_states(model, tokenizer, ids: Sequence[Sequence[int]], batch_size: int,
                       name: str) -> Iterator[np.ndarray]:
    """Per batch, [B, layers + 1, d] hidden states (embeddings first) of the prompt's
    last real token, in float32; one forward pass per batch."""
    import torch

    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for b in progress.track(range(0, len(ids), batch_size), -(-len(ids) // batch_size),
                            "activations", "batch"):
        seqs = ids[b:b + batch_size]
        x, mask = pad_ids(seqs, pad)  # right padding: the last real token is at len - 1
        with torch.inference_mode():
            res = model(input_ids=x.to(device), attention_mask=mask.to(device),
                        output_hidden_states=True, use_cache=False)
        hs = getattr(res, "hidden_states", None)
        if not hs:
            raise PddkitError(f"{name} returns no hidden states, so the probe cannot read it")
        last = torch.tensor([len(s) - 1 for s in seqs], device=device)
        rows = torch.arange(len(seqs), device=device)
        yield torch.stack([h[rows, last].float() for h in hs], 1).cpu().numpy()  # [B, L+1, d]


def activations(model, tokenizer, texts: Sequence[str], batch_size: int = 8,
                name: str = "model", layer: int | None = None,
                ids: Sequence[Sequence[int]] | None = None) -> np.ndarray:
    """[N, layers + 1, d] last-token activations; with `layer`, [N, d] of that layer only.
    `ids`: the texts' prompts already encoded by `encode_prompts`."""
    out = []
    if ids is None:
        ids, _ = encode_prompts(model, tokenizer, texts, name)
    for h in last_token_states(model, tokenizer, ids, batch_size, name):
        if layer is not None and layer >= h.shape[1]:
            raise PddkitError(f"the probe reads layer {layer} but {name} has {h.shape[1]}")
        out.append(h if layer is None else h[:, layer])
    return np.concatenate(out)


