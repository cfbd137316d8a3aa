"""`ref:form=ratio` (Carlini et al.'s ratio of log-perplexities) and the default difference,
against a plain float64 forward pass of the toy world's target and reference models."""

import numpy as np
import pytest
import torch

import pddkit


def mean_log_prob(model_dir, text) -> float:
    """SPEC 2 written out: start token, no special tokens, float64 log-softmax."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    ids = tok(text, add_special_tokens=False)["input_ids"]
    start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([[start, *ids]])).logits[0, :-1].double(), -1)
    return float(logp[torch.arange(len(ids)), torch.tensor(ids)].mean())


@pytest.mark.slow
def test_ref_forms_match_a_plain_forward(toy_world):
    texts = toy_world.members[:3] + toy_world.nonmembers[:3]
    got = pddkit.score(texts, str(toy_world.target_dir), "ref:form=difference,ref:form=ratio",
                       ref_model=str(toy_world.ref_dir), device="cpu", dtype="float32")
    target = np.array([mean_log_prob(toy_world.target_dir, t) for t in texts])
    ref = np.array([mean_log_prob(toy_world.ref_dir, t) for t in texts])
    # pddkit's log-softmax is float32: each mean is within ~1e-6 relative of the float64 one
    # (a few ulp of values up to ~10 nats, averaged); a ratio or difference of two such means
    # is within twice that, so rel=1e-5 leaves a margin of 5
    assert got["ref:form=difference"] == pytest.approx(target - ref, rel=1e-5, abs=1e-6)
    assert got["ref:form=ratio"] == pytest.approx(ref / target, rel=1e-5)
    # the toy target was trained on the members: its loss is lower on them, so the ratio
    # log PPL_ref / log PPL_target is larger for every member than for every non-member
    assert got["ref:form=ratio"][:3].min() > got["ref:form=ratio"][3:].max()
