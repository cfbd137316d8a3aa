"""`traps detect` (Meeus et al. 2024, copyright traps): hand-built trap folders, per-cell
AUC by hand (Table 2: inserted traps of (L, R) against every held-out trap of length L;
Figure 3: of (L, R, bucket) against held-out traps of (L, bucket)), scores and the paper's
ratio attack from a plain forward pass, exposures (repeats x stated epochs), a folder from
another tokenizer scored with a notice, and the refusals (never injected, inconsistent
trap-info, a malformed folder)."""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import replace

import numpy as np
import pytest
from tiny_models import small_tokenizer

from pddkit.errors import PddkitError
from pddkit.studies.traps.detect import (
    CI_MIN_PER_CLASS,
    TrapScore,
    detect_traps,
    table_cells,
)
from pddkit.studies.traps.folder import HELD_OUT, MEMBER, Insertion, Trap, TrapFolder

WORDS = ("quick", "brown", "fox", "jumps", "over", "lazy", "dog", "the")


def hand_auc(pos, neg) -> float:
    """Mann-Whitney: P(member scores above a non-member), ties one half."""
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def build_folder(tok, lengths=(4, 8), per_length=24, repeats=(1, 4), buckets=3, seed=0,
                 fingerprint=None, inject=True) -> TrapFolder:
    """Traps of single-token words (exact lengths under `tok`; made-up ids without one),
    alternately to be inserted and held out, spread over `buckets`, each inserted one with
    the repeat counts in turn."""
    rng = random.Random(seed)
    traps, ins = [], []
    for L in lengths:
        for i in range(per_length):
            text = "".join(" " + rng.choice(WORDS) for _ in range(L))
            ids = (tuple(tok(text, add_special_tokens=False)["input_ids"]) if tok is not None
                   else tuple(WORDS.index(w) for w in text.split()))  # no tokenizer: made up
            assert len(ids) == L
            role = MEMBER if i % 2 == 0 else HELD_OUT
            tid = f"L{L}-{i:05d}"
            traps.append(Trap(tid, text, ids, L, 1.0 + (i // 2) % buckets, (i // 2) % buckets,
                              1.0, role))
            if role == MEMBER and inject:
                ins.append(Insertion(tid, f"doc-{tid}", repeats[(i // 2) % len(repeats)], (0,)))
    manifest = {"model": "tiny", "options": {"ppl_range": [1, 1 + buckets], "buckets": buckets},
                "tokenizer": {"name": "tiny", "vocab_size": len(tok or WORDS),
                              "fingerprint": fingerprint or _digest(tok)}}
    return TrapFolder(tuple(traps), manifest, tuple(ins), {"repeats": list(repeats)} if inject else {})


def _digest(tok) -> str:
    from pddkit.cache.fingerprint import tokenizer_digest

    return "0" * 64 if tok is None else tokenizer_digest(tok)


def save_tiny_pair(root):
    """(tokenizer, target dir, reference dir): a random one-layer GPT-2 target and a
    differently seeded reference, one tokenizer."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = small_tokenizer()
    dirs = []
    for seed, name in ((0, "target"), (1, "ref")):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(tok),
                                           n_positions=64, bos_token_id=0, eos_token_id=0))
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
        dirs.append(root / name)
    return tok, dirs[0], dirs[1]


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    return save_tiny_pair(tmp_path_factory.mktemp("traps-models"))


def _scores(rows):
    return [TrapScore(r["id"], r["length"], r["repeats"], r["bucket"], 1.0, r["label"], None,
                      r["length"], {"m": r["m"]}) for r in rows]


def test_cells_pair_each_repeat_count_with_the_held_out_traps_of_its_length():
    rng = np.random.default_rng(0)
    rows = []
    for L in (25, 50):
        for k in range(30):
            label = int(k < 18)
            rows.append({"id": f"{L}-{k}", "length": L, "repeats": (1, 10, 100)[k % 3] * label,
                         "bucket": k % 2, "label": label, "m": float(rng.normal(label * L / 50))})
    table, by_bucket = table_cells(_scores(rows), ("m",), n_bootstrap=200, seed=0)
    # AUC = pairs ranked right over 6 x 12 pairs; pddkit sums trapezoids instead, which
    # differ by the rounding of < 100 additions of terms <= 1: below 1e-13
    assert [(c.length, c.repeats) for c in table] == [(L, r) for L in (25, 50) for r in (1, 10, 100)]
    for c in table:
        pos = [r["m"] for r in rows if r["label"] and (r["length"], r["repeats"]) == (c.length, c.repeats)]
        neg = [r["m"] for r in rows if not r["label"] and r["length"] == c.length]
        assert (c.n_members, c.n_nonmembers) == (6, 12)
        assert c.metrics["m"].auc == pytest.approx(hand_auc(pos, neg), abs=1e-13)
        assert c.ci and c.metrics["m"].n_bootstrap == 200
    for c in by_bucket:
        pos = [r["m"] for r in rows if r["label"] and (r["length"], r["repeats"], r["bucket"])
               == (c.length, c.repeats, c.bucket)]
        neg = [r["m"] for r in rows if not r["label"] and (r["length"], r["bucket"]) == (c.length, c.bucket)]
        assert c.metrics["m"].auc == pytest.approx(hand_auc(pos, neg), abs=1e-13)
        assert (c.n_members, c.n_nonmembers) == (3, 6)
        assert not c.ci and c.metrics["m"].n_bootstrap == 0  # 3 < CI_MIN_PER_CLASS
    assert CI_MIN_PER_CLASS > 3


def test_a_cell_without_held_out_traps_or_with_undefined_scores_says_why():
    rows = [{"id": f"a{k}", "length": 25, "repeats": 1, "bucket": 0, "label": 1, "m": float(k)}
            for k in range(3)]
    rows += [{"id": f"b{k}", "length": 50, "repeats": 1, "bucket": 0, "label": 1, "m": float(k)}
             for k in range(3)]
    rows += [{"id": f"c{k}", "length": 50, "repeats": 0, "bucket": 0, "label": 0,
              "m": math.nan if k == 0 else float(k)} for k in range(3)]
    table, _ = table_cells(_scores(rows), ("m",), n_bootstrap=10, seed=0)
    assert table[0].metrics["m"] is None and "no held-out traps of length 25" in table[0].reasons["m"]
    assert table[1].metrics["m"] is None and table[1].reasons["m"] == "1 trap has no finite m score"


def test_a_folder_never_injected_is_refused_before_any_model_loads(tmp_path):
    folder = build_folder(None, inject=False).write(tmp_path / "gen")
    with pytest.raises(PddkitError, match="inject them first"):
        detect_traps(folder, "/nonexistent/model/dir")


@pytest.mark.parametrize("edit, sentence", [
    (lambda ins, traps: (*ins, Insertion(traps[1].id, "d", 3, (0,))), "marks held out"),
    (lambda ins, traps: (*ins, ins[0]), "twice"),
    (lambda ins, traps: (Insertion("nope", "d", 1, (0,)), *ins), "does not hold"),
    (lambda ins, traps: (Insertion(ins[0].trap_id, "d", 0, ()), *ins[1:]), "at least 1 repeat"),
])
def test_inconsistent_trap_info_is_one_sentence(tmp_path, edit, sentence):
    f = build_folder(None)
    bad = TrapFolder(f.traps, f.manifest, edit(f.insertions, f.traps), f.injection)
    with pytest.raises(PddkitError, match=sentence):
        detect_traps(bad, "/nonexistent/model/dir")


@pytest.mark.slow
def test_a_folder_from_another_tokenizer_is_scored_with_a_notice(tiny_pair, tmp_path):
    """A publisher tests a third party's model, with another tokenizer than the one the
    traps were generated with (the authors: LLaMA-2 traps detected in CroissantLLM). The
    traps are scored, the cells keyed by the generating tokenizer's length, the notice
    counts the traps of another length under the target's, and scores.jsonl has each
    trap's count under it."""
    from test_traps_generate import word_tokenizer

    from pddkit.reporting.traps_report import terminal_lines

    _, target, ref = tiny_pair
    words = word_tokenizer(["<|endoftext|>", "<unk>", *WORDS, "zebra"])
    f = build_folder(words)  # one word, one token: exact lengths under `words`
    f = replace(f, manifest={**f.manifest, "tokenizer": {**f.manifest["tokenizer"], "name": "words"}})
    # three traps with a word the target's byte-level BPE never merged: longer under it
    odd = {f.traps[k].id for k in (0, 1, 30)}
    traps = tuple(replace(t, text=" zebra" + t.text[t.text.index(" ", 1):]) if t.id in odd else t
                  for t in f.traps)
    assert all(len(words(t.text, add_special_tokens=False)["input_ids"]) == t.length for t in traps)
    path = TrapFolder(traps, f.manifest, f.insertions, f.injection).write(tmp_path / "other")
    result = detect_traps(path, str(target), ref_model=str(ref), device="cpu", n_bootstrap=0)
    out = result.write(tmp_path / "out", report=False)
    saved = json.loads((out / "results.json").read_text())
    assert saved["tokenizer"]["same"] is False and saved["tokenizer"]["generating"] == "words"
    # no epochs given: exposures unknown, said, never guessed
    assert saved["epochs"] is None and saved["exposures"] is None
    assert all(c["exposures"] is None for c in saved["table"] + saved["by_bucket"])
    assert any("so the exposures are unknown" in n for n in saved["notices"])
    assert saved["counts"]["reencoded_other_length"] == 3
    [note] = [n for n in saved["notices"] if "another tokenizer" in n]
    assert "(words's, by its manifest's fingerprint)" in note
    assert "trap lengths are the generating tokenizer's" in note
    assert "3 of 48 traps re-encode to other lengths" in note
    rows = {r["id"]: r for r in map(json.loads, (out / "scores.jsonl").read_text().splitlines())}
    assert len(rows) == 48
    for t in traps:
        assert rows[t.id]["length"] == t.length  # the generating tokenizer's L
        assert (rows[t.id]["tokens"] > t.length) == (t.id in odd)
    assert saved["lengths"] == [4, 8] and all(c["n_members"] + c["n_nonmembers"] > 0
                                              for c in saved["table"])
    assert any("of the generating tokenizer (words's), not the target's: 3 traps" in line
               for line in terminal_lines(saved))
    # no fingerprint, and no trap keeps its length: scored too, the notice says so
    f = build_folder(small_tokenizer())
    manifest = {**f.manifest, "tokenizer": {"name": "tiny"}}
    longer = tuple(replace(t, length=t.length + 1) for t in f.traps)
    result = detect_traps(TrapFolder(longer, manifest, f.insertions, f.injection), str(target),
                          device="cpu", n_bootstrap=0)
    assert result.tokenizer["same"] is None and result.counts["reencoded_other_length"] == 48
    assert any("48 of 48 traps re-encode to another length" in n and "every trap does" in n
               for n in result.notices)
    assert [(c.length, c.repeats) for c in result.table] == [(L, r) for L in (5, 9) for r in (1, 4)]


def forward_mean_logprob(model_dir, texts) -> list[float]:
    """A plain forward pass per text, as the paper scores a trap: the start token (<|endoftext|>,
    id 0, the tokenizer's BOS) then the text's ids; the mean over the text's tokens of
    log p(token | everything before it)."""
    import torch
    from transformers import AutoTokenizer, GPT2LMHeadModel

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = GPT2LMHeadModel.from_pretrained(model_dir).eval()
    out = []
    for text in texts:
        ids = [tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"]]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].double()  # [n + 1, V]
        logp = torch.log_softmax(logits, dim=-1)
        out.append(float(np.mean([logp[i - 1, ids[i]].item() for i in range(1, len(ids))])))
    return out


@pytest.mark.slow
def test_detect_end_to_end_against_a_plain_forward_pass(tiny_pair, tmp_path):
    tok, target, ref = tiny_pair
    f = build_folder(tok)
    # one trap no longer re-encodes to its length: kept, counted, warned
    traps = (replace(f.traps[0], text=f.traps[0].text + " fox"), *f.traps[1:])
    path = TrapFolder(traps, f.manifest, f.insertions, f.injection).write(tmp_path / "injected")
    result = detect_traps(path, str(target), ref_model=str(ref), device="cpu", n_bootstrap=100,
                          epochs=3)
    out = result.write(tmp_path / "out")
    assert "ref" in result.methods and result.primary == "ref"
    assert result.counts["reencoded_other_length"] == 1
    assert any("1 of 48 traps re-encode to another length" in n for n in result.notices)
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == 48 and {r["id"] for r in rows} == {t.id for t in f.traps}
    by_id = {r["id"]: r for r in rows}
    # build_folder: members alternate with held-out traps, repeats 1, 4 in turn
    repeats = {i.trap_id: i.repeats for i in f.insertions}
    assert sum(r["label"] for r in rows) == 24
    for t in traps:
        r = by_id[t.id]
        assert (r["label"], r["repeats"]) == (int(t.id in repeats), repeats.get(t.id, 0))
        assert r["exposures"] == 3 * repeats.get(t.id, 0)  # 3 epochs: 3 or 12, held out 0
    # The paper's attack, from a plain forward pass: the ratio of the target's perplexity to
    # the reference's, exp(-mean L_target) / exp(-mean L_ref); pddkit's `ref` is minus its
    # log, mean L_target - mean L_ref, and `loss` is mean L_target. Both passes run float32
    # weights; each L_i is a log-softmax over 300 logits of size O(1), so a batched and a
    # single evaluation differ by at most ~300 x 1.2e-7 ~ 4e-5 per token: 1e-4 covers it.
    lt = forward_mean_logprob(target, [t.text for t in traps])
    lr = forward_mean_logprob(ref, [t.text for t in traps])
    for t, a, b in zip(traps, lt, lr):
        assert by_id[t.id]["loss"] == pytest.approx(a, abs=1e-4)
        assert by_id[t.id]["ref"] == pytest.approx(a - b, abs=1e-4)
    ratio = {t.id: math.exp(-a) / math.exp(-b) for t, a, b in zip(traps, lt, lr)}
    saved = json.loads((out / "results.json").read_text())
    assert saved["study"] == "traps detect" and saved["lengths"] == [4, 8]
    assert saved["repeats"] == [1, 4] and saved["buckets"] == [0, 1, 2]
    assert saved["epochs"] == 3 and saved["exposures"] == [3, 12]
    assert not any("exposures are unknown" in n for n in saved["notices"])
    for cell in saved["table"] + saved["by_bucket"]:
        assert cell["exposures"] == 3 * cell["repeats"]
        here = [t for t in traps if t.length == cell["length"]
                and cell["bucket"] in (None, t.bucket)]
        pos = [t.id for t in here if repeats.get(t.id) == cell["repeats"]]
        neg = [t.id for t in here if t.id not in repeats]
        assert (cell["n_members"], cell["n_nonmembers"]) == (len(pos), len(neg))
        # Table 2 / Figure 3 cells: a member has a lower ratio; AUC over the forward pass's
        # ratios (no two of them closer than 1e-4, so the ranking is pddkit's too). An AUC is
        # a count of pairs (halves for ties) over at most 6 x 12 pairs; pddkit sums it as
        # trapezoids, so the two differ by the rounding of < 100 additions of terms <= 1:
        # under 100 x 1.1e-16, hence 1e-13.
        want = hand_auc([-ratio[i] for i in pos], [-ratio[i] for i in neg])
        assert cell["metrics"]["ref"]["auc"] == pytest.approx(want, abs=1e-13), cell
        want = hand_auc([by_id[i]["loss"] for i in pos], [by_id[i]["loss"] for i in neg])
        assert cell["metrics"]["loss"]["auc"] == pytest.approx(want, abs=1e-13)
    assert min(abs(x - y) for i, x in enumerate(ratio.values())
               for j, y in enumerate(ratio.values()) if i < j) > 1e-4
    html = (out / "report.html").read_text()
    assert "Table 2 layout" in html and "Figure 3 layout" in html and "[1, 2)" in html
    assert "1 repeat = 3 exposures" in html and "4 repeats = 12 exposures" in html


def test_exposures_are_repeats_times_the_stated_epochs_and_never_guessed():
    rows = [{"id": f"{k}", "length": 25, "repeats": (0, 1, 10, 100)[k % 4], "bucket": 0,
             "label": int(k % 4 > 0), "m": float(k)} for k in range(40)]
    table, by_bucket = table_cells(_scores(rows), ("m",), n_bootstrap=0, seed=0, epochs=12)
    assert [(c.repeats, c.exposures) for c in table] == [(1, 12), (10, 120), (100, 1200)]
    assert [(c.repeats, c.exposures) for c in by_bucket] == [(1, 12), (10, 120), (100, 1200)]
    assert [c.to_dict()["exposures"] for c in table] == [12, 120, 1200]
    table, _ = table_cells(_scores(rows), ("m",), n_bootstrap=0, seed=0)  # epochs unknown
    assert [c.exposures for c in table] == [None, None, None]
    for bad in (0, -2, 1.5, True, "12"):
        with pytest.raises(PddkitError, match=re.escape("a whole number of at least 1 (leave "
                                                        "it out if unknown)")):
            detect_traps(build_folder(None), "/nonexistent/model/dir", epochs=bad)


@pytest.mark.parametrize("name, line, field, value, sentence", [
    ("trap-info.jsonl", 1, "positions", 5, "'positions' must be a list of whole numbers, not 5"),
    ("trap-info.jsonl", 2, "positions", [0, "7"], "'positions' must be a list of whole numbers"),
    ("trap-info.jsonl", 1, "repeats", "4", '\'repeats\' must be a whole number, not "4"'),
    ("trap-info.jsonl", 3, "repeats", True, "'repeats' must be a whole number, not true"),
    ("trap-info.jsonl", 1, "document_id", 12, "'document_id' must be a string, not 12"),
    ("traps.jsonl", 1, "length", "5", '\'length\' must be a whole number, not "5"'),
    ("traps.jsonl", 4, "length", 4.0, "'length' must be a whole number, not 4.0"),
    ("traps.jsonl", 2, "bucket", None, "'bucket' must be a whole number, not null"),
    ("traps.jsonl", 1, "perplexity", "12.5", '\'perplexity\' must be a number, not "12.5"'),
    ("traps.jsonl", 1, "token_ids", [1, 2.5], "'token_ids' must be a list of whole numbers"),
    ("traps.jsonl", 1, "text", ["a"], '\'text\' must be a string, not ["a"]'),
    ("traps.jsonl", 5, "role", "Member", '\'role\' must be member or held_out, not "Member"'),
])
def test_a_malformed_trap_folder_is_one_sentence_naming_file_and_line(tmp_path, name, line,
                                                                      field, value, sentence):
    from pddkit.studies.traps.folder import read_folder

    path = build_folder(None).write(tmp_path / "f")
    rows = [json.loads(x) for x in (path / name).read_text().splitlines()]
    rows[line - 1][field] = value
    (path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(PddkitError) as e:
        read_folder(path)
    assert str(e.value).startswith(f"{path / name} line {line}: {sentence}"), str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(PddkitError, match=f"line {line}: '{field}'"):  # and before any model loads
        detect_traps(path, "/nonexistent/model/dir")
