"""The blind baseline: chance on a random split, high on two authors, folds by document,
date and citation-year features, no leak from the scored fold, a warning that knows the
sample size, and `pddkit blind`."""

import json
import random

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl
from conftest import shared_path
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline

from pddkit.blind.baseline import BlindBaseline, _NeighbourVote
from pddkit.blind.features import (
    STYLE_NAMES,
    citation_years,
    count_matrix,
    date_features,
    style_features,
    years_in,
)
from pddkit.blind.greedy import GRID, flag_score, greedy_select
from pddkit.blind.verdict import (
    ALPHA,
    MIN_AUC,
    effective_units,
    null_sd,
    verdict_for,
)
from pddkit.data.gutenberg import strip_gutenberg
from pddkit.errors import PddkitError
from pddkit.reporting.blind_verdict_text import blind_sentence
from pddkit.sandbox.corpus import paragraphs


def author_paragraphs(author, n):
    root = shared_path("corpora", "gutenberg", author)
    out = []
    for f in sorted(root.glob("*.txt")):
        text = strip_gutenberg(f.read_text(encoding="utf-8", errors="replace"))
        out += [" ".join(p.split()[:64]) for p in paragraphs(text, 64)]
        if len(out) >= 4 * n:
            break
    random.Random(0).shuffle(out)
    return out[:n]


def wikimia(length):
    rows = [json.loads(line) for line in
            shared_path("data", "wikimia", f"WikiMIA_length{length}.jsonl").open()]
    return [r["input"] for r in rows], np.array([r["label"] for r in rows])


@pytest.mark.slow
def test_chance_on_a_random_split():
    texts = author_paragraphs("Doyle, Arthur Conan", 300)
    labels = np.array([random.Random(i).randint(0, 1) for i in range(len(texts))])
    auc = roc_auc_score(labels, BlindBaseline().cross_val_scores(texts, labels))
    assert abs(auc - 0.5) < 0.1, auc
    v = verdict_for(auc, int(labels.sum()), int((labels == 0).sum()))
    assert not v.warn
    assert "found no shift" in blind_sentence(v) and "do not differ" not in blind_sentence(v)


@pytest.mark.slow
def test_separates_two_authors():
    austen, doyle = author_paragraphs("Austen, Jane", 150), author_paragraphs("Doyle, Arthur Conan", 150)
    labels = np.array([1] * len(austen) + [0] * len(doyle))
    auc = roc_auc_score(labels, BlindBaseline().cross_val_scores(austen + doyle, labels))
    assert auc > 0.9, auc
    v = verdict_for(auc, 150, 150)
    assert v.warn and "prove little" in blind_sentence(v) and "above chance (p = " in blind_sentence(v)


@pytest.mark.slow
def test_folds_keep_a_documents_texts_together():
    """Each document carries an identity token and a random label: without groups the
    classifier learns the identity; with groups it cannot, and falls to chance."""
    rng = random.Random(1)
    texts, labels, groups = [], [], []
    filler = author_paragraphs("Doyle, Arthur Conan", 480)
    for d in range(60):
        label = rng.randint(0, 1)
        for k in range(8):
            texts.append(f"docid{d}x docid{d}y " + " ".join(filler[8 * d + k].split()[:8]))
            labels.append(label)
            groups.append(f"doc{d}")
    labels = np.array(labels)
    free = roc_auc_score(labels, BlindBaseline().cross_val_scores(texts, labels))
    grouped = roc_auc_score(labels, BlindBaseline().cross_val_scores(texts, labels, groups))
    assert free > 0.85, free
    assert abs(grouped - 0.5) < 0.15, grouped


def test_fit_then_predict():
    texts = ["the cat sat", "a dog ran", "the cat ran", "a dog sat"] * 5
    labels = [1, 0, 1, 0] * 5
    model = BlindBaseline().fit(texts, labels)
    assert set(model.chosen_) == {"tfidf", "bow", "dates", "style", "neighbours"}
    assert model.chosen_["neighbours"] in model.neighbours_p
    assert model.chosen_["tfidf"] in model.tfidf_C and model.chosen_["dates"] in model.dates_C
    p = model.predict_proba(["the cat", "a dog"])
    assert p[0] > 0.5 > p[1]


