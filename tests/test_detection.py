"""A tiny GPT-2 trained on member paragraphs: methods must separate members from
held-out non-members (ground truth by construction)."""

import pytest

import pddkit


@pytest.fixture(scope="module")
def result(toy_world, toy_lm):
    texts = toy_world.members + toy_world.nonmembers
    labels = [1] * len(toy_world.members) + [0] * len(toy_world.nonmembers)
    return pddkit.evaluate(texts, labels, model=toy_lm, methods="all",
                           ref_model=str(toy_world.ref_dir), freq=str(toy_world.freq_path),
                           n_bootstrap=200)


@pytest.mark.parametrize("name", ["loss", "mink", "surp"])
def test_separates_members(result, name):
    m = result.metrics()[name]
    assert m.auc > 0.8, (name, m.auc)
    assert m.auc_ci.low > 0.5


def test_all_eight_methods_ran(result):
    assert set(result.scores()) == {"loss", "zlib", "lowercase", "ref", "mink", "minkpp",
                                    "surp", "dcpdd", "blind"}
    assert abs(result.metrics()["blind"].auc - 0.5) < 0.2  # one author on both sides


def test_score_api_returns_one_array_per_method(toy_world, toy_lm):
    out = pddkit.score(toy_world.members[:4], model=toy_lm, methods="loss,mink:k=0.5")
    assert set(out) == {"loss", "mink"} and all(v.shape == (4,) for v in out.values())
