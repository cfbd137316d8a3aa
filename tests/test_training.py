"""The sandbox's pre-training loop (sandbox/training.py train_causal_lm) against a plain
transcription of what its docstring says: each epoch shuffles the documents (a start token
before each), concatenates them, cuts the stream into blocks of the context, and takes
AdamW steps (the default per-tensor loop) on batches of blocks. The same weights to the
last bit: the foreach optimiser changes the speed, not the arithmetic."""

import random

import torch

from pddkit.sandbox.training import build_gpt2, train_bpe_tokenizer, train_causal_lm
from tests.conftest import gutenberg_paragraphs


def _plain(model, tok, texts, epochs, lr, batch_size, seed, context):
    start = tok.bos_token_id
    docs = [[start, *tok(t, add_special_tokens=False)["input_ids"]] for t in texts]
    rng = random.Random(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)  # foreach left alone
    n_blocks = -(-sum(map(len, docs)) // context)
    steps = epochs * -(-n_blocks // batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)))
    model.train()
    losses = []
    for _ in range(epochs):
        keys = [rng.random() for _ in docs]
        order = sorted(range(len(docs)), key=lambda i: keys[i])
        stream = [t for i in order for t in docs[i]]
        blocks = [stream[i:i + context] for i in range(0, len(stream), context)]
        for b in range(0, len(blocks), batch_size):
            batch = blocks[b:b + batch_size]
            width = max(map(len, batch))
            ids = torch.tensor([x + [start] * (width - len(x)) for x in batch])
            labels = torch.tensor([x + [-100] * (width - len(x)) for x in batch])
            loss = model(input_ids=ids, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
    return losses


def test_pre_training_is_the_plain_loop_to_the_last_bit():
    texts = gutenberg_paragraphs(12)
    tok = train_bpe_tokenizer(texts, vocab_size=400)
    ours, plain = (build_gpt2(tok, n_layer=1, n_embd=32, n_head=2, n_positions=64, seed=3)
                   for _ in range(2))
    history = train_causal_lm(ours, tok, texts, epochs=3, lr=3e-3, batch_size=4, seed=5,
                              context=64)
    losses = _plain(plain, tok, texts, epochs=3, lr=3e-3, batch_size=4, seed=5, context=64)
    assert len(history) == 3 and len(losses) > 3 * 2
    for (name, a), (_, b) in zip(ours.named_parameters(), plain.named_parameters()):
        assert torch.equal(a, b), name


def test_dropout_is_gpt2s_unless_set_and_zero_means_none():
    """GPT-2's released configuration drops 10% (residual, embedding, attention); dropout=0
    leaves no dropout anywhere: in training mode two forwards give the same logits."""
    tok = train_bpe_tokenizer(gutenberg_paragraphs(12), vocab_size=300)
    default = build_gpt2(tok, n_layer=1, n_embd=32, n_positions=64)
    assert (default.config.resid_pdrop, default.config.embd_pdrop,
            default.config.attn_pdrop) == (0.1, 0.1, 0.1)
    none = build_gpt2(tok, n_layer=1, n_embd=32, n_positions=64, dropout=0.0)
    assert (none.config.resid_pdrop, none.config.embd_pdrop, none.config.attn_pdrop) == (0, 0, 0)
    assert all(m.p == 0 for m in none.modules() if isinstance(m, torch.nn.Dropout))
    ids = torch.arange(1, 41).reshape(2, 20)
    for model, same in ((none, True), (default, False)):
        model.train()
        torch.manual_seed(0)
        a = model(input_ids=ids).logits
        b = model(input_ids=ids).logits
        assert torch.equal(a, b) == same
    # the same initial weights either way (dropout draws nothing at initialisation)
    for (name, a), (_, b) in zip(default.named_parameters(), none.named_parameters()):
        assert torch.equal(a, b), name