def test_neighbour_vote_by_hand():
    """score = sum over the k most similar training rows of sim^p * (+1 member, -1 not):
    rows are unit vectors, so the similarities are the dot products written here."""
    X = sparse.csr_matrix(np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]]))  # labels 1, 0, 0
    y = np.array([1, 0, 0])
    Xt = sparse.csr_matrix(np.array([[0.8, 0.6], [0.0, 1.0]]))
    # similarities: row 0 -> 0.8, 0.96, 0.6; row 1 -> 0.0, 0.8, 1.0
    vote = _NeighbourVote(None, k=2)
    np.testing.assert_allclose(vote.fit_score(X, y, Xt, 2.0),
                               [0.8 ** 2 - 0.96 ** 2, -(0.8 ** 2) - 1.0])
    np.testing.assert_allclose(_NeighbourVote(None, k=3).fit_score(X, y, Xt, 4.0),
                               [0.8 ** 4 - 0.96 ** 4 - 0.6 ** 4, -(0.8 ** 4) - 1.0])
    rng = np.random.default_rng(0)
    A, At = sparse.random(40, 30, 0.3, "csr", random_state=1), sparse.random(25, 30, 0.3, "csr",
                                                                              random_state=2)
    ya = rng.integers(0, 2, 40)
    chunked = _NeighbourVote(None, k=5)
    chunked.CHUNK = 4  # blocks of 4 scored rows give the same top-k as one block
    np.testing.assert_allclose(chunked.fit_score(A, ya, At, 3.0),
                               _NeighbourVote(None, k=5).fit_score(A, ya, At, 3.0))


def test_style_features_by_hand():
    text = ("Title: On Widgets\nWe show that running widgets quickly (always) works, "
            "well-defined and straightforward.")
    f = dict(zip(STYLE_NAMES, style_features(text)))
    assert len(STYLE_NAMES) == len(style_features(text))
    words = text.split()  # 14 words, one sentence
    assert f["first_line_colon"] == 1.0 and f["words_per_sentence"] == 14.0
    assert f["first_line_chars"] == pytest.approx(np.log1p(17))          # "Title: On Widgets"
    assert f["first_person_share"] == pytest.approx(1 / 14)            # we
    assert f["function_word_share"] == pytest.approx(6 / 14)           # on we show that always and
    assert f["ing_share"] == pytest.approx(1 / 14)                      # running
    assert f["ly_share"] == pytest.approx(1 / 14)                       # quickly
    assert f["capitalised_share"] == pytest.approx(4 / 14)             # Title: On Widgets We
    assert f["paren_share"] == pytest.approx(1 / 14) and f["comma_share"] == pytest.approx(1 / 14)
    assert f["hyphen_share"] == pytest.approx(1 / 14)                   # well-defined
    assert f["long_word_share"] == pytest.approx(2 / 14)               # well-defined straightforward.
    assert f["word_length_std"] == pytest.approx(np.std([len(w) for w in words]))
    assert f["type_token_ratio"] == pytest.approx(13 / 14)             # widgets twice
    for odd in ("", " ", "\n\n", "...", "( ) ,", "Zürich 東京"):          # no text, no words
        assert np.isfinite(style_features(odd)).all(), odd
    assert dict(zip(STYLE_NAMES, style_features("( ) ,")))["type_token_ratio"] == 0.0


def test_neighbour_vote_refuses_meaningless_settings():
    X = sparse.csr_matrix(np.eye(2))
    with pytest.raises(ValueError, match="positive"):
        _NeighbourVote(None, k=1).fit_score(X, np.array([0, 1]), X, 0.0)
    with pytest.raises(ValueError, match="at least 1"):
        _NeighbourVote(None, k=0)


def test_greedy_rare_word_selection_by_hand():
    """'zebra' is only in non-members: chosen first (and alone) for them; 'common' is in 4
    documents of each class: never chosen; 'quasar' is only in members: chosen for them.
    After the first choice no remaining word flags its class more than the other."""
    non_members = ["zebra common", "zebra common", "zebra lamp", "zebra lamp", "common lamp",
                   "common river", "river stone", "stone lamp", "river", "stone"]
    members = ["common quasar", "common quasar", "quasar lamp", "common river", "common stone",
               "lamp river", "lamp stone", "river", "stone", "lamp"]
    docs, y = non_members + members, np.array([0] * 10 + [1] * 10)
    X = count_matrix(docs, "word", (1, 1), lowercase=True)
    vocab = sorted({w for d in docs for w in d.split()})
    cols, w = greedy_select(X, y, target=0, min_df=2, k=10)
    assert [vocab[c] for c in cols] == ["zebra"]
    assert w[0] == pytest.approx(np.log(4.5 / 0.5))
    mcols, _ = greedy_select(X, y, target=1, min_df=2, k=10)
    assert [vocab[c] for c in mcols] == ["quasar"]
    assert greedy_select(X, y, target=0, min_df=5, k=10)[0].size == 0  # zebra is in 4 docs
    s = flag_score(X, cols, w)
    assert s[0] == w[0] and s[4] == 0.0 and s[10] == 0.0
    np.testing.assert_array_equal(cols, greedy_select(X, y, 0, 2, 10)[0])  # deterministic


def test_greedy_base_model_in_the_stack():
    texts = ["the cat sat", "a dog ran", "the cat ran", "a dog sat"] * 5
    labels = [1, 0, 1, 0] * 5
    model = BlindBaseline(greedy=GRID).fit(texts, labels)
    assert model.chosen_["greedy"] in GRID
    p = model.predict_proba(["the cat", "a dog"])
    assert p[0] > 0.5 > p[1]


def test_date_features_by_hand():
    assert years_in("In 2023 the 1990s ended; 1,500 people paid $1999 for 3.2014 units in 1066.") \
        == [2023, 1990, 1066]
    new = date_features("The ceremony was held on February 18, 2023, in Seoul.")
    old = date_features("In 1998 the band released its second album.")
    none = date_features("The band released its second album.")
    assert new["max_year=2023"] == old["max_year=1998"] == 1.0
    assert new["full_date"] == new["month_with_year"] == 1.0 and "full_date" not in old
    assert "max_year>=2020" in new and "max_year>=2020" not in old and "max_year>=1998" in old
    assert new["decade=2020s"] == old["decade=1990s"] == 1.0
    assert none == {"no_year": 1.0, "no_cite_year": 1.0}
    span = date_features("From 1914 to 1918 and in 6 March 1920.")
    assert "min_year>=1914" in span and "min_year>=1916" not in span and "max_year>=1920" in span


@pytest.mark.slow
def test_years_alone_separate_what_word_tfidf_cannot():
    """Same filler text on both sides; members mention a year up to 2016, non-members one
    after it, each year rarely repeated: the date features learn the cut-off, word TF-IDF
    (years as tokens) cannot generalise to years it has not seen."""
    rng = random.Random(3)
    filler = author_paragraphs("Doyle, Arthur Conan", 240)
    texts, labels = [], []
    for i, para in enumerate(filler):
        label = i % 2
        year = rng.randint(1800, 2016) if label else rng.randint(2017, 2099)
        words = para.split()[:24]
        words.insert(rng.randint(0, len(words)), f"in {year}")
        texts.append(" ".join(words))
        labels.append(label)
    labels = np.array(labels)
    auc = roc_auc_score(labels, BlindBaseline().cross_val_scores(texts, labels))
    words_only = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                               LogisticRegression(C=10.0, max_iter=2000))
    wauc = roc_auc_score(labels, cross_val_predict(words_only, texts, labels, cv=StratifiedKFold(
        5, shuffle=True, random_state=0), method="predict_proba")[:, 1])
    assert auc > 0.95, auc
    assert wauc < 0.8, wauc


@pytest.mark.slow
def test_the_scored_fold_never_informs_its_own_scores():
    """Outer folds fixed: flipping the labels of fold 0 leaves fold 0's scores unchanged
    (hyperparameters, meta model and vocabularies come from the other folds), and they
    equal fit(training part).predict_proba(fold 0); the other folds' scores do change."""
    texts, y = wikimia(32)
    texts, y = texts[:240], y[:240]
    splits = list(StratifiedKFold(4, shuffle=True, random_state=0).split(texts, y))
    test0 = splits[0][1]
    flipped = y.copy()
    flipped[test0] = 1 - flipped[test0]
    a = BlindBaseline().cross_val_scores(texts, y, splits=splits)
    b = BlindBaseline().cross_val_scores(texts, flipped, splits=splits)
    np.testing.assert_allclose(a[test0], b[test0], rtol=1e-9, atol=1e-12)
    rest = np.setdiff1d(np.arange(len(y)), test0)
    assert np.abs(a[rest] - b[rest]).max() > 1e-3
    train0 = splits[0][0]
    direct = BlindBaseline().fit([texts[i] for i in train0], y[train0]).predict_proba(
        [texts[i] for i in test0])
    np.testing.assert_allclose(direct, a[test0], rtol=1e-3, atol=1e-6)  # solver tolerance


@pytest.mark.slow
@pytest.mark.parametrize("length", [32, 64, 128])
def test_wikimia_targets(length):
    texts, y = wikimia(length)
    auc = roc_auc_score(y, BlindBaseline().cross_val_scores(texts, y))
    assert auc >= 0.99, auc


def test_cli_blind_end_to_end(tmp_path, capsys):
    texts, y = wikimia(32)
    idx = list(np.flatnonzero(y == 1)[:40]) + list(np.flatnonzero(y == 0)[:40])
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": f"t{i}", "text": texts[i], "label": int(y[i])}
                                               for i in idx])
    code, out, err = run_cli(capsys, "blind", "--data", data, "--bootstrap", 200,
                             "--output", tmp_path / "out")
    assert code == 0, err
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    auc = res["methods"]["blind"]["metrics"]["auc"]
    assert auc > 0.9, auc  # WikiMIA's dates: a shift the baseline must find
    assert f"AUC {auc:.3f}" in out and "prove little" in out
    verdict = res["blind_baseline"]
    assert verdict["warn"] is True and verdict["p"] < ALPHA and verdict["interval"][0] > 0.5
    assert (verdict["n_members"], verdict["n_nonmembers"], verdict["unit"]) == (40, 40, "texts")
    assert f"p = {verdict['p']:.1e}" in out  # the p-value in words, as results.json has it
    # 40 non-members: 1% of them allows no false positive (floor(0.4) = 0), 5% allows 2
    assert "TPR@1%† " in out and "TPR@5% " in out and "TPR@5%†" not in out
    assert "† TPR@1%FPR with 40 non-members: no false positive allowed" in out
    rows = [json.loads(line) for line in (tmp_path / "out" / "scores.jsonl").open()]
    assert [r["id"] for r in rows] == [f"t{i}" for i in idx]
    # the scores written are the library's out-of-fold scores, in the table's order
    own = BlindBaseline(seed=0).cross_val_scores([texts[i] for i in idx], y[idx])
    np.testing.assert_allclose([r["blind"] for r in rows], own, rtol=1e-9)


@pytest.mark.parametrize("rows, message", [
    ([{"text": f"text number {i}"} for i in range(30)],
     "has no 'label' column (its columns: 'text'): the blind baseline needs members"),
    ([{"text": f"text number {i}", "label": 1} for i in range(30)], "has only members"),
    ([{"text": f"text number {i}", "label": int(i < 5)} for i in range(30)],
     "has 5 members and 25 non-members: the blind baseline needs at least 10 of each"),
])
def test_cli_blind_bad_input_is_one_sentence(tmp_path, capsys, rows, message):
    data = write_jsonl(tmp_path / "bad.jsonl", rows)
    code, _out, err = run_cli(capsys, "blind", "--data", data)
    assert code == 1
    assert message in err and "Traceback" not in err
    last = err.strip().splitlines()[-1]  # (a loader's note on the columns may come first)
    assert err.count("pddkit: error: ") == 1 and last.startswith("pddkit: error: ")
    assert message in last


