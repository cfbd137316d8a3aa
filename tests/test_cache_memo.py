"""The cache's memo (cache/memo.py): a rerun whose statistics are all cached loads neither
the model nor its tokenizer and fits no blind baseline, and gives the same results; any
change to the model's files, the truncation or the texts is noticed."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from pddkit.cache import cache_clear
from pddkit.cache.memo import Memo, result_key
from pddkit.data.samples import Dataset, Sample
from pddkit.engine.config import RunConfig
from pddkit.engine.run import run_dataset
from pddkit.reporting.cache_info_text import cache_info_lines
from pddkit.reporting.run_files import write_run

METHODS = "loss,zlib,mink,minkpp,surp"


@pytest.fixture()
def model_dir(tmp_path):
    """A tiny GPT-2 of our own in a folder the test may touch."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from pddkit.sandbox.training import train_bpe_tokenizer

    tok = train_bpe_tokenizer(["the quick brown fox jumps over the lazy dog. " * 4,
                               "a stitch in time saves nine, said the old tailor."], 300)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(tok),
                                       n_positions=64, bos_token_id=0, eos_token_id=0))
    d = tmp_path / "model"
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def dataset() -> Dataset:
    texts = ["the quick brown fox jumps over the lazy dog", "a stitch in time saves nine",
             "the old tailor said nothing at all", "nine foxes jump over a lazy tailor",
             "time saves the quick", "brown dogs are lazy in the time of the old"] * 2
    texts = [f"{t} {i}" for i, t in enumerate(texts)]
    return Dataset("memo-test", tuple(Sample(f"t{i}", t, i % 2) for i, t in enumerate(texts)))


def config(model_dir, cache, **extra) -> RunConfig:
    return RunConfig(model=str(model_dir), methods=METHODS, device="cpu", dtype="float32",
                     cache=str(cache), n_bootstrap=50, batch_size=4, **extra)


def forbid_loading(monkeypatch):
    """Any model, tokenizer or blind-baseline fit from here on fails the test."""
    import pddkit.backends.hf_loading as loading
    import pddkit.backends.hf_tokenizers as tokenizers
    from pddkit.blind.baseline import BlindBaseline

    def refuse(*a, **k):
        raise AssertionError("loaded or fitted on a fully cached rerun")

    monkeypatch.setattr(loading, "load_model", refuse)
    monkeypatch.setattr(tokenizers, "load_tokenizer", refuse)
    monkeypatch.setattr(BlindBaseline, "cross_val_scores", refuse)


def test_a_cached_rerun_loads_nothing_and_equals_the_first_run(model_dir, tmp_path, monkeypatch):
    first = run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    forbid_loading(monkeypatch)
    again = run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    for a, b in zip(first.methods, again.methods):
        assert a.label == b.label
        np.testing.assert_array_equal(a.scores, b.scores)  # bit for bit, the blind one too
    assert again.models["target"] == first.models["target"]
    assert again.models["target"]["vocab_size"] > 0 and again.models["target"]["dtype"] == "float32"
    assert again.counts["cache"]["target pass"] == {"hits": 12, "misses": 0}


def test_other_methods_on_the_same_texts_load_nothing(model_dir, tmp_path, monkeypatch):
    run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    forbid_loading(monkeypatch)
    res = run_dataset(dataset(), RunConfig(model=str(model_dir), methods="mink:k=0.5,surp:k=30",
                                           device="cpu", dtype="float32",
                                           cache=str(tmp_path / "cache"), n_bootstrap=50,
                                           batch_size=4))
    assert [m.label for m in res.methods][:2] == ["mink", "surp"]


def test_changed_model_files_are_loaded_again(model_dir, tmp_path, monkeypatch):
    run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    cfg = json.loads((model_dir / "config.json").read_text())
    cfg["layer_norm_epsilon"] = 1e-3  # another model: other statistics
    (model_dir / "config.json").write_text(json.dumps(cfg))
    res = run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    assert res.counts["cache"]["target pass"] == {"hits": 0, "misses": 12}


