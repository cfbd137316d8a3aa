"""A run's document level (SPEC 3c): rows recomputed by hand on small tables, the curve, and
`pddkit run --documents` end to end (documents.jsonl against scores.jsonl, report, refusals)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl

from pddkit.errors import PddkitError
from pddkit.evaluation.document_level import document_level

# Tolerances: every expected value here is computed in float64 from a handful of operations
# (a mean, a log, a ratio of counts), as pddkit computes it; two such computations agree to a
# few units in the last place (~1e-16 relative), so rel=1e-12 (abs=1e-15 near zero) leaves
# room for a different order of summation and nothing more. An AUC is a ratio of integer
# counts: exact to rounding, hence abs=1e-15.
EXACT = {"rel": 1e-12, "abs": 1e-15}


def _auc(pos, neg) -> float:
    return float(np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg]))  # Mann-Whitney


def _table(n_docs=12, per=5, seed=0):
    rng = np.random.default_rng(seed)
    groups = [f"d{i // per}" for i in range(n_docs * per)]
    labels = [int(i // per < n_docs // 2) for i in range(n_docs * per)]
    scores = rng.normal(size=n_docs * per) + 0.5 * np.array(labels)
    return groups, labels, scores


def test_mean_rows_and_metrics_by_hand_on_the_evaluated_texts_only():
    groups, labels, scores = _table()
    evaluated = np.arange(0, 60, 1)[np.arange(60) % 5 != 4]  # one text of each document left out
    out = document_level({"m": scores}, groups, labels, ["mean"], evaluated=evaluated,
                         n_bootstrap=50, seed=3)
    row = out.rows[0]
    assert row.label == "mean:m" and row.aggregation == "mean"
    by_hand = {g: np.mean([s for i, (s, gg) in enumerate(zip(scores, groups))
                           if gg == g and i % 5 != 4]) for g in dict.fromkeys(groups)}
    assert row.scores.tolist() == pytest.approx([by_hand[n] for n in out.docs.names], **EXACT)
    y = out.docs.labels
    assert row.metrics.auc == pytest.approx(_auc(row.scores[y == 1], row.scores[y == 0]), **EXACT)
    assert row.metrics.n_members == 6 and row.metrics.n_bootstrap == 50
    assert out.docs.sizes.tolist() == [4] * 12
    ks = [k for k, _ in row.curve]
    assert ks == [1, 2, 4]
    assert row.curve[-1][1] == pytest.approx(row.metrics.auc, **EXACT)  # all texts: the full AUC
    rows = out.jsonl_rows()
    assert rows[0] == {"group": "d0", "label": 1, "texts": 4, "mean:m": pytest.approx(by_hand["d0"], **EXACT)}


def their_tau(scores, labels, n_interpol=500):
    """The SoK authors' determine_tau (mia_llms_benchmark, document_level/
    from_seq_to_doc_level.py), transcribed: among n_interpol evenly spaced values between
    the lowest and highest calibration score, the one whose `score >= tau` has the best
    accuracy, a later tau winning ties (`acc >= best_acc`)."""
    best_acc, best_tau = 0.0, None
    for tau in np.linspace(min(scores), max(scores), n_interpol):
        acc = np.mean([(s >= tau) == (y == 1) for s, y in zip(scores, labels)])
        if acc >= best_acc:
            best_tau, best_acc = tau, acc
    return best_tau


def test_share_rows_fit_on_calibration_and_measure_on_evaluation_by_hand():
    groups, labels, scores = _table(n_docs=16, per=4, seed=1)
    out = document_level({"m": scores}, groups, labels, ["share"], n_bootstrap=0, seed=5)
    names = list(dict.fromkeys(groups))
    assert list(out.docs.names) == names
    doc_label = {g: lab for g, lab in zip(groups, labels)}
    calib = out.calibration
    # the calibration half: half of each label's 8 documents, seeded (another seed, another half)
    assert [sum(calib[d] for d, n in enumerate(names) if doc_label[n] == lab)
            for lab in (0, 1)] == [4, 4]
    again = document_level({"m": scores}, groups, labels, ["share"], n_bootstrap=0, seed=5)
    other = document_level({"m": scores}, groups, labels, ["share"], n_bootstrap=0, seed=6)
    assert (again.calibration == calib).all() and (other.calibration != calib).any()
    in_calib = {n for d, n in enumerate(names) if calib[d]}
    cal = [i for i, g in enumerate(groups) if g in in_calib]  # the calibration documents' texts
    tau = their_tau([scores[i] for i in cal], [labels[i] for i in cal])
    row = out.rows[0]
    # the same 500 grid values (np.linspace on the same min and max) and the same choice
    assert row.threshold == tau
    for d, name in enumerate(names):
        mine = [s for s, g in zip(scores, groups) if g == name]
        if calib[d]:
            assert np.isnan(row.scores[d])  # a calibration document is never scored
        else:  # the authors' apply_tau: the mean of 0/1 predictions; k of 4, exact
            assert row.scores[d] == np.mean([s >= tau for s in mine])
    ev = [d for d, n in enumerate(names) if not calib[d]]
    pos = [row.scores[d] for d in ev if doc_label[names[d]] == 1]
    neg = [row.scores[d] for d in ev if doc_label[names[d]] == 0]
    # Mann-Whitney over 4 x 4 pairs: a count over 16, exact in binary
    assert row.metrics.auc == _auc(pos, neg)
    assert row.metrics.n_members + row.metrics.n_nonmembers == len(ev) == 8
    assert {r["split"] for r in out.jsonl_rows()} == {"calibration", "evaluation"}
    assert all(r["share:m"] is None for r in out.jsonl_rows() if r["split"] == "calibration")


def test_classifier_row_sees_only_the_evaluated_texts():
    from pddkit.evaluation.doc_classifier import CrossValidated, FoldAUC

    groups, labels, scores = _table()
    evaluated = np.arange(10, 60)  # the first two documents are validation texts
    seen = []

    class Fake:  # records what it is given; scores a document by its texts' mean value
        def cross_validate(self, values, doc_of, labels_by_group, token_ids=None):
            seen.append((len(values), set(doc_of), token_ids))
            sums: dict = {}
            for v, g in zip(values, doc_of):
                sums.setdefault(g, []).append(float(v.mean()))
            docs = sorted(sums)
            # two folds by position; fold AUCs made up, to follow them into the row
            return CrossValidated({g: float(np.mean(x)) for g, x in sums.items()},
                                  {g: i % 2 for i, g in enumerate(docs)},
                                  (FoldAUC(0, 3, 2, 0.5 + 0.01 * len(seen)),
                                   FoldAUC(1, 2, 3, 0.75)))

    def token_values(idx):
        return [np.array([scores[i], scores[i]]) for i in idx], None

    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class FakeParams(Fake):
        bins: int = 3

    out = document_level({"m": scores}, groups, labels, ["classifier", "mean"], evaluated=evaluated,
                         n_bootstrap=0, token_values=token_values, classifier=FakeParams())
    assert [r.label for r in out.rows] == ["mean:m", "classifier"]
    assert seen[0][0] == 50 and "d0" not in seen[0][1] and "d1" not in seen[0][1]
    assert out.rows[1].scores.tolist() == pytest.approx(out.rows[0].scores.tolist(), **EXACT)
    assert out.rows[1].params == {"bins": 3}
    assert len(seen) == len(out.rows[1].curve)  # refitted per point; the last is the full fit
    saved = out.rows[1].to_dict()
    assert saved["metrics_are"].startswith("pooled out-of-fold")
    assert saved["per_fold"]["how"].startswith("each fold's documents ranked by the forest")
    # the full fit was the first call: fold 0's AUC 0.51; mean of 0.51 and 0.75
    assert saved["per_fold"]["auc_mean"] == pytest.approx(0.63, abs=1e-15)  # (0.51+0.75)/2
    assert (saved["per_fold"]["auc_min"], saved["per_fold"]["auc_max"]) == (0.51, 0.75)
    assert [f["members"] for f in saved["per_fold"]["folds"]] == [3, 2]
    # curve (1, 2, 4, 5 texts): calls 2-4 are the points below 5, the full fit (call 1) last
    assert [p["texts_per_document"] for p in saved["curve"]] == [1, 2, 4, 5]
    assert [p["auc_per_fold_mean"] for p in saved["curve"]] == pytest.approx(
        [(0.52 + 0.75) / 2, (0.53 + 0.75) / 2, (0.54 + 0.75) / 2, (0.51 + 0.75) / 2], abs=1e-15)
    rows = out.jsonl_rows()
    sorted_docs = sorted(out.docs.names)
    assert [r["classifier_fold"] for r in rows] == [sorted_docs.index(r["group"]) % 2
                                                    for r in rows]
    assert "mean:m_fold" not in rows[0]


def test_unlabelled_gets_the_mean_only_and_bad_tables_are_one_sentence():
    groups, _, scores = _table()
    out = document_level({"m": scores}, groups, None, ["mean"])
    assert out.rows[0].metrics is None and out.jsonl_rows()[0]["label"] is None
    with pytest.raises(PddkitError, match="fit on labels"):
        document_level({"m": scores}, groups, None, ["share"])
    with pytest.raises(PddkitError, match="at least 2 member and 2 non-member documents; the "
                                          "evaluated texts form 1 member and 1"):
        document_level({"m": np.arange(4.0)}, ["a", "a", "b", "b"], [1, 1, 0, 0], ["mean"])
    with pytest.raises(PddkitError, match="must name some of mean, share, classifier, not 'median'"):
        document_level({"m": scores}, groups, None, ["median"])


# ---- pddkit run --documents, end to end on the toy model (slow: it trains one) ----------


def _doc_rows(world, per=5):
    """The toy world's paragraphs as documents of `per` paragraphs (members, non-members)."""
    rows = []
    for label, texts in ((1, world.members), (0, world.nonmembers)):
        for i, t in enumerate(texts):
            rows.append({"id": f"{label}-{i}", "text": t, "label": label,
                         "group": f"{'m' if label else 'n'}{i // per}"})
    return rows


