"""Builders with `--index` (issue 31, item 4): non-members the training corpus contains are
dropped and counted, against a corpus written here with planted non-members whose overlap
is counted in plain Python over the same token ids."""

import json
import textwrap
from datetime import date

import pytest
from cli_helpers import run_cli, write_jsonl
from conftest import gutenberg_paragraphs
from corpus_world import PlainCounts, build_corpus_index, save_index_tokenizer

from pddkit.data.builders import make
from pddkit.errors import PddkitError

N = 13
MEMBER_BEFORE, NONMEMBER_AFTER = "2021-01-01", "2023-01-01"


@pytest.fixture(scope="module")
def paras():
    return gutenberg_paragraphs(60, seed=5)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory, paras):
    folder = tmp_path_factory.mktemp("builders-index") / "tokenizer"
    return folder, save_index_tokenizer(folder, paras[40:])


def _dated(paras: list[str]) -> list[dict]:
    """12 members dated 2019-2020, 10 non-members dated 2023-2024 (fewer than the members,
    so that without an index every non-member snippet is kept)."""
    rows = [{"id": f"m{i}", "text": t, "date": f"{2019 + i % 2}-03-0{1 + i % 9}",
             "publication_date": f"{2019 + i % 2}-03-0{1 + i % 9}", "priority_date": "2018-01-01"}
            for i, t in enumerate(paras[:12])]
    rows += [{"id": f"n{i}", "text": t, "date": f"{2023 + i % 2}-06-1{i % 9}",
              "publication_date": "2025-01-01", "priority_date": f"{2023 + i % 2}-06-1{i % 9}"}
             for i, t in enumerate(paras[12:22])]
    return rows


@pytest.mark.slow
def test_cutoff_drops_exactly_the_planted_nonmembers_and_stays_balanced(tmp_path, paras,
                                                                         tokenizer):
    tok_dir, tok = tokenizer
    docs = _dated(paras)
    planted = {"n0", "n3", "n7"}  # whole documents in the corpus: any snippet of them is in it
    text = {d["id"]: d["text"] for d in docs}
    corpus = [text[f"m{i}"] for i in range(12)] + [text[i] for i in sorted(planted)] + paras[22:30]
    index = build_corpus_index(tmp_path / "index", corpus, tok, tok_dir)
    inputs = write_jsonl(tmp_path / "docs.jsonl", docs)
    common = dict(inputs=[inputs], member_before=MEMBER_BEFORE, nonmember_after=NONMEMBER_AFTER,
                  words="32,64", seed=1)
    plain = make("cutoff", **common)
    checked = make("cutoff", **common, index=[index])
    counts = PlainCounts(corpus, tok)
    for n in ("32", "64"):
        before = [r for r in plain.rows if r["subset"] == n and r["label"] == 0]
        assert len(before) == plain.counts["buckets"][n]["nonmembers_long_enough"]  # all kept
        found = {r["id"] for r in before if counts.row(r["text"], N)["overlap"] >= 0.2}
        assert {i.split("@")[0] for i in found} == planted & {r["group"] for r in before}
        after = [r for r in checked.rows if r["subset"] == n]
        # the same snippets, less those found; the bucket balanced again
        assert [r for r in after if r["label"] == 0] == [r for r in before if r["id"] not in found]
        bucket = checked.counts["buckets"][n]
        assert bucket["nonmembers_in_corpus"] == len(found) > 0
        assert bucket["members"] == bucket["nonmembers"] == len(before) - len(found)
        assert sum(r["label"] for r in after) == bucket["members"]
    dropped = [d for d in checked.counts["corpus_check"]["dropped"]]
    record = checked.counts["corpus_check"]
    assert record["nonmembers_dropped"] == len(dropped) == sum(
        checked.counts["buckets"][n]["nonmembers_in_corpus"] for n in ("32", "64"))
    assert {d["id"].split("@")[0] for d in dropped} == planted
    assert all(d["overlap"] >= 0.2 for d in dropped)
    assert (record["index"], record["tokenizer"], record["n"], record["max_overlap"]) == \
        ([str(index)], str(tok_dir), 13, 0.2)
    assert record["nonmembers_too_short"] == 0
    # ground truth by date still holds for every row kept
    day = {d["id"]: date.fromisoformat(d["date"]) for d in docs}
    for r in checked.rows:
        assert (day[r["group"]] < date.fromisoformat(MEMBER_BEFORE)) == bool(r["label"])
        assert r["label"] or day[r["group"]] > date.fromisoformat(NONMEMBER_AFTER)
        assert r["text"] in text[r["group"]]


