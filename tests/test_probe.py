"""The probe: proxy fine-tuning changes weights (full and LoRA) with float32 master
weights for a bfloat16 model, per-set and training-row standardisation, a saved probe
reloads to identical scores, the (proxy lr, layer) grid, the validated choice, and end to
end through `pddkit run`."""

import copy
import json

import numpy as np
import pytest
import torch

from pddkit.cli import main
from pddkit.errors import PddkitError
from pddkit.resources.probe import (
    PROMPT,
    LinearProbe,
    activations,
    encode_prompts,
    fine_tune_proxy,
    probe_scores,
    split_auxiliary,
    standardize_set,
    train_probes,
)


def test_proxy_fine_tuning_changes_the_weights_and_not_the_target(toy_lm, toy_world):
    before = {k: v.clone() for k, v in toy_lm.model.state_dict().items()}
    proxy = fine_tune_proxy(toy_lm.model, toy_lm.tokenizer, toy_world.pool[:8], lr=1e-3)
    changed = [k for k, v in proxy.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) > 10
    assert all(torch.equal(v, before[k]) for k, v in toy_lm.model.state_dict().items())


def test_bf16_model_proxy_update_equals_the_float32_one(toy_lm, toy_world):
    """Float32 master weights: fine-tuning a bfloat16 model's proxy moves the weights as
    fine-tuning the same weights in float32 does (relative error of the whole update below
    1e-3; 0 on the CPU, where both run the same float32 arithmetic). Pure-bfloat16 AdamW
    (the old path, `master_dtype=None`) breaks that bound by far: at lr 1e-4 most updates
    fall below half a bfloat16 step and are rounded away."""
    bf16 = copy.deepcopy(toy_lm.model).to(torch.bfloat16)
    f32 = copy.deepcopy(bf16).float()  # exactly the same starting weights
    start = {k: v.float() for k, v in f32.state_dict().items() if v.is_floating_point()}
    texts = toy_world.pool[:8]

    def update(master_dtype="float32", model=bf16):
        proxy = fine_tune_proxy(model, toy_lm.tokenizer, texts, lr=1e-4, master_dtype=master_dtype)
        return torch.cat([(v.float() - start[k]).flatten() for k, v in proxy.state_dict().items()
                          if k in start])  # [n_weights]

    ref = update(model=f32)
    new, old = update(), update(master_dtype=None)
    err_new = float((new - ref).norm() / ref.norm())
    err_old = float((old - ref).norm() / ref.norm())
    still_new, still_old = float((new == 0).float().mean()), float((old == 0).float().mean())
    numbers = (f"relative error {err_new:.3g} (pure bfloat16: {err_old:.3g}); weights unmoved "
               f"{still_new:.3f} (pure bfloat16: {still_old:.3f})")  # measured: 0, 0.712; 0, 0.512
    assert next(fine_tune_proxy(bf16, toy_lm.tokenizer, texts[:2], lr=1e-4).parameters()).dtype \
        == torch.float32
    assert err_new < 1e-3, numbers
    assert err_old > 1e-2, numbers  # the bound above would catch pure-bfloat16 training
    assert still_old > still_new + 0.05, numbers
    assert all(v.dtype == torch.bfloat16 for v in bf16.parameters())  # the model is untouched


def test_micro_batches_make_the_same_one_batch_step(toy_lm, toy_world):
    """The paper's 'all texts in one batch', with memory bounded: gradients accumulated over
    micro-batches, weighted by their token counts, give the one-batch step (dropout off)."""
    import copy

    model = copy.deepcopy(toy_lm.model)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    texts = toy_world.pool[:7]  # prompts of different lengths
    one = fine_tune_proxy(model, toy_lm.tokenizer, texts, lr=1e-3, micro_batch=7).state_dict()
    acc = fine_tune_proxy(model, toy_lm.tokenizer, texts, lr=1e-3, micro_batch=3).state_dict()
    moved = [k for k, v in one.items() if not torch.equal(v, model.state_dict()[k])]
    assert len(moved) > 10
    for k in moved:  # float noise ~2e-5; micro-batch means weighted equally: ~4e-3 (Adam, lr 1e-3)
        torch.testing.assert_close(acc[k], one[k], rtol=0, atol=1e-4)


def test_activations_every_layer_last_token(toy_lm, toy_world):
    X = activations(toy_lm.model, toy_lm.tokenizer, toy_world.members[:5], batch_size=2)
    assert X.shape == (5, toy_lm.model.config.n_layer + 1, toy_lm.model.config.n_embd)
    one = activations(toy_lm.model, toy_lm.tokenizer, toy_world.members[:1], batch_size=1)
    np.testing.assert_allclose(X[0], one[0], atol=1e-4)  # padding does not change it
    only = activations(toy_lm.model, toy_lm.tokenizer, toy_world.members[:5], layer=1)
    np.testing.assert_allclose(only, X[:, 1], atol=1e-5)


