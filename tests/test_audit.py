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
from pddkit.reporting.audit_verdict_text import audit_verdict as _verdict
from pddkit.studies import STUDIES
from pddkit.studies.audit import (
    AuditResult,
    Book,
    SkippedBook,
    Snippet,
    _rates,
    _test_summary,
    audit_books,
    cut_snippets,
    load_books,
)
from pddkit.studies.book_rates import judge_books

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
def test_never_seen_books_with_between_book_spread_are_marked_at_most_at_the_fdr():
    """The issue's case: 50 validation books a class x 100 snippets, 100 audited books the
    model never saw, book rates varying with sd about 0.10. Every audited book is never
    seen, so any mark is false and the false-discovery rate at --fdr 0.05 bounds the share
    of runs with a mark by 0.05: over 8 runs, 3 or more such runs has probability
    1 - sum_{k<=2} C(8,k) 0.05^k 0.95^(8-k) = 0.0058 for a calibrated test, so at most 2
    are allowed. The same data without book names: no verdict, no mark. With the assumption
    that never-seen books do not differ stated (it is false here), one pooled rate marks
    never-seen books in most runs: why the assumption is never made silently."""
    rng = np.random.default_rng(19)
    runs = {"grouped": 0, "assumed": 0}
    for _ in range(8):
        val, y, groups, audited = _scored_world(rng)
        judged = judge_books(val, y, audited, val_groups=groups, fdr=0.05, seed=0)
        assert judged.reference.spread_accounted and judged.reference.books == 50
        assert judged.test.given
        # the simulated spread: book effects N(0, 0.33) on N(0, 1) scores, so a book's rate
        # above a threshold t is Phi(b - t) with sd about phi(0.74) x 0.33 = 0.10 near 0.23;
        # 50 books estimate an sd within about +-35% (chi-square, 49 d.f., 2 sigma)
        assert 0.06 < judged.reference.between_book_sd < 0.15
        runs["grouped"] += any(judged.test.marked)
        ungrouped = judge_books(val, y, audited, fdr=0.05, seed=0)
        assert not ungrouped.test.given and set(ungrouped.test.marked) == {None}
        assert set(ungrouped.test.p_values) == {None}
        assumed = judge_books(val, y, audited, fdr=0.05, seed=0, assume_no_book_spread=True)
        assert assumed.test.given and assumed.reference.assumption
        runs["assumed"] += any(assumed.test.marked)
    assert runs["grouped"] <= 2, runs
    assert runs["assumed"] >= 6, runs  # most runs mark a never-seen book


@pytest.mark.slow
def test_books_with_a_clearly_higher_rate_are_still_marked():
    rng = np.random.default_rng(20)
    for _ in range(3):  # 90 never-seen books (rates ~0.23), 10 trained on (rates ~0.9)
        val, y, groups, audited = _scored_world(rng, unseen=90, seen=10, shift=2.5)
        judged = judge_books(val, y, audited, val_groups=groups, fdr=0.05, seed=1)
        assert all(judged.test.marked[90:]), judged.test.p_values[90:]
        assert sum(judged.test.marked[:90]) <= 1


def test_without_a_measured_spread_between_books_no_book_is_marked_and_the_verdict_says_why():
    rng = np.random.default_rng(3)
    val, y, groups, audited = _scored_world(rng, books=6, snippets=20, unseen=3, seen=1,
                                            shift=3.0)
    for kw, reason in (({}, "the validation texts name no book (group)"),
                       ({"val_groups": [None, *groups[1:]]},
                        "1 of 240 validation texts name no book (group)"),
                       ({"val_groups": ["one"] * 120 + ["two"] * 120},
                        "the validation data has 1 known-member and 1 never-seen books"),
                       ({"val_groups": groups, "min_books": 7},
                        "the validation data has 6 never-seen books of 2 or more texts, too "
                        "few (under 7) to measure how much they vary")):
        judged = judge_books(val, y, audited, **kw)
        ref, test = judged.reference, judged.test
        assert ref.model == "binomial" and not ref.spread_accounted and not ref.assumption
        assert ref.reason.startswith(reason)
        assert not test.given and test.why_not.startswith(reason)
        assert test.marked == test.p_values == test.q_values == (None,) * 4
        rates = _rates(_cuts(audited), LENGTHS, judged)
        assert [b.marked for b in rates] == [None] * 4 and rates[0].book == "book3"  # member
        verdict = _verdict(rates, judged.threshold, ref, _test_summary(judged), 0)
        assert verdict.startswith(f"No verdict on the 4 books audited: {reason}")
        assert 'name each validation text\'s book in a "group" column' in verdict
        assert "`assume_no_book_spread=True`" in verdict and "Of 4 books" not in verdict
    # with groups the never-seen books' spread is measured: a verdict (6 never-seen books
    # leave the spread so uncertain that even 19 of 20 is not improbable enough to mark)
    grouped = judge_books(val, y, audited, val_groups=groups)
    assert grouped.reference.spread_accounted and grouped.reference.books == 6
    assert grouped.test.given and grouped.test.marked == (False,) * 4
    assert grouped.test.p_values[3] == min(grouped.test.p_values)  # the member book's
    assert grouped.reference.out_of_fold.startswith("cross-fitted in 5 folds of whole books")
    verdict = _verdict(_rates(_cuts(audited), LENGTHS, grouped), grouped.threshold,
                       grouped.reference, _test_summary(grouped), 0)
    assert verdict.startswith("Of 4 books audited, 0 show") and "assumption" not in verdict
    # stating the assumption where the spread is measured changes nothing, and says so
    also = judge_books(val, y, audited, val_groups=groups, assume_no_book_spread=True)
    assert also.assumption_unused and also.reference == grouped.reference
    assert also.test == grouped.test
    unseen_only = judge_books(val, y, audited[:3], val_groups=groups)  # the 3 never-seen books
    assert not any(unseen_only.test.marked)
    verdict = _verdict(_rates(_cuts(audited[:3]), LENGTHS, unseen_only), unseen_only.threshold,
                       unseen_only.reference, _test_summary(unseen_only), 0)
    assert "Of 3 books audited, 0 show" in verdict and ("Had the model seen none of these "
        "books, the chance of marking any would be at most 5% (the false-discovery rate)") in verdict
    with pytest.raises(PddkitError, match="`fdr` must be between 0 and 1"):
        judge_books(val, y, audited, fdr=5)


