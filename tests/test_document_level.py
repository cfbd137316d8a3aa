"""A run's document level (SPEC 3c): rows recomputed by hand on small tables, the curve, and
`pddkit run --documents` end to end (documents.jsonl against scores.jsonl, report, refusals)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl

from pddkit.errors import PddkitError
from pddkit.evaluation.document_level import document_level
from pddkit.evaluation.documents import calibration_split, group_documents, share_threshold


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
    assert row.scores.tolist() == pytest.approx([by_hand[n] for n in out.docs.names])
    y = out.docs.labels
    assert row.metrics.auc == pytest.approx(_auc(row.scores[y == 1], row.scores[y == 0]))
    assert row.metrics.n_members == 6 and row.metrics.n_bootstrap == 50
    assert out.docs.sizes.tolist() == [4] * 12
    ks = [k for k, _ in row.curve]
    assert ks == [1, 2, 4]
    assert row.curve[-1][1] == pytest.approx(row.metrics.auc)  # all texts: the full AUC
    rows = out.jsonl_rows()
    assert rows[0] == {"group": "d0", "label": 1, "texts": 4, "mean:m": pytest.approx(by_hand["d0"])}


def test_share_rows_fit_on_calibration_and_measure_on_evaluation_by_hand():
    groups, labels, scores = _table(n_docs=16, per=4, seed=1)
    out = document_level({"m": scores}, groups, labels, ["share"], n_bootstrap=0, seed=5)
    docs = group_documents(groups, labels)
    calib = calibration_split(docs, 5)
    assert (out.calibration == calib).all()
    on = calib[docs.index]
    tau = share_threshold(scores[on], np.asarray(labels)[on])
    row = out.rows[0]
    assert row.threshold == tau
    for d, name in enumerate(docs.names):
        mine = [s for s, g in zip(scores, groups) if g == name]
        if calib[d]:
            assert np.isnan(row.scores[d])  # a calibration document is never scored
        else:
            assert row.scores[d] == pytest.approx(np.mean([s >= tau for s in mine]))
    ev, y = ~calib, docs.labels
    assert row.metrics.auc == pytest.approx(_auc(row.scores[ev & (y == 1)], row.scores[ev & (y == 0)]))
    assert row.metrics.n_members + row.metrics.n_nonmembers == int(ev.sum()) == 8
    assert {r["split"] for r in out.jsonl_rows()} == {"calibration", "evaluation"}
    assert all(r["share:m"] is None for r in out.jsonl_rows() if r["split"] == "calibration")


def test_classifier_row_sees_only_the_evaluated_texts():
    groups, labels, scores = _table()
    evaluated = np.arange(10, 60)  # the first two documents are validation texts
    seen = []

    class Fake:  # records what it is given; scores a document by its texts' mean value
        def cross_val_scores(self, values, doc_of, labels_by_group, token_ids=None):
            seen.append((len(values), set(doc_of), token_ids))
            sums: dict = {}
            for v, g in zip(values, doc_of):
                sums.setdefault(g, []).append(float(v.mean()))
            return {g: float(np.mean(x)) for g, x in sums.items()}

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
    assert out.rows[1].scores.tolist() == pytest.approx(out.rows[0].scores.tolist())
    assert out.rows[1].params == {"bins": 3}
    assert len(seen) == len(out.rows[1].curve)  # refitted per point; the last is the full fit


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
        assert d["texts"] == 5 and d["mean:mink"] == pytest.approx(np.mean(mine))
    y = np.array([d["label"] for d in docs])
    m = np.array([d["mean:mink"] for d in docs])
    assert doc["rows"]["mean:mink"]["metrics"]["auc"] == pytest.approx(_auc(m[y == 1], m[y == 0]))
    assert doc["rows"]["classifier"]["params"]["features"] == "aggregate"
    html = (out / "report.html").read_text()
    assert "Document level" in html and "Document AUC by texts per document" in html
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