def test_cli_blind_needs_one_source(tmp_path, capsys):
    code, _, err = run_cli(capsys, "blind")
    assert code == 1 and "exactly one of --data and --benchmark" in err


def test_citation_years_by_hand():
    """The newest cited year, as Das et al. read arXiv papers: LaTeX keys (four digits, or
    author + two digits), author-year citations and reference-list entries; never a year
    that is not a citation, and a missing indicator when nothing is cited."""
    latex = r"As in \cite{smith2019, lee20deep} and \citep[see][p.~3]{vaswani2017attention}."
    assert citation_years(latex) == ([2019, 2020, 2017], True, False)
    assert citation_years(r"\citet{BE} and \cite{b17,S98,resnet50}") == ([], True, False)
    prose = ("Smith et al., 2019 showed it (Barello et al., 2018); see Jones (2021) and "
             "(Conway 1976; Lee, 2020a).")
    assert sorted(citation_years(prose)[0]) == [1976, 2018, 2019, 2020, 2021]
    refs = "Intro.\n[12] A. Smith. Deep things. In NeurIPS, 2019.\n[13] B. Lee. More, 2021."
    assert citation_years(refs) == ([2019, 2021], False, True)
    for plain in ("Born in 1952 (in Paris), he fought 1914-1918.", "(May 2019) was wet.",
                  "The 2019 season (born 1952) ended."):
        assert citation_years(plain)[0] == [], plain
    f = date_features(latex + " " + prose)
    assert f["cite_max_year=2021"] == f["cite_max_year>=2020"] == f["latex_cite"] == 1.0
    assert "cite_max_year>=2022" not in f and "no_cite_year" not in f
    assert date_features("The band released its second album.") == {"no_year": 1.0,
                                                                     "no_cite_year": 1.0}
    assert "no_cite_year" not in date_features("x", citations=False)


def _hanley_mcneil_sd(a, n1, n0):
    """Hanley and McNeil (1982), eq. 1: the standard error of an AUC `a` from n1 members and
    n0 non-members (Q1 = a / (2 - a), Q2 = 2 a^2 / (1 + a)); an AUC below 0.5 spreads as
    its mirror 1 - a does (the labels swapped)."""
    a = max(a, 1.0 - a)
    q1, q2 = a / (2.0 - a), 2.0 * a * a / (1.0 + a)
    return np.sqrt((a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n1 * n0))


