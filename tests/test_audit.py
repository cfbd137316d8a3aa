"""Copyrighted-book audit (Shi et al. 2024, case study on copyrighted books): snippets,
bad inputs, the report, and ground truth on a tiny model trained on whole books."""

import csv
import json
import re
from itertools import pairwise

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl
from conftest import shared_path

from pddkit.cli import main
from pddkit.errors import PddkitError
from pddkit.evaluation.book_rates import judge_books
from pddkit.studies import STUDIES
from pddkit.studies.audit import (
    AuditResult,
    Book,
    SkippedBook,
    Snippet,
    _rates,
    _test_summary,
    _verdict,
    audit_books,
    cut_snippets,
    load_books,
)

NO_MODEL = "/nonexistent/model/dir"  # every check below answers before a model would load


def _words(n, tag="w"):
    return " ".join(f"{tag}{i}" for i in range(n))


def test_snippets_are_verbatim_non_overlapping_and_seeded():
    text = "\n\n".join(f"Para {p}:\n" + _words(50, f"p{p}x") for p in range(20))  # 1040 words
    book = Book("b", text, "b.txt")
    got = cut_snippets(book, 8, 100, seed=3)
    assert len(got) == 8 and all(s.text in text for s in got)  # verbatim, newlines kept
    assert all(len(s.text.split()) == 100 for s in got)
    starts = [s.start_word for s in got]
    assert starts == sorted(starts) and all(b - a >= 100 for a, b in pairwise(starts))
    assert [s.text for s in cut_snippets(book, 8, 100, seed=3)] == [s.text for s in got]
    assert starts != [s.start_word for s in cut_snippets(book, 8, 100, seed=4)]
    # a book with room for 10 non-overlapping snippets gives 10, not 50
    assert len(cut_snippets(book, 50, 100, seed=0)) == 10
    assert cut_snippets(Book("s", _words(99), "s"), 5, 100, seed=0) == []
    # a book's snippets do not depend on the other books
    other = Book("c", text, "c.txt")
    assert [s.start_word for s in cut_snippets(other, 8, 100, 3)] != starts


