"""Breakdowns by subset (issue 11, item 8) and language (item 7): per-subset metrics equal
the metrics of each subset alone, the blind baseline fitted within each subset, one-class
subsets without an AUC, the columns in results.json / the terminal / the report; methods
meaningless without letter case skipped for Chinese; jieba words for Chinese neighbours.

The runs use test_engine's fake backend (words are tokens, no model): milliseconds."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from test_engine import FakeBackend

from pddkit.data.samples import Dataset, Sample
from pddkit.engine.config import RunConfig
from pddkit.engine.plan import Resources, make_plan
from pddkit.engine.run import run_dataset
from pddkit.errors import PddkitError
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.subsets import breakdown, subset_indices
from pddkit.reporting.run_files import write_run

WORDS = ["river", "stone", "cloud", "winter", "lamp", "harbour", "orchard", "meadow", "lantern",
         "copper", "valley", "thunder", "garden", "candle", "forest", "silver", "window"]


def labelled(subsets=("arxiv", "github", "pubmed"), n=12, one_class=None, seed=0) -> Dataset:
    """n texts per subset, half members; `one_class` names a subset of members only. The
    members' texts end in a capitalised word, so the blind baseline can tell them apart."""
    rng = random.Random(seed)
    samples = []
    for sub in subsets:
        for i in range(n):
            label = 1 if sub == one_class else i % 2
            words = [rng.choice(WORDS) for _ in range(10 + i % 5)]
            text = " ".join(words) + (" Harbour" if label and rng.random() < 0.8 else "")
            samples.append(Sample(f"{sub}-{i}", text, label, source=f"fixture {sub} {i}",
                                  subset=sub))
    return Dataset("subsets-fixture", tuple(samples))


def run(dataset, **extra):
    cfg = dict(model="fake", methods="loss,zlib,mink", n_bootstrap=30, blind=False)
    return run_dataset(dataset, RunConfig(**{**cfg, **extra}), model=FakeBackend())


def same(a, b) -> None:
    """The same metrics of the same scores with the same bootstrap seed: equal but for a
    float64 summation order (1e-12 relative and absolute, for a TPR of 0, said)."""
    close = {"rel": 1e-12, "abs": 1e-12}
    assert a.auc == pytest.approx(b.auc, **close) and a.tpr == pytest.approx(b.tpr, **close)
    assert (a.auc_ci.low, a.auc_ci.high) == pytest.approx((b.auc_ci.low, b.auc_ci.high), **close)
    assert (a.n_members, a.n_nonmembers) == (b.n_members, b.n_nonmembers)


# -- per-subset metrics --------------------------------------------------------------------

def test_each_subset_gets_the_metrics_of_its_texts_alone():
    ds = labelled()
    res = run(ds)
    y = np.array(ds.labels)
    tags = np.array([s.subset for s in ds.samples])
    for m in res.methods:
        assert list(m.subsets) == ["arxiv", "github", "pubmed"]  # first-appearance order
        for name, got in m.subsets.items():
            idx = np.flatnonzero(tags == name)
            same(got, compute_metrics(m.scores[idx], y[idx], n_bootstrap=30, seed=0))
        same(m.metrics, compute_metrics(m.scores, y, n_bootstrap=30, seed=0))  # pooled unchanged


def test_with_a_validation_split_subsets_are_measured_on_the_test_part_only():
    ds = labelled(n=16)
    res = run(ds, val_fraction=0.5)
    test = np.array([s == "test" for s in res.splits])
    y = np.array(ds.labels)
    tags = np.array([s.subset for s in ds.samples])
    for m in res.methods:
        for name, got in m.subsets.items():
            idx = np.flatnonzero((tags == name) & test)
            same(got, compute_metrics(m.scores[idx], y[idx], n_bootstrap=30, seed=0))
    counts = res.to_dict()["subsets"]
    assert sum(c["members"] + c["nonmembers"] for c in counts.values()) == int(test.sum())


