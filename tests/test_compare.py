"""`pddkit compare`, the unlearning audit (Shi et al. 2024, section 7): ratios and the band,
ROUGE-L recall, chunks, bad input, the report, and ground truth (a tiny model trained on
chunks of two books, then gradient-ascent unlearning applied to a random half of them, on
three seeds)."""

from __future__ import annotations

import contextlib
import copy
import csv
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl
from conftest import shared_path

from pddkit.errors import PddkitError
from pddkit.studies.compare import (
    ChunkResult,
    CompareResult,
    book_chunks,
    compare_models,
    lcs_length,
    not_removed,
    rouge_l_recall,
    score_ratios,
)

# -- ratios, the band, ROUGE-L ----------------------------------------------------------


def test_ratio_is_unlearned_over_original_and_the_band_is_open():
    original = np.array([-2.0, -2.0, -2.0, -2.0, -2.0, -2.0, -2.0])
    unlearned = np.array([-2.2, -2.6, -1.8, -1.5, -4.0, -2.5, -1.6])
    r = score_ratios(original, unlearned)
    # one float64 division of numbers written to one decimal: 2 roundings of 1.1e-16
    np.testing.assert_allclose(r, [1.1, 1.3, 0.9, 0.75, 2.0, 1.25, 0.8], rtol=1e-15, atol=0)
    # (1/1.25, 1.25) = (0.8, 1.25): both ends are outside ("moved")
    assert not_removed(r, 1.25).tolist() == [True, False, True, False, False, False, False]
    # a text predicted with certainty: finite ratios, 1 when neither model moved
    r0 = score_ratios([0.0, 0.0, -1.0], [0.0, -1.0, 0.0])
    # 0 counts as -EPS (compare.EPS, far below 1e-6): 1 / EPS > 1e6 and EPS / 1 < 1e-6
    assert np.isfinite(r0).all() and r0[0] == 1.0 and r0[1] > 1e6 and r0[2] < 1e-6
    assert not_removed(r0, 1.15).tolist() == [True, False, False]


def test_ratio_direction_matches_min_k_prob():
    """Min-K% Prob is a mean log-probability (negative): a text the unlearned model finds
    less likely has a more negative score, so its ratio is above 1."""
    # one float64 division each: within 2 roundings (rel 2.2e-16); 1e-15 said
    assert score_ratios([-3.0], [-6.0])[0] == 2.0  # forgotten: far outside (exact: 6/3)
    assert score_ratios([-3.0], [-3.1])[0] == pytest.approx(3.1 / 3.0, rel=1e-15)  # barely moved


def _lcs_dp(a, b):
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], prev + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def test_lcs_equals_dynamic_programming():
    rng = random.Random(0)
    for _ in range(300):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 30))]
        b = [rng.choice("abcdef") for _ in range(rng.randint(0, 30))]
        assert lcs_length(a, b) == _lcs_dp(a, b), (a, b)


def test_rouge_l_recall():
    # LCS "the cat on the mat" = 5 of the reference's 6 words; a count over a count, one
    # float64 division, the same as 5 / 6 here: equal
    assert rouge_l_recall("the cat sat on the mat", "the cat is on the mat") == 5 / 6
    assert rouge_l_recall("The CAT, on: the mat!", "the cat on the mat") == 1.0
    # "the on the" in order: 3 of 5
    assert rouge_l_recall("mat the on cat the", "the cat on the mat") == 3 / 5
    assert rouge_l_recall("", "the cat") == 0.0
    assert rouge_l_recall("anything", "") == 0.0
    # recall: extra candidate words cost nothing
    assert rouge_l_recall("a b c the d cat e on f the g mat", "the cat on the mat") == 1.0


# -- chunks and bad input ---------------------------------------------------------------


HEADER = "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n"
FOOTER = "\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nlicence text here\n"


def _books(tmp_path, lengths=(25, 7)) -> Path:
    d = tmp_path / "books"
    d.mkdir()
    for i, n in enumerate(lengths):
        words = [f"w{i}_{j}" for j in range(n)]
        body = " ".join(words[:5]) + "\n\n" + " ".join(words[5:])
        (d / f"book{i}.txt").write_text("Title page\n" + HEADER + body + FOOTER)
    return d


def test_books_cut_into_consecutive_verbatim_chunks(tmp_path):
    chunks, counts = book_chunks(_books(tmp_path), 10)
    assert [c.id for c in chunks] == ["book0#0", "book0#1"]  # 25 words: 2 chunks, 5 dropped
    assert chunks[0].text == "w0_0 w0_1 w0_2 w0_3 w0_4\n\nw0_5 w0_6 w0_7 w0_8 w0_9"  # verbatim
    assert chunks[1].text.split() == [f"w0_{j}" for j in range(10, 20)]
    assert counts == {"books": 2, "books_too_short": 1}  # book1 (7 words) is shorter
    assert all("Title" not in c.text and "licence" not in c.text for c in chunks)
    jl = write_jsonl(tmp_path / "b.jsonl", [{"book": "A", "text": "a b c"},
                                            {"book": "A", "text": "d e f"}])
    chunks, _ = book_chunks(jl, 3)
    assert [c.text for c in chunks] == ["a b c", "d e f"] and chunks[0].source == "A"


def test_too_few_chunks_is_one_sentence(tmp_path, capsys):
    books = _books(tmp_path)
    with pytest.raises(PddkitError, match=r"none of the 2 books holds a chunk of 512 words "
                                          r"\(the longest has 25\).*lower `words`"):
        compare_models("m", "m2", books=books)
    code, _, err = run_cli(capsys, "compare", "--model", "/nonexistent/a", "--model-b",
                           "/nonexistent/b", "--books", books, "--output", tmp_path / "o")
    assert code == 1 and err.count("\n") == 1 and "lower --words" in err, err


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "zlib"}, "`method` must be one of mink, loss, surp"),
    ({"method": "mink,loss"}, "`method` must be one of"),
    ({"band": 1.0}, "`band` must be greater than 1"),
    ({"books": "x"}, "give exactly one of `chunks` and `books`"),
    ({"continuations": 2}, "`continuations` need `model_b` as a local Hugging Face model"),
])
def test_bad_options(tmp_path, kwargs, message):
    data = write_jsonl(tmp_path / "c.jsonl", [{"text": "some words here"}, {"text": "more"}])
    with pytest.raises(PddkitError, match=re.escape(message)):
        compare_models("/nonexistent/a", "org/hub-model", **{"chunks": data, **kwargs})


def test_cli_names_flags(tmp_path, capsys):
    data = write_jsonl(tmp_path / "c.jsonl", [{"text": "some words here"}])
    code, _, err = run_cli(capsys, "compare", "--model", "/nonexistent/a", "--model-b",
                           "org/hub-model", "--data", data, "--continue", "2", "--output",
                           tmp_path / "o")
    assert code == 1 and "--continue need --model-b as a local" in err, err
    code, _, err = run_cli(capsys, "compare", "--model", "a", "--model-b", "b", "--output",
                           tmp_path / "o2")
    assert code == 1 and "give exactly one of --data and --books" in err, err


def test_different_tokenizers_are_allowed_and_said(tmp_path):
    """Each model scores with its own tokenizer; the result and the report say so."""
    from pddkit.reporting.compare_report import write_outputs
    from pddkit.sandbox.training import build_gpt2, save, train_bpe_tokenizer

    text = ("It was a bright cold day in April, and the clocks were striking thirteen. "
            "The hallway smelt of boiled cabbage and old rag mats. ") * 3
    dirs = []
    for i, size in enumerate((300, 400)):
        tok = train_bpe_tokenizer([text, text.upper()], vocab_size=size)
        dirs.append(save(build_gpt2(tok, n_layer=1, n_embd=16, n_head=2, seed=i), tok,
                         tmp_path / f"m{i}"))
    data = write_jsonl(tmp_path / "c.jsonl", [{"id": f"c{i}", "text": text[i * 20:i * 20 + 60]}
                                              for i in range(4)])
    res = compare_models(str(dirs[0]), str(dirs[1]), chunks=data, device="cpu")
    assert res.same_tokenizer is False and len(res.chunks) == 4
    assert any("different tokenizers" in n for n in res.notices)
    assert res.models["original"]["vocab_size"] != res.models["unlearned"]["vocab_size"]
    (tmp_path / "out").mkdir()
    write_outputs(res, tmp_path / "out")
    assert "different: each model scores with its own" in (tmp_path / "out" / "report.html").read_text()
    same = compare_models(str(dirs[0]), str(dirs[0]), chunks=data, device="cpu")
    assert same.same_tokenizer is True and all(c.ratio == 1.0 and c.flagged for c in same.chunks)


# -- outputs and the report -------------------------------------------------------------


def _hand_made() -> CompareResult:
    rows = [ChunkResult("HP#0", "HP", 512, -3.0, -3.1, 3.1 / 3.0, True, (0.4, 0.2), ("a", "b")),
            ChunkResult("HP#1", "HP", 512, -3.0, -6.0, 2.0, False),
            ChunkResult("HP#2", "HP", 512, -3.0, -2.0, 2 / 3, False),
            ChunkResult("HP#3", "HP", 512, -3.0, -2.9, 2.9 / 3.0, True, (0.1,), ("c",))]
    config = {"model": "orig", "model_b": "unl", "chunks": None, "books": "hp/", "words": 512,
              "method": "mink", "band": 1.15, "continuations": 2, "prompt_words": 200, "seed": 0}
    info = {"name": "orig", "tokenizer": "t", "vocab_size": 32000, "truncated": 0}
    return CompareResult(config, tuple(rows), {"original": info, "unlearned": {**info, "name": "unl"}},
                         True, {"chunks": 4, "not_removed": 2, "removed": 1, "more_likely": 1,
                                "no_continuation": 0, "books": 1, "books_too_short": 0})


def test_verdict_sentence():
    res = _hand_made()
    assert res.verdict.startswith("For 2 of 4 text chunks (50%) the unlearned model still finds")
    assert "reproduce on average 23% of the true text's words" in res.verdict
    none = CompareResult({**res.config}, (res.chunks[1],), res.models, True, res.counts)
    assert none.verdict.startswith("None of the 1 text chunks kept its likelihood")


@pytest.mark.slow
def test_outputs_and_browser(tmp_path):
    from browser import rendered

    from pddkit.reporting.compare_report import terminal_text, write_outputs

    res = _hand_made()
    out = tmp_path / "o"
    out.mkdir()
    path = write_outputs(res, out)
    for name in ("results.json", "scores.jsonl", "flagged.csv", "continuations.jsonl",
                 "report.html", "report.md", "ratios.png"):
        assert (out / name).is_file(), name
    saved = json.loads(path.read_text())
    assert saved["verdict"] == res.verdict and saved["counts"]["not_removed"] == 2
    assert [r["id"] for r in saved["flagged"]] == ["HP#0", "HP#3"]
    rows = list(csv.DictReader((out / "flagged.csv").open()))
    assert [r["id"] for r in rows] == ["HP#0", "HP#3"]  # least moved first
    # a mean of a few recalls, written as text: float64's 17 digits keep it to 1e-15
    assert float(rows[0]["rouge_l_mean"]) == pytest.approx(0.3, rel=1e-12)
    assert len((out / "continuations.jsonl").read_text().splitlines()) == 3
    assert len((out / "scores.jsonl").read_text().splitlines()) == 4
    text = terminal_text(res)
    assert "4 chunks: 2 not removed" in text and "HP#3" in text
    dom = rendered(out / "report.html", tmp_path / "profile", images=1)
    assert "id=\"verdict\"" in dom and "HP#3" in dom and "Not removed" in dom


# -- ground truth -----------------------------------------------------------------------
# Two books' chunks (20 of Doyle, 20 of Austen, 64 words each) train a tiny model (50
# epochs, batches of 4 blocks of 128 tokens: batches of 2 took 35% longer and held the same
# assertions); then gradient ascent (3 Adam steps maximising the LM loss, lr 1e-3) is
# applied to a seeded random half of the 40 chunks. Three seeds (each its own initial
# weights, training order and unlearned half): the ratio separates unlearned from kept
# chunks on every seed (kept-vs-unlearned AUC; figures in docs/guides/compare.md, `pytest
# tests/test_compare.py -m slow -s` prints them). The ascent also degrades the model in
# general, so kept chunks drift too, but less.

WORDS = 64
GT_BAND = 1.15
GT_SEEDS = (0, 1, 2)
GT_MIN_AUC = 0.85  # on every seed (measured 1.000, 0.970, 0.943: docs/guides/compare.md)


@dataclass(frozen=True)
class UnlearnWorld:
    original: Path
    unlearned: Path
    books: Path
    forgotten: frozenset[str]  # ids of the chunks gradient ascent was applied to (half)
    kept: frozenset[str]


def _gradient_ascent(model, tok, texts, steps: int, lr: float) -> None:
    import torch

    from pddkit.backends.hf_tokenizers import start_token_id

    s = start_token_id(tok)
    enc = [[s, *ids] for ids in tok(texts, add_special_tokens=False)["input_ids"]]
    width = max(map(len, enc))
    ids = torch.full((len(enc), width), s)
    labels = torch.full((len(enc), width), -100)
    for r, x in enumerate(enc):
        ids[r, :len(x)] = torch.tensor(x)
        labels[r, :len(x)] = torch.tensor(x)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        (-loss).backward()  # ascent: maximise the loss on the texts to forget
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    model.eval()


