"""Builders (issue 11): dolma-book on the shared Gutenberg books, cutoff / patentmia on
dated documents, Chinese words through jieba, manifests, and `pddkit build` end to end."""

import hashlib
import json
import re
from pathlib import Path

import pytest
from cli_helpers import run_cli, write_jsonl
from conftest import SHARED, shared_path

from pddkit.data import load_jsonl
from pddkit.data.builders import BUILDERS, build, make
from pddkit.data.builders.words import word_spans, words
from pddkit.data.gutenberg import strip_gutenberg
from pddkit.errors import PddkitError

GUTENBERG = SHARED / "corpora" / "gutenberg"
MEMBERS = [GUTENBERG / "Poe, Edgar Allan" / n for n in
           ("The Raven.txt", "The Cask of Amontillado.txt", "The Masque of the Red Death.txt")]
NONMEMBERS = [GUTENBERG / "Doyle, Arthur Conan" / n for n in
              ("The Adventure of the Dying Detective.txt",
               "The Cabman's StoryThe Mysteries of a London 'Growler'.txt")]


@pytest.fixture
def shared_books():
    """The shared books these tests cut: missing, a failure under CI, a skip elsewhere."""
    return [shared_path(*p.relative_to(SHARED).parts) for p in MEMBERS + NONMEMBERS]


needs_books = pytest.mark.usefixtures("shared_books")

CHINESE = [
    "专利是一种受法律保护的发明创造，它确认发明人对其发明享有独占性的权利。本发明涉及一种用于"
    "处理图像数据的方法和装置，能够有效提高计算效率并降低能耗。",
    "本实用新型公开了一种新型的电池散热结构，包括壳体、散热片和风扇，结构简单，成本低廉，"
    "适合大规模生产和推广应用。",
    "本发明提供了一种基于深度学习的语音识别方法，通过构建神经网络模型对输入的语音信号进行"
    "特征提取和分类，从而提高识别的准确率。",
    "一种用于农业灌溉的智能控制系统，包括传感器模块、控制模块和执行模块，能够根据土壤湿度"
    "自动调节灌溉水量，节约水资源。",
]


def _book_words(path: Path) -> list[str]:
    text = path.read_bytes().decode("utf-8-sig").replace("\r\n", "\n")
    return strip_gutenberg(text).split()


def _fake_book(path: Path, n_words: int) -> Path:
    body = " ".join(f"w{i}" for i in range(n_words))
    path.write_text("*** START OF THE PROJECT GUTENBERG EBOOK SHORT ***\n" + body
                    + "\n*** END OF THE PROJECT GUTENBERG EBOOK SHORT ***\nlicence text\n")
    return path


def _docs(path: Path, n: int = 40, start_year: int = 2018) -> Path:
    """n dated documents of 40..(40+3n) words, years start_year.. in turn."""
    rows = [{"id": f"d{i}", "text": " ".join(f"doc{i}-w{j}" for j in range(40 + 3 * i)),
             "date": f"{start_year + i % 8}-0{1 + i % 9}-15"} for i in range(n)]
    return write_jsonl(path, rows)


def test_registry_names_the_builders():
    assert {"dolma-book", "cutoff", "patentmia"} <= set(BUILDERS.names())
    pat = BUILDERS.get("patentmia").defaults
    assert (pat["language"], pat["words"], pat["member_before"], pat["nonmember_after"]) == \
        ("zh", (512,), "2023-01-01", "2024-03-01")


@needs_books
def test_dolma_book_segments_are_exact_and_in_place():
    built = make("dolma-book", members=MEMBERS, nonmembers=NONMEMBERS, words="512,1024")
    # the two short Poe tales have two 1024-word segments only: skipped at 1024
    assert len(built.rows) == (len(MEMBERS) + len(NONMEMBERS)) * 3 * 2 - 2 * 3
    assert built.counts["skipped_too_short"] == {"512": 0, "1024": 2}
    for path, label in [(p, 1) for p in MEMBERS] + [(p, 0) for p in NONMEMBERS]:
        book = _book_words(path)
        for n in (512, 1024):
            count = len(book) // n
            if count < 3:
                assert not [r for r in built.rows if r["id"].startswith(f"{path.stem}#")
                            and r["id"].endswith(f"/{n}")]
                continue
            expect = {"head": 0, "middle": count // 2, "tail": count - 1}
            for pos, index in expect.items():
                (row,) = [r for r in built.rows if r["id"] == f"{path.stem}#{pos}/{n}"]
                assert row["label"] == label and row["group"] == path.stem
                assert row["subset"] == f"{pos}/{n}"
                assert row["text"].split() == book[index * n:(index + 1) * n]
    # one length: subset = position
    one = make("dolma-book", members=MEMBERS[:1], nonmembers=NONMEMBERS[:1], words=512)
    assert {r["subset"] for r in one.rows} == {"head", "middle", "tail"}


@needs_books
def test_manifest_hashes_counts_and_same_output_twice(tmp_path):
    short = _fake_book(tmp_path / "Short Book.txt", 1600)  # three 512-segments, one 1024
    tiny = _fake_book(tmp_path / "Tiny.txt", 100)
    members = [*MEMBERS, short, tiny]
    out = build("dolma-book", tmp_path / "a", members=members, nonmembers=NONMEMBERS)
    manifest = json.loads((out / "manifest.json").read_text())
    hashes = {s["path"]: s["sha256"] for s in manifest["sources"]}
    for p in members + NONMEMBERS:
        assert hashes[str(p)] == hashlib.sha256(p.read_bytes()).hexdigest()
    assert manifest["files"]["data.jsonl"]["sha256"] == \
        hashlib.sha256((out / "data.jsonl").read_bytes()).hexdigest()
    # 1024: Short Book, Tiny and the two short Poe tales (two segments each)
    assert manifest["counts"]["skipped_too_short"] == {"512": 1, "1024": 4}
    assert manifest["counts"]["books"] == {"members": 5, "nonmembers": 2}
    assert manifest["builder"] == "dolma-book" and manifest["language"] == "en"
    assert manifest["parameters"]["words"] == [512, 1024]
    rows = [json.loads(line) for line in (out / "data.jsonl").read_text().splitlines()]
    assert sum(r["group"] == "Short Book" for r in rows) == 3  # at 512 only
    assert not any(r["group"] == "Tiny" for r in rows)
    again = build("dolma-book", tmp_path / "b", members=members, nonmembers=NONMEMBERS)
    assert (out / "data.jsonl").read_bytes() == (again / "data.jsonl").read_bytes()
    # the manifests are identical apart from the provenance block (its times)
    manifests = [json.loads((d / "manifest.json").read_text()) for d in (out, again)]
    assert all(m.pop("provenance")["started_at"] for m in manifests)
    assert manifests[0] == manifests[1]
    with pytest.raises(PddkitError, match=r"already holds manifest.json; .* `overwrite=True`"):
        build("dolma-book", out, members=members, nonmembers=NONMEMBERS)
    build("dolma-book", out, overwrite=True, members=members, nonmembers=NONMEMBERS, words=512)
    assert json.loads((out / "manifest.json").read_text())["parameters"]["words"] == [512]
    assert not list(out.glob(".*tmp*"))


def test_dolma_book_bad_input(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "n").mkdir()
    _fake_book(tmp_path / "m" / "a.txt", 600)
    _fake_book(tmp_path / "n" / "a.txt", 600)
    with pytest.raises(PddkitError, match="'a' is among both `members` and `nonmembers`"):
        make("dolma-book", members=tmp_path / "m", nonmembers=tmp_path / "n", words=512)
    (tmp_path / "n" / "a.txt").rename(tmp_path / "n" / "b.txt")
    _fake_book(tmp_path / "m" / "a.txt", 3100)  # six 512-segments, three 1024-segments
    _fake_book(tmp_path / "n" / "b.txt", 1600)  # three 512-segments, one 1024-segment
    with pytest.raises(PddkitError, match=r"no non-member book is at least 3 x 1024 words"):
        make("dolma-book", members=tmp_path / "m", nonmembers=tmp_path / "n", words=1024)
    built = make("dolma-book", members=tmp_path / "m", nonmembers=tmp_path / "n", words=512)
    assert [r["id"] for r in built.rows] == ["a#head/512", "a#middle/512", "a#tail/512",
                                             "b#head/512", "b#middle/512", "b#tail/512"]
    assert [r["text"].split()[0] for r in built.rows] == ["w0", "w1536", "w2560",
                                                          "w0", "w512", "w1024"]
    # two segments only: head, middle and tail would repeat a text, so the book is skipped
    _fake_book(tmp_path / "n" / "c.txt", 1100)
    built = make("dolma-book", members=tmp_path / "m", nonmembers=tmp_path / "n", words=512)
    assert not any(r["group"] == "c" for r in built.rows)
    assert built.counts["skipped_too_short"] == {"512": 1}
    assert any("shorter than 3 segments: 1 at 512 words" in n for n in built.notes)
    for book in ("a", "b"):  # no position repeats another's text
        assert len({r["text"] for r in built.rows if r["group"] == book}) == 3
    with pytest.raises(PddkitError, match="takes no `inputs`; its parameters are `members`"):
        make("dolma-book", inputs=["x.jsonl"])
    with pytest.raises(PddkitError, match=r"`members` .* is neither a folder nor a file"):
        make("dolma-book", members=tmp_path / "nope", nonmembers=tmp_path / "n")


def _cut(tmp_path, **kw):
    params = {"inputs": _docs(tmp_path / "docs.jsonl"), "member_before": "2021-01-01",
              "nonmember_after": "2022-12-31", "words": (32, 64, 128), **kw}
    return make("cutoff", **params)


def test_cutoff_buckets_are_balanced_and_exact(tmp_path):
    built = _cut(tmp_path)
    docs = {json.loads(line)["id"]: json.loads(line)
            for line in (tmp_path / "docs.jsonl").read_text().splitlines()}
    for n in (32, 64, 128):
        bucket = [r for r in built.rows if r["subset"] == str(n)]
        labels = [r["label"] for r in bucket]
        assert labels.count(1) == labels.count(0) > 0
        for r in bucket:
            doc = docs[r["group"]]
            assert len(r["text"].split()) == n and r["text"] in doc["text"]
            year = int(doc["date"][:4])
            assert (year < 2021) if r["label"] == 1 else (year >= 2023)
    counts = built.counts
    assert counts["members"] + counts["nonmembers"] + counts["between_cutoffs"] == 40
    assert counts["buckets"]["128"]["members"] == counts["buckets"]["128"]["nonmembers"]
    assert counts["buckets"]["32"]["members_long_enough"] == counts["members"]


def test_cutoff_first_vs_random_and_seeds(tmp_path):
    first = _cut(tmp_path, snippet="first", words=64)
    docs = {json.loads(line)["id"]: json.loads(line)["text"]
            for line in (tmp_path / "docs.jsonl").read_text().splitlines()}
    assert all(r["text"] == " ".join(docs[r["group"]].split()[:64]) for r in first.rows)
    rand = _cut(tmp_path, words=64)
    assert any(not docs[r["group"]].startswith(r["text"]) for r in rand.rows)
    assert _cut(tmp_path, words=64).rows == rand.rows
    assert _cut(tmp_path, words=64, seed=1).rows != rand.rows
    one = build("cutoff", tmp_path / "a", inputs=tmp_path / "docs.jsonl", words=64,
                member_before="2021-01-01", nonmember_after="2022-12-31")
    two = build("cutoff", tmp_path / "b", inputs=tmp_path / "docs.jsonl", words=64,
                member_before="2021-01-01", nonmember_after="2022-12-31")
    assert (one / "data.jsonl").read_bytes() == (two / "data.jsonl").read_bytes()
    # identical apart from the provenance block (its times, pddkit/provenance.py)
    manifests = [json.loads((d / "manifest.json").read_text()) for d in (one, two)]
    assert all(m.pop("provenance")["started_at"] for m in manifests)
    assert manifests[0] == manifests[1]


def test_cutoff_bad_input_is_one_sentence(tmp_path):
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"text": "a b c", "date": "2020-01-01"},
                                                {"text": "d e f", "date": "yesterday"}])
    with pytest.raises(PddkitError, match=r"bad.jsonl line 2 has date 'yesterday', which is not"):
        make("cutoff", inputs=bad, member_before="2021-01-01", nonmember_after="2022-01-01")
    write_jsonl(bad, [{"text": "a b c", "date": "2020-01-01T10:00:00Z"}])
    with pytest.raises(PddkitError, match=r"no document is dated after 2022-01-01, so the cutoff "
                                          r"leaves no non-members"):
        make("cutoff", inputs=bad, member_before="2021-01-01", nonmember_after="2022-01-01")
    docs = _docs(tmp_path / "docs.jsonl")
    with pytest.raises(PddkitError, match="no document is dated before 2000-01-01"):
        make("cutoff", inputs=docs, member_before="2000-01-01", nonmember_after="2022-01-01")
    with pytest.raises(PddkitError, match="the cutoff needs `member_before`"):
        make("cutoff", inputs=docs, nonmember_after="2022-01-01")
    with pytest.raises(PddkitError, match="`nonmember_after` 2019-01-01 is earlier than"):
        make("cutoff", inputs=docs, member_before="2021-01-01", nonmember_after="2019-01-01")
    with pytest.raises(PddkitError, match="no member document has 500 words; leave 500 out"):
        make("cutoff", inputs=docs, member_before="2021-01-01", nonmember_after="2022-01-01",
             words=(32, 500))


def test_cutoff_reads_lines_at_newlines_only_and_rejects_bad_lines(tmp_path):
    docs = tmp_path / "docs.jsonl"
    rows = [{"id": f"d{i}", "text": " ".join(f"w{i}-{j}" for j in range(40)),
             "date": "2019-05-01" if i % 2 else "2024-05-01"} for i in range(6)]
    rows[0]["text"] = "a\u2028line\u2029separator\x85inside " + rows[0]["text"]
    docs.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    assert "\u2028" in docs.read_text(encoding="utf-8")
    built = make("cutoff", inputs=docs, member_before="2021-01-01",
                 nonmember_after="2022-01-01", words=32, snippet="first")
    (row,) = [r for r in built.rows if r["group"] == "d0"]
    assert row["text"].startswith("a\u2028line\u2029separator\x85inside")
    assert built.counts["members"] + built.counts["nonmembers"] == 6
    with docs.open("ab") as fh:
        fh.write(b'{"text": "caf\xe9 au lait", "date": "2019-01-01"}\n')
    with pytest.raises(PddkitError, match=r"docs.jsonl line 7 is not valid UTF-8"):
        make("cutoff", inputs=docs, member_before="2021-01-01", nonmember_after="2022-01-01")
    docs.write_text(docs.read_bytes()[:-47].decode("utf-8") + "\n{not json\n", encoding="utf-8")
    with pytest.raises(PddkitError, match=r"docs.jsonl line 8 is not valid JSON"):
        make("cutoff", inputs=docs, member_before="2021-01-01", nonmember_after="2022-01-01")


def test_chinese_words_through_jieba(tmp_path):
    import jieba

    text = CHINESE[0]
    assert "".join(words(text, "zh")) == text and len(words(text, "zh")) > 10
    assert len(word_spans("two words", "en")) == 2
    rows = [{"id": f"p{i}", "text": t, "date": "2022-06-01" if i % 2 else "2024-05-01"}
            for i, t in enumerate(CHINESE)]
    docs = write_jsonl(tmp_path / "patents.jsonl", rows)
    one_date = {"member_date_field": "date", "nonmember_date_field": "date"}
    first = make("patentmia", inputs=docs, words=12, snippet="first", **one_date)
    assert first.language == "zh" and len(first.rows) == 4
    for r in first.rows:
        source = CHINESE[int(r["group"][1:])]
        assert r["text"] == "".join(jieba.lcut(source)[:12])
    rand = make("patentmia", inputs=docs, words=12, **one_date)
    for r in rand.rows:
        source = CHINESE[int(r["group"][1:])]
        toks = jieba.lcut(source)
        assert any("".join(toks[i:i + 12]) == r["text"] for i in range(len(toks) - 11))



SPACED = ("本发明 涉及一种 GPU 加速的图像处理方法。\n\n第二段  说明了 the device 的结构，"
          "包括壳体 和 散热片，结构简单。\r\n第三段 内容 结束。")