def test_a_subset_with_one_class_gets_no_auc_and_a_notice_not_a_crash():
    res = run(labelled(one_class="pubmed"))
    for m in res.methods:
        assert m.subsets["pubmed"] is None and m.subsets["arxiv"] is not None
    assert any("subset pubmed has only members" in n for n in res.notices)
    d = res.to_dict()
    assert d["subsets"]["pubmed"] == {"members": 12, "nonmembers": 0, "auc_defined": False}
    assert d["methods"]["loss"]["subsets"]["pubmed"] is None
    json.dumps(d)  # writable


def test_no_breakdown_without_subsets_or_with_a_single_one():
    assert breakdown([None, None]) == [] and breakdown(None) == []
    assert breakdown(["a", "a"]) == []  # its column would repeat the pooled one
    assert breakdown(["b", None, "a", "b"]) == ["b", "a"]
    idx = subset_indices(["b", None, "a", "b"], ["b", "a"], within=np.array([0, 2]))
    assert {k: v.tolist() for k, v in idx.items()} == {"b": [0], "a": [2]}
    single = run(labelled(subsets=("arxiv",)))
    assert all(m.subsets == {} for m in single.methods)
    assert "subsets" not in single.to_dict()


def test_texts_without_a_subset_count_in_the_pooled_metrics_only():
    ds = labelled(subsets=("a", "b"))
    samples = list(ds.samples)
    samples[0] = Sample(samples[0].id, samples[0].text, samples[0].label)  # no subset
    res = run(Dataset(ds.name, tuple(samples)))
    assert res.methods[0].subsets["a"].n_members + res.methods[0].subsets["a"].n_nonmembers == 11
    assert any("1 of 24 texts name no subset" in n for n in res.notices)


# -- the blind baseline per subset -----------------------------------------------------------

@pytest.mark.slow
def test_the_blind_baseline_is_fitted_within_each_subset():
    from pddkit.blind.baseline import BlindBaseline

    ds = labelled(subsets=("a", "b"), n=20, one_class=None)
    res = run(ds, blind=True)
    blind = next(m for m in res.methods if m.label == "blind")
    assert blind.params["per_subset"].startswith("fitted within each subset")
    for name in ("a", "b"):
        rows = [s for s in ds.samples if s.subset == name]
        y = [s.label for s in rows]
        own = BlindBaseline(seed=0).cross_val_scores([s.text for s in rows], y)  # that subset alone
        same(blind.subsets[name], compute_metrics(own, y, n_bootstrap=30, seed=0))
    per = res.to_dict()["blind_baseline"]["subsets"]
    assert set(per) == {"a", "b"} and all({"auc", "p", "warn"} <= set(v) for v in per.values())


@pytest.mark.slow
def test_blind_subsets_that_cannot_be_fitted_get_no_auc():
    ds = labelled(subsets=("a", "b", "c"), n=20, one_class="c")
    small = [s for s in ds.samples if s.subset != "b" or int(s.id.split("-")[1]) < 3]  # b: 2+1
    res = run(Dataset(ds.name, tuple(small)), blind=True)
    blind = next(m for m in res.methods if m.label == "blind")
    assert blind.subsets["a"] is not None
    assert blind.subsets["b"] is None and blind.subsets["c"] is None
    assert any(n.startswith("no blind baseline for subset b:") for n in res.notices)
    assert not any("subset c:" in n and "blind" in n for n in res.notices)  # one class: said once
    assert res.methods[0].subsets["b"] is not None  # the methods still have b's AUC


@pytest.mark.slow
def test_pddkit_blind_reports_each_subset_too(tmp_path):
    from pddkit.blind.baseline import BlindBaseline
    from pddkit.engine.blind_run import blind_result

    ds = labelled(subsets=("a", "b"), n=20)
    res = blind_result(ds, seed=0, n_bootstrap=30)
    rows = [s for s in ds.samples if s.subset == "b"]
    y = [s.label for s in rows]
    own = BlindBaseline(seed=0).cross_val_scores([s.text for s in rows], y)
    same(res.methods[0].subsets["b"], compute_metrics(own, y, n_bootstrap=30, seed=0))
    saved = json.loads((write_run(res, tmp_path) / "results.json").read_text())
    assert set(saved["blind_baseline"]["subsets"]) == {"a", "b"}
    assert saved["methods"]["blind"]["subsets"]["a"]["auc"] == res.methods[0].subsets["a"].auc


