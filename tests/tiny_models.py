"""Tiny models the tests build and save themselves (nothing is downloaded)."""


def small_tokenizer(extra: str = ""):
    """A 300-token byte-level BPE trained on one sentence (plus `extra`)."""
    from pddkit.sandbox.training import train_bpe_tokenizer

    return train_bpe_tokenizer(["the quick brown fox jumps over the lazy dog " * 3 + extra], 300)


def save_tiny_gpt2(directory):
    """A random one-layer GPT-2 with small_tokenizer(), saved as a complete causal-LM folder."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = small_tokenizer()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(tok),
                                       n_positions=64, bos_token_id=0, eos_token_id=0))
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory
