"""JSONL loading, its bad-input sentences and skip policy; spec strings."""

import json

import pytest

from pddkit.data import load_benchmark, load_jsonl
from pddkit.errors import PddkitError
from pddkit.methods.base import Need, resolve_methods
from pddkit.params import parse_spec, split_spec_list


def write(tmp_path, lines, name="d.jsonl"):
    p = tmp_path / name
    p.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines))
    return p


def row(**kw):
    return json.dumps(kw)


def test_reads_text_or_input_with_labels_and_ids(tmp_path):
    p = write(tmp_path, [row(text="a b", label=1, id="x"), "", row(input="c d", label=0)])
    ds = load_jsonl(p)
    assert [(s.id, s.text, s.label) for s in ds.samples] == [("x", "a b", 1), ("3", "c d", 0)]
    assert ds.meta["blank_lines"] == 1 and ds.labelled


BAD = [
    (b"\xff\xfe not utf8", "line 2 is not valid UTF-8"),
    ("{not json", "line 2 is not valid JSON"),
    (row(txt="x", label=1), "line 2 has no 'text' (or 'input') field"),
    (row(text="   \n ", label=1), "line 2 has an empty or whitespace-only text"),
    (row(text="ok", label=2), "line 2 has label 2"),
    (row(text="ok", label="maybe"), "line 2 has label 'maybe'"),
    (row(text=5, label=1), "line 2 has a 'text' field that is a int"),
    ("[1, 2]", "line 2 is a JSON list"),
]


@pytest.mark.parametrize("bad,sentence", BAD)
def test_each_bad_line_is_one_sentence_naming_file_and_line(tmp_path, bad, sentence):
    p = write(tmp_path, [row(text="fine", label=1), bad, row(text="also fine", label=0)])
    with pytest.raises(PddkitError) as e:
        load_jsonl(p)
    assert str(p) in str(e.value) and sentence in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("bad,sentence", BAD)
def test_skip_policy_counts_every_left_out_line(tmp_path, bad, sentence):
    p = write(tmp_path, [row(text="fine", label=1), bad, row(text="also fine", label=0)])
    ds = load_jsonl(p, on_invalid="skip")
    assert len(ds.samples) == 2 and ds.counts()["skipped"] == 1
    assert ds.skipped[0].source.endswith("line 2")


def test_dataset_rules(tmp_path):
    with pytest.raises(PddkitError, match="has no label but other lines do"):
        load_jsonl(write(tmp_path, [row(text="a", label=1), row(text="b")]))
    with pytest.raises(PddkitError, match="repeats id 'a'"):
        load_jsonl(write(tmp_path, [row(text="a", id="a"), row(text="b", id="a")]))
    with pytest.raises(PddkitError, match="holds only blank lines"):
        load_jsonl(write(tmp_path, ["", "  "]))
    with pytest.raises(PddkitError, match="does not exist"):
        load_jsonl(tmp_path / "missing.jsonl")
    ds = load_jsonl(write(tmp_path, [row(text="a", label=1), row(text="b", label=1)]))
    with pytest.raises(PddkitError, match="only members"):
        ds.require_both_classes()


def test_wikimia_from_local_dir():
    from conftest import shared_path

    ds = load_benchmark("wikimia:length=64", data_dir=shared_path("data", "wikimia"))
    c = ds.counts()
    assert c["samples"] == 542 and c["members"] > 0 and c["nonmembers"] > 0
    with pytest.raises(PddkitError, match="length must be one of"):
        load_benchmark("wikimia:length=48", data_dir=shared_path("data", "wikimia"))
    with pytest.raises(PddkitError, match="unknown benchmark 'nope'"):
        load_benchmark("nope")


def test_spec_parsing():
    assert parse_spec("surp:entropy_threshold=2.5,k=30") == (
        "surp", {"entropy_threshold": "2.5", "k": "30"})
    assert split_spec_list("loss,surp:entropy_threshold=2.5,k=30,mink:k=0.1,zlib") == [
        "loss", "surp:entropy_threshold=2.5,k=30", "mink:k=0.1", "zlib"]


def test_resolve_methods_types_and_needs():
    calls = resolve_methods("mink:k=0.1,surp:entropy_threshold=2.5,k=30", set())
    assert calls[0].params == {"k": 0.1}
    assert calls[1].params == {"entropy_threshold": 2.5, "k": 30.0}
    labels = [c.label for c in resolve_methods("mink,mink:k=0.5", set())]
    assert labels == ["mink:k=0.2", "mink:k=0.5"]
    everything = [c.label for c in resolve_methods("all", {Need.LOWERCASE})]
    assert "ref" not in everything and "dcpdd" not in everything and "loss" in everything
    with pytest.raises(PddkitError, match="needs a reference model: pass `ref_model`"):
        resolve_methods("ref", set())
    with pytest.raises(PddkitError, match="has no parameter 'q'"):
        resolve_methods("mink:q=1", set())
    with pytest.raises(PddkitError, match="is not a float"):
        resolve_methods("mink:k=abc", set())
    with pytest.raises(PddkitError, match="unknown method 'nope'"):
        resolve_methods("nope", set())


def test_wikimia_from_the_hub_offline_is_one_sentence(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(PddkitError, match=r"swj0419/WikiMIA") as e:
        load_benchmark("wikimia:length=32")
    assert "`data_dir`" in str(e.value) or "pddkit[hub]" in str(e.value)
