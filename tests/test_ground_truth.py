"""Sandbox ground truth (SPEC section 7): no near-duplicates across roles, windows cut
verbatim from their documents, and the check that re-reads what the sandbox wrote."""

import json

import pytest

from pddkit.data.ngrams import ngram_hashes, shares_run
from pddkit.errors import PddkitError
from pddkit.sandbox import ground_truth
from pddkit.sandbox.corpus import Corpus, Document
from pddkit.sandbox.split import ROLES, split_documents, windows


def _doc(i: int, n: int = 150) -> list[str]:
    return [f"w{i}_{j}" for j in range(n)]


def _paired_corpus(shared: int, pairs: int = 40, single: int = 40) -> Corpus:
    """Documents 2k and 2k+1 share a run of `shared` words (upper-cased in the copy); the
    rest share nothing."""
    docs = []
    for k in range(pairs):
        a, b = _doc(2 * k), _doc(2 * k + 1)
        b[60:60 + shared] = [w.upper() for w in a[10:10 + shared]]
        docs += [Document(f"p{k}a", " ".join(a), "x"), Document(f"p{k}b", " ".join(b), "x")]
    docs += [Document(f"s{i}", " ".join(_doc(1000 + i)), "x") for i in range(single)]
    return Corpus("paired", tuple(docs), 1, 0)


def test_ngrams_are_13_lowercased_whitespace_words():
    words = _doc(0, 30)
    a = " ".join(words)
    assert shares_run(a, "x " + "\n".join(w.upper() for w in words[5:18]) + " y")  # 13 words
    assert not shares_run(a, "x " + " ".join(words[5:17]) + " y")  # 12 words
    assert len(ngram_hashes(a)) == 30 - 13 + 1 and ngram_hashes(" ".join(words[:12])) == set()
    assert ngram_hashes(a) == ngram_hashes(a.upper().replace(" ", "\n  "))


@pytest.mark.slow
def test_documents_sharing_a_13_word_run_never_take_two_roles():
    corpus = _paired_corpus(13)
    for seed in range(5):
        split = split_documents(corpus, 20, 20, 10, min_words=64, seed=seed)
        role = split.roles()
        for k in range(40):
            a, b = role.get(f"p{k}a"), role.get(f"p{k}b")
            assert a is None or b is None or a == b, (seed, k, a, b)
        assert [len(x) for x in (split.members, split.nonmembers, split.reference,
                                 split.background)] == [20, 20, 20, 10]
        nd = split.near_duplicates
        assert nd.moved + nd.dropped > 0 and nd.examined == 70 + nd.dropped
        # no two documents of different roles share a run, checked pairwise
        docs = {d.id: d.text for d in corpus.documents}
        placed = sorted(role)
        for i, x in enumerate(placed):
            for y in placed[i + 1:]:
                if role[x] != role[y]:
                    assert not shares_run(docs[x], docs[y])


def test_a_12_word_shared_run_is_allowed():
    split = split_documents(_paired_corpus(12), 20, 20, 10, min_words=64, seed=0)
    nd = split.near_duplicates
    assert (nd.moved, nd.dropped, nd.examined) == (0, 0, 70)
    role = split.roles()
    assert any(f"p{k}a" in role and f"p{k}b" in role and role[f"p{k}a"] != role[f"p{k}b"]
               for k in range(40))


def test_a_corpus_too_repetitive_for_the_split_is_one_sentence_with_numbers():
    base = _doc(0, 400)
    # every document quotes the same 20 words: they can only ever share one role
    docs = tuple(Document(f"d{i}", " ".join(_doc(i + 1, 130) + base[:20]), "x") for i in range(30))
    with pytest.raises(PddkitError) as err:
        split_documents(Corpus("rep", docs, 1, 0), 5, 5, 0, min_words=128)
    msg = str(err.value)
    assert msg == ("corpus rep has 5 documents of at least 128 words after removing "
                   "near-duplicates across roles (25 dropped for sharing a run of 13 words with "
                   "another role); this split needs 15 (2 x 5 members/non-members + 5 reference "
                   "+ 0 background): lower `members`, `reference` or `background`, or give a "
                   "larger corpus")


def _para_corpus(n: int = 60) -> Corpus:
    docs = []
    for i in range(n):
        w = _doc(i, 160)
        paras = [" ".join(w[k:k + 40]) for k in range(0, 160, 40)]
        docs.append(Document(f"d{i}", "\n\n".join(paras).replace("_3 ", "_3\t "), "x"))
    return Corpus("paras", tuple(docs), 1, 0)


def test_windows_are_verbatim_text_of_their_document_newlines_kept():
    corpus = _para_corpus()
    split = split_documents(corpus, 15, 15, 5, min_words=128, seed=1)
    text = {d.id: d.text for d in corpus.documents}
    ds = windows(split, 64, per_doc=2, seed=1)
    assert len(ds.samples) == 2 * 15 * 2
    assert all(s.text in text[s.group] and len(s.text.split()) == 64 for s in ds.samples)
    assert all(s.text == s.text.strip() for s in ds.samples)
    assert sum("\n\n" in s.text for s in ds.samples) == len(ds.samples)  # 64 words span a break
    assert any("\t" in s.text for s in ds.samples)


def _write_sandbox_files(out, split, w=64):
    tok_rows = [{"id": d.id, "text": d.text} for d in split.reference + split.background]
    ground_truth.write_split_texts(out, split, tok_rows)
    run = out / "run"
    texts = ground_truth.write_train_documents(run, split, repeats=2, background=3)
    ground_truth.write_windows(run / f"window-{w}", windows(split, w, per_doc=2, seed=0))
    return run, texts


def test_the_check_passes_on_what_the_sandbox_writes_and_reports_one_line(tmp_path):
    split = split_documents(_paired_corpus(13), 20, 20, 10, min_words=64, seed=0)
    run, texts = _write_sandbox_files(tmp_path, split)
    assert texts == [d.text for d in split.members] * 2 + [d.text for d in split.background[:3]]
    rows = ground_truth.read_jsonl(run / "train-documents.jsonl")
    assert [(r["role"], r["repeats"]) for r in rows] == [("member", 2)] * 20 + [("background", 1)] * 3
    truth = ground_truth.verify_sandbox(tmp_path, [run], None, None)
    assert truth["line"] == (
        "ground truth verified (64-word windows): 0 of 40 non-member windows share a 13-word "
        "run with training text; 40 of 40 member windows are verbatim training text; "
        "0 of 80 evaluated windows "
        "share a 13-word run with the reference pool or tokenizer texts")
    assert truth["runs"][0]["nonmember_documents"] == 20
    based = ground_truth.verify_sandbox(tmp_path, [run], "some/base", None)
    assert "base model's own pre-training data is unknown" in based["line"]
    assert not based["tokenizer_texts_checked"] and based["pretraining_data_unknown"]


@pytest.mark.parametrize("tamper", ["nonmember copied from a member", "member whitespace folded",
                                    "reference pool quotes a non-member"])
def test_the_check_fails_on_tampered_files(tmp_path, tamper):
    split = split_documents(_para_corpus(), 15, 15, 5, min_words=128, seed=0)
    run, _ = _write_sandbox_files(tmp_path, split)
    path = run / "window-64" / "windows.jsonl"
    rows = ground_truth.read_jsonl(path)
    member = next(r for r in rows if r["label"] == 1)
    nonmember = next(r for r in rows if r["label"] == 0)
    if tamper == "nonmember copied from a member":
        nonmember["text"] = member["text"]
        expect = "1 of 30 non-member windows share a 13-word run with training text"
    elif tamper == "member whitespace folded":
        member["text"] = " ".join(member["text"].split())
        expect = "1 of 30 member windows are not verbatim training text"
    else:
        ref = ground_truth.read_jsonl(tmp_path / "reference-pool.jsonl")
        ref[0]["text"] += " " + " ".join(nonmember["text"].split()[:13])
        ground_truth.write_jsonl(tmp_path / "reference-pool.jsonl", ref)
        expect = "1 of 60 evaluated windows share a 13-word run with the reference pool"
    ground_truth.write_jsonl(path, rows)
    with pytest.raises(PddkitError, match=f"ground truth check failed for .*{expect}"):
        ground_truth.verify_run(tmp_path, run)


