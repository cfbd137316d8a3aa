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


def save_word_gpt2(directory, words):
    """A random one-layer GPT-2 with a 128-token context and a BPE that knows `words` and
    the tokens n0..n39, w0..w39, v0..v39, saved as a complete causal-LM folder."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = small_tokenizer(" ".join(words * 3) + " " + " ".join(f"n{i} w{i} v{i}" for i in range(40)))
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(tok),
                               n_positions=128, bos_token_id=0, eos_token_id=0)).save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


def save_tiny_llama(directory, train_texts, *, vocab_size: int = 600, add_bos: bool = True,
                    steps: int = 60, seed: int = 0):
    """A two-layer Llama-shaped model with a SentencePiece BPE tokenizer (byte fallback),
    both trained here on `train_texts` (every text seen `steps // len(train_texts)` times or
    more), saved as a folder llama.cpp's converter reads: tokenizer.model, its config
    (`add_bos` written as add_bos_token), config.json and the weights."""
    import json
    from pathlib import Path

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    save_spm_tokenizer(out, train_texts, vocab_size, add_bos)
    tok = AutoTokenizer.from_pretrained(out)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=1, eos_token_id=2, rms_norm_eps=1e-5, tie_word_embeddings=False))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batches = [torch.tensor([[1, *tok(t, add_special_tokens=False)["input_ids"][:200]]])
               for t in train_texts]
    for step in range(steps):
        ids = batches[step % len(batches)]  # [1, T]
        model(ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval().save_pretrained(out)
    (out / "pddkit-test.json").write_text(json.dumps({"steps": steps, "texts": len(train_texts)}))
    return out


def save_spm_tokenizer(out, texts, vocab_size: int, add_bos: bool = True):
    """A SentencePiece BPE model trained on `texts` (Llama's layout: <unk> 0, <s> 1, </s> 2,
    byte fallback) as tokenizer.model with a LlamaTokenizer config, in folder `out`."""
    import json
    import tempfile
    from pathlib import Path

    import sentencepiece as spm

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(texts), encoding="utf-8")
        spm.SentencePieceTrainer.train(
            input=str(corpus), model_prefix=str(Path(tmp) / "tokenizer"), vocab_size=vocab_size,
            model_type="bpe", byte_fallback=True, character_coverage=1.0, unk_id=0, bos_id=1,
            eos_id=2, pad_id=-1, add_dummy_prefix=True, normalization_rule_name="identity",
            remove_extra_whitespaces=False, num_threads=1, minloglevel=2)
        (out / "tokenizer.model").write_bytes((Path(tmp) / "tokenizer.model").read_bytes())
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": add_bos, "add_eos_token": False,
        "legacy": False, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}))
    return out
