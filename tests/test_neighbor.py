"""Neighbourhood attack: the ranking rule on a hand-made case, whole-word candidates,
deterministic one-word neighbours, one neighbour set per parameter set, errors, and end
to end."""

import json

import pytest
import torch

from pddkit.cli import main
from pddkit.errors import PddkitError
from pddkit.resources import neighbors as nbmod
from pddkit.resources.neighbor_sets import NeighborParams
from pddkit.resources.neighbors import WordRule, load_mask_model, neighbors_of

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
    from pddkit.resources.neighbors import generate

    mm = load_mask_model(str(mask_model_dir))
    long = " ".join(toy_world.pool[:12])  # well over the masked LM's 512 tokens
    assert len(mm.tokenizer(long)["input_ids"]) > mm.tokenizer.model_max_length
    nbs, cut = generate(mm, [TEXT, long], ["a", "b"], n_neighbors=3, top_k=5, dropout=0.7, seed=0)
    assert cut == 1 and "1 of 2 texts are longer than the 512-token context" in caplog.text
    assert len(nbs[1]) == 3 and all(len(nb.split()) == len(long.split()) for nb in nbs[1])
    assert all(nb[-200:] == long[-200:] for nb in nbs[1])  # only words within the context change


HAND = "The man said that she was with him."
# original word -> (p_j(w_j), {candidate token: p_j(c)}); every other position puts all its
# mass on its own word. 'ld' is a subword piece (no 'Ġ'): never a candidate.
TABLE = {"said": (0.90, {"Ġwas": 0.06, "ld": 0.05, "Ġhad": 0.03}),
         "she": (0.10, {"Ġhe": 0.50, "Ġit": 0.30}),
         "him": (0.50, {"Ġher": 0.20, "Ġme": 0.10})}


def test_pairs_are_ranked_by_p_c_over_one_minus_p_original(mask_model_dir, monkeypatch):
    """Hand-checked: ratios said->was .06/.10=.60, she->he .50/.90=.556, him->her .20/.50=.40,
    she->it .30/.90=.333, said->had .03/.10=.30, him->me .10/.50=.20 (p(c)/(1-p(w))). The raw
    p(c) order (he .50, it .30, her .20, me .10, was .06) would give other neighbours; with
    pieces allowed, said->'ld' (.05/.10=.50) would be third."""
    mm = load_mask_model(str(mask_model_dir))
    tok = mm.tokenizer
    seen = []

    def fake(mm_, ids, positions, dropout, gen):
        probs = torch.zeros(len(positions), mm_.word_key.shape[0])  # [P, V]
        for r, p in enumerate(positions):
            orig = int(ids[0, p])
            word = tok.decode([orig]).strip()
            seen.append(word)
            p_orig, cands = TABLE.get(word, (1.0, {}))
            probs[r, orig] = p_orig
            for t, pc in cands.items():
                probs[r, tok.convert_tokens_to_ids(t)] = pc
        return probs, 1 - probs[torch.arange(len(positions)), ids[0, positions]]

    monkeypatch.setattr(nbmod, "_masked_probs", fake)
    got = neighbors_of(mm, HAND, n_neighbors=4, top_k=2)
    assert got == ["The man was that she was with him.",
                   "The man said that he was with him.",
                   "The man said that she was with her.",
                   "The man said that it was with him."]
    assert seen == ["man", "said", "that", "she", "was", "with", "him"]  # 'The': no 'Ġ' marker
    raw = sorted(((pc, w, c) for w, (_, cs) in TABLE.items() for c, pc in cs.items() if c != "ld"),
                 reverse=True)[:4]
    assert [c for _, _, c in raw] != ["Ġwas", "Ġhe", "Ġher", "Ġit"]  # raw p(c) ranks otherwise
    assert neighbors_of(mm, HAND, n_neighbors=6, top_k=2)[4:] == [
        "The man had that she was with him.", "The man said that she was with me."]
    assert neighbors_of(mm, HAND, n_neighbors=6, top_k=1) == got[:3]  # one per position


def test_subword_pieces_are_never_candidates(mask_model_dir):
    mm = load_mask_model(str(mask_model_dir))
    assert mm.rule == WordRule("Ġ", True)
    tokens = mm.tokenizer.convert_ids_to_tokens(list(range(len(mm.tokenizer))))
    words = [t for t, k in zip(tokens, mm.word_key) if k >= 0]
    assert words and all(t.startswith("Ġ") and t[1:].isalpha() for t in words)
    assert "ld" in tokens and mm.word_key[tokens.index("ld")] == -1
    enc = mm.tokenizer(TEXT, return_offsets_mapping=True)
    positions = nbmod._word_positions(TEXT, enc["offset_mapping"], enc.tokens(), mm.rule)
    ids = torch.tensor([enc["input_ids"]])
    probs, _ = nbmod._masked_probs(mm, ids, positions, 0.7, torch.Generator().manual_seed(0))
    raw_top = probs.topk(10, dim=-1).indices  # [P, 10] what the raw top_k would offer
    pieces = {tokens[i] for i in raw_top.flatten().tolist() if not tokens[i].startswith("Ġ")}
    assert pieces  # the (random) masked LM does offer pieces, so the filter is exercised
    for nb in neighbors_of(mm, TEXT, n_neighbors=30, top_k=10):
        new = next(y for x, y in zip(TEXT.split(), nb.split()) if x != y).strip(".")
        assert mm.word_key[mm.tokenizer.convert_tokens_to_ids("Ġ" + new)] >= 0, new