def test_touching_a_file_only_costs_a_load_not_the_statistics(model_dir, tmp_path):
    run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    st = (model_dir / "config.json").stat()
    os.utime(model_dir / "config.json", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    res = run_dataset(dataset(), config(model_dir, tmp_path / "cache"))  # loads, same fingerprint
    assert res.counts["cache"]["target pass"] == {"hits": 12, "misses": 0}
    assert len(list((tmp_path / "cache" / "memo" / "facts").iterdir())) == 2


def test_a_copied_model_folder_shares_the_statistics(model_dir, tmp_path):
    run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    copy = shutil.copytree(model_dir, tmp_path / "copy")
    res = run_dataset(dataset(), config(copy, tmp_path / "cache"))
    assert res.counts["cache"]["target pass"] == {"hits": 12, "misses": 0}


@pytest.mark.slow
def test_encodings_are_remembered_per_truncation(model_dir, tmp_path, monkeypatch):
    full = run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    cut = run_dataset(dataset(), config(model_dir, tmp_path / "cache", max_length=4))
    assert cut.counts["truncated"]["target"] == 12 and full.counts["truncated"]["target"] == 0
    assert cut.counts["cache"]["target pass"]["misses"] == 12
    forbid_loading(monkeypatch)
    again = run_dataset(dataset(), config(model_dir, tmp_path / "cache", max_length=4))
    assert again.counts["truncated"]["target"] == 12
    np.testing.assert_array_equal(again.methods[0].scores, cut.methods[0].scores)


@pytest.mark.slow
def test_new_texts_are_encoded_and_scored_old_ones_read(model_dir, tmp_path):
    run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    more = Dataset("more", (*dataset().samples, Sample("x0", "an entirely new text here", 1),
                            Sample("x1", "and another one", 0)))
    res = run_dataset(more, config(model_dir, tmp_path / "cache"))
    assert res.counts["cache"]["target pass"] == {"hits": 12, "misses": 2}


@pytest.mark.slow
def test_the_blind_memo_follows_the_labels(model_dir, tmp_path):
    run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    flipped = Dataset("flipped", tuple(Sample(s.id, s.text, 1 - s.label) for s in dataset().samples))
    res = run_dataset(flipped, config(model_dir, tmp_path / "cache"))
    assert len(list((tmp_path / "cache" / "memo" / "blind").iterdir())) == 2
    assert res.methods[-1].label == "blind"


def test_clear_removes_the_memo(model_dir, tmp_path):
    run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    assert (tmp_path / "cache" / "memo").is_dir()
    assert cache_clear(tmp_path / "cache") > 3
    assert not (tmp_path / "cache").exists()


def test_memo_files_that_cannot_be_read_are_ignored(tmp_path):
    memo = Memo(tmp_path)
    memo.put_facts("k", {"fingerprint": "f"})
    assert memo.get_facts("k") == {"fingerprint": "f"}
    (tmp_path / "memo" / "facts" / "k.json").write_text("{not json")
    assert memo.get_facts("k") is None
    memo.put_result("blind", "r", {"scores": np.arange(3.0)}, {"folds": 5})
    arrays, meta = memo.get_result("blind", "r")
    assert arrays["scores"].tolist() == [0.0, 1.0, 2.0] and meta == {"folds": 5}
    (tmp_path / "memo" / "blind" / "r.npz").write_bytes(b"garbage")
    assert memo.get_result("blind", "r") is None
    (tmp_path / "memo" / "blind" / "r.npz").write_bytes(b"PK\x03\x04 a zip cut short")
    assert memo.get_result("blind", "r") is None
    memo.put_encodings("e", ["a", "b"], [[1, 2], [3]], [False, True])
    (tmp_path / "memo" / "encodings" / "e-broken.npz").write_bytes(b"garbage")
    (tmp_path / "memo" / "encodings" / "e-cut.npz").write_bytes(b"PK\x03\x04 a zip cut short")
    np.savez(tmp_path / "memo" / "encodings" / "e-odd.npz", texts=np.array(["c" * 64], dtype="S64"),
             lengths=np.array([5]), ids=np.array([1, 2]), truncated=np.array([False]))
    again = Memo(tmp_path)
    known = again.encodings("e")
    assert len(known) == 2 and len(again.skipped) == 3  # the odd one's lengths overrun its ids
    assert len(memo.skipped) == 3  # facts, two blind results
    assert result_key("blind", 1, {"a": 1}) != result_key("blind", 2, {"a": 1})


@pytest.mark.slow
def test_a_cached_rerun_draws_no_figure_and_its_report_is_the_same(model_dir, tmp_path, monkeypatch):
    from pddkit.reporting import plots
    from pddkit.reporting.report import write_report

    first = run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    write_report(write_run(first, tmp_path / "first"))
    forbid_loading(monkeypatch)
    for draw in ("roc_png", "histograms_png"):
        monkeypatch.setattr(plots, draw, lambda *a, **k: pytest.fail("a cached rerun drew a figure"))
    again = run_dataset(dataset(), config(model_dir, tmp_path / "cache"))
    write_report(write_run(again, tmp_path / "again"))
    for png in ("roc.png", "roc_loglog.png", "histograms.png"):
        assert (tmp_path / "again" / png).read_bytes() == (tmp_path / "first" / png).read_bytes()
    monkeypatch.undo()  # other labels: other figures, drawn
    other = Dataset("d", tuple(Sample(id=s.id, text=s.text, label=1 - s.label)
                               for s in dataset().samples), (), {})
    write_report(write_run(run_dataset(other, config(model_dir, tmp_path / "cache")), tmp_path / "other"))
    assert (tmp_path / "other" / "roc.png").read_bytes() != (tmp_path / "first" / "roc.png").read_bytes()


def test_the_figure_memo_keys_on_method_order_and_creates_no_foreign_cache(tmp_path):
    from pddkit.reporting.report import _FigureMemo

    labels = np.array([1, 0, 1, 0])
    a, b = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1])
    drawn = []

    def draw(tag):
        return lambda: drawn.append(tag) or tag.encode()

    missing = tmp_path / "elsewhere" / "cache"  # a results folder from another machine
    assert _FigureMemo.of(str(missing), labels, {"x": a}).png("roc", draw("m")) == b"m"
    assert not missing.exists()
    cache = tmp_path / "cache"
    (cache / "memo").mkdir(parents=True)
    first = _FigureMemo.of(str(cache), labels, {"x": a, "y": b})
    assert first.png("roc", draw("xy")) == b"xy" and first.png("roc", draw("again")) == b"xy"
    swapped = _FigureMemo.of(str(cache), labels, {"y": b, "x": a})  # other colours, legend
    assert swapped.png("roc", draw("yx")) == b"yx"
    other = _FigureMemo.of(str(cache), labels[::-1].copy(), {"x": a, "y": b})
    assert other.png("roc", draw("labels")) == b"labels"
    assert drawn == ["m", "xy", "yx", "labels"]