def test_chinese_snippets_are_jieba_tokens_joined_as_dc_pdd_cuts_them(tmp_path):
    """DC-PDD's code cuts a Chinese text to N words as "".join(jieba.lcut(text)[:N]):
    whitespace tokens count as words and stay in the text; nothing is inserted or removed."""
    import jieba

    toks = jieba.lcut(SPACED)
    assert words(SPACED, "zh") == toks and "".join(words(SPACED, "zh")) == SPACED
    docs = write_jsonl(tmp_path / "p.jsonl", [
        {"id": "m", "text": SPACED, "publication_date": "2022-01-05"},
        {"id": "n", "text": SPACED.replace("本发明", "本实用新型"), "priority_date": "2024-05-01"}])
    for n in (6, 20):
        built = make("patentmia", inputs=docs, words=n, snippet="first")
        (member,) = [r["text"] for r in built.rows if r["label"] == 1]
        assert member == "".join(toks[:n])  # DC-PDD's com_det_sco.py, lang cn
        assert member.count(" ") >= 1  # the source's spaces kept
    rand = make("patentmia", inputs=docs, words=9, seed=4)
    (member,) = [r["text"] for r in rand.rows if r["label"] == 1]
    assert member in {"".join(toks[i:i + 9]) for i in range(len(toks) - 8)}


def test_patentmia_members_by_publication_date_nonmembers_by_priority_date(tmp_path, capsys):
    """The paper's PatentMIA: members published before 2023-01-01, non-members with a
    priority date after 2024-03-01 (a patent published after the cutoff but filed before it
    is neither)."""
    dates = {"a": ("2022-06-01", "2021-01-01"), "b": ("2024-06-01", "2024-04-01"),
             "c": ("2024-05-01", "2023-06-01"), "d": (20221201, 20200301),
             "e": (None, "20240501"), "f": ("2023-04-01", "2022-11-01")}
    rows = []
    for i, (doc, (published, priority)) in enumerate(dates.items()):
        row = {"id": doc, "text": CHINESE[i % 4], "priority_date": priority}
        if published is not None:
            row["publication_date"] = published
        rows.append(row)
    docs = write_jsonl(tmp_path / "patents.jsonl", rows)
    built = make("patentmia", inputs=docs, words=8, snippet="first")
    sides = {label: sorted(r["group"] for r in built.rows if r["label"] == label)
             for label in (1, 0)}
    assert sides == {1: ["a", "d"], 0: ["b", "e"]}
    assert built.counts["between_cutoffs"] == 2  # c and f
    assert built.counts["without_date_field"] == {"publication_date": 1, "priority_date": 0}
    assert any("1 of 6 documents have no publication_date" in note for note in built.notes)
    # with the fields swapped, f (filed 2022-11, published 2023-04) is on both sides of a
    # 2023-01-01 cutoff: one sentence naming it
    swapped = {"member_date_field": "priority_date", "nonmember_date_field": "publication_date"}
    with pytest.raises(PddkitError, match=r"patents.jsonl line 6 would be both a member "
                                          r"\(priority_date 2022-11-01, before 2023-01-01\) and a "
                                          r"non-member \(publication_date 2023-04-01, after"):
        make("patentmia", inputs=docs, words=8, nonmember_after="2023-01-01", **swapped)
    with pytest.raises(PddkitError, match=r"line 5 is missing both date fields, 'publication_date' "
                                          r"and 'priority_date'; its fields are 'text'"):
        make("patentmia", inputs=write_jsonl(tmp_path / "x.jsonl", [*rows[:4], {"text": "x"}]))
    with pytest.raises(PddkitError, match=r"no document is dated after 2025-01-01 by its "
                                          r"priority_date, so the cutoff leaves no non-members "
                                          r"\(priority_date runs from 2020-03-01 to 2024-05-01\)"):
        make("patentmia", inputs=docs, nonmember_after="2025-01-01")
    # the flags, and the manifest records the fields
    code, _, err = run_cli(capsys, "build", "patentmia", "--input", docs, "--words", "8",
                           "--member-date-field", "priority_date", "--nonmember-date-field",
                           "priority_date", "--output", tmp_path / "out")
    assert code == 0, err
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["parameters"]["member_date_field"] == "priority_date"
    assert manifest["counts"]["members"] == 3 and manifest["counts"]["nonmembers"] == 2  # a d f; b e
    code, _, err = run_cli(capsys, "build", "patentmia", "--input", docs, "--member-date-field",
                           "", "--output", tmp_path / "bad")
    assert code == 1 and "--member-date-field must name a field" in err, err