def test_word_rule_of_wordpiece_and_sentencepiece_tokenizers():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    wp = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "b": 2, "##b": 3}, unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.Whitespace()
    rule = WordRule.of(PreTrainedTokenizerFast(tokenizer_object=wp, unk_token="[UNK]"))
    assert rule == WordRule("##", False) and rule.starts_word("b") and not rule.starts_word("##b")
    sp = Tokenizer(models.WordLevel({"<unk>": 0, "\u2581a": 1, "\u2581b": 2, "b": 3}, unk_token="<unk>"))
    sp.pre_tokenizer = pre_tokenizers.Metaspace()
    rule = WordRule.of(PreTrainedTokenizerFast(tokenizer_object=sp, unk_token="<unk>"))
    assert rule == WordRule("\u2581", True) and not rule.starts_word("b")


def test_each_parameter_set_gets_its_own_neighbours(toy_world, mask_model_dir, tmp_path, capsys):
    from pddkit.methods.neighbor import neighbor
    from pddkit.stats import Observation, TokenStats

    lines = toy_world.data_path.read_text().splitlines()
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(lines[:6] + lines[-6:]) + "\n")

    def cmd(methods, *extra):
        return ["run", "--model", str(toy_world.target_dir), "--data", str(data), "--methods",
                methods, "--bootstrap", "20", "--no-blind", *extra]

    mask = ["--mask-model", str(mask_model_dir)]
    three_calls = "neighbor:n_neighbors=3,neighbor:n_neighbors=6,neighbor:n_neighbors=6,top_k=1"
    assert main(cmd(three_calls, *mask, "--output", str(tmp_path / "a"))) == 0
    saved = [json.loads(x) for x in (tmp_path / "a" / "neighbors.jsonl").read_text().splitlines()]
    sets = {}
    for r in saved:
        sets.setdefault((r["params"]["top_k"], r["n_neighbors"]), {})[r["id"]] = r["neighbors"]
    assert set(sets) == {(10, 6), (1, 6)} and len(saved) == 2 * 12  # one line per (text, set)
    assert sum(sets[10, 6][i] != sets[1, 6][i] for i in sets[10, 6]) > 0  # shared sets: 0 (4 here)
    for i, nbs in sets[1, 6].items():  # top_k=1: at most one candidate per position
        text = next(json.loads(x)["text"] for x in lines if json.loads(x)["id"] == i)
        where = [next(j for j, (x, y) in enumerate(zip(text.split(), nb.split())) if x != y)
                 for nb in nbs]
        assert len(set(where)) == len(where), i
    res = json.loads((tmp_path / "a" / "results.json").read_text())
    assert res["counts"]["neighbor_texts"] == len({t for r in saved for t in r["neighbors"]})
    rows = [json.loads(x) for x in (tmp_path / "a" / "scores.jsonl").read_text().splitlines()]
    cols = [k for k in rows[0] if k.startswith("neighbor")]
    assert len(cols) == 3 and len({tuple(r[c] for r in rows) for c in cols}) == 3
    # n_neighbors=3 alone: the first 3 of the 6 generated with the same (top_k, dropout, seed)
    alone = tmp_path / "b"
    assert main(cmd("neighbor:n_neighbors=3", *mask, "--output", str(alone))) == 0
    three = {json.loads(x)["id"]: json.loads(x)["neighbors"]
             for x in (alone / "neighbors.jsonl").read_text().splitlines()}
    assert all(three[i] == sets[10, 6][i][:3] for i in three)
    st = TokenStats.from_lists([1, 2], [-1.0, -3.0])
    nbs = tuple(TokenStats.from_lists([1], [v]) for v in (-4.0, -6.0, -8.0, -100.0))
    obs = Observation("x", st, neighbors={NeighborParams(10, 0.7, 0): nbs})
    assert neighbor(obs, n_neighbors=3) == pytest.approx(-2.0 - (-6.0))  # the first 3 only
    # reuse: a set the file lacks, more neighbours than it holds, an old-format file
    capsys.readouterr()
    reuse = ["--neighbors", str(alone / "neighbors.jsonl")]
    assert main(cmd("neighbor:top_k=1", *reuse, "--output", str(tmp_path / "c"))) == 1
    assert "has no neighbours for top_k=1, dropout=0.7, seed=0 (it holds: top_k=10" in \
        capsys.readouterr().err
    assert main(cmd("neighbor:n_neighbors=4", *reuse, "--output", str(tmp_path / "d"))) == 1
    assert "holds 3 neighbours per text for top_k=10" in capsys.readouterr().err
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps({"id": "m0", "neighbors": ["x"]}) + "\n")
    with pytest.raises(PddkitError, match="line 1 has no `params`"):
        nbmod.load(old, ["m0"], {NeighborParams(10, 0.7, 0): 1})