@pytest.mark.slow
def test_a_run_with_unreadable_shards_skips_them_and_gives_the_same_scores(model_dir, tmp_path):
    from test_cache import damage

    cfg = config(model_dir, tmp_path / "cache", blind=False)
    first = run_dataset(dataset(), cfg)
    (shard,) = (tmp_path / "cache").glob("shard-*.npz")
    damage(shard, "L")  # an array overwritten: found when it is read (cut short: test_cache.py)
    again = run_dataset(dataset(), cfg)
    assert again.counts["cache"]["target pass"] == {"hits": 0, "misses": 12}
    for a, b in zip(first.methods, again.methods):
        np.testing.assert_array_equal(a.scores, b.scores)
    assert any("unreadable shard(s) skipped" in n for n in again.notices)


def test_memo_spans_are_stored_compactly_and_counted_by_cache_info(tmp_path):
    from pddkit.cache import StatsStore, cache_info

    StatsStore.open(tmp_path).close()
    memo = Memo(tmp_path)
    n, span = 2000, "ünïcode span, long " * 250  # one 4,750-character span among 2,000 texts
    texts = [f"text {i}" for i in range(n)]
    ids = [[i, i + 1] for i in range(n)]
    cut = [i == 7 for i in range(n)]
    memo.put_encodings("k", texts, ids, cut, ["" if not c else span for c in cut])
    (enc,) = (tmp_path / "memo" / "encodings").iterdir()
    # per text: digest 64, length 8, two ids 16, flag 1, offset 8 bytes; the span's UTF-8 once
    # (fixed-width UTF-32 spans would cost n x 4,750 x 4 = 38 MB)
    assert enc.stat().st_size < n * 100 + len(span.encode()) + 4096
    assert Memo(tmp_path).span("k", ids[7]) == span and Memo(tmp_path).span("k", ids[8]) is None
    info = cache_info(tmp_path)
    assert info.memo_files == 1 and info.memo_bytes == enc.stat().st_size
    assert any(line.startswith("memo: 1 files") for line in cache_info_lines(info))


def test_memo_files_written_with_fixed_width_spans_are_still_read(tmp_path):
    (tmp_path / "memo" / "encodings").mkdir(parents=True)
    from pddkit.cache.memo import text_digest

    np.savez(tmp_path / "memo" / "encodings" / "k-old.npz",
             texts=np.array([text_digest("a"), text_digest("b")], dtype="S64"),
             lengths=np.array([2, 1]), ids=np.array([4, 5, 6]), truncated=np.array([True, False]),
             spans=np.array(["the span", ""]))
    memo = Memo(tmp_path)
    assert memo.span("k", [4, 5]) == "the span" and memo.encodings("k")[text_digest("b")][0].tolist() == [6]
