"""Neighbourhood attack: deterministic one-word neighbours, errors, and end to end."""

import json

import pytest

from pddkit.cli import main
from pddkit.errors import PddkitError
from pddkit.runner.neighbors import load_mask_model, neighbors_of

TEXT = "The detective looked at the letter and smiled at his old friend."


def test_neighbours_are_deterministic_one_word_swaps(mask_model_dir):
    mm = load_mask_model(str(mask_model_dir))
    a = neighbors_of(mm, TEXT, n_neighbors=8, seed=0)
    assert a == neighbors_of(mm, TEXT, n_neighbors=8, seed=0)  # same seed, same neighbours
    assert len(a) == 8 and len(set(a)) == 8 and TEXT not in a
    for nb in a:
        diff = [(x, y) for x, y in zip(TEXT.split(), nb.split()) if x != y]
        assert len(nb.split()) == len(TEXT.split()) and len(diff) == 1, nb
        assert diff[0][1].strip(".").isalpha()
    assert neighbors_of(mm, TEXT, n_neighbors=8, seed=1) != a  # dropout masks follow the seed


def test_text_without_replaceable_word_and_wrong_model(mask_model_dir, toy_world):
    mm = load_mask_model(str(mask_model_dir))
    with pytest.raises(PddkitError, match=r"data\.jsonl line 3 has no word the masked LM"):
        neighbors_of(mm, "1984 -- 2001, 42!", source="data.jsonl line 3")
    with pytest.raises(PddkitError, match="is not a fill-mask"):
        load_mask_model(str(toy_world.target_dir))  # a causal LM


def test_neighbor_end_to_end_and_reuse(toy_world, mask_model_dir, tmp_path, capsys):
    lines = toy_world.data_path.read_text().splitlines()
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(lines[:15] + lines[-15:]) + "\n")
    args = ["run", "--model", str(toy_world.target_dir), "--data", str(data), "--methods",
            "loss,neighbor:n_neighbors=6", "--bootstrap", "50"]
    code = main([*args, "--mask-model", str(mask_model_dir), "--output", str(tmp_path / "a")])
    assert code == 0, capsys.readouterr().err
    res = json.loads((tmp_path / "a" / "results.json").read_text())
    assert res["counts"]["neighbor_texts"] == 30 * 6
    assert res["counts"]["truncated"]["neighbor_mask_model"] == 0  # all within its context
    assert res["methods"]["neighbor"]["metrics"]["auc"] > 0.7  # memorised texts beat neighbours
    saved = [json.loads(x) for x in (tmp_path / "a" / "neighbors.jsonl").read_text().splitlines()]
    assert len(saved) == 30 and all(len(r["neighbors"]) == 6 for r in saved)
    code = main([*args, "--neighbors", str(tmp_path / "a" / "neighbors.jsonl"), "--output",
                 str(tmp_path / "b")])
    assert code == 0, capsys.readouterr().err
    rows = [[json.loads(x) for x in (tmp_path / d / "scores.jsonl").read_text().splitlines()]
            for d in ("a", "b")]
    assert [r["neighbor"] for r in rows[0]] == pytest.approx([r["neighbor"] for r in rows[1]])


def test_text_longer_than_the_mask_models_context_is_counted(mask_model_dir, toy_world, caplog):
    from pddkit.runner.neighbors import generate

    mm = load_mask_model(str(mask_model_dir))
    long = " ".join(toy_world.pool[:12])  # well over the masked LM's 512 tokens
    assert len(mm.tokenizer(long)["input_ids"]) > mm.tokenizer.model_max_length
    nbs, cut = generate(mm, [TEXT, long], ["a", "b"], n_neighbors=3, top_k=5, dropout=0.7, seed=0)
    assert cut == 1 and "1 of 2 texts are longer than the 512-token context" in caplog.text
    assert len(nbs[1]) == 3 and all(len(nb.split()) == len(long.split()) for nb in nbs[1])
    assert all(nb[-200:] == long[-200:] for nb in nbs[1])  # only words within the context change
