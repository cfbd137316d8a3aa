"""`traps inject` (studies/traps/inject.py, documents.py): counts read back from the
written documents (each inserted trap exactly R times in its one document and nowhere
else, held-out traps nowhere, positions at the trap's text), the sentence-boundary rule,
the repeat split, format round trips, and the bad-input sentences. Fast tests use hand-made
traps and documents; the slow one generates traps with the toy GPT-2 and injects them into
Gutenberg paragraphs."""

from __future__ import annotations

import csv
import dataclasses
import json
import random
from collections import Counter

import pytest
from test_traps_generate import word_tokenizer

from pddkit.errors import PddkitError
from pddkit.studies.traps.documents import read_documents, write_documents
from pddkit.studies.traps.folder import HELD_OUT, MEMBER, Trap, TrapFolder, read_folder
from pddkit.studies.traps.inject import (
    SENTENCE_END,
    inject_traps,
    insert_copies,
    sentence_boundaries,
)

WORDS = ["<|endoftext|>", "<unk>"] + [f"t{i:02d}" for i in range(100)]  # fixed width: no
# trap's text is a part of another's
NOUNS = ["cat", "dog", "bird", "fox", "owl", "hen", "cow", "pig", "ram", "elk"]
VERBS = ["sat", "ran", "flew", "hid", "slept", "ate", "sang", "swam"]


def hand_folder(tok) -> TrapFolder:
    """2 lengths x 2 buckets x (2 members + 2 held out) traps, no word in two traps."""
    from pddkit.cache.fingerprint import tokenizer_digest

    traps, k, used = [], 0, 0
    for length in (3, 5):
        for bucket in (0, 1):
            for role in (MEMBER, MEMBER, HELD_OUT, HELD_OUT):
                words = [f"t{used + j:02d}" for j in range(length)]
                used += length
                ids = tuple(tok.convert_tokens_to_ids(words))
                traps.append(Trap(f"L{length}-{k:05d}", " ".join(words), ids, length,
                                  5.0 + 10 * bucket, bucket, 1.0, role))
                k += 1
    manifest = {"model": "hand", "tokenizer": {"name": "words", "vocab_size": len(tok),
                                               "fingerprint": tokenizer_digest(tok)}}
    return TrapFolder(tuple(traps), manifest)