def test_the_never_seen_rate_is_out_of_fold_worked_by_hand():
    """Hand-made scores where the in-sample and out-of-fold never-seen rates differ.
    Members 5, 6, 7, 8, 9; never-seen 0, 1, 2, 3, 5.5. On all ten texts the accuracy rule
    ties at 9/10 between 4 (all members, 5.5 a false positive) and 5.75 (5 missed, no false
    positive) and takes the higher: 5.75, an in-sample never-seen rate of 0 of 5. Five
    stratified folds hold one member and one never-seen text each. Fold holding 5.5: the
    other four never-seen texts lie at most at 3, below every member, so the threshold lies
    between 3 and the lowest member left (4 or 4.5) and 5.5 is called a member. Any other
    fold: 5.5 is in training; with member 5 held out the threshold is 5.75 (between 5.5 and
    6); with 5 in training, 5.25 and 5.75 tie at 7/8 and the higher, 5.75, is taken; the
    held-out never-seen text (at most 3) is below. Out of fold: 1 of 5, whatever the folds.
    Reference (uniform prior on the rate): a Beta(1 + 1, 4 + 1) predictive. A book with 3
    of 3 snippets above: P(X >= 3) = B(2 + 3, 5) / B(2, 5) = (4! 4! / 9!) / (1! 4! / 6!)
    = (1/630) / (1/30) = 1/21 (the in-sample 0 of 5 would give B(4, 6) / B(1, 6) = 1/84).
    A second book, 0 of 3: P(X >= 0) = 1. Benjamini-Hochberg: q = min(1/21 x 2 / 1, 1) =
    2/21 = 0.095 and 1: marked at --fdr 0.1 (books can be marked), not at 0.05 (where the
    in-sample rate's q, 2/84 = 0.024, would have marked it)."""
    val = [5, 6, 7, 8, 9, 0, 1, 2, 3, 5.5]
    y = [1] * 5 + [0] * 5
    books = [np.array([10.0, 10.0, 10.0]), np.array([0.0, 0.0, 0.0])]
    for seed in range(4):  # the folds change with the seed, the out-of-fold count does not
        judged = judge_books(val, y, books, fdr=0.1, seed=seed, assume_no_book_spread=True)
        th, ref, test = judged.threshold, judged.reference, judged.test
        assert th.threshold == 5.75 and th.val_fpr == 0.0  # in-sample: 0 of 5
        assert (ref.above, ref.snippets) == (1, 5) and ref.mean == 0.2  # out of fold: 1 of 5
        assert ref.out_of_fold.startswith("cross-fitted in 5 folds of texts")
        assert ref.assumption.startswith("never-seen books do not differ")
        # 1/21 from sums of at most 4 float64 terms: within 1e-15 relative, 1e-12 allowed
        assert test.p_values == pytest.approx((1 / 21, 1.0), rel=1e-12)
        assert test.q_values == pytest.approx((2 / 21, 1.0), rel=1e-12)
        assert test.given and test.marked == (True, False)
    at_05 = judge_books(val, y, books, fdr=0.05, assume_no_book_spread=True)
    assert at_05.test.marked == (False, False)
    without = judge_books(val, y, books, fdr=0.1)  # no assumption stated: no verdict
    assert not without.test.given and without.test.marked == (None, None)
    assert (without.reference.above, without.reference.snippets) == (1, 5)
    # out of fold needs 2 texts of each class: one sentence, never an in-sample rate
    with pytest.raises(PddkitError, match=r"has 4 member and 1 never-seen texts: the never-seen "
                       r"rate is measured on texts that did not choose the threshold"):
        judge_books([5, 6, 7, 8, 0], [1, 1, 1, 1, 0], books, assume_no_book_spread=True)