def test_the_check_fails_when_a_non_member_document_is_trained_on(tmp_path):
    split = split_documents(_para_corpus(), 15, 15, 5, min_words=128, seed=0)
    run, _ = _write_sandbox_files(tmp_path, split)
    rows = ground_truth.read_jsonl(run / "train-documents.jsonl")
    rows.append({"id": split.nonmembers[0].id, "role": "background", "repeats": 1,
                 "text": split.nonmembers[0].text})
    ground_truth.write_jsonl(run / "train-documents.jsonl", rows)
    with pytest.raises(PddkitError, match="non-member documents share a 13-word run"):
        ground_truth.verify_run(tmp_path, run)
    assert json.loads((tmp_path / "evaluated-documents.jsonl").read_text().splitlines()[0])[
        "role"] in ROLES


def _with_shots(out, split, w=64):
    """What the sandbox writes when `methods` names recall: members held out for shots."""
    from pddkit.sandbox import shots

    tok_rows = [{"id": d.id, "text": d.text} for d in split.reference + split.background]
    ground_truth.write_split_texts(out, split, tok_rows)
    run = out / "run"
    ground_truth.write_train_documents(run, split, repeats=1, background=0)
    evaluated, held = shots.hold_out(split, 4, seed=0)
    ground_truth.write_windows(run / f"window-{w}", windows(evaluated, w, per_doc=2, seed=0))
    pool = ground_truth.write_windows(run / f"window-{w}", shots.pool(split, held, w, 0),
                                      name=shots.POOL)
    return run, held, pool


def test_sandbox_shots_are_members_never_evaluated_and_reference_pool_non_members(tmp_path):
    split = split_documents(_para_corpus(), 15, 15, 5, min_words=128, seed=0)
    run, held, pool = _with_shots(tmp_path, split)
    rows = ground_truth.read_jsonl(pool)
    assert sorted(r["label"] for r in rows) == [0] * 4 + [1] * 4
    assert {r["group"] for r in rows if r["label"] == 1} == set(held)
    assert {r["group"] for r in rows if r["label"] == 0} <= {d.id for d in split.reference}
    evaluated = {r["group"] for r in ground_truth.read_jsonl(run / "window-64" / "windows.jsonl")}
    assert not evaluated & set(held) and len(evaluated) == 15 - 4 + 15
    check = ground_truth.verify_run(tmp_path, run)
    assert (check.shots, check.shots_wrong) == (8, 0)
    assert "8 recall shots" in ground_truth.verify_sandbox(tmp_path, [run], None, None)["line"]


@pytest.mark.parametrize("tamper", ["member shot from an evaluated document",
                                    "non-member shot from a member"])
def test_the_check_fails_on_tampered_shots(tmp_path, tamper):
    split = split_documents(_para_corpus(), 15, 15, 5, min_words=128, seed=0)
    run, held, pool = _with_shots(tmp_path, split)
    rows = ground_truth.read_jsonl(pool)
    windows_ = ground_truth.read_jsonl(run / "window-64" / "windows.jsonl")
    evaluated_member = next(r for r in windows_ if r["label"] == 1)
    if tamper == "member shot from an evaluated document":
        shot = next(r for r in rows if r["label"] == 1)
        shot.update(text=evaluated_member["text"], group=evaluated_member["group"])
    else:
        shot = next(r for r in rows if r["label"] == 0)
        held_text = next(d.text for d in split.members if d.id == held[0])
        shot["text"] = " ".join(held_text.split()[:64])
    ground_truth.write_jsonl(pool, rows)
    with pytest.raises(PddkitError, match="1 of 8 shots are not what their label says"):
        ground_truth.verify_run(tmp_path, run)
