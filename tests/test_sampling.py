"""pddkit's sampling loop (backends/sampling.py, `samia`) against transformers' own
`generate(do_sample=True, top_k=..., top_p=..., temperature=...)`.

Both consume random numbers the same way: one `torch.multinomial(probs, 1)` per step over
the [n, V] probabilities of all n rows (finished rows included), from a CPU Mersenne
Twister seeded with the same seed (pddkit's own torch.Generator, generate's global one).
So with one seed the two draw the same tokens, as long as their probabilities agree: the
filtered distributions are checked for exact equality with transformers' logits
processors, and the drawn tokens for equality with generate's. (generate runs the prompt
on n rows, pddkit once with its cache expanded: their logits may differ in the last float32
bit, which changes a draw only if its uniform number falls within that of a boundary of
the cumulative distribution, about 1e-7 per draw.)
"""

import pytest
import torch
from tiny_models import save_tiny_gpt2

from pddkit.backends import sampling
from pddkit.backends.sampling import sample_ids

pytestmark = pytest.mark.slow  # a model built and sampled from, generate run: seconds

PROMPT = [0, 5, 17, 42, 99, 7]  # [start] + prompt ids (token 0: the start and end token)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(save_tiny_gpt2(tmp_path_factory.mktemp("gpt2")))
    with torch.no_grad():  # a peaked model: logits spread over tens, not a near-uniform draw
        m.lm_head.weight.mul_(40.0)
    return m.eval()


def _processors(top_k: int, top_p: float, temperature: float):
    from transformers import (
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    # the order generate applies them in (GenerationMixin._get_logits_processor)
    out = [TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k)]
    if top_p < 1.0:
        out.append(TopPLogitsWarper(top_p))
    return LogitsProcessorList(out)


@pytest.mark.parametrize("top_k,top_p,temperature", [(5, 1.0, 0.7), (40, 0.8, 1.3), (1, 1.0, 1.0)])
def test_the_filtered_distributions_are_transformers_exactly(model, monkeypatch, top_k, top_p,
                                                             temperature):
    """Every step's probabilities, as pddkit hands them to multinomial, equal softmax of
    transformers' temperature, top-k and top-p processors on the same logits, bit for bit
    (the same float32 operations in the same order)."""
    seen = []
    real = sampling._draw

    def spy(logits, k, p, t, generator):
        seen.append(logits.clone())
        return real(logits, k, p, t, generator)

    monkeypatch.setattr(sampling, "_draw", spy)
    captured = []
    multinomial = torch.multinomial

    def record(probs, n, generator=None):
        captured.append(probs.clone())
        return multinomial(probs, n, generator=generator)

    monkeypatch.setattr(torch, "multinomial", record)
    sample_ids(model, PROMPT, 3, top_k=top_k, top_p=top_p, temperature=temperature,
               max_new=6, seed=11, end_ids=set())
    assert len(seen) == len(captured) == 6
    procs = _processors(top_k, top_p, temperature)
    for logits, probs in zip(seen, captured):
        want = torch.softmax(procs(None, logits.clone()), -1)
        assert torch.equal(probs, want)
        assert int((probs > 0).sum(-1).max()) <= top_k


@pytest.mark.parametrize("top_k,top_p,temperature,seed", [(5, 1.0, 0.7, 3), (40, 0.8, 1.3, 8),
                                                          (300, 1.0, 1.0, 21)])
def test_the_same_seed_draws_the_same_tokens_as_generate(model, top_k, top_p, temperature, seed):
    n, new = 4, 16
    ours = sample_ids(model, PROMPT, n, top_k=top_k, top_p=top_p, temperature=temperature,
                      max_new=new, seed=seed, end_ids={0})
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), attention_mask=torch.ones(1, len(PROMPT),
                                                                               dtype=torch.long),
                             do_sample=True, top_k=top_k, top_p=top_p, temperature=temperature,
                             num_return_sequences=n, max_new_tokens=new, min_new_tokens=0,
                             eos_token_id=0, pad_token_id=0)
    theirs = []
    for row in out[:, len(PROMPT):].tolist():
        cut = row.index(0) if 0 in row else len(row)  # generate pads a finished row with 0
        theirs.append(row[:cut])
    assert ours == theirs
    assert len(set(map(tuple, ours))) > 1  # the rows are draws, not one path copied


def test_another_seed_draws_other_tokens(model):
    a = sample_ids(model, PROMPT, 4, top_k=40, top_p=1.0, temperature=1.0, max_new=16,
                   seed=1, end_ids=set())
    b = sample_ids(model, PROMPT, 4, top_k=40, top_p=1.0, temperature=1.0, max_new=16,
                   seed=2, end_ids=set())
    assert a != b


def _generated(model, prompt, n, top_k, top_p, temperature, new, seed, ends):
    """One prompt's rows as transformers' generate draws them alone (the global generator
    seeded with `seed`), cut at the first end token."""
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt),
                                                                                 dtype=torch.long),
                             do_sample=True, top_k=top_k, top_p=top_p, temperature=temperature,
                             num_return_sequences=n, max_new_tokens=new, min_new_tokens=0,
                             eos_token_id=sorted(ends), pad_token_id=sorted(ends)[0])
    rows = []
    for row in out[:, len(prompt):].tolist():
        rows.append(row[:next((i for i, t in enumerate(row) if t in ends), len(row))])
    return rows


@pytest.mark.parametrize("top_k,top_p,temperature", [(5, 1.0, 0.7), (0, 0.95, 1.0), (40, 0.8, 1.3)])
def test_texts_decoded_together_draw_what_each_draws_alone(model, top_k, top_p, temperature):
    """Several prompts of different lengths (left-padded in one batch), budgets and seeds,
    decoded together by `sample_many`, draw token for token what generate draws for each
    prompt alone with its seed; a prompt whose rows all end at once leaves the batch while
    the others go on, one with no budget is never sampled."""
    from pddkit.backends.sampling import sample_many

    prompts = [PROMPT, [0, 3], [0, *range(11, 22)], [0, 250, 251, 9], [0, *range(60, 67)], [0, 8]]
    budgets = [16, 16, 9, 20, 16, 0]
    seeds = [3, 4, 5, 6, 7, 8]
    ends = {7, 118}  # token 7: the peaked model's first draw after PROMPT; 118: now and then
    n = 4
    together = sample_many(model, prompts, n, top_k=top_k, top_p=top_p, temperature=temperature,
                           max_new=budgets, seeds=seeds, end_ids=ends)
    alone = [_generated(model, p, n, top_k, top_p, temperature, b, s, ends) if b else [[]] * n
             for p, b, s in zip(prompts, budgets, seeds)]
    assert together == alone
    lengths = [[len(r) for r in rows] for rows in together]
    assert lengths[0] == [0] * n  # ended at the first step: left the batch at once
    assert lengths[2] == [9] * n and lengths[3] == [20] * n  # each its own budget
    assert lengths[5] == [0] * n
    assert len({len(p) for p in prompts[:5]}) == 5  # the sampled prompts padded differently
