"""SPEC section 2 on the edges: the start token is BOS, else EOS (tokenizers with BOS != EOS
and with no BOS), and a bf16 model's statistics are a float32 softmax of its own logits."""

import numpy as np
import pytest
import torch
from rounding import forward_bounds

from pddkit.backends.hf_loading import load_model
from pddkit.backends.hf_tokenizers import start_token_id
from pddkit.backends.stats_pass import StatsRunner
from pddkit.errors import PddkitError

TEXTS = ["It was a dark and stormy night; the rain fell in torrents.",
         "Mr. Holmes sat in his chair and smoked his pipe in silence."]


def reference_stats(lm, ids: list[int], start: int):
    """The model's own logits for [start, ids], softmax in float64: (L, H)."""
    x = torch.tensor([[start, *ids]])
    with torch.inference_mode():
        logits = lm.model(input_ids=x, attention_mask=torch.ones_like(x)).logits[0, :-1]  # [n, V]
    logp = torch.log_softmax(logits.double(), -1)
    p = logp.exp()
    L = logp[torch.arange(len(ids)), torch.tensor(ids)].numpy()
    return L, (-(p * logp).sum(-1)).numpy(), logits


def _model_with(tok, out):
    """A tiny random GPT-2 sized to `tok`, saved with it; loaded the way users load models."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=32, n_layer=1,
                                       n_head=2, bos_token_id=tok.bos_token_id,
                                       eos_token_id=tok.eos_token_id))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return load_model(str(out), device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def bos_ne_eos(toy_world, tmp_path_factory):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(toy_world.target_dir)
    tok.add_special_tokens({"bos_token": "<s>"})  # BOS is new; EOS stays <|endoftext|>
    return _model_with(tok, tmp_path_factory.mktemp("bos-ne-eos"))


@pytest.fixture(scope="module")
def no_bos(toy_world, tmp_path_factory):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(toy_world.target_dir)
    tok.add_special_tokens({"eos_token": "</s>"})
    tok.bos_token = None
    return _model_with(tok, tmp_path_factory.mktemp("no-bos"))


@pytest.mark.slow  # its fixtures (chosen by `which`) need the trained toy world
@pytest.mark.parametrize("which", ["bos_ne_eos", "no_bos"])
def test_the_start_token_is_bos_else_eos(which, request):
    lm = request.getfixturevalue(which)
    bos, eos = lm.tokenizer.bos_token_id, lm.tokenizer.eos_token_id
    if which == "bos_ne_eos":
        assert bos is not None and eos is not None and bos != eos
        want, other = bos, eos
    else:
        assert bos is None and eos is not None
        want, other = eos, lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert want != other and start_token_id(lm.tokenizer) == want
    stats = StatsRunner(lm, batch_size=2).run(TEXTS)
    # against the model's own forward in float64 from `want`: within the float32 rounding
    # measured on these texts (tests/rounding.py)
    exact, bound = forward_bounds(lm.model, want, [st.ids.tolist() for st in stats])
    for st, e in zip(stats, exact):
        assert np.all(np.abs(st.L - e.L) <= bound.L)
        assert np.all(np.abs(st.H - e.H) <= bound.H)
        L_other, _, _ = reference_stats(lm, st.ids.tolist(), other)
        # the first token's context is the start token: another one moves its L by more
        # than rounding could (ten times the bound)
        assert abs(st.L[0] - L_other[0]) > 10 * bound.L


def test_a_tokenizer_with_neither_bos_nor_eos_is_one_sentence(toy_world):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(toy_world.target_dir)
    tok.bos_token = None
    tok.eos_token = None
    with pytest.raises(PddkitError, match="neither a BOS nor an EOS token"):
        start_token_id(tok, "m")


def softmax_rounding(logits: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per position, how far a float32 log-softmax (and entropy) of `logits` may lie from
    the float64 one, first order: log p_v = x_v - m - log(sum exp(x - m)) rounds by at most
    E = 4 EPS32 (max |x - m| + ln V) (two subtractions, each relative to a result no larger
    than |x - m| + ln V, and the log-sum, with a factor 2 to spare); H = -sum p log p moves
    by at most E (1 + max |log p|) from those, plus EPS32 log2(V) H for the cascade sum."""
    x = logits.double()
    V, eps = x.shape[-1], float(np.finfo(np.float32).eps)
    spread = (x.max(-1).values - x.min(-1).values).numpy()
    E = 4 * eps * (spread + np.log(V))
    logp = torch.log_softmax(x, -1)
    H = (-(logp.exp() * logp).sum(-1)).numpy()
    return E, E * (1 + spread + np.log(V)) + eps * np.log2(V) * H


def test_bf16_model_statistics_are_a_float32_softmax_of_its_logits(toy_world):
    """Against a float64 softmax of the bf16 model's own logits (the same bf16 arithmetic,
    one text a batch, so the same logits): within float32 softmax rounding (about 1e-5 here);
    a softmax run in bf16 misses it by three orders of magnitude (measured: L off by
    ~0.025, H by ~0.05 on this model), so this test fails if the cast is lost."""
    lm = load_model(str(toy_world.target_dir), device="cpu", dtype="bfloat16")
    assert lm.model.dtype == torch.bfloat16
    start = start_token_id(lm.tokenizer)
    for st in StatsRunner(lm, batch_size=1).run(TEXTS):
        ids = st.ids.tolist()
        L, H, logits = reference_stats(lm, ids, start)
        assert logits.dtype == torch.bfloat16
        assert st.L.dtype == np.float32
        bound_L, bound_H = softmax_rounding(logits)
        assert np.all(np.abs(st.L - L) <= bound_L) and np.all(np.abs(st.H - H) <= bound_H)
        low = torch.log_softmax(logits, -1)  # what a bf16 softmax would give
        L_bf16 = low[torch.arange(len(ids)), torch.tensor(ids)].double().numpy()
        H_bf16 = (-(low.exp() * low).sum(-1)).double().numpy()
        # bf16 keeps 8 bits: its softmax is off by ~2^-8 of |log p|, a hundred times the bound
        assert np.abs(L_bf16 - L).max() > 100 * bound_L.max()
        assert np.abs(H_bf16 - H).max() > 100 * bound_H.max()
