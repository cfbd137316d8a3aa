"""Model families beyond GPT-2 (GPT-NeoX, Llama, OPT), tiny and random: the statistics
pass equals a full-softmax computation from the model's own logits, batched with padding
on either side, and the probe reads every layer through the standard hidden states and
fine-tunes a proxy, with no family-specific code."""

import numpy as np
import pytest
import torch
from rounding import ROUNDING_FACTOR, float64_default, forward_bounds

from pddkit.backends.hf_loading import load_model
from pddkit.backends.stats_pass import StatsRunner
from pddkit.resources.probe import activations, fine_tune_proxy, probe_scores, train_probes

D, LAYERS, HEADS, FFN = 32, 2, 4, 64


def _config(family: str, vocab: int, tok):
    from transformers import GPTNeoXConfig, LlamaConfig, OPTConfig

    ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
           "pad_token_id": tok.pad_token_id}
    if family == "gpt_neox":
        return GPTNeoXConfig(vocab_size=vocab, hidden_size=D, num_hidden_layers=LAYERS,
                             num_attention_heads=HEADS, intermediate_size=FFN,
                             max_position_embeddings=512, **ids)
    if family == "llama":
        return LlamaConfig(vocab_size=vocab, hidden_size=D, num_hidden_layers=LAYERS,
                           num_attention_heads=HEADS, num_key_value_heads=2, intermediate_size=FFN,
                           max_position_embeddings=512, **ids)
    return OPTConfig(vocab_size=vocab, hidden_size=D, num_hidden_layers=LAYERS,
                     num_attention_heads=HEADS, ffn_dim=FFN, word_embed_proj_dim=D,
                     max_position_embeddings=512, **ids)


@pytest.fixture(scope="module", params=["gpt_neox", "llama", "opt"])
def family_lm(request, toy_world, tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(toy_world.target_dir)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_config(request.param, len(tok), tok))
    assert model.config.model_type == request.param
    out = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return load_model(str(out), device="cpu", dtype="float32")


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_statistics_equal_the_models_own_logits(family_lm, toy_world, padding_side):
    """Against the model's own forward with weights and softmax in float64: within the
    float32 rounding measured on these texts (tests/rounding.py)."""
    texts = [toy_world.members[0], toy_world.nonmembers[1][:80], toy_world.pool[2][:30]]
    runner = StatsRunner(family_lm, batch_size=3, padding_side=padding_side)
    stats = runner.run(texts)
    assert runner.body is not None  # the body + head split reproduced the logits
    exact, bound = forward_bounds(family_lm.model, family_lm.tokenizer.bos_token_id,
                                  [s.ids.tolist() for s in stats])
    for s, e in zip(stats, exact):
        assert np.all(np.abs(s.L - e.L) <= bound.L)
        assert np.all(np.abs(s.H - e.H) <= bound.H)
        assert np.all(np.abs(s.var - e.var) <= bound.var_rel * e.var)


def _hidden_rounding(model, tok, text: str) -> float:
    """4 x the largest distance of the model's float32 hidden states (every layer, every
    position) from its float64 ones on the probe's prompt of `text` (tests/rounding.py's
    rule, for activations)."""
    import copy

    from pddkit.resources.probe.features import encode_prompts

    ids, _ = encode_prompts(model, tok, [text], "model")
    x = {"input_ids": torch.tensor([list(ids[0])])}
    with torch.no_grad():
        h32 = model(**x, output_hidden_states=True).hidden_states
        with float64_default():
            h64 = copy.deepcopy(model).double()(**x, output_hidden_states=True).hidden_states
    return ROUNDING_FACTOR * max(float((a.double() - b).abs().max()) for a, b in zip(h32, h64))