def test_standardisation_uses_training_rows_only_and_reload_is_identical(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 6))
    y = rng.integers(0, 2, 80)
    X[:, 0] += 3 * y
    probe = LinearProbe().fit(X, y, layer=2, proxy_lr=1e-3)
    np.testing.assert_allclose(probe.mean_, X.mean(0))
    np.testing.assert_allclose(probe.scale_, X.std(0) + 1e-6)
    shifted = X + 100.0  # rows from elsewhere must not move the probe's statistics
    assert probe.predict_proba(shifted).mean() != pytest.approx(probe.predict_proba(X).mean())
    saved = probe.save(tmp_path / "p")
    assert not any(f.suffix == ".pkl" for f in saved.iterdir())
    again = LinearProbe.load(saved)
    assert (again.layer_, again.proxy_lr_) == (2, 1e-3)
    np.testing.assert_array_equal(again.predict_proba(X), probe.predict_proba(X))
    with pytest.raises(PddkitError, match="is not a saved probe"):
        LinearProbe.load(tmp_path)


def test_per_set_standardisation_uses_each_sets_own_statistics(toy_lm, toy_world):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 64)) * rng.uniform(0.5, 3, 64) + rng.uniform(-2, 2, 64)
    y = rng.integers(0, 2, 60)
    X[:, 0] += 2 * y
    probe = LinearProbe().fit(X, y, layer=1)
    S = rng.standard_normal((12, 64)) * 4 + 1.5  # a set with other statistics
    own = probe.decision_function(S, "per_set")
    np.testing.assert_allclose(own, standardize_set(S) @ probe.coef_ + probe.intercept_)
    np.testing.assert_allclose(standardize_set(S).mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(probe.decision_function(S + 100.0, "per_set"), own, atol=1e-8)
    train = probe.decision_function(S)  # "train": the training rows' mean_ and scale_
    assert np.abs(train - own).max() > 0.1
    assert np.abs(probe.decision_function(S + 100.0) - train).max() > 1.0
    with pytest.raises(PddkitError, match="must be one of per_set, train"):
        probe.decision_function(S, "global")
    # through the model: each set (e.g. validation, test) standardised on its own
    texts = toy_world.members[:4] + toy_world.nonmembers[:5]
    A = activations(toy_lm.model, toy_lm.tokenizer, texts, batch_size=4)[:, 1]  # [9, d]
    sets = [np.array([0, 4, 5]), np.array([1, 2, 3, 6, 7, 8])]
    got, _ = probe_scores(toy_lm.model, toy_lm.tokenizer, texts, [probe], 4, sets=sets)
    for rows in sets:
        np.testing.assert_allclose(got[rows, 0], probe.decision_function(A[rows], "per_set"),
                                   rtol=1e-5, atol=1e-5)
    one, _ = probe_scores(toy_lm.model, toy_lm.tokenizer, texts, [probe], 4)
    assert np.abs(one - got).max() > 1e-3  # the split changes the statistics
    tr, _ = probe_scores(toy_lm.model, toy_lm.tokenizer, texts, [probe], 4, standardize="train")
    np.testing.assert_allclose(tr[:, 0], probe.decision_function(A), rtol=1e-5, atol=1e-5)
    with pytest.raises(PddkitError, match="at least 2 texts in a set"):
        probe_scores(toy_lm.model, toy_lm.tokenizer, texts[:1], [probe], 4)


def test_auxiliary_split_is_half_injected_and_stratified():
    injected, held_out = split_auxiliary(50, seed=3)
    assert injected.sum() == 25 and held_out.sum() == 10
    assert injected[held_out].sum() == 5  # 20% of each half
    again = split_auxiliary(50, seed=3)
    assert (again[0] == injected).all() and (again[1] == held_out).all()
    labels = [1] * 12 + [0] * 8  # labelled probe data (ArxivMIA's train file): labels decide
    injected, held_out = split_auxiliary(20, seed=0, injected=labels)
    assert injected.tolist() == labels and held_out[:12].sum() == 2 and held_out[12:].sum() == 1
    with pytest.raises(PddkitError, match="has 0 texts labelled 0 \\(to leave out\\)"):
        split_auxiliary(20, injected=[1] * 20)
    with pytest.raises(PddkitError, match="has 3 texts labelled 1"):
        split_auxiliary(20, injected=[1] * 3 + [0] * 17)


def test_grid_has_one_probe_per_lr_and_layer_fitted_on_proxy_rows(toy_lm, toy_world):
    aux = toy_world.pool[:20]
    search = train_probes(toy_lm.model, toy_lm.tokenizer, aux, lrs=(1e-3, 3e-3), seed=0)
    layers = toy_lm.model.config.n_layer  # transformer layers 1..L; not the embeddings (0)
    assert [g["proxy_lr"] for g in search.grid] == [1e-3] * layers + [3e-3] * layers
    assert [g["layer"] for g in search.grid] == list(range(1, layers + 1)) * 2
    assert search.best is search.probes[int(np.argmax(search.aux_val_auc))]
    injected, held_out = split_auxiliary(len(aux), 0)
    proxy = fine_tune_proxy(toy_lm.model, toy_lm.tokenizer,
                            [aux[i] for i in np.flatnonzero(injected)], lr=3e-3)
    X = activations(proxy, toy_lm.tokenizer, aux, batch_size=8)
    p = search.probes[layers]  # lr 3e-3, layer 1: standardised on the proxy's fit rows
    np.testing.assert_allclose(p.mean_, X[~held_out, 1].mean(0), rtol=1e-4, atol=1e-5)
    target = activations(toy_lm.model, toy_lm.tokenizer, toy_world.members[:6], batch_size=4)
    grid, cut = probe_scores(toy_lm.model, toy_lm.tokenizer, toy_world.members[:6], search.probes, 4)
    assert cut == 0
    assert grid.shape == (6, 2 * layers)
    np.testing.assert_allclose(grid[:, layers], p.decision_function(target[:, 1], "per_set"),
                               rtol=1e-5, atol=1e-6)
    from sklearn.metrics import roc_auc_score  # held-out rows standardised as their own set

    aux_auc = roc_auc_score(injected[held_out], p.decision_function(X[held_out, 1], "per_set"))
    assert search.aux_val_auc[layers] == pytest.approx(aux_auc, abs=1e-6)
    assert p.meta_["aux_val_auc"] == search.aux_val_auc[layers]
    prob = p.predict_proba(target[:, 1], "per_set")  # the log-odds are the probability's logit
    np.testing.assert_allclose(1 / (1 + np.exp(-grid[:, layers])), prob, rtol=1e-6)


def test_a_prompt_longer_than_the_context_keeps_its_question(toy_lm, toy_world):
    long = " ".join(toy_world.pool[:12])  # far more than the 512-token context
    ids, cut = encode_prompts(toy_lm.model, toy_lm.tokenizer, [toy_world.members[0], long])
    short = toy_lm.tokenizer(PROMPT.format(text=toy_world.members[0]))["input_ids"]
    assert cut == 1 and ids[0] == short
    assert 500 <= len(ids[1]) <= 512
    question = toy_lm.tokenizer("\nIs the above statement correct? Answer:")["input_ids"]
    assert ids[1][-len(question):] == question
    X = activations(toy_lm.model, toy_lm.tokenizer, [long], batch_size=1)  # runs, no index error
    assert np.isfinite(X).all()


def test_too_few_rows_and_wrong_width(toy_lm, toy_world):
    with pytest.raises(PddkitError, match="needs at least 10"):
        train_probes(toy_lm.model, toy_lm.tokenizer, toy_world.pool[:4])
    probe = LinearProbe().fit(np.random.default_rng(0).standard_normal((20, 7)),
                              np.arange(20) % 2, layer=0)
    with pytest.raises(PddkitError, match="expects 7-wide activations"):
        probe.predict_proba(np.zeros((2, 64)))


def test_a_model_without_hidden_states_is_one_sentence(toy_lm, toy_world):
    class NoHidden(torch.nn.Module):  # e.g. a wrapper that returns logits only
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, **kw):
            kw.pop("output_hidden_states")
            return self.inner(**kw, output_hidden_states=False)

    with pytest.raises(PddkitError, match="my-model returns no hidden states"):
        activations(NoHidden(toy_lm.model), toy_lm.tokenizer, toy_world.members[:2], name="my-model")


