"""The blind baseline at scale: features counted once and quickly (equal to scikit-learn's
vectorizers and to the plain per-character loops), fold TF-IDF by subtraction, the
approximate neighbour search (exact where it keeps every term), inner folds on a sample,
the out-of-fold semantics kept with both, and `blind_max_texts` (a stratified sample, said
in results.json, the terminal and the report)."""

import json
import math
import random
import re

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl
from conftest import shared_path
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold

from pddkit.blind.baseline import BlindBaseline
from pddkit.blind.counts import (
    FoldTfidf,
    char_wb_counts,
    column_totals,
    count_matrix,
    word_counts,
)
from pddkit.blind.features import STYLE_NAMES, date_features, style_features
from pddkit.blind.folds import stratified_sample
from pddkit.blind.neighbours import NeighbourGraph
from pddkit.data.gutenberg import strip_gutenberg
from pddkit.engine.blind_run import blind_result
from pddkit.engine.config import RunConfig
from pddkit.errors import PddkitError
from pddkit.reporting.run_files import write_run
from pddkit.sandbox.corpus import paragraphs

ODD = ["", " ", "a", "ab", "abc", "a  b\t\tc\nd", "Zürich 東京 \U0001F600x", "x\xa0y\u2003z",
       "\x1cq\x1fw", "ÉCOLE é", "İSTANBUL ß ǅx Σ", "...", "( ) ,", "١٢٣٤ in 1999", "tab\tsep",
       "Title: On Widgets\nWe show that running widgets quickly (always) works, well-defined.",
       r"As in \cite{smith2019} and [12] A. Lee. 2020.", "lying, ing. ING ly"]


def texts(n=300, seed=0):
    """Gutenberg paragraphs (two books), WikiMIA and ArxivMIA texts, and odd ones."""
    out = []
    for author in ("Doyle, Arthur Conan", "Austen, Jane"):
        book = sorted(shared_path("corpora", "gutenberg", author).glob("*.txt"))[0]
        out += paragraphs(strip_gutenberg(book.read_text(encoding="utf-8", errors="replace")), 8)
    for rel, field in (("wikimia/WikiMIA_length64.jsonl", "input"),
                       ("arxivmia/arxiv_mia_dev.jsonl", "text")):
        out += [json.loads(line)[field] for line in shared_path("data", *rel.split("/")).open()]
    random.Random(seed).shuffle(out)
    return out[:n] + ODD


def _assert_same_counts(ours, docs, **vectorizer) -> None:
    """`ours` equals CountVectorizer(**vectorizer)'s counts of `docs`, column for column."""
    theirs = CountVectorizer(dtype=np.float64, **vectorizer).fit_transform(docs).tocsr()
    theirs.sort_indices()
    assert ours.shape == theirs.shape and ours.has_sorted_indices
    np.testing.assert_array_equal(ours.indptr, theirs.indptr)
    np.testing.assert_array_equal(ours.indices, theirs.indices)
    np.testing.assert_array_equal(ours.data, theirs.data)


def test_words_and_char_ngrams_counted_with_numpy_equal_countvectorizer():
    docs = texts(150)
    for lowercase in (False, True):
        ours = char_wb_counts(docs, (3, 5), lowercase, chunk_chars=5000)  # many chunks
        _assert_same_counts(ours, docs, analyzer="char_wb", ngram_range=(3, 5),
                            lowercase=lowercase)
    for ngram_range, lowercase in (((1, 2), True), ((1, 3), True), ((2, 2), False)):
        ours = word_counts(docs, ngram_range, lowercase, chunk_docs=50)  # many chunks
        _assert_same_counts(ours, docs, ngram_range=ngram_range, lowercase=lowercase)
    assert word_counts(["", "a b"], (1, 2), True) is None  # no word: the vectorizer says so
    with pytest.raises(ValueError, match="empty vocabulary"):
        count_matrix(["", "a b"], "word", (1, 2), True)
    assert char_wb_counts(docs, (2, 4), False) is None  # two-character n-grams: the vectorizer
    many = ["".join(chr(0x4E00 + 9 * i + j) for j in range(9)) for i in range(900)]
    assert char_wb_counts(many, (3, 5), False) is None  # 8,100 characters: too many to pack
    assert count_matrix(many, "char_wb", (3, 5), False).shape[0] == 900  # ... counted anyway
    assert count_matrix(docs, "char_wb", (3, 5), False, dtype=np.float32).dtype == np.float32