def hand_documents(n: int, sentences: int = 12, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        said = [f"The {rng.choice(NOUNS)} {rng.choice(VERBS)}{rng.choice('.!?')}"
                for _ in range(sentences)]
        docs.append((f"doc{i}", " ".join(said) + ("\n" if i % 2 else "")))
    return docs


@pytest.fixture(scope="module")
def injected():
    tok = word_tokenizer(WORDS)
    folder = hand_folder(tok)
    docs = [*hand_documents(12), ("short1", "A cat sat."), ("short2", "")]
    out, done = inject_traps(folder, docs, repeats=[1, 2, 4], tokenizer=tok, min_tokens=20,
                             seed=5)
    return folder, docs, out, done


def test_sentence_boundaries_are_punctuation_then_whitespace():
    text = 'Mr. Holmes said "Go!" Then (he left.) Pi is 3.14 and... Done?\nEnd.'
    got = [text[:b] for b in sentence_boundaries(text)]
    assert got == ["Mr.", 'Mr. Holmes said "Go!"', 'Mr. Holmes said "Go!" Then (he left.)',
                   'Mr. Holmes said "Go!" Then (he left.) Pi is 3.14 and...',
                   'Mr. Holmes said "Go!" Then (he left.) Pi is 3.14 and... Done?', text]
    assert sentence_boundaries("no end here") == [] and SENTENCE_END.pattern


def test_each_copy_is_its_own_sentence():
    new, pos = insert_copies("One. Two!  Three", "w1 w2", [4, 9])
    assert new == "One. w1 w2 Two! w1 w2  Three" and pos == (5, 16)
    assert all(new[p:p + 5] == "w1 w2" for p in pos)
    new, pos = insert_copies("One.", " lead", [4])  # a leading space stands for the separator
    assert new == "One. lead" and new[pos[0]:] == " lead"


def test_counts_read_back_from_the_documents(injected):
    folder, docs, out, done = injected
    written = dict(out)
    assert [d for d, _ in out] == [d for d, _ in docs]  # same documents, same order
    by_id = {t.id: t for t in folder.traps}
    inserted = {i.trap_id: i for i in done.insertions}
    assert len(inserted) == 6  # 8 members, 3 repeat counts: 2 each, 2 left out
    assert Counter(i.repeats for i in done.insertions) == {1: 2, 2: 2, 4: 2}
    assert len({i.document_id for i in done.insertions}) == 6  # one trap per document
    for trap in folder.traps:
        ins = inserted.get(trap.id)
        for doc_id, text in written.items():
            want = ins.repeats if ins and ins.document_id == doc_id else 0
            assert text.count(trap.text) == want, (trap.id, doc_id)
        if ins:
            assert trap.role == MEMBER and len(ins.positions) == ins.repeats
            assert all(written[ins.document_id][p:p + len(trap.text)] == trap.text
                       for p in ins.positions)
    left = set(done.injection["not_inserted"])
    assert len(left) == 2 and all(by_id[t].role == MEMBER for t in left)
    with_trap = {i.document_id for i in done.insertions}
    original = dict(docs)
    for doc_id, text in written.items():
        assert (text != original[doc_id]) == (doc_id in with_trap)
    assert not with_trap & {"short1", "short2"}
    c = done.injection["counts"]
    assert (c["documents"], c["too_short"], c["eligible"], c["with_trap"], c["unchanged"]) == \
        (14, 2, 12, 6, 8)
    assert c["traps_per_repeats"] == {"1": 2, "2": 2, "4": 2} and c["copies"] == 14
    assert done.traps == folder.traps and done.manifest == folder.manifest


def test_removing_the_copies_gives_the_original(injected):
    _, docs, out, done = injected
    written, original = dict(out), dict(docs)
    traps = {t.id: t for t in done.traps}
    for ins in done.insertions:
        text, trap = written[ins.document_id], traps[ins.trap_id].text
        for p in sorted(ins.positions, reverse=True):
            assert text[p - 1] == " "  # after the boundary's punctuation, then the trap
            text = text[:p - 1] + text[p + len(trap):]
        assert text == original[ins.document_id]


def _untimed(folder):
    """`folder` with the clock times of its injection's provenance left out."""
    prov = {k: v for k, v in folder.injection["provenance"].items()
            if k not in ("started_at", "finished_at")}
    return dataclasses.replace(folder, injection={**folder.injection, "provenance": prov})


def test_seeded_and_folder_round_trip(injected, tmp_path):
    folder, docs, out, done = injected
    tok = word_tokenizer(WORDS)
    again = inject_traps(folder, docs, repeats=[1, 2, 4], tokenizer=tok, min_tokens=20, seed=5)
    # the same texts and the same injection; only the provenance's clock times may differ
    # (the two calls can fall on either side of a second)
    assert again[0] == out and _untimed(again[1]) == _untimed(done)
    other = inject_traps(folder, docs, repeats=[1, 2, 4], tokenizer=tok, min_tokens=20, seed=6)
    assert other[1].insertions != done.insertions
    back = read_folder(done.write(tmp_path / "inj"))
    assert back == done


@pytest.mark.parametrize("name", ["docs.jsonl", "docs.csv", "docs.tsv", "docs.parquet"])
def test_documents_file_round_trip(tmp_path, name):
    docs = [*hand_documents(8), ("d-empty", "")]
    rows = [{"id": d, "title": f"Title, {d}", "text": t, "year": str(1800 + i)}
            for i, (d, t) in enumerate(docs)]
    src = tmp_path / "in" / name
    src.parent.mkdir()
    if name.endswith(".jsonl"):
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif name.endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), src)
    else:
        with src.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]), delimiter="\t" if "tsv" in name
                               else ",")
            w.writeheader()
            w.writerows(rows)
    table = read_documents(src)
    assert table.documents == docs
    tok = word_tokenizer(WORDS)
    out, done = inject_traps(hand_folder(tok), table.documents, repeats=[2, 3],
                             tokenizer=tok, min_tokens=10)
    path = write_documents(table, out, tmp_path / "out")
    assert path.name == name and path.parent == tmp_path / "out"
    back = read_documents(path)
    assert back.documents == out and back.format == table.format
    assert [{k: v for k, v in r.items() if k != "text"} for r in back.rows] == \
        [{k: v for k, v in r.items() if k != "text"} for r in rows]
    assert len(done.insertions) == 8
    with pytest.raises(PddkitError, match="would replace the input"):
        write_documents(table, out, src.parent)


