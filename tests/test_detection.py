"""A tiny GPT-2 trained on member paragraphs: methods must separate members from
held-out non-members (ground truth by construction)."""

import numpy as np
import pytest

import pddkit


def _hidden_rounding(model, tok, texts) -> float:
    """4 x the largest distance of the model's float32 hidden states (every layer and
    position of the probe's prompts) from its float64 ones (tests/rounding.py's rule)."""
    import copy

    import torch
    from rounding import ROUNDING_FACTOR, float64_default

    from pddkit.resources.probe.features import encode_prompts

    m64 = copy.deepcopy(model).double()
    worst = 0.0
    for ids in encode_prompts(model, tok, texts, "model")[0]:
        x = torch.tensor([list(ids)])
        with torch.no_grad():
            h32 = model(input_ids=x, output_hidden_states=True).hidden_states
            with float64_default():
                h64 = m64(input_ids=x, output_hidden_states=True).hidden_states
        worst = max(worst, max(float((a.double() - b).abs().max()) for a, b in zip(h32, h64)))
    return ROUNDING_FACTOR * worst


@pytest.fixture(scope="module")
def result(toy_world, toy_lm):
    texts = toy_world.members + toy_world.nonmembers
    labels = [1] * len(toy_world.members) + [0] * len(toy_world.nonmembers)
    return pddkit.evaluate(texts, labels, model=toy_lm, methods="all",
                           ref_model=str(toy_world.ref_dir), freq=str(toy_world.freq_path),
                           n_bootstrap=200)


@pytest.mark.parametrize("name", ["loss", "mink", "surp", "gapk"])
def test_separates_members(result, name):
    m = result.metrics()[name]
    assert m.auc > 0.8, (name, m.auc)
    assert m.auc_ci.low > 0.5


def test_all_ten_methods_ran(result):
    assert set(result.scores()) == {"loss", "zlib", "lowercase", "ref", "mink", "maxk", "minkpp",
                                    "gapk", "surp", "dcpdd", "blind"}
    # one author on both sides: chance, sampling error not rounding: the AUC of 60 against
    # 60 under no difference has standard deviation sqrt(121 / (12 x 60 x 60)) = 0.053, and
    # 0.2 is 3.8 of them
    assert abs(result.metrics()["blind"].auc - 0.5) < 0.2


def test_score_api_returns_one_array_per_method(toy_world, toy_lm):
    out = pddkit.score(toy_world.members[:4], model=toy_lm, methods="loss,mink:k=0.5")
    assert set(out) == {"loss", "mink"} and all(v.shape == (4,) for v in out.values())


def test_python_api_runs_neighbor_probe_and_validation(toy_world, toy_lm, mask_model_dir, tmp_path):
    """The Python API takes the options of `pddkit run` that the two extra methods and
    validated hyperparameters need, as explicit keyword arguments."""
    import json

    aux = tmp_path / "aux.jsonl"
    aux.write_text("".join(json.dumps({"text": t}) + "\n" for t in toy_world.pool[:20]))
    texts = toy_world.members[:20] + toy_world.nonmembers[:20]
    labels = [1] * 20 + [0] * 20
    res = pddkit.evaluate(texts, labels, model=toy_lm, methods="loss,mink,neighbor:n_neighbors=4,probe",
                          mask_model=str(mask_model_dir), probe_data=str(aux), probe_lrs=(1e-3,),
                          val_fraction=0.25, n_bootstrap=20, blind=False,
                          probe_standardize="train")
    assert set(res.scores()) == {"loss", "mink", "neighbor", "probe"}
    assert res.splits.count("val") == 10 and set(res.validation) == {"mink", "probe"}
    m = res.metrics()["neighbor"]
    assert (m.n_members, m.n_nonmembers) == (15, 15)  # metrics on the test part only
    (nbs,) = res.neighbors.texts.values()  # one parameter set
    assert len(nbs) == 40 and all(len(nb) == 4 for nb in nbs)
    assert res.probe.layer_ in range(1, toy_lm.model.config.n_layer + 1)
    saved = res.probe.save(tmp_path / "probe")
    again = pddkit.score(texts[:6], model=toy_lm, methods="probe", probe_load=str(saved),
                         probe_standardize="train")  # a text's score independent of the others
    # the same texts' activations in another batch: float32 rounding of the hidden states
    # (measured against float64, times 4: tests/rounding.py's rule), through the probe's
    # member probability sigmoid(sum_j w_j (h_j - mu_j) / s_j + b), whose slope is at most
    # 1/4 sum_j |w_j| / s_j
    slope = 0.25 * float(np.sum(np.abs(res.probe.coef_) / res.probe.scale_))
    bound = slope * _hidden_rounding(toy_lm.model, toy_lm.tokenizer, texts[:6])
    assert np.all(np.abs(again["probe"] - res.scores()["probe"][:6]) <= bound)