def test_run_documents_end_to_end(toy_world, tmp_path, capsys):
    data = write_jsonl(tmp_path / "docs.jsonl", _doc_rows(toy_world))
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                                "--methods", "loss,mink", "--documents", "mean,share,classifier",
                                "--doc-features", "aggregate", "--bootstrap", "100",
                                "--output", out)
    assert code == 0, err
    assert "Document level:" in stdout and "Document AUC by texts per document:" in stdout
    results = json.loads((out / "results.json").read_text())
    doc = results["documents"]
    assert doc["documents"] == 24 and doc["members"] == 12 and doc["texts"] == 120
    assert set(doc["rows"]) == {"mean:loss", "mean:mink", "mean:blind", "share:loss",
                                "share:mink", "share:blind", "classifier"}
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    docs = [json.loads(line) for line in (out / "documents.jsonl").read_text().splitlines()]
    group_of = {r["id"]: r["group"] for r in _doc_rows(toy_world)}
    for d in docs:
        mine = [s["mink"] for s in scores if group_of[s["id"]] == d["group"]]
        assert d["texts"] == 5 and d["mean:mink"] == pytest.approx(np.mean(mine), **EXACT)
    y = np.array([d["label"] for d in docs])
    m = np.array([d["mean:mink"] for d in docs])
    assert doc["rows"]["mean:mink"]["metrics"]["auc"] == pytest.approx(_auc(m[y == 1], m[y == 0]), **EXACT)
    assert doc["rows"]["classifier"]["params"]["features"] == "aggregate"
    # the classifier's two AUCs from documents.jsonl alone (its scores, folds, labels):
    # pooled over every document, and per held-out fold as the authors compute it
    from sklearn.metrics import roc_auc_score

    c = np.array([d["classifier"] for d in docs])
    fold = np.array([d["classifier_fold"] for d in docs])
    cl = doc["rows"]["classifier"]
    # AUCs are pair counts over 12 x 12 pairs (per fold: over a few pairs): a sum of
    # halves and ones over a power-of-two-free count, so one rounding of the division
    assert cl["metrics"]["auc"] == pytest.approx(roc_auc_score(y, c), abs=1e-15)
    assert cl["metrics_are"].startswith("pooled out-of-fold")
    by_fold = [roc_auc_score(y[fold == k], c[fold == k]) for k in sorted(set(fold))]
    assert len(by_fold) == 5 and [f["fold"] for f in cl["per_fold"]["folds"]] == [0, 1, 2, 3, 4]
    assert [f["auc"] for f in cl["per_fold"]["folds"]] == pytest.approx(by_fold, abs=1e-15)
    assert cl["per_fold"]["auc_mean"] == pytest.approx(np.mean(by_fold), abs=1e-15)
    assert (cl["per_fold"]["auc_min"], cl["per_fold"]["auc_max"]) == pytest.approx(
        (min(by_fold), max(by_fold)), abs=1e-15)
    assert "classifier, pooled" in stdout and "classifier, mean of folds (5)" in stdout
    html = (out / "report.html").read_text()
    assert "Document level" in html and "Document AUC by texts per document" in html
    assert "mean of folds" in html
    assert "documents_curve.png" in (out / "report.md").read_text()