def test_probe_reads_every_layer_and_trains_a_proxy(family_lm, toy_world):
    model, tok = family_lm.model, family_lm.tokenizer
    X = activations(model, tok, toy_world.members[:4], batch_size=2)  # [4, layers + 1, d]
    assert X.shape == (4, LAYERS + 1, D) and np.isfinite(X).all()
    single = activations(model, tok, toy_world.members[:1], batch_size=1)
    # right padding changes nothing: two float32 computations of one text's activations
    # (another batch shape), each a mean over positions of hidden states, so within the
    # float32 rounding of the hidden states themselves
    bound = _hidden_rounding(model, tok, toy_world.members[0])
    assert np.all(np.abs(X[0] - single[0]) <= bound)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    proxy = fine_tune_proxy(model, tok, toy_world.pool[:4], lr=1e-3)
    assert any(not torch.equal(v, before[k]) for k, v in proxy.state_dict().items())
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    search = train_probes(model, tok, toy_world.pool[:12], lrs=(1e-3,), batch_size=4)
    assert [p.layer_ for p in search.probes] == list(range(1, LAYERS + 1))
    scores, cut = probe_scores(model, tok, toy_world.nonmembers[:5], search.probes, batch_size=2)
    assert scores.shape == (5, LAYERS) and np.isfinite(scores).all() and cut == 0


def _takes_positions(backend) -> bool:
    import inspect

    body = backend.runner.body if backend.runner.body is not None else backend.lm.model
    return "position_ids" in inspect.signature(body.forward).parameters


@pytest.mark.slow
def test_infill_shares_each_texts_key_value_cache_and_equals_the_plain_pass(family_lm):
    """backends/infill_windows.py: every variant's statistics from the text's cache (rows of
    one batch starting at different positions) equal a plain pass over the variant."""
    from pddkit.backends.hf import HFBackend
    from pddkit.engine.infill_pass import variants

    backend = HFBackend(family_lm, batch_size=3)
    texts = ["the cat sat on the mat and looked at the dog", "a dog ran after the cat"]
    bases = backend.stats_for_ids(backend.encode(texts, ["a", "b"]).ids, [False, False])
    rows = [variants(b.ids, b.top, 3) for b in bases]
    assert all(len(r) > 3 for r in rows)
    got = backend.infill_stats(bases, rows)
    # shared where the model's forward takes position ids (transformers 4.4x's OPT does not:
    # it runs every variant in full, with a warning)
    assert backend._shared_cache is _takes_positions(backend)
    seqs = [list(seq) for r in rows for _, seq in r]
    want = backend.runner.run_ids(seqs)
    # two float32 computations of each variant (its window from the cache, or all of it):
    # within the float32 rounding measured on the variants (tests/rounding.py)
    exact, bound = forward_bounds(family_lm.model, backend.runner.start_id, seqs)
    for g, w, e in zip([s for per in got for s in per], want, exact):
        np.testing.assert_array_equal(g.ids, w.ids)
        assert np.all(np.abs(g.L - w.L) <= bound.L)
        assert np.all(np.abs(g.H - w.H) <= bound.H)
        assert np.all(np.abs(g.var - w.var) <= bound.var_rel * e.var)
        np.testing.assert_array_equal(g.top, w.top)


@pytest.mark.slow
def test_recall_shares_the_prefix_cache_and_equals_the_plain_pass(family_lm):
    """backends/prefix_pass.py: the shots' cache expanded across a batch of texts gives the
    plain pass over [start] + P + x."""
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.prefix_pass import plain_prefix_stats

    backend = HFBackend(family_lm, batch_size=3)
    texts = ["the cat sat on the mat", "a dog ran after the cat and the mat", "cats"]
    enc = backend.encode(texts, ["a", "b", "c"])
    prefix = backend.tokenize("some shot text. another shot here.")
    got = backend.stats_given_prefix(prefix, enc.ids, enc.truncated)
    assert backend._shared_prefix is _takes_positions(backend)  # as for infill above
    want = plain_prefix_stats(backend.runner, prefix, enc.ids, enc.truncated)
    # two float32 computations of [start] + P + x (the prefix's cache shared, or run with
    # each text): within the float32 rounding measured on them (tests/rounding.py)
    _, bound = forward_bounds(family_lm.model, backend.runner.start_id,
                              [[*prefix, *ids] for ids in enc.ids])
    for g, w in zip(got, want):
        assert np.all(np.abs(g.L - w.L) <= bound.L)
        assert np.all(np.abs(g.H - w.H) <= bound.H)