def test_fewer_documents_than_traps_is_one_sentence():
    tok = word_tokenizer(WORDS)
    docs = [*hand_documents(3), ("tiny", "A cat.")]
    with pytest.raises(PddkitError) as e:
        inject_traps(hand_folder(tok), docs, repeats=[1], tokenizer=tok, min_tokens=20)
    assert str(e.value).startswith("3 of the 4 documents have at least `min_tokens` 20 "
                                   "tokens, fewer than the 8 member traps to insert")
    assert "\n" not in str(e.value)


def test_documents_without_enough_boundaries_are_one_sentence():
    tok = word_tokenizer(WORDS)
    docs = hand_documents(8, sentences=3) + hand_documents(4, sentences=12, seed=1)
    docs = [(f"d{i}", t) for i, (_, t) in enumerate(docs)]
    _, done = inject_traps(hand_folder(tok), docs, repeats=[1, 12], tokenizer=tok, min_tokens=0)
    assert all(int(i.document_id[1:]) >= 8 for i in done.insertions if i.repeats == 12)
    with pytest.raises(PddkitError, match=r"^4 traps are to be repeated 13 times .* only 0 of"):
        inject_traps(hand_folder(tok), docs, repeats=[1, 13], tokenizer=tok, min_tokens=0)


@pytest.mark.parametrize("change, words", [
    (dict(repeats=[0, 10]), "`repeats` must be whole numbers of at least 1, not [0, 10]"),
    (dict(repeats=[]), "`repeats` must be whole numbers"),
    (dict(repeats=[10, 10]), "`repeats` names a count twice"),
    (dict(min_tokens=-1), "`min_tokens` must be 0 or more"),
    (dict(tokenizer=None), "counting `min_tokens` needs the traps' tokenizer"),
])
def test_bad_options_are_one_sentence(change, words):
    tok = word_tokenizer(WORDS)
    kw = {"repeats": [1, 2], "tokenizer": tok, "min_tokens": 5, **change}
    with pytest.raises(PddkitError) as e:
        inject_traps(hand_folder(tok), hand_documents(12), **kw)
    assert str(e.value).startswith(words) and "\n" not in str(e.value)


def test_injected_folder_other_tokenizer_and_duplicate_ids_are_refused(injected):
    _, docs, _, done = injected
    tok = word_tokenizer(WORDS)
    with pytest.raises(PddkitError, match="already holds injected traps"):
        inject_traps(done, docs, repeats=[1], tokenizer=tok, min_tokens=0)
    other = word_tokenizer(["<|endoftext|>", "<unk>", "a", "b"])
    with pytest.raises(PddkitError, match=r"generated for words .* not for the tokenizer given"):
        inject_traps(hand_folder(tok), docs, repeats=[1], tokenizer=other, min_tokens=0)
    with pytest.raises(PddkitError, match="document id 'doc0' appears twice"):
        inject_traps(hand_folder(tok), [*docs, docs[0]], repeats=[1], tokenizer=tok,
                     min_tokens=0)
    no_members = dataclasses.replace(hand_folder(tok), traps=tuple(
        dataclasses.replace(t, role=HELD_OUT) for t in hand_folder(tok).traps))
    with pytest.raises(PddkitError, match="no member traps"):
        inject_traps(no_members, docs, repeats=[1], tokenizer=tok, min_tokens=0)


def test_documents_file_errors_are_one_sentence(tmp_path):
    bad = tmp_path / "d.jsonl"
    bad.write_text('{"id": "a", "text": "x."}\n{"id": "a", "text": "y."}\n')
    with pytest.raises(PddkitError, match=r"lines 1 and 2 share the id 'a'"):
        read_documents(bad)
    bad.write_text('{"id": "a", "text": "x."}\n{"text": "y."}\n')
    with pytest.raises(PddkitError, match=r"line 2 has no 'id'"):
        read_documents(bad)
    bad.write_text('{"id": "a", "text": 3}\n')
    with pytest.raises(PddkitError, match=r"line 1 has a 'text' that is not a string"):
        read_documents(bad)
    table = tmp_path / "d.csv"
    table.write_text("name,text\na,x.\n")
    with pytest.raises(PddkitError, match=r"has no 'id' column; its columns are 'name', 'text'"):
        read_documents(table)
    assert read_documents(table, id_field="name").documents == [("a", "x.")]
    with pytest.raises(PddkitError, match="does not exist"):
        read_documents(tmp_path / "none.jsonl")