@pytest.mark.slow
def test_dolma_book_drops_the_segments_the_corpus_holds(tmp_path, paras, tokenizer):
    tok_dir, tok = tokenizer
    members, nonmembers = tmp_path / "members", tmp_path / "nonmembers"
    members.mkdir()
    nonmembers.mkdir()
    books = {}
    for i in range(3):
        for folder, name, part in ((members, f"m{i}", paras[6 * i:6 * i + 3]),
                                   (nonmembers, f"n{i}", paras[6 * i + 3:6 * i + 6])):
            body = "\n\n".join(textwrap.fill(p, 60) for p in part)
            books[name] = body  # wrapped lines, as books are: normalised on both sides
            (folder / f"{name}.txt").write_text(
                "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n" + body
                + "\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n")
    plain = make("dolma-book", members=members, nonmembers=nonmembers, words="32")
    tail = next(r["text"] for r in plain.rows if r["id"] == "n2#tail/32")
    # the corpus holds the members, book n0 whole and n2's tail inside another document
    corpus = ([books[f"m{i}"] for i in range(3)] + [books["n0"], f"{paras[30]} {tail} {paras[31]}"]
              + paras[32:36])
    index = build_corpus_index(tmp_path / "index", corpus, tok, tok_dir)
    checked = make("dolma-book", members=members, nonmembers=nonmembers, words="32",
                   index=[index], max_overlap=0.5)
    counts = PlainCounts(corpus, tok)
    found = {r["id"] for r in plain.rows
             if r["label"] == 0 and counts.row(r["text"], N)["overlap"] >= 0.5}
    assert found == {"n0#head/32", "n0#middle/32", "n0#tail/32", "n2#tail/32"}
    assert [r for r in checked.rows] == [r for r in plain.rows if r["id"] not in found]
    record = checked.counts["corpus_check"]
    assert {d["id"] for d in record["dropped"]} == found
    assert (record["nonmembers_dropped"], record["nonmembers_checked"], record["max_overlap"]) == \
        (4, 9, 0.5)
    assert checked.counts["rows_per_subset"]["head"] == {"members": 3, "nonmembers": 2}
    assert any("dolma-book: dropped 4 of 9 non-members checked" in n for n in checked.notes)


@pytest.mark.slow
def test_patentmia_through_the_command_line(tmp_path, paras, tokenizer, capsys):
    tok_dir, tok = tokenizer
    docs = _dated(paras)
    corpus = [d["text"] for d in docs if d["id"] in ("n1", "n2")] + paras[22:30]
    index = build_corpus_index(tmp_path / "index", corpus, tok, tok_dir)
    inputs = write_jsonl(tmp_path / "docs.jsonl", docs)
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "build", "patentmia", "--input", inputs, "--language",
                                "en", "--words", "32", "--member-before", MEMBER_BEFORE,
                                "--nonmember-after", NONMEMBER_AFTER, "--index", index,
                                "--output", out)
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    record = manifest["counts"]["corpus_check"]
    assert {d["id"] for d in record["dropped"]} == {"n1@32", "n2@32"}
    assert manifest["parameters"]["index"] == [str(index)]
    assert manifest["files"]["data.jsonl"]["nonmembers"] == 8  # 10 - 2, balanced again
    assert (f"  non-members the corpus contains, dropped: 2 of 10 checked (at least 0.2 of "
            f"their 13-grams found in index {index}, tokenizer {tok_dir})") in stdout
    rows = [json.loads(line) for line in (out / "data.jsonl").read_text().splitlines()]
    assert not {"n1", "n2"} & {r["group"] for r in rows}


@pytest.mark.slow
def test_builders_bad_index_input(tmp_path, paras, tokenizer, capsys):
    tok_dir, tok = tokenizer
    inputs = write_jsonl(tmp_path / "docs.jsonl", _dated(paras))
    base = ["build", "cutoff", "--input", inputs, "--member-before", MEMBER_BEFORE,
            "--nonmember-after", NONMEMBER_AFTER, "--words", "32"]
    index = build_corpus_index(tmp_path / "index", paras[22:30], tok, tok_dir)
    other = tmp_path / "other"
    save_index_tokenizer(other, ["another corpus entirely " * 5], vocab_size=300)
    capsys.readouterr()
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(capsys, *base, "--index", empty, "--output", tmp_path / "o1")
    assert code == 1 and err.count("\n") == 1
    assert f"{empty} is not an infini-gram index: it has no tokenized.N files" in err
    code, _, err = run_cli(capsys, *base, "--index", index, "--index-tokenizer", other,
                           "--output", tmp_path / "o2")
    assert code == 1 and err.count("\n") == 1
    assert f"tokenizer of {tok_dir}, not that of {other}" in err
    code, _, err = run_cli(capsys, *base, "--index", index, "--max-overlap", "1.5",
                           "--output", tmp_path / "o3")
    assert code == 1 and "--max-overlap must be a share in (0, 1], not 1.5" in err, err
    code, _, err = run_cli(capsys, *base, "--max-overlap", "0.5", "--output", tmp_path / "o4")
    assert code == 1 and "--max-overlap sets how texts are checked against a corpus index; " \
        "give --index too" in err, err
    # every non-member in the corpus: one sentence, no build
    docs = _dated(paras)
    whole = build_corpus_index(tmp_path / "whole", [d["text"] for d in docs], tok, tok_dir)
    with pytest.raises(PddkitError, match="the corpus contains every non-member snippet of 32 "
                                          "words"):
        make("cutoff", inputs=[inputs], member_before=MEMBER_BEFORE,
             nonmember_after=NONMEMBER_AFTER, words="32", index=[whole])
    assert not any((tmp_path / o).exists() for o in ("o1", "o2", "o3", "o4"))


def test_builders_without_an_index_are_unchanged(tmp_path, paras):
    """No `index`: no corpus_check in the counts, and nothing about it in the output."""
    inputs = write_jsonl(tmp_path / "docs.jsonl", _dated(paras))
    built = make("cutoff", inputs=[inputs], member_before=MEMBER_BEFORE,
                 nonmember_after=NONMEMBER_AFTER, words="32")
    assert "corpus_check" not in built.counts
    assert "nonmembers_in_corpus" not in built.counts["buckets"]["32"]
    with pytest.raises(PddkitError, match="`index_tokenizer` names the tokenizer of a corpus "
                                          "index; give `index` too"):
        make("cutoff", inputs=[inputs], member_before=MEMBER_BEFORE,
             nonmember_after=NONMEMBER_AFTER, index_tokenizer="gpt2")