def _style_by_loops(text):
    """The style features as first written: one Python loop per feature."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    words = text.split()
    n_chars, n_words = max(len(text), 1), max(len(words), 1)
    lines = text.split("\n")
    n_sentences = len(re.findall(r"[.!?](?:\s|$)", text))
    lengths = np.array([len(w) for w in words]) if words else np.zeros(1)
    bare = [w.strip(".,;:!?()[]{}\"'").lower() for w in words]
    bare = [w for w in bare if w]
    return [math.log1p(len(text)), math.log1p(len(words)), sum(len(w) for w in words) / n_words,
            float(len(lines[0].split())), len(lines) / n_words, n_sentences / n_words,
            sum(c.isupper() for c in text) / n_chars, sum(c.isdigit() for c in text) / n_chars,
            sum(not c.isalnum() and not c.isspace() for c in text) / n_chars,
            text.count("$") / n_chars, sum(ord(c) > 127 for c in text) / n_chars,
            math.log1p(len(lines[0])), float(":" in lines[0]), n_words / max(n_sentences, 1),
            float(lengths.std()), float((lengths >= 10).mean()),
            sum(w in ENGLISH_STOP_WORDS for w in bare) / n_words, len(set(bare)) / n_words,
            sum(w in {"i", "me", "my", "we", "us", "our", "ours"} for w in bare) / n_words,
            sum(w[:1].isupper() for w in words) / n_words,
            sum(w.endswith("ing") for w in bare) / n_words,
            sum(w.endswith("ly") for w in bare) / n_words,
            text.count(",") / n_words, text.count("(") / n_words, text.count("-") / n_words]


def test_quick_style_and_date_features_equal_the_plain_loops():
    docs = texts(600)
    for t in docs:
        assert style_features(t) == _style_by_loops(t), t[:80]
    assert len(STYLE_NAMES) == len(style_features(docs[0]))
    # no digit and no backslash: the shortcut; its answer is the full parse's
    assert date_features("no year here, Smith et al. (May)") == {"no_year": 1.0, "no_cite_year": 1.0}
    assert date_features("no year here", citations=False) == {"no_year": 1.0}
    assert "reference_list" in date_features("Intro.\n[1] A. Smith. Things.")
    assert "latex_cite" in date_features(r"As \cite{smith} shows")


def test_fold_tfidf_by_subtraction_equals_tfidfvectorizer_on_the_training_texts():
    docs = texts(200)
    counts = count_matrix(docs, "word", (1, 2), lowercase=True)
    totals = column_totals(counts)
    rng = np.random.default_rng(0)
    for share in (0.8, 0.3):  # most rows: subtract the others; few: sum them
        train = np.sort(rng.choice(len(docs), int(share * len(docs)), replace=False))
        test = np.setdiff1d(np.arange(len(docs)), train)
        ours = FoldTfidf().fit(counts, train, totals)
        vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit([docs[i] for i in train])
        np.testing.assert_array_equal(ours.columns_.size, len(vec.vocabulary_))
        want = vec.transform([docs[i] for i in test]).toarray()
        np.testing.assert_allclose(ours.transform(counts, test).toarray(), want, atol=1e-12)
        plain = FoldTfidf(max_features=500).fit(counts[train])  # no totals: summed
        both = FoldTfidf(max_features=500).fit(counts, train, totals)
        np.testing.assert_array_equal(plain.columns_, both.columns_)
        np.testing.assert_array_equal(plain.idf_, both.idf_)


def test_the_neighbour_graph_is_the_exact_search_when_it_keeps_every_term():
    docs = texts(300)
    counts = count_matrix(docs, "word", (1, 2), lowercase=True)
    graph = NeighbourGraph(candidates=20, max_df=len(docs), chunk=64).fit(counts)
    X = FoldTfidf(50000).fit(counts).transform(counts).toarray()
    S = X @ X.T                                                        # [n, n] cosine
    np.fill_diagonal(S, -np.inf)
    for i in range(0, len(docs), 7):
        have = graph.index_[i][graph.index_[i] >= 0]
        best = np.argsort(-S[i], kind="stable")[:len(have)]
        assert i not in have
        np.testing.assert_allclose(graph.sim_[i][:len(have)], S[i, best], atol=1e-5)
        assert len(have) == min(20, int((S[i] > 0).sum()))  # texts sharing no term never meet
    # a pruned search counts only the distinctive terms: never more similar
    pruned = NeighbourGraph(candidates=20, max_df=10).fit(counts)
    rows = np.arange(len(docs))[:, None]
    found = pruned.index_ >= 0
    assert (pruned.sim_[found] <= S[rows.repeat(20, 1)[found], pruned.index_[found]] + 1e-5).all()


def test_the_graph_vote_takes_each_texts_first_k_candidates_among_the_training_rows():
    graph = NeighbourGraph(candidates=4)
    graph.index_ = np.array([[3, 1, 2, -1], [0, 3, 2, 4], [4, 3, 0, 1]])
    graph.sim_ = np.array([[0.9, 0.8, 0.5, 0.0], [0.7, 0.6, 0.4, 0.3], [0.5, 0.4, 0.3, 0.2]])
    graph.index_ = np.vstack([graph.index_, [[0, 1, 2, 3]], [[0, 1, 2, 3]]])
    graph.sim_ = np.vstack([graph.sim_, [[0.1] * 4], [[0.1] * 4]])
    train, y = np.array([1, 2, 3]), np.array([1, 0, 1])  # rows 0 and 4 are scored
    sim, sign = graph.vote(train, y, np.array([0, 4]), k=2)
    np.testing.assert_allclose(sim, [[0.9, 0.8, 0.0, 0.0], [0.0, 0.1, 0.1, 0.0]])
    np.testing.assert_allclose(sign, [[1, 1, 0, 0], [0, 1, -1, 0]])


def test_stratified_samples_keep_each_class_share_and_whole_documents():
    y = np.array([1] * 300 + [0] * 700)
    s = stratified_sample(y, None, 100, seed=0)
    assert len(s) == 100 and y[s].sum() == 30 and np.all(np.diff(s) > 0)
    np.testing.assert_array_equal(s, stratified_sample(y, None, 100, seed=0))  # seeded
    assert not np.array_equal(s, stratified_sample(y, None, 100, seed=1))
    np.testing.assert_array_equal(stratified_sample(y, None, 5000, 0), np.arange(1000))
    groups = np.array([f"d{i // 10}" for i in range(1000)])  # 100 documents of 10 texts
    g = stratified_sample(y, groups, 200, seed=0)
    assert 200 <= len(g) <= 220 and abs(y[g].mean() - 0.3) < 0.06
    kept = set(groups[g])
    assert all(set(np.flatnonzero(np.isin(groups, [d]))) <= set(g) for d in kept)  # whole


@pytest.mark.slow
def test_approximate_search_and_inner_sample_keep_the_out_of_fold_semantics():
    """The neighbour graph forced (exact search up to 0 texts) and the inner folds on a
    sample of 120 texts: flipping fold 0's labels leaves its scores unchanged, while the
    others change; the WikiMIA shift is still found."""
    rows = [json.loads(line) for line in shared_path("data", "wikimia",
                                                     "WikiMIA_length32.jsonl").open()]
    docs, y = [r["input"] for r in rows][:300], np.array([r["label"] for r in rows])[:300]
    splits = list(StratifiedKFold(4, shuffle=True, random_state=0).split(docs, y))
    test0 = splits[0][1]
    flipped = y.copy()
    flipped[test0] = 1 - flipped[test0]
    make = dict(neighbours_exact_max=0, inner_max_texts=120)
    a = BlindBaseline(**make).cross_val_scores(docs, y, splits=splits)
    b = BlindBaseline(**make).cross_val_scores(docs, flipped, splits=splits)
    np.testing.assert_allclose(a[test0], b[test0], rtol=1e-9, atol=1e-12)
    rest = np.setdiff1d(np.arange(len(y)), test0)
    assert np.abs(a[rest] - b[rest]).max() > 1e-3
    model = BlindBaseline(**make)
    auc = roc_auc_score(y, model.cross_val_scores(docs, y))
    assert model.neighbour_search_.startswith("approximate") and auc > 0.95, auc


@pytest.mark.slow
def test_max_texts_scores_a_sample_out_of_fold_and_the_rest_with_its_model():
    rows = [json.loads(line) for line in shared_path("data", "wikimia",
                                                     "WikiMIA_length64.jsonl").open()]
    docs, y = [r["input"] for r in rows][:200], np.array([r["label"] for r in rows])[:200]
    model = BlindBaseline(max_texts=120)
    scores = model.cross_val_scores(docs, y)
    sample = model.sample_
    assert len(sample) == 120 and abs(y[sample].mean() - y.mean()) < 0.01
    assert np.isfinite(scores).all()
    alone = BlindBaseline().cross_val_scores([docs[i] for i in sample], y[sample])
    np.testing.assert_allclose(scores[sample], alone, rtol=1e-6, atol=1e-9)  # its OOF scores
    rest = np.setdiff1d(np.arange(len(y)), sample)
    fitted = BlindBaseline().fit([docs[i] for i in sample], y[sample])
    np.testing.assert_allclose(scores[rest], fitted.predict_proba([docs[i] for i in rest]),
                               rtol=1e-3, atol=1e-6)  # solver tolerance
    assert roc_auc_score(y, scores) > 0.9
    with pytest.raises(ValueError, match="not both"):
        model.cross_val_scores(docs, y, splits=[(np.arange(100), np.arange(100, 200))])


@pytest.mark.slow
def test_blind_max_texts_is_said_in_results_json_the_terminal_and_the_report(tmp_path, capsys):
    from pddkit.data.samples import Sample, make_dataset
    from pddkit.reporting.report import write_report

    rows = [json.loads(line) for line in shared_path("data", "wikimia",
                                                     "WikiMIA_length32.jsonl").open()][:120]
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": f"t{i}", "text": r["input"],
                                               "label": r["label"]} for i, r in enumerate(rows)])
    code, out, err = run_cli(capsys, "blind", "--data", data, "--blind-max-texts", 60,
                             "--bootstrap", 50, "--output", tmp_path / "out")
    assert code == 0, err
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    said = "fitted on a stratified sample of 60 of the 120 texts"
    assert res["blind_baseline"]["sample"] == {"texts": 60, "of": 120}
    assert said in res["blind_baseline"]["message"] and said in out
    assert res["methods"]["blind"]["params"]["sample"] == {"texts": 60, "of": 120}
    assert res["config"]["blind"]["max_texts"] == 60
    assert res["blind_baseline"]["n_members"] + res["blind_baseline"]["n_nonmembers"] == 120
    assert len((tmp_path / "out" / "scores.jsonl").read_text().splitlines()) == 120
    dataset = make_dataset("d", [Sample(f"t{i}", r["input"], r["label"])
                                 for i, r in enumerate(rows)], [])
    result = blind_result(dataset, seed=0, n_bootstrap=50, max_texts=60)
    out_dir = write_run(result, tmp_path / "again")
    _html, md = write_report(out_dir)
    assert said in md.read_text()


def test_a_sample_too_small_is_one_sentence(tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": f"text {i}", "label": i % 2}
                                              for i in range(40)])
    code, _out, err = run_cli(capsys, "blind", "--data", data, "--blind-max-texts", 10)
    assert code == 1 and "Traceback" not in err
    assert "--blind-max-texts must be at least 20 (10 texts of each class), not 10" in err
    with pytest.raises(PddkitError, match="`blind_max_texts` must be at least 20"):
        RunConfig(model="m", blind_max_texts=19).check()
    RunConfig(model="m", blind_max_texts=20).check()


@pytest.mark.slow
def test_blind_max_texts_reaches_the_runs_baseline():
    from pddkit.data.samples import Sample, make_dataset
    from pddkit.engine.blind_job import blind_baseline

    words = ["old", "ancient", "river", "castle", "new", "phone", "online", "startup", "app"]
    rng = np.random.default_rng(0)
    data = make_dataset("d", [Sample(str(i), " ".join(rng.choice(words[:4] if i % 2 else words[4:],
                                                                 12)), i % 2)
                              for i in range(60)], [])
    notices: list[str] = []
    found = blind_baseline(data, RunConfig(model="m", n_bootstrap=20, blind_max_texts=40), None,
                           notices)
    assert found.params["sample"] == {"texts": 40, "of": 60}
    assert found.params["units"]["sample"] == {"texts": 40, "of": 60}
    assert np.isfinite(found.scores).all() and found.metrics.auc > 0.9