@contextlib.contextmanager
def one_thread():
    """Tiny models on a shared CPU: one intra-op thread (two spin against other jobs and
    make a 64-wide model's token steps 10x slower); restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def unlearn_world(tmp_path_factory) -> UnlearnWorld:
    with one_thread():
        return _unlearn_world(tmp_path_factory, seed=0)


@pytest.fixture(scope="module")
def unlearn_worlds(unlearn_world, tmp_path_factory) -> list[UnlearnWorld]:
    """The ground truth on GT_SEEDS: seed 0's world and one more per other seed."""
    with one_thread():
        return [unlearn_world, *(_unlearn_world(tmp_path_factory, seed=s) for s in GT_SEEDS[1:])]


def _unlearn_world(tmp_path_factory, seed: int) -> UnlearnWorld:
    """Seed: the model's initial weights and training order, and which half is unlearned."""
    from pddkit.data.gutenberg import strip_gutenberg
    from pddkit.sandbox.training import build_gpt2, save, train_bpe_tokenizer, train_causal_lm

    root = shared_path("corpora", "gutenberg")
    tmp = tmp_path_factory.mktemp(f"unlearn-{seed}")
    books = tmp / "books"
    books.mkdir()

    def words_of(author: str) -> list[str]:
        f = sorted((root / author).glob("*.txt"))[0]
        return strip_gutenberg(f.read_text(encoding="utf-8", errors="replace")).split()

    for name, author in (("doyle", "Doyle, Arthur Conan"), ("austen", "Austen, Jane")):
        w = words_of(author)[5 * WORDS:25 * WORDS]  # 20 chunks, past the title pages
        (books / f"{name}.txt").write_text(" ".join(w))
    chunks, _ = book_chunks(books, WORDS)  # exactly what `pddkit compare --books` cuts
    assert len(chunks) == 40
    tok = train_bpe_tokenizer([" ".join(words_of("Poe, Edgar Allan"))], vocab_size=1024)
    model = build_gpt2(tok, n_layer=2, n_embd=64, n_positions=256, seed=seed)
    order = [c.text for pair in zip(chunks[:20], chunks[20:]) for c in pair]
    train_causal_lm(model, tok, order, epochs=50, lr=3e-3, batch_size=4, seed=seed, context=128)
    original = save(model, tok, tmp / "original")
    ids = [c.id for c in chunks]
    random.Random(seed).shuffle(ids)
    forget_ids = frozenset(ids[:20])  # a random half, of both books
    unlearned = copy.deepcopy(model)
    _gradient_ascent(unlearned, tok, [c.text for c in chunks if c.id in forget_ids], steps=3, lr=1e-3)
    return UnlearnWorld(original, save(unlearned, tok, tmp / "unlearned"), books,
                        forget_ids, frozenset(ids[20:]))


def _kept_vs_unlearned_auc(kept, forgot) -> float:
    """P(an unlearned chunk's ratio > a kept chunk's), ties counting one half."""
    k, f = np.asarray(kept)[:, None], np.asarray(forgot)[None, :]
    return float(((f > k).sum() + 0.5 * (f == k).sum()) / (k.size * f.size))


def test_kept_vs_unlearned_auc_counts_pairs():
    assert _kept_vs_unlearned_auc([1.0, 1.1], [1.2, 1.3]) == 1.0
    assert _kept_vs_unlearned_auc([1.2, 1.3], [1.0, 1.1]) == 0.0
    # pair counts over 4: an exact binary fraction
    assert _kept_vs_unlearned_auc([1.0, 1.2], [1.1, 1.2]) == (1 + 1 + 0 + 0.5) / 4