def test_generated_traps_injected_into_gutenberg(toy_lm, tmp_path):
    """Byte-level BPE traps (some begin with a space) from the toy GPT-2, inserted into
    real paragraphs, written as JSONL and counted back from the file."""
    from conftest import gutenberg_paragraphs

    from pddkit.studies.traps.generate import generate_traps

    tok = toy_lm.tokenizer
    folder = generate_traps(toy_lm.model, tok, lengths=[8], count=8, ppl_range=(20.0, 220.0),
                            buckets=4, batch_size=32, seed=2)
    paras = gutenberg_paragraphs(40, seed=3)
    src = tmp_path / "books.jsonl"
    src.write_text("".join(json.dumps({"id": f"book{i}", "text": "\n\n".join(paras[i::8])})
                           + "\n" for i in range(8)))
    table = read_documents(src)
    out, done = inject_traps(folder, table.documents, repeats=[1, 3], tokenizer=tok,
                             min_tokens=300, seed=1)
    written = dict(read_documents(write_documents(table, out, tmp_path / "o")).documents)
    inserted = {i.trap_id: i for i in done.insertions}
    assert len(inserted) == 4 and Counter(i.repeats for i in inserted.values()) == {1: 2, 3: 2}
    for trap in folder.traps:
        ins = inserted.get(trap.id)
        assert (ins is not None) == (trap.role == MEMBER)
        for doc_id, text in written.items():
            want = ins.repeats if ins and ins.document_id == doc_id else 0
            assert text.count(trap.text) == want
        if ins:
            assert all(written[ins.document_id][p:].startswith(trap.text) for p in ins.positions)


def test_too_few_members_for_the_repeat_counts_is_refused():
    tok = word_tokenizer(WORDS)
    folder = hand_folder(tok)
    one = dataclasses.replace(folder, traps=tuple(
        t if t.id == "L3-00000" else dataclasses.replace(t, role=HELD_OUT) for t in folder.traps))
    with pytest.raises(PddkitError, match=r"^1 member traps cannot go to 2 repeat counts"):
        inject_traps(one, hand_documents(4), repeats=[1, 2], tokenizer=tok, min_tokens=0)


def test_a_documents_file_without_its_text_field_is_one_sentence(tmp_path):
    src = tmp_path / "d.jsonl"
    src.write_text('{"id": "a", "body": "One. Two."}\n{"id": "b", "body": "Three."}\n')
    with pytest.raises(PddkitError) as e:
        read_documents(src)
    assert str(e.value) == (f"no line of {src} has the text field 'text': name the field "
                            "holding the documents' texts with `text_field`")
    src.write_text('{"id": "a", "text": null}\n{"id": "b"}\n')  # null everywhere: no text either
    with pytest.raises(PddkitError, match="has the text field 'text'"):
        read_documents(src)
    assert read_documents(src, text_field="id").documents == [("a", "a"), ("b", "b")]


def test_rows_without_text_are_skipped_counted_and_written_back_as_they_were(tmp_path):
    tok = word_tokenizer(WORDS)
    rows = [{"id": d, "text": t} for d, t in hand_documents(12)]
    rows[3:3] = [{"id": "no-text", "n": 1}, {"id": "null-text", "text": None}]
    src = tmp_path / "in" / "d.jsonl"
    src.parent.mkdir()
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = read_documents(src)
    assert table.without_text == 2
    assert dict(table.documents)["no-text"] is None and dict(table.documents)["null-text"] is None
    out, done = inject_traps(hand_folder(tok), table.documents, repeats=[1, 2], tokenizer=tok,
                             min_tokens=20)
    c = done.injection["counts"]
    assert (c["documents"], c["without_text"], c["too_short"], c["eligible"]) == (14, 2, 0, 12)
    assert not {i.document_id for i in done.insertions} & {"no-text", "null-text"}
    back = [json.loads(x) for x in write_documents(table, out, tmp_path / "out").read_text()
            .splitlines()]
    assert back[3] == rows[3] and back[4] == rows[4]  # no text key, null text: as they were
    with pytest.raises(PddkitError, match=r"^0 of the 0 documents \(2 more have no text\)"):
        inject_traps(hand_folder(tok), [("a", None), ("b", None)], repeats=[1], tokenizer=tok,
                     min_tokens=0)