# -- where the columns show -------------------------------------------------------------------

@pytest.mark.slow
def test_results_json_terminal_and_report_show_one_column_per_subset(tmp_path):
    from pddkit.reporting.report import write_report
    from pddkit.reporting.terminal import metrics_table

    ds = labelled(subsets=("head", "middle", "tail"), n=20, one_class="tail")
    res = run(ds, blind=True)
    out = write_run(res, tmp_path)
    saved = json.loads((out / "results.json").read_text())
    assert list(saved["subsets"]) == ["head", "middle", "tail"]
    head = saved["methods"]["loss"]["subsets"]["head"]
    assert {"auc", "auc_ci", "tpr@0.01", "tpr@0.05", "tpr@0.1", "tpr@0.01_ci"} <= set(head)
    assert saved["methods"]["loss"]["subsets"]["tail"] is None
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert [r["subset"] for r in rows] == [s.subset for s in ds.samples]

    text = metrics_table(res)
    table = text[text.index("AUC per subset"):].splitlines()
    assert table[1].split() == ["method", "AUC,", "all", "head", "middle", "tail"]
    loss = next(line for line in table if line.startswith("loss"))
    auc = res.methods[0].subsets
    assert f"{auc['head'].auc:.3f}" in loss and f"{auc['middle'].auc:.3f}" in loss
    assert loss.rstrip().endswith("-")  # tail: one class
    assert any(line.startswith("blind") for line in table)
    assert "tail has only members: no AUC" in text

    html_path, md_path = write_report(out)
    page = html_path.read_text()
    assert "<table id='subsets'>" in page and "<th>middle</th>" in page
    md = md_path.read_text()
    assert "## AUC per subset" in md and "| method | AUC, all [95% CI] | head | middle | tail |" in md


def test_report_subset_table_says_test_part_when_validating(tmp_path):
    from pddkit.reporting.run_tables import subset_table

    res = run(labelled(n=16), val_fraction=0.5)
    table = subset_table(res.to_dict())
    assert table.title == "AUC per subset (test part)"
    assert subset_table(run(labelled(subsets=("x",))).to_dict()) is None


# -- language ---------------------------------------------------------------------------------

def test_lowercase_is_skipped_with_a_notice_for_a_language_without_letter_case():
    notices: list[str] = []
    plan = make_plan("all", Resources(), notices=notices, language="zh")
    assert "lowercase" not in [c.label for c in plan.calls] and "loss" in [c.label for c in plan.calls]
    assert any(n.startswith("skipping lowercase:") and "`language` zh" in n for n in notices)
    named: list[str] = []
    plan = make_plan("loss,lowercase", Resources(), notices=named, language="ja")
    assert [c.label for c in plan.calls] == ["loss"] and "skipping lowercase" in named[0]
    for cased in ("en", "de", "ru", "zh-Latn", None):
        assert "lowercase" in [c.label for c in make_plan("loss,lowercase", Resources(),
                                                          language=cased).calls]
    with pytest.raises(PddkitError, match="selects no method"):
        make_plan("lowercase", Resources(), language="zh")


def test_letter_case_by_language():
    from pddkit.methods.base import has_letter_case

    for code in ("zh", "ZH", "zh_Hant", "zh-CN", "ja", "ko", "th", "ar", "he", "hi", "sr-Arab"):
        assert not has_letter_case(code), code
    for code in ("en", "fr", "ru", "el", "hy", "sr-Cyrl", "zh-Latn", "xx-unknown"):
        assert has_letter_case(code), code


def test_a_chinese_data_set_runs_no_lowercase_pass():
    ds = labelled(subsets=("a", "b")).with_meta(language="zh")
    fake = FakeBackend()
    res = run_dataset(ds, RunConfig(model="fake", methods="all", n_bootstrap=20, blind=False),
                      model=fake)
    assert "lowercase" not in res.scores() and "loss" in res.scores()
    assert [desc for desc, _ in fake.calls] == ["target pass"]
    assert sum(n.startswith("skipping lowercase") for n in res.notices) == 1  # computed once


# -- jieba words for Chinese neighbours ----------------------------------------------------------

TEXT_ZH = "我们今天去北京看书，他在家里写字。"


def jieba_words(text):
    import jieba

    return [(w, a, b) for w, a, b in jieba.tokenize(text)]


def test_chinese_words_are_jiebas_words_of_han_characters():
    from pddkit.resources.neighbors import chinese_words

    words = chinese_words(TEXT_ZH)
    expected = {(a, b) for w, a, b in jieba_words(TEXT_ZH) if w not in "，。"}
    assert words == expected and (0, 2) in words  # 我们
    assert all(TEXT_ZH[a:b] not in ("，", "。") for a, b in words)


def test_word_positions_in_chinese_are_tokens_that_are_one_whole_jieba_word():
    from pddkit.resources.neighbors import WordRule, _word_positions, chinese_words

    words = chinese_words(TEXT_ZH)
    rule = WordRule("##", False)
    # a character-level tokenizer (bert-base-chinese): one token per character
    chars = [(i, i + 1) for i in range(len(TEXT_ZH))]
    pos = _word_positions(TEXT_ZH, [(0, 0), *chars, (0, 0)], ["[CLS]", *TEXT_ZH, "[SEP]"], rule,
                          words)
    single = {a for w, a, b in jieba_words(TEXT_ZH) if b - a == 1 and w not in "，。"}
    assert [p - 1 for p in pos] == sorted(single) and single  # only one-character words
    # a tokenizer with word tokens (SentencePiece-like, no markers inside the text)
    spans = [(a, b) for _, a, b in jieba_words(TEXT_ZH)]
    tokens = [TEXT_ZH[a:b] for a, b in spans]
    pos = _word_positions(TEXT_ZH, spans, tokens, WordRule("▁", True), words)
    assert [spans[p] for p in pos] == sorted(words)
    # without `words` (English rules) nothing in Chinese is replaceable
    assert _word_positions(TEXT_ZH, chars, list(TEXT_ZH), rule) == []


@pytest.fixture(scope="module")
def chinese_mask_model():
    """A tiny BERT-shaped fill-mask model (random weights) with a character WordPiece
    vocabulary, as bert-base-chinese tokenizes: milliseconds, no download."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    from pddkit.resources.neighbors import MaskModel

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = sorted(set(TEXT_ZH + "你好天地人山水火木金土") - set("，。"))
    vocab = {t: i for i, t in enumerate([*specials, "，", "。", "a", "b", "##a", "##b", *chars])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(handle_chinese_chars=True, lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=64)
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=32,
                                       max_position_embeddings=64)).eval()
    return MaskModel(model, fast, "tiny-chinese-bert")


def test_chinese_neighbours_swap_one_jieba_word_for_han_characters(chinese_mask_model):
    from pddkit.resources.neighbors import _HAN, neighbors_of

    mm = chinese_mask_model
    single = {a for w, a, b in jieba_words(TEXT_ZH) if b - a == 1 and w not in "，。"}
    nbs = neighbors_of(mm, TEXT_ZH, n_neighbors=8, top_k=5, dropout=0.1, seed=0, language="zh")
    assert 0 < len(nbs) <= 8 and len(set(nbs)) == len(nbs)
    for nb in nbs:
        assert len(nb) == len(TEXT_ZH)  # one character for one character
        diff = [i for i, (a, b) in enumerate(zip(nb, TEXT_ZH)) if a != b]
        assert len(diff) == 1 and diff[0] in single and _HAN.fullmatch(nb[diff[0]])
    assert nbs == neighbors_of(mm, TEXT_ZH, n_neighbors=8, top_k=5, dropout=0.1, seed=0,
                               language="zh")  # seeded
    with pytest.raises(PddkitError, match="bert-base-chinese"):
        neighbors_of(mm, "，。", language="zh")


def test_chinese_neighbours_without_jieba_is_one_sentence(monkeypatch, chinese_mask_model):
    import sys

    from pddkit.resources.neighbors import generate

    monkeypatch.setitem(sys.modules, "jieba", None)  # import jieba fails
    with pytest.raises(PddkitError, match=r"pip install jieba") as e:
        generate(chinese_mask_model, [TEXT_ZH], ["t0"], 2, 5, 0.1, 0, language="zh")
    assert str(e.value).count(". ") == 0