@pytest.mark.slow
def test_ground_truth_the_ratio_separates_unlearned_from_kept_chunks_on_every_seed(unlearn_worlds):
    rows = []
    for seed, w in zip(GT_SEEDS, unlearn_worlds):
        with one_thread():
            res = compare_models(str(w.original), str(w.unlearned), books=w.books, words=WORDS,
                                 band=GT_BAND, device="cpu")
        assert res.same_tokenizer is True
        ratios = {c.id: c.ratio for c in res.chunks}
        assert {c.id for c in res.flagged} == {i for i, r in ratios.items()
                                               if 1 / GT_BAND < r < GT_BAND}
        kept, forgot = (np.array([ratios[i] for i in sorted(ids)]) for ids in (w.kept, w.forgotten))
        auc = _kept_vs_unlearned_auc(kept, forgot)
        shares = [(not_removed(kept, b).mean(), not_removed(forgot, b).mean())
                  for b in (1.1, 1.12, 1.15, 1.2)]
        rows.append((seed, auc, np.median(kept), np.median(forgot), shares))
        print(f"\nseed {seed}: kept-vs-unlearned AUC of the ratio {auc:.3f}; kept median "
              f"{np.median(kept):.3f} [{kept.min():.3f}, {kept.max():.3f}], unlearned median "
              f"{np.median(forgot):.3f} [{forgot.min():.3f}, {forgot.max():.3f}]; flagged (kept "
              "/ unlearned): " + "; ".join(f"band {b}: {k:.0%} / {f:.0%}" for b, (k, f)
                                          in zip((1.1, 1.12, 1.15, 1.2), shares)))
        # ascent made every unlearned chunk less likely, and more so than the kept ones
        assert all(ratios[i] > 1 for i in w.forgotten), seed
        assert auc >= GT_MIN_AUC, (seed, auc)
        k15, f15 = shares[2]
        assert k15 > f15, (seed, k15, f15)  # the paper's band flags kept chunks more often
    aucs = np.array([r[1] for r in rows])
    print(f"AUC over seeds {GT_SEEDS}: mean {aucs.mean():.3f}, sd {aucs.std(ddof=1):.3f}, "
          f"range {aucs.min():.3f}-{aucs.max():.3f}")


@pytest.mark.slow
def test_cli_end_to_end_with_continuations(unlearn_world, tmp_path, capsys):
    w = unlearn_world
    out = tmp_path / "audit"
    args = ["compare", "--model", w.original, "--model-b", w.unlearned, "--books", w.books,
            "--words", WORDS, "--band", GT_BAND, "--continue", 2, "--prompt-words", 32,
            "--device", "cpu", "--seed", 0, "--output", out]
    with one_thread():
        code, stdout, err = run_cli(capsys, *args)
    assert code == 0, err
    saved = json.loads((out / "results.json").read_text())
    n = saved["counts"]["not_removed"]
    scores = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    inside = {r["id"] for r in scores if 1 / GT_BAND < r["ratio"] < GT_BAND}
    assert saved["configuration"]["band"] == GT_BAND and saved["counts"]["chunks"] == len(scores) == 40
    assert n == len(inside) > 0 and {r["id"] for r in saved["flagged"]} == inside
    assert "unlearning probably did not remove them" in stdout and "ROUGE-L" in stdout
    print("\n" + stdout)
    lines = [json.loads(x) for x in (out / "continuations.jsonl").read_text().splitlines()]
    assert len(lines) == 2 * n and {x["id"] for x in lines} == inside
    # each recall is against the chunk's true rest after its first 32 words (not the prompt)
    from pddkit.data.builders.words import word_spans

    chunks = {c.id: c.text for c in book_chunks(w.books, WORDS)[0]}
    for x in lines:
        text = chunks[x["id"]]
        rest = text[word_spans(text)[32][0]:]
        # the same count over count, written to JSON and read back (repr: exact)
        assert x["rouge_l_recall"] == rouge_l_recall(x["continuation"], rest)
        assert len(rest.split()) == WORDS - 32
    assert len(list(csv.DictReader((out / "flagged.csv").open()))) == n
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "id='verdict'" in html
    # seeded: the same command gives the same continuations
    with one_thread():
        code, _, err = run_cli(capsys, *args, "--overwrite")
    assert code == 0, err
    again = [json.loads(x) for x in (out / "continuations.jsonl").read_text().splitlines()]
    assert again == lines


def test_every_studys_results_share_one_header(tmp_path):
    """audit, compare and infer results.json: the same top-level keys for what they share."""
    import importlib

    from pddkit.studies.dataset_inference import FeatureMatrix, decide
    from pddkit.studies.infer import InferenceResult

    audit_tests = importlib.import_module("test_audit")
    audit = json.loads((audit_tests._hand_made(tmp_path) / "results.json").read_text())
    compare = _hand_made().to_json()
    rng = np.random.default_rng(0)
    f = FeatureMatrix(("a", "b"), rng.normal(size=(20, 2)), rng.normal(size=(20, 2)))
    infer = InferenceResult(decide(f), f, {"model": "m"}, {}, (), {}, {}).to_dict()
    header = {"study", "paper", "pddkit_version", "verdict", "configuration", "models",
              "counts", "notices"}
    for name, d in (("audit", audit), ("compare", compare), ("infer", infer)):
        assert header <= set(d), (name, header - set(d))
        assert d["study"] == name and d["paper"].startswith(("Shi et al.", "Maini et al."))
