"""Train tiny GPT-2-shaped models and byte-level BPE tokenizers on chosen texts, or go on
pre-training any causal LM (a `--base-model`) on them; CPU or GPU."""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from pathlib import Path

from pddkit import progress

logger = logging.getLogger(__name__)

EOT = "<|endoftext|>"


def _wrap(tok):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOT, eos_token=EOT,
                                   pad_token=EOT, unk_token=None)


def train_bpe_tokenizer(texts: Sequence[str], vocab_size: int = 1024):
    """A byte-level BPE trained on `texts`, with <|endoftext|> as BOS/EOS/PAD."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return _wrap(tok)


def gpt2_tokenizer(vocab_dir: str | Path):
    """The real GPT-2 vocabulary from vocab.json + merges.txt (50,257 tokens)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    d = Path(vocab_dir)
    tok = Tokenizer(models.BPE.from_file(str(d / "vocab.json"), str(d / "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return _wrap(tok)


def build_gpt2(tokenizer, n_layer: int = 2, n_embd: int = 64, n_head: int = 2,
               n_positions: int = 256, seed: int = 0, dropout: float = 0.1):
    """A randomly initialised GPT-2-shaped causal LM sized to `tokenizer`. `dropout`: GPT-2's
    0.1 (residual, embedding and attention) by default; 0 as today's pre-training runs train
    (Pythia, OLMo, Llama), and faster: no random masks, and attention without dropout runs
    PyTorch's fused kernel (a training step of a 2 x 64 model on 12 x 512 tokens: 0.47 s
    instead of 0.85 s on one CPU thread, 2026-11-27)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=len(tokenizer), n_positions=n_positions, n_embd=n_embd,
                     n_layer=n_layer, n_head=n_head, bos_token_id=tokenizer.bos_token_id,
                     eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                     resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout)
    return GPT2LMHeadModel(cfg)


def train_causal_lm(model, tokenizer, texts: Sequence[str], epochs: int = 10, lr: float = 3e-3,
                    batch_size: int = 8, seed: int = 0, context: int | None = None) -> list[float]:
    """Next-token training on `texts` as in pre-training: each epoch shuffles the texts,
    concatenates them (each after a start token) and cuts the stream into full blocks of
    the model's context (at most `context` tokens), so no step is spent on padding and
    every token is trained on. `batch_size` counts blocks. Any causal LM family, on the
    device its weights are on. Returns the mean loss of each epoch.
    """
    import torch

    from pddkit.backends.hf_tokenizers import start_token_id
    from pddkit.backends.model_config import context_length

    ctx = min([c for c in (context_length(model), context) if c] or [512])
    start = start_token_id(tokenizer)
    device = next(model.parameters()).device
    docs = [[start, *ids] for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]
    n_tokens = sum(len(d) for d in docs)
    blocks_per_epoch = max(1, -(-n_tokens // ctx))
    rng = random.Random(seed)
    torch.manual_seed(seed)
    # foreach: one kernel per step for all tensors instead of a loop over them (on a CPU the
    # loop is the default); the same arithmetic, the same weights to the last bit, ~7% faster
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, foreach=True)
    steps = epochs * -(-blocks_per_epoch // batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)))
    model.train()
    history = []
    bar = progress.bar(total=steps, desc="training", unit="step")
    for _ in range(epochs):
        order = sorted(range(len(docs)), key=lambda _i: rng.random())
        stream = torch.tensor([t for i in order for t in docs[i]], dtype=torch.long)  # [n_tokens]
        blocks = list(stream.split(ctx))  # each [<= ctx]; only the last may be shorter
        total, count = 0.0, 0
        for b in range(0, len(blocks), batch_size):
            batch = blocks[b:b + batch_size]
            T = max(len(x) for x in batch)
            ids = torch.full((len(batch), T), start, dtype=torch.long)  # [B, T]
            labels = torch.full((len(batch), T), -100, dtype=torch.long)
            for r, x in enumerate(batch):
                ids[r, :len(x)] = x
                labels[r, :len(x)] = x
            loss = model(input_ids=ids.to(device), labels=labels.to(device)).loss
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            n = sum(len(x) for x in batch)
            total += float(loss.detach()) * n
            count += n
            bar.update(1)
        history.append(total / count)
        logger.info("epoch %d: loss %.3f", len(history), history[-1])
    bar.close()
    model.eval()
    return history


def save(model, tokenizer, out_dir: str | Path) -> Path:
    """An ordinary Hugging Face model directory: `pddkit run --model DIR` loads it."""
    out = Path(out_dir)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
