"""`traps generate` (studies/traps/generate.py): exact token lengths after retokenization,
the Jaccard bound on every pair, bucket counts, member / held-out halves, seeded
determinism, perplexity equal to a teacher-forced pass, the unreachable-count sentence.
Fast tests use a hand-made word-level tokenizer and a bigram "causal LM"; the slow one
samples from the toy GPT-2 trained on Gutenberg text."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import pytest
from rounding import EPS32, forward_bounds

from pddkit.errors import PddkitError
from pddkit.studies.traps.folder import HELD_OUT, MEMBER, read_folder
from pddkit.studies.traps.generate import (
    DEFAULT_TEMPERATURES,
    bucket_edges,
    bucket_of,
    check_generate_options,
    generate_traps,
    jaccard_similarity,
)

WORDS = ["<|endoftext|>", "<unk>", "x", "y", ".", "x.y"] + [f"w{i}" for i in range(34)]
SPLIT = WORDS.index("x.y")  # decodes to "x.y", which encodes to x . y: fails retokenization


def word_tokenizer(words=WORDS):
    """A word-level tokenizer: decode joins words with spaces, encode splits them again."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", unk_token="<unk>")


def bigram_model(vocab: int = len(WORDS), scale: float = 3.0, seed: int = 0):
    """A causal LM whose next-token logits depend on the last token only: a [V, V] table.
    Its "cache" is a token, so generate's cached path feeds one token per step."""
    import torch

    class Bigram(torch.nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(seed)
            self.table = torch.nn.Parameter(scale * torch.randn(vocab, vocab, generator=g))
            self.table.data[:, SPLIT] += 2.0  # often drawn, never kept
            self.config = SimpleNamespace(vocab_size=vocab)
            self.name_or_path = "bigram"

        def forward(self, input_ids, attention_mask=None, use_cache=None, past_key_values=None):
            assert attention_mask is not None and attention_mask.shape[1] == \
                input_ids.shape[1] + (0 if past_key_values is None else past_key_values)
            seen = input_ids.shape[1] + (past_key_values or 0)
            return SimpleNamespace(logits=self.table[input_ids], past_key_values=seen)

    return Bigram().eval()


def teacher_forced_ppl(model, start: int, ids) -> float:
    import torch

    x = torch.tensor([[start, *ids]])
    with torch.no_grad():
        logits = model(input_ids=x, attention_mask=torch.ones_like(x)).logits[0, :-1].float()
    nll = -torch.log_softmax(logits, -1).gather(1, x[0, 1:, None])[:, 0]
    return math.exp(float(nll.mean()))


OPTIONS = dict(lengths=[4, 6], count=8, ppl_range=(1.0, 41.0), buckets=4, jaccard=0.3,
               batch_size=32, max_tries=20_000)


@pytest.fixture(scope="module")
def made():
    tok, model = word_tokenizer(), bigram_model()
    return tok, model, generate_traps(model, tok, seed=3, **OPTIONS)


def test_bucket_edges_are_the_authors_integer_buckets():
    edges = bucket_edges((1, 101), 10)
    assert edges == [1 + 10 * i for i in range(11)]
    assert [bucket_of(p, edges) for p in (1.0, 10.999, 11.0, 55.5, 100.99)] == [0, 0, 1, 5, 9]
    assert bucket_of(0.999, edges) is None and bucket_of(101.0, edges) is None
    # gen_traps.py: int(ppl) in 1..100 grouped by np.array_split into ten runs of ten
    for p in (1.0, 1.5, 20.999, 21.0, 64.2, 99.9, 100.5):
        assert bucket_of(p, edges) == (int(p) - 1) // 10
    assert DEFAULT_TEMPERATURES[0] == 0.5 and DEFAULT_TEMPERATURES[-1] == 4.0
    assert len(DEFAULT_TEMPERATURES) == 15


@pytest.mark.parametrize("bad, words", [
    (dict(count=45), "`count` 45 is not a positive multiple of `buckets` 10"),
    (dict(count=5), "use 10"),
    (dict(lengths=[25, 25]), "names a length twice"),
    (dict(lengths=[0]), "at least 1"),
    (dict(ppl_range=(50, 10)), "`ppl_range` must be"),
    (dict(temperatures=[0.0, 1.0]), "`temperatures` must be positive"),
    (dict(jaccard=1.5), "`jaccard`"),
    (dict(max_tries=0), "`max_tries`"),
])
def test_bad_options_are_one_sentence(bad, words):
    with pytest.raises(PddkitError, match=words) as e:
        check_generate_options(**{"lengths": [25], "count": 40, **bad})
    assert "\n" not in str(e.value)


def test_exact_lengths_jaccard_buckets_and_halves(made):
    tok, _, folder = made
    traps = folder.traps
    edges = folder.manifest["bucket_edges"]
    assert edges == bucket_edges((1.0, 41.0), 4)
    for length in (4, 6):
        mine = [t for t in traps if t.length == length]
        assert len(mine) == 8
        for b in range(4):
            cell = [t for t in mine if t.bucket == b]
            assert len(cell) == 2  # count / buckets
            assert sorted(t.role for t in cell) == [HELD_OUT, MEMBER]
    for t in traps:
        assert len(t.token_ids) == t.length  # exact, after retokenization:
        assert tok(t.text, add_special_tokens=False)["input_ids"] == list(t.token_ids)
        assert tok.decode(list(t.token_ids), clean_up_tokenization_spaces=False) == t.text
        assert bucket_of(t.perplexity, edges) == t.bucket
        assert SPLIT not in t.token_ids and 0 not in t.token_ids  # never kept / never drawn
        assert t.temperature in DEFAULT_TEMPERATURES
    for a, b in itertools.combinations(traps, 2):  # every pair, across lengths too
        assert jaccard_similarity(a.token_ids, b.token_ids) <= 0.3
    assert len({t.id for t in traps}) == len(traps)


def test_counts_account_for_every_sample(made):
    from pddkit.cache.fingerprint import tokenizer_digest

    tok, _, folder = made
    m = folder.manifest
    assert m["model"] == "bigram" and m["tokenizer"]["vocab_size"] == len(WORDS)
    assert m["tokenizer"]["fingerprint"] == tokenizer_digest(tok) == folder.tokenizer_fingerprint
    assert m["options"]["lengths"] == [4, 6] and m["options"]["jaccard"] == 0.3
    assert set(m["counts"]) == {"4", "6"}
    for c in m["counts"].values():
        assert c["kept"] == 8 and c["kept_per_bucket"] == [2, 2, 2, 2]
        assert c["members"] == c["held_out"] == 4
        assert c["sampled"] == c["kept"] + sum(v for k, v in c.items() if k.startswith("rejected"))
        assert c["rejected_retokenization"] > 0  # "x.y" is drawn often
        assert c["rejected_jaccard"] > 0  # a 40-word vocabulary repeats itself


def test_perplexity_is_the_teacher_forced_one(made):
    _, model, folder = made
    # the same table logits and float32 log-softmax both ways; the NLLs summed in float32 in
    # another order (at most 6 of them, mean at most ln 41 = 3.7) and exp'd in float32:
    # relative (6 x 3.7 + 4) x 1.2e-7 = 3e-6 at most, 1e-5 said
    for t in folder.traps:
        assert t.perplexity == pytest.approx(teacher_forced_ppl(model, 0, t.token_ids), rel=1e-5)


def test_seeded_and_written_folder_reads_back(made, tmp_path):
    tok, model, folder = made
    again = generate_traps(model, tok, seed=3, **OPTIONS)
    assert again.traps == folder.traps
    other = generate_traps(model, tok, seed=4, **OPTIONS)
    assert [t.token_ids for t in other.traps] != [t.token_ids for t in folder.traps]
    back = read_folder(folder.write(tmp_path / "traps"))
    assert back.traps == folder.traps and back.manifest == folder.manifest
    assert not back.insertions


def test_odd_cells_alternate_the_extra_member():
    tok, model = word_tokenizer(), bigram_model()
    folder = generate_traps(model, tok, lengths=[4], count=4, ppl_range=(1.0, 41.0), buckets=4,
                            jaccard=0.5, batch_size=32)
    assert [t.role for t in sorted(folder.traps, key=lambda t: t.bucket)] == \
        [MEMBER, HELD_OUT, MEMBER, HELD_OUT]


def test_unreachable_range_is_one_sentence_with_what_was_reached():
    tok, model = word_tokenizer(), bigram_model()
    with pytest.raises(PddkitError) as e:
        generate_traps(model, tok, lengths=[4], count=4, ppl_range=(1.0, 2.0), buckets=2,
                       temperatures=(2.0,), batch_size=16, max_tries=64)
    msg = str(e.value)
    assert msg.startswith("length 4: 0 of 4 traps after 64 samples (")
    assert "buckets 0 (1-1.5) got 0, 1 (1.5-2) got 0 of 2 each" in msg
    assert "perplexities " in msg and "`temperatures`" in msg and "\n" not in msg


def test_toy_lm_traps_are_exact_and_seeded(toy_lm):
    """The real thing: byte-level BPE (retokenization rejects many samples) and GPT-2's
    key/value cache; the perplexity is what a full forward pass gives."""
    tok, model = toy_lm.tokenizer, toy_lm.model
    kw = dict(lengths=[8, 16], count=8, ppl_range=(20.0, 220.0), buckets=4, batch_size=32,
              max_tries=20_000, seed=1)
    folder = generate_traps(model, tok, **kw)
    # exp(mean NLL) from the sampling pass (cache, batches of 32) and a plain forward: the
    # mean NLL moves by at most the float32 rounding of L measured on the trap
    # (tests/rounding.py), exp by 1.01 x that relative (below 0.01), plus the float32 sum
    # of at most 16 NLLs of mean ln 220 and the float32 exp, (16 x 5.4 + 4) x EPS32
    _, bound = forward_bounds(model, tok.bos_token_id, [list(t.token_ids) for t in folder.traps])
    rel = 1.01 * bound.L + (16 * math.log(220.0) + 4) * EPS32
    for t in folder.traps:
        assert tok(t.text, add_special_tokens=False)["input_ids"] == list(t.token_ids)
        assert len(t.token_ids) == t.length
        assert t.perplexity == pytest.approx(
            teacher_forced_ppl(model, tok.bos_token_id, t.token_ids), rel=rel)
    for a, b in itertools.combinations(folder.traps, 2):
        assert jaccard_similarity(a.token_ids, b.token_ids) <= 0.2
    counts = folder.manifest["counts"]
    assert [counts[k]["kept_per_bucket"] for k in ("8", "16")] == [[2, 2, 2, 2]] * 2
    assert counts["16"]["rejected_retokenization"] > 0
    assert generate_traps(model, tok, **kw).traps == folder.traps