def test_run_split_words_groups_consecutive_texts(toy_world, tmp_path, capsys):
    rows = [{"id": f"{'m' if y else 'n'}{d}", "text": "\n\n".join(texts[5 * d:5 * d + 5]),
             "label": y} for y, texts in ((1, toy_world.members), (0, toy_world.nonmembers))
            for d in range(4)]
    rows.append({"id": "short", "text": "only a few words", "label": 0})
    data = write_jsonl(tmp_path / "long.jsonl", rows)
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                                "--methods", "loss", "--documents", "mean", "--split-words", "40",
                                "--max-texts", "3", "--no-blind", "--bootstrap", "0",
                                "--output", out)
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    counts = results["counts"]["split_words"]
    assert counts["documents_too_short"] == 1 and counts["max_texts"] == 3
    assert results["documents"]["documents"] == 8 and results["documents"]["texts"] == 24
    assert [s["reason"] for s in results["skipped"] if s["source"].endswith("line 9")] == [
        "has 4 words, fewer than one 40-word text"]
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert [s["id"] for s in scores[:3]] == ["m0@0", "m0@1", "m0@2"]


@pytest.mark.parametrize("extra, rows, message", [
    (["--documents", "mean"], [{"text": "a b c", "label": 1}, {"text": "d e f", "label": 0}],
     "needs the document each text belongs to"),
    (["--documents", "mean"], [{"text": "a b", "label": 1, "group": "g"},
                               {"text": "c d", "label": 0, "group": "g"}],
     "document 'g' holds both member and non-member texts"),
    (["--documents", "share"], [{"text": "a b", "label": 1, "group": "g"},
                                {"text": "c d", "label": 0, "group": "h"}],
     "at least 2 member and 2 non-member documents"),
    (["--documents", "mean", "--split-words", "0"], [{"text": "a b", "label": 1}],
     "--split-words must be at least 1 word per text, not 0"),
    (["--max-texts", "2"], [{"text": "a b", "label": 1}], "give both"),
    (["--documents", "median"], [{"text": "a b", "label": 1, "group": "g"}],
     "--documents must name some of mean, share, classifier"),
])
def test_run_documents_bad_input_is_one_sentence_before_any_model_loads(
        tmp_path, capsys, extra, rows, message):
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "no-such-model", "--data", data,
                           "--methods", "loss", *extra, "--output", tmp_path / "out")
    assert code == 1 and message in err, err
    assert err.count("\n") == 1 and err.startswith("pddkit: error: ")  # one line, no traceback


