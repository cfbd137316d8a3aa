"""The probe: proxy fine-tuning changes weights, standardisation uses training rows only,
a saved probe reloads to identical scores, end to end through `pddkit run`."""

import json

import numpy as np
import pytest
import torch

from pddkit.cli import main
from pddkit.errors import PddkitError
from pddkit.runner.probe import LinearProbe, activations, fine_tune_proxy, train_probe


def test_proxy_fine_tuning_changes_the_weights_and_not_the_target(toy_lm, toy_world):
    before = {k: v.clone() for k, v in toy_lm.model.state_dict().items()}
    proxy = fine_tune_proxy(toy_lm.model, toy_lm.tokenizer, toy_world.pool[:8], lr=1e-3)
    changed = [k for k, v in proxy.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) > 10
    assert all(torch.equal(v, before[k]) for k, v in toy_lm.model.state_dict().items())


def test_activations_every_layer_last_token(toy_lm, toy_world):
    X = activations(toy_lm.model, toy_lm.tokenizer, toy_world.members[:5], batch_size=2)
    assert X.shape == (5, toy_lm.model.config.n_layer + 1, toy_lm.model.config.n_embd)
    one = activations(toy_lm.model, toy_lm.tokenizer, toy_world.members[:1], batch_size=1)
    np.testing.assert_allclose(X[0], one[0], atol=1e-4)  # padding does not change it
    only = activations(toy_lm.model, toy_lm.tokenizer, toy_world.members[:5], layer=1)
    np.testing.assert_allclose(only, X[:, 1], atol=1e-5)


def test_standardisation_uses_training_rows_only_and_reload_is_identical(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 3, 6))
    y = rng.integers(0, 2, 80)
    X[:, 2, 0] += 3 * y  # layer 2 carries the signal
    X_val = rng.standard_normal((40, 3, 6)) + 100.0  # a shifted validation set
    y_val = rng.integers(0, 2, 40)
    X_val[:, 2, 0] += 3 * y_val
    probe = LinearProbe().fit(X, y, X_val, y_val)
    assert probe.layer_ == 2
    np.testing.assert_allclose(probe.mean_, X[:, 2].mean(0))  # not the validation rows
    np.testing.assert_allclose(probe.scale_, X[:, 2].std(0) + 1e-6)
    saved = probe.save(tmp_path / "p")
    assert not any(f.suffix == ".pkl" for f in saved.iterdir())
    again = LinearProbe.load(saved)
    np.testing.assert_array_equal(again.predict_proba(X[:, 2]), probe.predict_proba(X[:, 2]))
    with pytest.raises(PddkitError, match="is not a saved probe"):
        LinearProbe.load(tmp_path)


def test_too_few_rows_and_wrong_width(toy_lm, toy_world):
    with pytest.raises(PddkitError, match="needs at least 10"):
        train_probe(toy_lm.model, toy_lm.tokenizer, toy_world.pool[:4])
    probe = LinearProbe()
    probe.coef_, probe.mean_, probe.scale_, probe.intercept_, probe.layer_ = (
        np.ones(7), np.zeros(7), np.ones(7), 0.0, 0)
    with pytest.raises(PddkitError, match="expects 7-wide activations"):
        probe.predict_proba(np.zeros((2, 64)))


def test_probe_end_to_end_and_reload(toy_world, tmp_path, capsys):
    aux = tmp_path / "aux.jsonl"
    aux.write_text("".join(json.dumps({"text": t}) + "\n" for t in toy_world.pool[:60]))
    args = ["run", "--model", str(toy_world.target_dir), "--data", str(toy_world.data_path),
            "--methods", "loss,probe", "--bootstrap", "50"]
    code = main([*args, "--probe-data", str(aux), "--probe-lrs", "1e-3,3e-3",
                 "--output", str(tmp_path / "a")])
    assert code == 0, capsys.readouterr().err
    meta = json.loads((tmp_path / "a" / "probe" / "probe.json").read_text())
    assert meta["lr_grid"] == [1e-3, 3e-3] and meta["proxy_lr"] in meta["lr_grid"]
    res = json.loads((tmp_path / "a" / "results.json").read_text())
    assert 0 <= res["methods"]["probe"]["metrics"]["auc"] <= 1
    code = main([*args, "--probe-load", str(tmp_path / "a" / "probe"), "--output",
                 str(tmp_path / "b")])
    assert code == 0, capsys.readouterr().err
    rows = [[json.loads(x)["probe"] for x in (tmp_path / d / "scores.jsonl").read_text().splitlines()]
            for d in ("a", "b")]
    np.testing.assert_allclose(rows[0], rows[1], rtol=1e-6)  # the reloaded probe scores alike
