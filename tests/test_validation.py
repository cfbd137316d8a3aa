"""Hyperparameters chosen on validation data: never from test labels; reported with the
default and the oracle; end to end through `pddkit run`."""

import json

import numpy as np
import pytest

from pddkit.cli import main
from pddkit.data.stratified import stratified_split
from pddkit.errors import PddkitError
from pddkit.evaluation.validation import choose, validate


def test_stratified_split_keeps_both_classes_and_is_seeded():
    labels = [1] * 30 + [0] * 20
    v, t = stratified_split(labels, 0.2, seed=1)
    assert len(v) == 10 and sorted(np.r_[v, t]) == list(range(50))
    y = np.array(labels)
    assert (y[v] == 1).sum() == 6 and (y[v] == 0).sum() == 4
    assert np.array_equal(v, stratified_split(labels, 0.2, seed=1)[0])
    with pytest.raises(PddkitError, match="leaves no non-member on one side"):
        stratified_split([1] * 30 + [0] * 2, 0.1)
    with pytest.raises(PddkitError, match="between 0 and 1"):
        stratified_split(labels, 1.5)


def test_the_choice_never_reads_test_labels():
    rng = np.random.default_rng(0)
    n, G = 200, 12
    labels = rng.integers(0, 2, n)
    scores = rng.standard_normal((n, G)) + labels[:, None] * np.linspace(0, 2, G)[None]
    val, test = stratified_split(labels, 0.3, seed=0)
    grid = [{"k": g} for g in range(G)]
    a = validate("x", grid, scores, labels, val, test, n_bootstrap=20)
    flipped = labels.copy()
    flipped[test] = 1 - flipped[test]  # would change the choice if it read test labels
    b = validate("x", grid, scores, flipped, val, test, n_bootstrap=20)
    assert a.chosen == b.chosen and np.array_equal(a.val_auc, b.val_auc)
    assert a.oracle != b.oracle  # the oracle reads test labels, by definition
    best, aucs = choose(scores[val], labels[val])
    assert grid[best] == a.chosen and aucs[best] == aucs.max()


def test_run_with_val_fraction_end_to_end(toy_world, tmp_path, capsys):
    out = tmp_path / "o"
    code = main(["run", "--model", str(toy_world.target_dir), "--freq", str(toy_world.freq_path),
                 "--data", str(toy_world.data_path), "--methods", "loss,mink,minkpp,surp,dcpdd",
                 "--val-fraction", "0.3", "--output", str(out), "--bootstrap", "50"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "hyperparameters chosen on validation data" in printed.out and "oracle" in printed.out
    res = json.loads((out / "results.json").read_text())
    assert res["metrics_on"] == "test part"
    for m in ("mink", "minkpp", "surp", "dcpdd"):
        v = res["methods"][m]["validation"]
        assert v["chosen"] and v["oracle"]["params"]
        # the oracle is the best on the test part by definition; the toy members separate
        assert v["oracle"]["auc"] >= v["test"]["auc"] > 0.8, (m, v)
        assert v["test"]["n_members"] == 42 and v["test"]["bootstrap"] == "stratified"
    assert res["methods"]["loss"]["validation"] is None
    assert len(res["methods"]["surp"]["validation"]["val_auc_grid"]) == 200
    assert res["methods"]["mink"]["metrics"]["n_members"] == 42  # 60 members, 18 for validation
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == 120 and sum(r["split"] == "val" for r in rows) == 36
    html = (out / "report.html").read_text()
    assert "id='validation'" in html and "(oracle)" in html and (out / "surp_heatmap.png").is_file()


def test_val_data_file_and_bad_val_options(toy_world, tmp_path, capsys):
    lines = toy_world.data_path.read_text().splitlines()
    val = tmp_path / "val.jsonl"
    val.write_text("\n".join(lines[:10] + lines[-10:]) + "\n")
    test = tmp_path / "test.jsonl"
    test.write_text("\n".join(lines[10:-10]) + "\n")
    code = main(["run", "--model", str(toy_world.target_dir), "--data", str(test), "--val-data",
                 str(val), "--methods", "mink", "--output", str(tmp_path / "o"), "--bootstrap", "20"])
    assert code == 0, capsys.readouterr().err
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["methods"]["mink"]["metrics"]["n_members"] == 50  # the test file only
    one_class = tmp_path / "one.jsonl"
    one_class.write_text("\n".join(lines[:5]) + "\n")
    few = tmp_path / "few.jsonl"  # 40 members, 3 non-members: 10% of 3 rounds to none
    few.write_text("\n".join(lines[:40] + lines[-3:]) + "\n")
    for data, args, sentence in [(test, ["--val-data", str(one_class)], "has only members"),
                                 (few, ["--val-fraction", "0.1"],
                                  "leaves no non-member on one side (3 non-members)")]:
        code = main(["run", "--model", str(toy_world.target_dir), "--data", str(data), *args,
                     "--methods", "mink", "--output", str(tmp_path / "x")])
        assert code == 1 and sentence in capsys.readouterr().err


def test_grouped_split_keeps_a_document_on_one_side():
    """Windows of one document never land in both validation and test; the shares stay
    near the fraction per class; texts without a group are groups of their own."""
    rng = np.random.default_rng(3)
    labels, groups = [], []
    for d in range(80):
        label = d % 2
        for _ in range(int(rng.integers(1, 6))):
            labels.append(label)
            groups.append(f"doc{d}")
    labels += [1, 0] * 5
    groups += [None] * 10
    y = np.array(labels)
    for seed in range(5):
        v, t = stratified_split(labels, 0.25, seed=seed, groups=groups)
        assert sorted(np.r_[v, t]) == list(range(len(y)))
        vg = {groups[i] for i in v if groups[i] is not None}
        tg = {groups[i] for i in t if groups[i] is not None}
        assert not vg & tg
        for c in (0, 1):
            share = (y[v] == c).sum() / (y == c).sum()
            assert 0.15 < share < 0.35, (seed, c, share)
    ungrouped = stratified_split(labels, 0.25, seed=0)[0]
    assert {groups[i] for i in ungrouped} & {groups[i] for i in np.setdiff1d(range(len(y)), ungrouped)}
    with pytest.raises(PddkitError, match=r"leaves no member on one side \(1 documents with members\)"):
        stratified_split([1, 1, 1, 0, 0, 0], 0.5, groups=["a", "a", "a", "b", "c", "d"])