def test_books_from_a_folder_or_jsonl(tmp_path):
    d = tmp_path / "books"
    (d / "author").mkdir(parents=True)
    header = "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n"
    end = "\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nlicence"
    (d / "author" / "one.txt").write_text(header + "The story." + end)
    (d / "two.txt").write_text("Another story.")
    books = load_books(d)
    assert [(b.name, b.text) for b in books] == [("author/one", "The story."),
                                                 ("two", "Another story.")]
    f = write_jsonl(tmp_path / "b.jsonl", [{"book": "A", "text": "part one"},
                                           {"book": "B", "text": "x"},
                                           {"book": "A", "text": "part two"}])
    assert [(b.name, b.text) for b in load_books(f)] == [("A", "part one\n\npart two"), ("B", "x")]
    (tmp_path / "bad.jsonl").write_text('{"book": "A", "text": "t"}\n{"title": "B"}\n')
    with pytest.raises(PddkitError, match=r"bad\.jsonl line 2 needs a 'book' name and a 'text'"):
        load_books(tmp_path / "bad.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PddkitError, match=r"holds no \.txt files"):
        load_books(tmp_path / "empty")


@pytest.fixture
def small_inputs(tmp_path):
    books = tmp_path / "books"
    books.mkdir()
    (books / "long.txt").write_text(_words(300, "long"))
    (books / "short.txt").write_text(_words(30, "short"))
    val = write_jsonl(tmp_path / "val.jsonl", [{"text": _words(60, f"v{i}x"), "label": i % 2}
                                               for i in range(10)])
    return books, val


def test_bad_inputs_are_one_sentence_before_any_model_loads(tmp_path, small_inputs):
    books, val = small_inputs
    with pytest.raises(PddkitError, match=r"none of the 2 books holds one 512-word snippet "
                       r"\(the longest has 300 words\): lower `words`"):
        audit_books(NO_MODEL, books, val_data=str(val))
    one = write_jsonl(tmp_path / "one.jsonl", [{"text": f"member text {i}", "label": 1}
                                               for i in range(5)])
    with pytest.raises(PddkitError, match=r"has only members \(5 texts\): choosing a threshold"):
        audit_books(NO_MODEL, books, val_data=str(one), words=50)
    with pytest.raises(PddkitError, match="give exactly one of `val_data`"):
        audit_books(NO_MODEL, books, words=50)
    with pytest.raises(PddkitError, match="give exactly one of `val_data`"):
        audit_books(NO_MODEL, books, val_data=str(val), val_benchmark="bookmia", words=50)
    with pytest.raises(PddkitError, match="`snippets` must be a whole number of at least 1"):
        audit_books(NO_MODEL, books, val_data=str(val), snippets=0)
    with pytest.raises(PddkitError, match="`method` names one method"):
        audit_books(NO_MODEL, books, "loss,mink", val_data=str(val))
    with pytest.raises(PddkitError, match="`threshold` must be"):
        audit_books(NO_MODEL, books, val_data=str(val), threshold="fpr=2")
    leak = write_jsonl(tmp_path / "leak.jsonl", [{"text": _words(300, "long"), "label": 1},
                                                 {"text": "other", "label": 0}])
    with pytest.raises(PddkitError, match=r"1 of the 2 texts of validation data .* also occur in "
                       "the book snippets"):
        audit_books(NO_MODEL, books, val_data=str(leak), words=300, snippets=1)


def test_cli_bad_inputs_name_flags(tmp_path, small_inputs, capsys):
    books, val = small_inputs
    code, _, err = run_cli(capsys, "audit", "--model", NO_MODEL, "--books", books,
                           "--val-data", val, "--output", tmp_path / "o")
    assert code == 1 and "none of the 2 books holds one 512-word snippet" in err
    assert "lower --words" in err and "`" not in err
    code, _, err = run_cli(capsys, "audit", "--model", NO_MODEL, "--books", books,
                           "--output", tmp_path / "o")
    assert code == 1 and "give exactly one of --val-data (a labelled table) and --val-benchmark" \
        in err


def test_audit_is_registered_and_listed(capsys):
    assert "audit" in STUDIES.names()
    code, out, _ = run_cli(capsys, "list")
    assert code == 0 and re.search(r"studies.*\n(.*\n)*\s+audit\s+Which books", out)


def _scored_world(rng, books=50, snippets=100, unseen=100, seen=0, tau=0.33, shift=1.5):
    """Simulated snippet scores: a book's snippets score N(book effect, 1), members `shift`
    higher; book effects N(0, tau) make never-seen books' rates above a threshold vary
    (tau 0.33: sd about 0.10 around a rate near 0.23). Validation: `books` member and
    `books` never-seen books (groups); audited: `unseen` never-seen books, then `seen`
    member books."""
    y = np.repeat(np.r_[np.ones(books, int), np.zeros(books, int)], snippets)
    val = np.repeat(rng.normal(0, tau, 2 * books), snippets) + rng.normal(size=y.size) + shift * y
    groups = np.repeat([f"val{i}" for i in range(2 * books)], snippets)
    audited = [rng.normal(b, 1, snippets) for b in rng.normal(0, tau, unseen)]
    audited += [rng.normal(b + shift, 1, snippets) for b in rng.normal(0, tau, seen)]
    return val, y, groups, audited


@pytest.mark.slow
def test_never_seen_books_with_between_book_spread_are_rarely_marked():
    """The issue's case: 50 validation books a class x 100 snippets, 100 audited books the
    model never saw, book rates varying with sd about 0.10 (the old rule, a book's Wilson
    interval above the pooled rate's, marked about 20% of them). Marked against the
    never-seen books' spread with Benjamini-Hochberg at 5%: at most 5% of never-seen books
    over the runs, and few runs with any false mark (with every book never seen, that
    share is the false-discovery rate); against one pooled rate, the same data marks many."""
    rng = np.random.default_rng(19)
    marked, runs = [], 0
    for _ in range(8):
        val, y, groups, audited = _scored_world(rng)
        judged = judge_books(val, y, audited, val_groups=groups, fdr=0.05, seed=0)
        assert judged.reference.spread_accounted and judged.reference.books == 50
        assert 0.06 < judged.reference.between_book_sd < 0.15  # the spread is there, and seen
        marked += judged.test.marked
        runs += any(judged.test.marked)
    assert np.mean(marked) <= 0.05 and np.mean(marked) <= 0.01, np.mean(marked)
    assert runs <= 2, runs
    pooled = judge_books(val, y, audited, fdr=0.05)  # no groups: one pooled rate
    assert not pooled.reference.spread_accounted and np.mean(pooled.test.marked) >= 0.08


@pytest.mark.slow
def test_books_with_a_clearly_higher_rate_are_still_marked():
    rng = np.random.default_rng(20)
    for _ in range(3):  # 90 never-seen books (rates ~0.23), 10 trained on (rates ~0.9)
        val, y, groups, audited = _scored_world(rng, unseen=90, seen=10, shift=2.5)
        judged = judge_books(val, y, audited, val_groups=groups, fdr=0.05, seed=1)
        assert all(judged.test.marked[90:]), judged.test.p_values[90:]
        assert sum(judged.test.marked[:90]) <= 1


def test_without_groups_the_verdict_says_between_book_variation_is_not_accounted_for():
    rng = np.random.default_rng(3)
    val, y, groups, audited = _scored_world(rng, books=6, snippets=20, unseen=3, seen=1,
                                            shift=3.0)
    for kw, reason in (({}, "the validation data names no book (group) for its texts"),
                       ({"val_groups": [None, *groups[1:]]},
                        "1 of 240 validation texts name no book (group)"),
                       ({"val_groups": ["one"] * 120 + ["two"] * 120},
                        "the validation data has 1 known-member and 1 never-seen books")):
        judged = judge_books(val, y, audited, **kw)
        ref = judged.reference
        assert ref.model == "binomial" and not ref.spread_accounted
        assert ref.reason.startswith(reason)
        assert ref.mean == judged.threshold.expected_fpr  # the pooled out-of-sample rate
        verdict = _verdict(_rates(_cuts(audited), LENGTHS, judged), judged.threshold, ref,
                           _test_summary(judged), 0)
        assert f"Between-book variation is not accounted for ({ref.reason})" in verdict
    grouped = judge_books(val, y, audited, val_groups=groups)
    assert grouped.reference.spread_accounted and grouped.reference.books == 6
    verdict = _verdict(_rates(_cuts(audited), LENGTHS, grouped), grouped.threshold,
                       grouped.reference, _test_summary(grouped), 0)
    assert "not accounted for" not in verdict
    assert grouped.threshold.expected_fpr_source.endswith("folds of whole groups)")
    unseen_only = judge_books(val, y, audited[:3], val_groups=groups)  # the 3 never-seen books
    assert not any(unseen_only.test.marked)
    verdict = _verdict(_rates(_cuts(audited[:3]), LENGTHS, unseen_only), unseen_only.threshold,
                       unseen_only.reference, _test_summary(unseen_only), 0)
    assert "Of 3 books audited, 0 show" in verdict and ("Had the model seen none of these "
        "books, the chance of marking any would be at most 5% (the false-discovery rate)") in verdict
    # too few never-seen books to measure their spread: whole-book folds, pooled rate
    judged = judge_books(val, y, audited, val_groups=groups, min_books=7)
    assert judged.threshold.expected_fpr_source.endswith("folds of whole groups)")
    assert judged.reference.reason == ("the validation data has 6 never-seen books of 2 or "
                                       "more texts, too few (under 7) to measure how much "
                                       "they vary")
    with pytest.raises(PddkitError, match="`fdr` must be between 0 and 1"):
        judge_books(val, y, audited, fdr=5)


LENGTHS = {f"book{i}": 1000 for i in range(4)}


def _cuts(audited, names=None):
    names = names or [f"book{i}" for i in range(len(audited))]
    return [[Snippet(name, i, 0, "") for i in range(len(scores))]
            for name, scores in zip(names, audited)]


def _judged_result(tmp_path, report=True):
    """An audit result from the real decision path on simulated scores: 6 member and 6
    never-seen validation books (groups), a member book and a never-seen book audited."""
    rng = np.random.default_rng(5)
    val, y, groups, audited = _scored_world(rng, books=6, snippets=30, unseen=1, seen=1,
                                            tau=0.2, shift=2.5)
    audited = audited[::-1]  # the member book first
    judged = judge_books(val, y, audited, val_groups=groups, fdr=0.05)
    names = ["Member Book", "Unseen Book"]
    rates = _rates(_cuts(audited, names), {"Member Book": 5000, "Unseen Book": 4000}, judged)
    test = _test_summary(judged)
    r = AuditResult(method="mink", threshold=judged.threshold, reference=judged.reference,
                    book_test=test, books=tuple(rates),
                    skipped=(SkippedBook("Tiny", 12, "shorter than one 64-word snippet"),),
                    snippets=(), scores=(),
                    verdict=_verdict(rates, judged.threshold, judged.reference, test, 1),
                    config={"model": "m", "method": "mink", "books": "b", "val_data": "v.jsonl",
                            "val_benchmark": None, "snippets": 30, "words": 64, "seed": 0,
                            "threshold": "accuracy", "fdr": 0.05},
                    counts={"books": 3, "audited": 2, "skipped": 1, "snippets": 60})
    return r, r.write(tmp_path / "audit", report=report)


def _hand_made(tmp_path):
    """An audit folder (results.json, books.csv, snippets.jsonl) for other studies' tests."""
    return _judged_result(tmp_path, report=False)[1]


def test_results_record_the_reference_and_each_books_p_and_q_values(tmp_path):
    _, out = _judged_result(tmp_path, report=False)
    saved = json.loads((out / "results.json").read_text())
    ref, test = saved["never_seen_reference"], saved["book_test"]
    assert ref["model"] == "beta-binomial" and ref["books"] == 6 and ref["snippets"] == 180
    assert len(ref["book_above"]) == 6 and sum(ref["book_above"]) == ref["above"]
    assert ref["spread_accounted"] and test["fdr"] == 0.05
    books = {b["book"]: b for b in saved["books"]}
    member, unseen = books["Member Book"], books["Unseen Book"]
    assert member["rate"] > 0.8 and member["p_value"] < 0.01 and member["marked"]
    assert unseen["rate"] < 0.4 and unseen["p_value"] > 0.05 and not unseen["marked"]
    # two books: q = min(1, p x 2 / rank) with the running minimum from the top
    assert member["q_value"] == pytest.approx(min(1.0, 2 * member["p_value"]))
    assert unseen["q_value"] == pytest.approx(max(unseen["p_value"], member["q_value"]))
    rows = list(csv.DictReader((out / "books.csv").open()))
    assert [(row["book"], row["marked"]) for row in rows] == [("Member Book", "1"),
                                                              ("Unseen Book", "0")]
    assert "Of 2 books audited, 1 shows clearly more passages" in saved["verdict"]
    assert re.search(r"Of the 1 marked, about 0\.0\d+ are expected to be books the model "
                     r"never saw, marked by chance \(the 5% false-discovery rate allows at most "
                     r"0\.05\)\.", saved["verdict"]), saved["verdict"]
    assert "not accounted for" not in saved["verdict"]


@pytest.mark.slow
def test_report_files_and_browser(tmp_path):
    _, out = _judged_result(tmp_path)
    for name in ("results.json", "books.csv", "snippets.jsonl", "report.html", "report.md",
                 "audit_books.png", "audit_rates.png"):
        assert (out / name).is_file(), name
    rows = list(csv.DictReader((out / "books.csv").open()))
    assert [r["book"] for r in rows] == ["Member Book", "Unseen Book"]
    assert rows[0]["marked"] == "1" and rows[1]["marked"] == "0"
    html = (out / "report.html").read_text()
    assert "id='verdict'" in html and "Tiny: 12 words" in html and "<script src" not in html
    md = (out / "report.md").read_text()
    assert re.search(r"\| 1 \| Member Book \| [\d.]+ \[[\d.]+, [\d.]+\] \| \d+/30 \| [\de.-]+ \| "
                     r"[\de.-]+ \| marked \|", md)
    assert re.search(r"\| 2 \| Unseen Book \| .* \| - \|", md)
    from browser import rendered

    dom = rendered(out / "report.html", tmp_path / "profile", images=2)
    assert "Member Book" in dom and "Books ranked by contamination rate" in dom
    (out / "report.html").unlink()

    assert main(["report", str(out)]) == 0 and "id='verdict'" in (out / "report.html").read_text()


# Ground truth: a tiny GPT-2-shaped model trained on whole books (members); other books it
# never saw (non-members). Validation = snippets of one more member and one more non-member
# book, labelled; the audited books are different books.
BOOKS = {"cask": "Poe, Edgar Allan/The Cask of Amontillado.txt",
         "masque": "Poe, Edgar Allan/The Masque of the Red Death.txt",
         "feeding": "Carroll, Lewis/Feeding the Mind.txt",
         "cabman": "Doyle, Arthur Conan/The Cabman's StoryThe Mysteries of a London 'Growler'.txt",
         "king": "Wilde, Oscar/For Love of the King: A Burmese Masque.txt",
         "usher": "Poe, Edgar Allan/The Fall of the House of Usher.txt",
         "murderer": "Doyle, Arthur Conan/My Friend The Murderer.txt",
         "dying": "Doyle, Arthur Conan/The Adventure of the Dying Detective.txt",
         "canterville": "Wilde, Oscar/The Canterville Ghost.txt",
         "wisteria": "Doyle, Arthur Conan/The Adventure of Wisteria Lodge.txt"}
MEMBERS, VAL_MEMBERS = ("cask", "masque", "cabman"), ("feeding",)
NONMEMBERS, VAL_NONMEMBERS = ("king", "usher", "murderer"), ("dying",)
TOKENIZER_TEXTS = ("canterville", "wisteria")
WORDS, SNIPPETS = 64, 16


@pytest.fixture(scope="module")
def book_world(tmp_path_factory):
    import torch

    from pddkit.data.ngrams import ngram_hashes
    from pddkit.sandbox.corpus import strip_gutenberg
    from pddkit.sandbox.training import build_gpt2, save, train_bpe_tokenizer, train_causal_lm

    root = shared_path("corpora", "gutenberg")
    text = {k: strip_gutenberg((root / p).read_text(encoding="utf-8", errors="replace"))
            for k, p in BOOKS.items()}
    trained = MEMBERS + VAL_MEMBERS
    seen = set().union(*(ngram_hashes(text[k]) for k in trained))
    for k in NONMEMBERS + VAL_NONMEMBERS + TOKENIZER_TEXTS:  # SPEC section 7, checked
        assert seen.isdisjoint(ngram_hashes(text[k])), f"{k} shares a 13-word run with a member"
    out = tmp_path_factory.mktemp("books")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on 2 shared cores, more threads are many times slower
    try:
        tok = train_bpe_tokenizer([text[k] for k in TOKENIZER_TEXTS], vocab_size=1024)
        model = build_gpt2(tok, n_layer=2, n_embd=64, n_positions=512, seed=0)
        train_causal_lm(model, tok, [text[k] for k in trained], epochs=8, lr=3e-3,
                        batch_size=8, seed=0, context=128)
    finally:
        torch.set_num_threads(threads)
    model_dir = save(model, tok, out / "model")
    books = out / "books"
    books.mkdir()
    for k in MEMBERS + NONMEMBERS:
        (books / f"{k}.txt").write_text(text[k])
    (books / "fragment.txt").write_text(" ".join(text["wisteria"].split()[:40]))  # too short
    rows = [{"text": s.text, "label": int(k in VAL_MEMBERS)} for k in VAL_MEMBERS + VAL_NONMEMBERS
            for s in cut_snippets(Book(k, text[k], k), 40, WORDS, seed=1)]
    val = write_jsonl(out / "val.jsonl", rows)
    return model_dir, books, val


@pytest.mark.slow
def test_ground_truth_member_books_stand_above_never_seen_books(book_world):
    import torch

    model_dir, books, val = book_world
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        r = audit_books(str(model_dir), books, "mink", val_data=str(val), snippets=SNIPPETS,
                        words=WORDS, device="cpu", dtype="float32")
    finally:
        torch.set_num_threads(threads)
    rate = {b.book: b for b in r.books}
    assert set(rate) == set(MEMBERS + NONMEMBERS)
    assert [s.book for s in r.skipped] == ["fragment"] and r.counts["skipped"] == 1
    assert r.counts["snippets"] == SNIPPETS * 6 and r.counts["validation_texts"] == 80
    member_rates = [rate[k].rate for k in MEMBERS]
    other_rates = [rate[k].rate for k in NONMEMBERS]
    print("ground truth:", r.threshold, {k: (b.above, b.snippets) for k, b in rate.items()})
    assert r.threshold.val_auc > 0.85
    # every member book clearly above every never-seen book, and only members marked
    assert min(member_rates) >= max(other_rates) + 0.3, (member_rates, other_rates)
    assert all(rate[k].marked for k in MEMBERS) and not any(rate[k].marked for k in NONMEMBERS)
    assert all(rate[k].q_value <= 0.05 < rate[j].q_value for k in MEMBERS for j in NONMEMBERS)
    assert all(rate[k].ci_low > max(other_rates) for k in MEMBERS)
    assert [b.book for b in r.books[:3]] == sorted(MEMBERS, key=lambda k: (-rate[k].rate,
                                                                           -rate[k].ci_low, k))
    assert "Of 6 books audited, 3 show clearly more passages" in r.verdict
    # the validation texts name no book: one pooled never-seen rate, and the verdict says so
    assert r.reference.model == "binomial" and "Between-book variation is not accounted for " \
        "(the validation data names no book (group) for its texts)" in r.verdict


@pytest.mark.slow
def test_cli_end_to_end(book_world, tmp_path, capsys):
    model_dir, books, val = book_world
    out = tmp_path / "audit"
    args = ["audit", "--model", model_dir, "--method", "mink:k=0.2", "--books", books,
            "--val-data", val, "--snippets", 8, "--words", WORDS, "--threshold", "fpr=0.05",
            "--device", "cpu", "--dtype", "float32", "--output", out]
    code, stdout, err = run_cli(capsys, *args)
    assert code == 0, err
    assert "Books ranked by contamination rate" in stdout and "threshold" in stdout
    assert "1 books shorter than one 64-word snippet were skipped: fragment" in stdout
    saved = json.loads((out / "results.json").read_text())
    assert saved["study"] == "audit" and saved["configuration"]["threshold"] == "fpr=0.05"
    v = saved["validation"]
    assert v["val_fpr"] <= 0.05 and saved["counts"]["snippets"] == 48  # in-sample, by the rule
    assert v["expected_fpr_source"] == "cross-validated (5 folds)"  # held out: may be higher
    assert saved["verdict"].startswith("Of 6 books audited")
    rows = list(csv.DictReader((out / "books.csv").open()))
    assert len(rows) == 6 and {r["book"] for r in rows[:3]} == set(MEMBERS)
    assert (out / "report.html").is_file() and (out / "audit_books.png").is_file()
    assert len((out / "snippets.jsonl").read_text().splitlines()) == 48
    code, _, err = run_cli(capsys, *args)  # a folder with results is refused...
    assert code == 1 and "--overwrite" in err
    code, _, err = run_cli(capsys, *args, "--overwrite")  # ...unless replaced
    assert code == 0, err