def test_beta_binomial_tails_and_fit_agree_with_scipy():
    """studies/beta_binomial.py against scipy.stats.betabinom and binom (independent
    code): the tails P(X >= x), and the maximum-likelihood fit found by scipy's optimiser on
    scipy's log-pmf in another parametrisation (log alpha, log beta)."""
    from scipy.optimize import minimize
    from scipy.stats import betabinom, binom

    from pddkit.studies.beta_binomial import fit, tails

    for n, mean, rho in ((10, 0.2, 0.1), (100, 0.23, 0.03), (7, 0.5, 0.0)):
        j = np.arange(n + 1)
        want = (binom(n, mean).sf(j - 1) if rho == 0 else
                betabinom(n, mean * (1 - rho) / rho, (1 - mean) * (1 - rho) / rho).sf(j - 1))
        # sums of at most 101 float64 probabilities: errors of order 1e-14, 1e-12 allowed
        np.testing.assert_allclose(tails(n, mean, rho), want, rtol=0, atol=1e-12)
    x = np.array([3, 7, 1, 12, 5, 0, 9, 4])
    n = np.array([20, 20, 20, 20, 25, 15, 20, 30])
    mean, rho = fit(x, n)

    def nll(log_ab):
        return -betabinom.logpmf(x, n, *np.exp(log_ab)).sum()

    best = minimize(nll, [0.0, 1.0], method="Nelder-Mead",
                    options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
    a, b = np.exp(best.x)
    # both optimisers stop where the log-likelihood is flat to about 1e-9; the parameters
    # then agree to about sqrt(1e-9 / curvature) ~ 1e-4 (mean, rho near 0.24 and 0.15), and
    # pddkit's optimum is no worse than scipy's by more than that flatness (1e-8 allowed)
    assert (mean, rho) == pytest.approx((a / (a + b), 1 / (a + b + 1)), abs=1e-4)
    assert nll(np.log([mean * (1 - rho) / rho, (1 - mean) * (1 - rho) / rho])) \
        <= best.fun + 1e-8
    # less spread than binomial draws: the boundary, rho = 0 at the pooled rate
    assert fit([5, 5, 5, 5], [10] * 4) == (0.5, 0.0)


LENGTHS = {f"book{i}": 1000 for i in range(4)}


def _cuts(audited, names=None):
    names = names or [f"book{i}" for i in range(len(audited))]
    return [[Snippet(name, i, 0, "") for i in range(len(scores))]
            for name, scores in zip(names, audited)]


def _judged_result(tmp_path, report=True, grouped=True):
    """An audit result from the real decision path on simulated scores: 6 member and 6
    never-seen validation books (groups, unless not `grouped`), a member book and a
    never-seen book audited."""
    rng = np.random.default_rng(5)
    val, y, groups, audited = _scored_world(rng, books=6, snippets=30, unseen=1, seen=1,
                                            tau=0.2, shift=2.5)
    audited = audited[::-1]  # the member book first
    judged = judge_books(val, y, audited, val_groups=groups if grouped else None, fdr=0.05)
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
    # two books: q = min(1, p x 2 / rank) with the running minimum from the top; one
    # float64 multiplication each, exact to 1 ulp: 1e-12 relative allowed
    assert member["q_value"] == pytest.approx(min(1.0, 2 * member["p_value"]), rel=1e-12)
    assert unseen["q_value"] == pytest.approx(max(unseen["p_value"], member["q_value"]),
                                              rel=1e-12)
    rows = list(csv.DictReader((out / "books.csv").open()))
    assert [(row["book"], row["marked"]) for row in rows] == [("Member Book", "1"),
                                                              ("Unseen Book", "0")]
    assert "Of 2 books audited, 1 shows clearly more passages" in saved["verdict"]
    assert re.search(r"Of the 1 marked, about 0\.0\d+ are expected to be books the model "
                     r"never saw, marked by chance \(the 5% false-discovery rate allows at most "
                     r"0\.05\)\.", saved["verdict"]), saved["verdict"]
    assert "not accounted for" not in saved["verdict"]


def test_without_groups_the_files_and_the_table_say_no_verdict_and_why(tmp_path):
    from pddkit.reporting.audit_report import load_audit, terminal_books, validation_lines

    _, out = _judged_result(tmp_path, report=False, grouped=False)
    saved = load_audit(out)
    why = ("the validation texts name no book (group), so nothing measures how much books "
           "the model never saw differ from one another")
    assert saved["book_test"]["verdict_given"] is False and saved["book_test"]["why_not"] == why
    assert saved["book_test"]["cutoff"] is None and saved["book_test"]["p_values"] is None
    assert [(b["p_value"], b["q_value"], b["marked"]) for b in saved["books"]] == [(None,) * 3] * 2
    ref = saved["never_seen_reference"]
    assert ref["assumption"] == "" and ref["out_of_fold"].startswith("cross-fitted in 5 folds "
                                                                      "of texts")
    rows = list(csv.DictReader((out / "books.csv").open()))
    assert [(r["p_value"], r["q_value"], r["marked"]) for r in rows] == [("", "", "")] * 2
    assert {r["verdict"] for r in rows} == {f'no verdict: {why}; a "group" column naming each '
                                            "validation text's book gives one"}
    lines = terminal_books(saved)
    assert lines[0] == "Books ranked by contamination rate"
    assert lines[1].split() == ["rank", "book", "rate", "%", "[95%", "CI]", "snippets", "above",
                                "verdict"]  # no p or q columns
    assert [line.rstrip().endswith("no verdict") for line in lines[3:5]] == [True, True]
    note = " ".join(lines[5:])
    assert f"'no verdict': no book is marked, because {why}." in note
    assert 'A "group" column in the validation data' in note and all(len(x) <= 100 for x in lines)
    summary = dict(validation_lines(saved))
    assert summary["never-seen rate"].startswith(f"{100 * ref['mean']:.1f}% of never-seen")
    assert "cross-fitted in 5 folds of texts" in summary["never-seen rate"]
    assert summary["a book is marked"].startswith("no book is marked, because")


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


# Ground truth: a tiny GPT-2-shaped model trained on four whole books (members); other books
# it never saw (non-members, sharing no 13-word run with a member). Audited: two more member
# books and three never-seen ones. Validation, without book names (the case): snippets
# of one member book and one never-seen book; with book names (`group`): two member books and
# sixteen never-seen books of five authors.
BOOKS = {"cask": "Poe, Edgar Allan/The Cask of Amontillado.txt",
         "masque": "Poe, Edgar Allan/The Masque of the Red Death.txt",
         "feeding": "Carroll, Lewis/Feeding the Mind.txt",
         "cabman": "Doyle, Arthur Conan/The Cabman's StoryThe Mysteries of a London 'Growler'.txt",
         "king": "Wilde, Oscar/For Love of the King: A Burmese Masque.txt",
         "usher": "Poe, Edgar Allan/The Fall of the House of Usher.txt",
         "murderer": "Doyle, Arthur Conan/My Friend The Murderer.txt",
         "dying": "Doyle, Arthur Conan/The Adventure of the Dying Detective.txt",
         "susan": "Austen, Jane/Lady Susan.txt",
         "love": "Austen, Jane/Love and Freindship [sic].txt",
         "tangled": "Carroll, Lewis/A Tangled Tale.txt",
         "logic": "Carroll, Lewis/The Game of Logic.txt",
         "circle": "Doyle, Arthur Conan/The Adventure of the Red Circle.txt",
         "box": "Doyle, Arthur Conan/The Adventure of the Cardboard Box.txt",
         "devil": "Doyle, Arthur Conan/The Adventure of the Devil's Foot.txt",
         "bruce": "Doyle, Arthur Conan/The Adventure of the Bruce-Partington Plans.txt",
         "raven": "Poe, Edgar Allan/The Raven, and The Philosophy of Composition.txt",
         "bells": "Poe, Edgar Allan/The Bells, and Other Poems.txt",
         "eureka": "Poe, Edgar Allan/Eureka: A Prose Poem.txt",
         "works3": "Poe, Edgar Allan/The Works of Edgar Allan Poe — Volume 3.txt",
         "works4": "Poe, Edgar Allan/The Works of Edgar Allan Poe — Volume 4.txt",
         "prince": "Wilde, Oscar/The Happy Prince, and Other Tales.txt",
         "fan": "Wilde, Oscar/Lady Windermere's Fan.txt",
         "canterville": "Wilde, Oscar/The Canterville Ghost.txt",
         "wisteria": "Doyle, Arthur Conan/The Adventure of Wisteria Lodge.txt"}
MEMBERS, VAL_MEMBERS = ("masque", "cabman"), ("feeding", "cask")
NONMEMBERS, VAL_NONMEMBERS = ("king", "usher", "murderer"), ("dying",)
GROUPED_NONMEMBERS = ("dying", "susan", "love", "tangled", "logic", "circle", "box", "devil",
                      "bruce", "raven", "bells", "eureka", "works3", "works4", "prince", "fan")
TOKENIZER_TEXTS = ("canterville", "wisteria")
WORDS, SNIPPETS = 64, 32


@pytest.fixture(scope="module")
def book_world(tmp_path_factory):
    """(model folder, books folder, validation without groups, validation with groups)."""
    import torch

    from pddkit.data.gutenberg import strip_gutenberg
    from pddkit.data.ngrams import ngram_hashes
    from pddkit.sandbox.training import build_gpt2, save, train_bpe_tokenizer, train_causal_lm

    root = shared_path("corpora", "gutenberg")
    text = {k: strip_gutenberg((root / p).read_text(encoding="utf-8", errors="replace"))
            for k, p in BOOKS.items()}
    trained = ("cask", "masque", "cabman", "feeding")
    seen = set().union(*(ngram_hashes(text[k]) for k in trained))
    for k in NONMEMBERS + GROUPED_NONMEMBERS + TOKENIZER_TEXTS:  # SPEC section 7, checked
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
    rows = [{"text": s.text, "label": int(k in VAL_MEMBERS)} for k in ("feeding", "dying")
            for s in cut_snippets(Book(k, text[k], k), 40, WORDS, seed=1)]
    val = write_jsonl(out / "val.jsonl", rows)
    rows = [{"text": s.text, "label": int(k in VAL_MEMBERS), "group": k}
            for k in VAL_MEMBERS + GROUPED_NONMEMBERS
            for s in cut_snippets(Book(k, text[k], k), 40 if k in VAL_MEMBERS else 8, WORDS,
                                  seed=1)]
    grouped = write_jsonl(out / "val_groups.jsonl", rows)
    return model_dir, books, val, grouped


def _audit(model_dir, books, val, **kw):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return audit_books(str(model_dir), books, "mink", val_data=str(val), snippets=SNIPPETS,
                           words=WORDS, device="cpu", dtype="float32", **kw)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_ground_truth_ungrouped_validation_marks_no_never_seen_book(book_world):
    """The issue's case: validation texts that name no book (one member book, one never-seen
    book). One pooled never-seen rate (13% of the never-seen book's snippets) marked Usher,
    a never-seen Poe story (12 of its 32 snippets above the threshold), beside the two member
    books: Poe's other stories are among the trained books, and nothing in the validation
    texts measures how much never-seen books differ. Now no book is marked, and the verdict
    says why and what gives one."""
    model_dir, books, val, _ = book_world
    r = _audit(model_dir, books, val)
    rate = {b.book: b for b in r.books}
    assert set(rate) == set(MEMBERS + NONMEMBERS)
    assert not any(rate[k].marked for k in NONMEMBERS), {k: rate[k] for k in NONMEMBERS}
    assert [s.book for s in r.skipped] == ["fragment"] and r.counts["skipped"] == 1
    assert r.counts["snippets"] == sum(b.snippets for b in r.books)
    assert r.counts["validation_texts"] == 80
    assert r.threshold.val_auc > 0.85
    print("ungrouped:", r.threshold, {k: (b.above, b.snippets) for k, b in rate.items()})
    # the rates are still measured: every member book clearly above every never-seen book
    member_rates = [rate[k].rate for k in MEMBERS]
    other_rates = [rate[k].rate for k in NONMEMBERS]
    assert min(member_rates) >= max(other_rates) + 0.2, (member_rates, other_rates)
    # ...but no book gets a verdict, and the verdict says why and what gives one
    assert all(b.marked is None and b.p_value is None for b in r.books)
    assert not r.book_test["verdict_given"] and r.reference.reason == \
        "the validation texts name no book (group)"
    assert r.verdict.startswith("No verdict on the 5 books audited: the validation texts name "
                                "no book (group), so nothing measures how much books the model "
                                "never saw differ from one another")
    assert r.reference.out_of_fold.startswith("cross-fitted in 5 folds of texts")
    assert r.book_test["why_not"] == ("the validation texts name no book (group), so nothing "
                                      "measures how much books the model never saw differ "
                                      "from one another")
    saved = r.to_dict()
    assert saved["configuration"]["assume_no_book_spread"] is False
    assert saved["never_seen_reference"]["assumption"] == ""
    # stating the assumption marks books again: the member books, and also Usher, the
    # never-seen book whose passages differ from the validation book's
    assumed = _audit(model_dir, books, val, assume_no_book_spread=True)
    marked = {b.book for b in assumed.books if b.marked}
    assert set(MEMBERS) <= marked and "usher" in marked, marked
    assert assumed.book_test["verdict_given"] and assumed.reference.assumption
    assert ("This rests on the assumption that never-seen books do not differ from one "
            "another in their rates beyond chance (stated, not measured), which nothing here "
            "checks") in assumed.verdict
    assert assumed.to_dict()["configuration"]["assume_no_book_spread"] is True


@pytest.mark.slow
def test_ground_truth_grouped_validation_marks_members_and_no_never_seen_book(book_world):
    """Validation texts naming their book: 2 member books and 16 never-seen books (Austen,
    Carroll, Doyle, Poe, Wilde) measure the never-seen books' spread, out of fold in folds of
    whole books; the member books are marked, the never-seen ones (Usher included) not."""
    model_dir, books, _, grouped = book_world
    r = _audit(model_dir, books, grouped)
    rate = {b.book: b for b in r.books}
    print("grouped:", r.threshold, r.reference, {k: (b.above, b.p_value) for k, b in rate.items()})
    assert r.book_test["verdict_given"] and r.reference.model == "beta-binomial"
    assert r.reference.books == 16 and r.reference.spread_accounted
    assert r.reference.out_of_fold.startswith("cross-fitted in 2 folds of whole books")
    assert not any(rate[k].marked for k in NONMEMBERS)
    assert all(rate[k].marked for k in MEMBERS)
    assert all(rate[k].q_value <= 0.05 < rate[j].q_value for k in MEMBERS for j in NONMEMBERS)
    assert [b.book for b in r.books[:2]] == sorted(MEMBERS, key=lambda k: (-rate[k].rate,
                                                                           -rate[k].ci_low, k))
    assert r.verdict.startswith("Of 5 books audited, 2 show clearly more passages")
    assert "assumption" not in r.verdict


@pytest.mark.slow
def test_cli_end_to_end(book_world, tmp_path, capsys):
    model_dir, books, val, grouped = book_world
    out = tmp_path / "audit"
    args = ["audit", "--model", model_dir, "--method", "mink:k=0.2", "--books", books,
            "--snippets", 8, "--words", WORDS, "--threshold", "fpr=0.05",
            "--device", "cpu", "--dtype", "float32", "--output", out]
    code, stdout, err = run_cli(capsys, *args, "--val-data", val)
    assert code == 0, err
    assert "Books ranked by contamination rate" in stdout and "threshold" in stdout
    assert "1 books shorter than one 64-word snippet were skipped: fragment" in stdout
    saved = json.loads((out / "results.json").read_text())
    assert saved["study"] == "audit" and saved["configuration"]["threshold"] == "fpr=0.05"
    v = saved["validation"]
    assert v["val_fpr"] <= 0.05 and saved["counts"]["snippets"] == 40  # in-sample, by the rule
    assert v["expected_fpr_source"] == "cross-validated (5 folds)"  # held out: may be higher
    # no book names in the validation texts: a verdict column of "no verdict", flags named
    table = stdout[stdout.index("Books ranked"):].splitlines()
    assert sum(line.rstrip().endswith("no verdict") for line in table) == 5, table
    assert saved["verdict"].startswith("No verdict on the 5 books audited")
    assert "(--assume-no-book-spread)" in saved["verdict"] and "`" not in stdout.split(
        "Books ranked")[0]
    rows = list(csv.DictReader((out / "books.csv").open()))
    assert len(rows) == 5 and {r["book"] for r in rows[:2]} == set(MEMBERS)
    assert all(r["marked"] == "" and r["verdict"].startswith("no verdict: the validation texts "
                                                            "name no book") for r in rows)
    assert (out / "report.html").is_file() and (out / "audit_books.png").is_file()
    assert len((out / "snippets.jsonl").read_text().splitlines()) == 40
    code, _, err = run_cli(capsys, *args, "--val-data", grouped)  # a folder with results is
    assert code == 1 and "--overwrite" in err  # refused...
    code, stdout, err = run_cli(capsys, *args, "--val-data", grouped, "--overwrite")  # ...unless
    assert code == 0, err  # replaced; book names in the validation texts give a verdict
    saved = json.loads((out / "results.json").read_text())
    assert saved["book_test"]["verdict_given"] and saved["verdict"].startswith("Of 5 books")
    assert saved["validation"]["expected_fpr_source"] == "cross-validated (2 folds of whole groups)"
    assert "no verdict" not in stdout