# Project Gutenberg mentions that strip_gutenberg keeps because they are not at the start of
# the text (it drops only the header and the credit / note blocks right after it): a PG
# editor's note after the title, and a "Presented by Project Gutenberg" line inside the
# dedication.
PG_MENTIONS_KEPT = {"Doyle, Arthur Conan/A Study in Scarlet",
                    "Wilde, Oscar/The Ballad of Reading Gaol"}


@pytest.mark.slow
def test_no_gutenberg_boilerplate_in_any_shared_books_segments(tmp_path):
    """Every shared book's head, middle and tail segments are free of Project Gutenberg
    boilerplate (header, wrapped START markers, producer credits, the old header without a
    START marker), but for the documented mentions inside two books."""
    folder = shared_path("corpora", "gutenberg")
    (tmp_path / "n").mkdir()
    _fake_book(tmp_path / "n" / "other.txt", 3 * 1024)
    built = make("dolma-book", members=folder, nonmembers=tmp_path / "n", words="512,1024")
    books = {r["group"] for r in built.rows if r["label"] == 1}
    total = len(list(folder.rglob("*.txt")))
    assert total > 100 and len(books) + built.counts["skipped_too_short"]["512"] == total
    pattern = re.compile(r"project gutenberg|gutenberg\.org|pgdp", re.I)
    failing = {r["group"] for r in built.rows if pattern.search(r["text"])}
    assert failing == PG_MENTIONS_KEPT
    heads = [r["text"] for r in built.rows if r["subset"].startswith("head/")]
    assert not [t for t in heads if re.match(r"\s*(Produced by|E-text prepared by|"
                                              r"Transcribed (by|from))|.*\*{3}", t)]
    # the old header (no START marker) ends at the small print, a wrapped marker at its ***
    lock = [r["text"] for r in built.rows if r["id"].startswith("Poe, Edgar Allan/The Lock and "
                                                               "Key Library") and "head/" in r["id"]]
    assert lock and all(t.startswith("THE LOCK AND KEY LIBRARY") for t in lock)


def test_strip_gutenberg_front_matter():
    text = ("header\n***START OF THE PROJECT GUTENBERG EBOOK GREAT SHORT STORIES OF\n"
            "TROUBLED MARRIAGES***\n\n\nProduced by A. Reader and the Online Distributed\n"
            "Proofreading Team at http://www.pgdp.net\n\n\n\nNote: Project Gutenberg also has "
            "an HTML version.\n\nCHAPTER I\n\nProduced by the author in 1890.\n"
            "***END OF THE PROJECT GUTENBERG EBOOK GREAT\nlicence\n")
    assert strip_gutenberg(text) == "CHAPTER I\n\nProduced by the author in 1890."
    old = ("The Project Gutenberg Etext of X\n\n***START**THE SMALL PRINT!**START***\nlaw\n"
           "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n\n\nBOOK\n"
           "text\n\nEnd of The Project Gutenberg Etext of X\n")
    assert strip_gutenberg(old) == "BOOK\ntext"
    assert strip_gutenberg("Produced by me.\n\nNo markers here.") == \
        "Produced by me.\n\nNo markers here."