def _interval_by_hand(auc, n1, n0, inflation=1.55):
    """The verdict's 95% interval solved exactly: the AUCs A on either side of `auc` where
    |auc - A| = 1.96 x inflation x sd(A) (a root finder, not the module's grid)."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    z = norm.ppf(0.975)

    def gap(a):
        return abs(auc - a) - z * inflation * _hanley_mcneil_sd(a, n1, n0)

    low = 0.0 if gap(0.0) <= 0 else brentq(gap, 0.0, auc)
    high = 1.0 if gap(1.0) <= 0 else brentq(gap, auc, 1.0)
    return low, high


def test_verdict_knows_the_sample_size():
    """The p-value and interval by hand (the null spread 1.55 x the Mann-Whitney one,
    Hanley-McNeil's spread for the interval); the same AUC warns on many texts and not on
    few; the interval's lower end is above 0.5 exactly when p < 0.025; a significant AUC
    below MIN_AUC is a small shift without the warning; documents count when grouped."""
    from scipy.stats import norm

    # AUC 0.7 on 20 and 20 texts: s0 = 1.55 sqrt(41 / 4800) = 0.14325, z = 1.3961
    v = verdict_for(0.7, 20, 20)
    assert v.p == pytest.approx(norm.sf(0.2 / (1.55 * np.sqrt(41 / 4800))), rel=1e-12)
    assert v.p == pytest.approx(0.0813, abs=1e-4) and not v.shift
    # the smallest AUC that is above chance on 20 + 20 texts: 0.5 + 1.96 s0 = 0.7808
    edge = 0.5 + norm.ppf(1 - ALPHA) * 1.55 * np.sqrt(41 / 4800)
    assert edge == pytest.approx(0.7808, abs=1e-4)
    assert verdict_for(edge + 1e-6, 20, 20).warn and not verdict_for(edge - 1e-6, 20, 20).shift
    assert verdict_for(0.62, 1000, 1000).warn and not verdict_for(0.62, 40, 40).warn
    for n1, n0 in ((20, 20), (80, 80), (61, 99), (1000, 1000)):
        for auc in (0.5, 0.55, 0.62, 0.75, 0.9, 0.99):
            v = verdict_for(auc, n1, n0)
            low, high = _interval_by_hand(auc, n1, n0)
            # the module scans a grid of 1/2000 outwards from the AUC and keeps the last
            # point inside: each of its ends lies up to one step inside the exact root
            assert low <= v.low < low + 1 / 2000 + 1e-12, (n1, n0, auc, v.low, low)
            assert high - 1 / 2000 - 1e-12 < v.high <= high, (n1, n0, auc, v.high, high)
            assert (v.low > 0.5) == (v.p < ALPHA) or abs(v.p - ALPHA) < 1e-3, (n1, n0, auc)
    small = verdict_for(0.54, 5000, 5000)
    assert small.shift and not small.warn and "small shift" in blind_sentence(small)
    assert verdict_for(MIN_AUC, 5000, 5000).warn
    groups = [f"d{i // 8}" for i in range(160)]
    labels = [int(i // 8 < 10) for i in range(160)]
    assert effective_units(labels, groups) == {"members": 10, "nonmembers": 10,
                                               "unit": "documents"}
    assert effective_units(labels, [str(i) for i in range(160)]) is None  # a text each
    assert null_sd(10, 10) == pytest.approx(1.55 * np.sqrt(21 / 1200), rel=1e-12)


def test_the_verdict_names_its_interval():
    """Printed beside the metrics table's bootstrap CI, the verdict's interval says what it
    is (the classifier's refitting counted), the numbers those of the hand solution."""
    v = verdict_for(0.475, 20, 20)
    low, high = _interval_by_hand(0.475, 20, 20)
    assert (f"reaches AUC 0.475 on 20 member and 20 non-member texts (95% interval allowing "
            f"for the classifier's refitting on every fold [{low:.3f}, {high:.3f}])"
            ) in blind_sentence(v)


def test_texts_without_a_word_are_said_before_the_baseline_runs():
    """Its word n-grams count words of two or more letters or digits (scikit-learn's token
    pattern): single digits, single letters and signs are none."""
    from pddkit.blind.requirements import word_shortage

    why = word_shortage(["1 + 2 = 3", "x = 7", "7"])
    assert why == ("none of the 3 texts has a word of two or more letters or digits (e.g. "
                   "'7'), and the blind baseline's word n-gram models (TF-IDF, bag of "
                   "words, neighbour vote) need words")
    assert word_shortage(["1 + 2 = 3", "10 - 7 = 3"]) is None  # "10" is a word
    assert word_shortage(["a b", "it"]) is None
    labels = [0, 1] * 10
    with pytest.raises(PddkitError, match="none of the 20 texts has a word"):
        BlindBaseline().cross_val_scores([f"{i % 10} + 1" for i in range(20)], labels)


def test_a_base_model_with_no_feature_in_a_training_part_abstains():
    """Arithmetic where only two texts hold a word (`10`): most training parts have no word
    for the bag of words, which then scores 0 (no opinion) instead of failing the fit
    (`Found array with 0 feature(s)` from naive Bayes)."""
    from sklearn.naive_bayes import MultinomialNB

    from pddkit.blind.baseline import _BowNB, _fit_score

    empty = sparse.csr_matrix((6, 0))
    with pytest.raises(ValueError, match="0 feature"):
        MultinomialNB().fit(empty, [0, 1] * 3)  # what the stack met before
    np.testing.assert_array_equal(_fit_score(_BowNB(None), empty, [0, 1] * 3,
                                             sparse.csr_matrix((2, 0)), 1.0), [0.0, 0.0])
    texts = [f"{a} + {b} = {(a + b) % 10}" for a in range(1, 10) for b in range(1, 5)]
    texts[:2] = ["5 + 5 = 10", "9 + 1 = 10"]
    labels = np.array([i % 2 for i in range(len(texts))])
    scores = BlindBaseline().cross_val_scores(texts, labels)
    assert scores.shape == (36,) and np.isfinite(scores).all()
    assert ((scores > 0) & (scores < 1)).all()  # member probabilities


def test_cli_blind_on_texts_without_a_word_is_one_sentence(tmp_path, capsys):
    rows = [{"text": f"{a} + {b} = {(a + b) % 10}", "label": (a + b) % 2}
            for a in range(1, 7) for b in range(1, 6)]
    data = write_jsonl(tmp_path / "arith.jsonl", rows)
    code, _out, err = run_cli(capsys, "blind", "--data", data)
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "pddkit: error: none of the 30 texts has a word of two or more letters or digits "
        "(e.g. '1 + 1 = 2'), and the blind baseline's word n-gram models (TF-IDF, bag of "
        "words, neighbour vote) need words")


def _documents(per_author=4, per_doc=10):
    """16 documents of 10 paragraphs (one author each, 4 per author) and their ids."""
    texts, groups = [], []
    for author in ("Austen, Jane", "Carroll, Lewis", "Doyle, Arthur Conan", "Wilde, Oscar"):
        paras = [" ".join(p.split()[:40]) for p in author_paragraphs(author, per_author * per_doc)]
        for d in range(per_author):
            texts += paras[d * per_doc:(d + 1) * per_doc]
            groups += [f"{author}-{d}"] * per_doc
    return texts, groups


@pytest.mark.slow
def test_the_warning_fires_by_chance_at_most_at_its_rate_and_still_on_a_shift():
    """Random member documents (8 of 16, 160 texts, grouped folds), 12 seeded draws: the
    out-of-fold AUC spreads so widely that a fixed 0.60 line is crossed in several draws;
    the verdict, which counts documents, warns in at most 1 (its rate ALPHA = 2.5%, with
    slack: P(>= 2 of 12) = 3.5%), a bound the fixed line fails. The same texts with
    members written by other authors than non-members (no document ids) still warn."""
    texts, groups = _documents()
    docs = sorted(set(groups))
    model = BlindBaseline()
    feats = model._features(texts)
    model._features = lambda _texts: feats  # label-free features, computed once
    rng = np.random.default_rng(0)
    aucs, warns = [], 0
    for _ in range(12):
        members = set(rng.choice(len(docs), 8, replace=False).tolist())
        y = np.array([int(docs.index(g) in members) for g in groups])
        auc = roc_auc_score(y, model.cross_val_scores(texts, y, groups))
        units = effective_units(y, groups)
        assert units == {"members": 8, "nonmembers": 8, "unit": "documents"}
        warns += verdict_for(auc, units["members"], units["nonmembers"], units["unit"]).warn
        aucs.append(round(auc, 3))
    assert warns <= 1, (warns, aucs)
    assert sum(a >= 0.60 for a in aucs) >= 2, aucs  # the old fixed line fails that bound
    y = np.array([int(g.startswith(("Austen", "Carroll"))) for g in groups])
    auc = roc_auc_score(y, model.cross_val_scores(texts, y))  # texts, no document ids
    v = verdict_for(auc, 80, 80)
    assert v.warn and "80 member and 80 non-member texts" in blind_sentence(v), (auc, v.p)