def test_lora_proxy_trains_adapters_only(toy_lm, toy_world):
    pytest.importorskip("peft")
    base = {k: v.clone() for k, v in toy_lm.model.state_dict().items()}
    proxy = fine_tune_proxy(toy_lm.model, toy_lm.tokenizer, toy_world.pool[:8], lr=1e-2,
                            lora=True, lora_rank=4)
    trainable = [n for n, p in proxy.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    X = activations(proxy, toy_lm.tokenizer, toy_world.members[:3], batch_size=2)  # through peft
    assert X.shape == (3, toy_lm.model.config.n_layer + 1, toy_lm.model.config.n_embd)
    merged = proxy.merge_and_unload().state_dict()
    changed = [k for k, v in merged.items() if k in base and not torch.equal(v, base[k])]
    assert len(changed) >= 4  # the adapters moved the effective weights
    assert all(torch.equal(v, base[k]) for k, v in toy_lm.model.state_dict().items())


def test_probe_end_to_end_and_reload(toy_world, tmp_path, capsys):
    aux = tmp_path / "aux.jsonl"
    long = " ".join(toy_world.pool[60:80])  # longer than the 512-token context: cut, counted
    aux.write_text("".join(json.dumps({"text": t}) + "\n" for t in [*toy_world.pool[:59], long]))
    args = ["run", "--model", str(toy_world.target_dir), "--data", str(toy_world.data_path),
            "--methods", "loss,probe", "--bootstrap", "50"]
    code = main([*args, "--probe-data", str(aux), "--probe-lrs", "1e-3,3e-3",
                 "--output", str(tmp_path / "a")])
    assert code == 0, capsys.readouterr().err
    meta = json.loads((tmp_path / "a" / "probe" / "probe.json").read_text())
    assert meta["lr_grid"] == [1e-3, 3e-3] and meta["proxy_lr"] in meta["lr_grid"]
    assert 1 <= meta["layer"] <= 2 and meta["standardize"] == "per_set"
    res = json.loads((tmp_path / "a" / "results.json").read_text())
    assert res["config"]["probe_standardize"] == "per_set"
    from sklearn.metrics import roc_auc_score

    scored = [json.loads(x) for x in (tmp_path / "a" / "scores.jsonl").read_text().splitlines()]
    assert res["methods"]["probe"]["metrics"]["auc"] == pytest.approx(
        roc_auc_score([r["label"] for r in scored], [r["probe"] for r in scored]), abs=1e-9)
    assert res["counts"]["truncated"]["probe_data"] == meta["aux_texts_cut"] == 1
    assert res["counts"]["truncated"]["probe"] == 0  # the texts under test all fit
    code = main([*args, "--probe-load", str(tmp_path / "a" / "probe"), "--output",
                 str(tmp_path / "b")])
    assert code == 0, capsys.readouterr().err
    rows = [[json.loads(x)["probe"] for x in (tmp_path / d / "scores.jsonl").read_text().splitlines()]
            for d in ("a", "b")]
    np.testing.assert_allclose(rows[0], rows[1], rtol=1e-6)  # the reloaded probe scores alike
    code = main([*args, "--probe-load", str(tmp_path / "a" / "probe"), "--probe-standardize",
                 "train", "--output", str(tmp_path / "c")])  # its saved mean_/scale_
    assert code == 0, capsys.readouterr().err
    res = json.loads((tmp_path / "c" / "results.json").read_text())
    assert res["config"]["probe_standardize"] == "train"
    train = [json.loads(x)["probe"] for x in (tmp_path / "c" / "scores.jsonl").read_text().splitlines()]
    assert np.abs(np.array(train) - np.array(rows[0])).max() > 1e-3


def test_probe_layer_and_lr_chosen_on_the_validation_split(toy_world, tmp_path, capsys):
    aux = tmp_path / "aux.jsonl"  # labelled: 1 = inject into the proxy, 0 = leave out
    aux.write_text("".join(json.dumps({"text": t, "label": int(i < 16)}) + "\n"
                           for i, t in enumerate(toy_world.pool[:40])))
    out = tmp_path / "v"
    code = main(["run", "--model", str(toy_world.target_dir), "--data", str(toy_world.data_path),
                 "--methods", "probe", "--probe-data", str(aux), "--probe-lrs", "1e-3,3e-3",
                 "--val-fraction", "0.3", "--bootstrap", "20", "--output", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    v = json.loads((out / "results.json").read_text())["methods"]["probe"]["validation"]
    assert v["grid_size"] == 2 * 2 and len(v["val_auc_grid"]) == 4  # 2 lrs x layers 1, 2
    default = json.loads((out / "probe" / "probe.json").read_text())
    assert default["split"] == "labels" and default["injected"] == 16
    assert v["default"] == {"proxy_lr": default["proxy_lr"], "layer": default["layer"]}
    chosen = json.loads((out / "probe-validated" / "probe.json").read_text())
    assert v["chosen"] == {"proxy_lr": chosen["proxy_lr"], "layer": chosen["layer"]}
    assert set(v["oracle"]["params"]) == {"proxy_lr", "layer"}
    assert "proxy_lr=" in printed.out and "(oracle)" in (out / "report.md").read_text()


def test_probe_data_of_one_label_is_one_sentence(toy_world, tmp_path, capsys):
    aux = tmp_path / "aux.jsonl"
    aux.write_text("".join(json.dumps({"text": t, "label": 0}) + "\n" for t in toy_world.pool[:20]))
    code = main(["run", "--model", str(toy_world.target_dir), "--data", str(toy_world.data_path),
                 "--methods", "probe", "--probe-data", str(aux), "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "has 0 texts labelled 1 (to inject into the proxy)" in err