@needs_books
def test_build_command_end_to_end(tmp_path, capsys):
    members, nonmembers = tmp_path / "members", tmp_path / "nonmembers"
    members.mkdir()
    nonmembers.mkdir()
    for p in MEMBERS:
        (members / p.name).write_bytes(p.read_bytes())
    for p in NONMEMBERS:
        (nonmembers / p.name).write_bytes(p.read_bytes())
    out = tmp_path / "dolma"
    code, stdout, err = run_cli(capsys, "build", "dolma-book", "--members", members,
                                "--nonmembers", nonmembers, "--words", "512,1024", "--output", out)
    assert code == 0, err
    assert "dolma-book: 24 texts (12 members, 12 non-members)" in stdout
    assert "head/512" in stdout and "pddkit run --model MODEL --data" in stdout
    data = load_jsonl(out / "data.jsonl")  # what `pddkit run --data` reads
    assert data.subsets == ["head/512", "middle/512", "tail/512",
                            "head/1024", "middle/1024", "tail/1024"]
    assert {s.group for s in data.samples} == {p.stem for p in MEMBERS + NONMEMBERS}
    assert (data.counts()["members"], data.counts()["nonmembers"]) == (12, 12)
    code, _, err = run_cli(capsys, "build", "dolma-book", "--members", members,
                           "--nonmembers", nonmembers, "--output", out)
    assert code == 1 and "already holds manifest.json" in err and "--overwrite" in err, err
    code, _, err = run_cli(capsys, "build", "dolma-book", "--members", members, "--nonmembers",
                           nonmembers, "--input", "x.jsonl", "--output", tmp_path / "o")
    assert code == 1 and "takes no --input; its parameters are --members, --nonmembers" in err
    assert len(err.strip().splitlines()) == 1 and "`" not in err


def test_build_command_cutoff_flags(tmp_path, capsys):
    docs = _docs(tmp_path / "docs.jsonl")
    code, stdout, err = run_cli(capsys, "build", "cutoff", "--input", docs, "--member-before",
                                "2021-01-01", "--nonmember-after", "2022-12-31", "--words", "32,64",
                                "--snippet", "first", "--seed", "3", "--output", tmp_path / "c")
    assert code == 0, err
    assert "cutoff: " in stdout and "data.jsonl" in stdout
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["parameters"]["snippet"] == "first"
    assert load_jsonl(tmp_path / "c" / "data.jsonl").subsets == ["32", "64"]
    code, _, err = run_cli(capsys, "build", "cutoff", "--input", docs, "--member-before",
                           "2021-13-01", "--nonmember-after", "2022-12-31", "--output", tmp_path / "d")
    assert code == 1 and "--member-before '2021-13-01' is not an ISO date" in err, err
    code, _, err = run_cli(capsys, "build", "nosuch", "--output", tmp_path / "e")
    assert code == 1 and "unknown builder 'nosuch'" in err


def test_missing_jieba_is_one_sentence(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "jieba", None)  # import jieba -> ImportError
    with pytest.raises(PddkitError, match=r"need jieba: `pip install jieba`"):
        words("中文文本", "zh-CN")
    assert words("no jieba needed", "en") == ["no", "jieba", "needed"]


@needs_books
def test_a_built_dolma_book_runs_into_a_per_position_table(toy_world, tmp_path, capsys):
    """Issue 11's finish line: `pddkit build dolma-book` on the shared books, then
    `pddkit run` on its output, gives one AUC column per position."""
    members, nonmembers = tmp_path / "members", tmp_path / "nonmembers"
    for folder, books in ((members, MEMBERS), (nonmembers, NONMEMBERS)):
        folder.mkdir()
        for p in books:
            (folder / p.name).write_bytes(p.read_bytes())
    built = tmp_path / "dolma"
    code, _, err = run_cli(capsys, "build", "dolma-book", "--members", members, "--nonmembers",
                           nonmembers, "--words", "128", "--output", built)
    assert code == 0, err
    code, out, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data",
                             built / "data.jsonl", "--methods", "loss,zlib,mink", "--device", "cpu",
                             "--bootstrap", "20", "--no-report", "--output", tmp_path / "run")
    assert code == 0, err
    assert "AUC per subset" in out and all(p in out for p in ("head", "middle", "tail"))
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert set(res["methods"]["loss"]["subsets"]) == {"head", "middle", "tail"}
    assert set(res["blind_baseline"]["subsets"]) == {"head", "middle", "tail"}