def test_too_few_documents_left_by_the_validation_split_is_refused_before_any_model_loads(
        tmp_path, capsys):
    rows = [{"text": f"text {i} of document {d}", "label": int(d < 2), "group": f"g{d}"}
            for d in range(4) for i in range(3)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    code, _, err = run_cli(capsys, "run", "--model", tmp_path / "no-such-model", "--data", data,
                           "--methods", "loss", "--documents", "mean", "--val-fraction", "0.5",
                           "--output", tmp_path / "out")
    assert code == 1, err
    assert "the texts left to evaluate (test part, shots left out) form 1 member and 1" in err


def test_unlabelled_split_words_previews_the_texts_scored(tmp_path, capsys):
    from tiny_models import save_tiny_gpt2

    model = save_tiny_gpt2(tmp_path / "m")
    words = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
    rows = [{"id": "short", "text": "too short"},
            {"id": "long", "text": " ".join(words * 3)}]  # 27 words: three 9-word texts
    data = write_jsonl(tmp_path / "u.jsonl", rows)
    code, out, err = run_cli(capsys, "run", "--model", model, "--data", data, "--methods", "loss",
                             "--split-words", "9", "--documents", "mean", "--output", tmp_path / "o")
    assert code == 0, err
    assert "scored 3 texts cut from 1 documents" in out and "1 documents shorter than one text" in out
    assert "long@0" in out and "the quick brown fox jumps over the lazy dog" in out
    assert "1 documents scored" in out


def test_sandbox_documents_checked_before_anything_is_trained(tmp_path, capsys):
    code, _, err = run_cli(capsys, "sandbox", "--documents", "median", "--output", tmp_path / "sb")
    assert code == 1 and "--documents must name some of mean, share, classifier" in err, err
    assert not (tmp_path / "sb" / "reference-model").exists()
