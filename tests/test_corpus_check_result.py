"""The corpus check's result (evaluation/corpus_check.py) and its lines and table
(reporting/run_tables.py), on numbers written here: no index, no model."""

import numpy as np
import pytest

from pddkit.corpus.overlap import TextOverlap
from pddkit.evaluation.corpus_check import CorpusCheck, metrics_without
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.results import MethodResult, RunResult
from pddkit.reporting import run_tables

LABELS = (1, 1, 1, 0, 0, 0, 0)
# an AUC from pddkit's ROC is a ratio of pair counts reached in a few float operations: it
# equals the fraction written here to a few units of 1e-16
EXACT = 1e-12
SCORES = np.array([0.9, 0.2, 0.6, 0.8, 0.1, 0.7, 0.3])


def _check(reasons, evaluated=tuple(range(7)), metrics=None) -> CorpusCheck:
    overlaps = [TextOverlap(20, 8, 8 if r else 1, 20 if r else 13, 1 if r else 0)
                for r in reasons]
    overlaps[-1] = TextOverlap(5, 0, 0, 5, 0)  # shorter than one 13-gram
    return CorpusCheck("idx", "tok", True, True, 13, 0.2, False, tuple(overlaps),
                       tuple(reasons), tuple(evaluated), metrics or {})


def _result(check) -> RunResult:
    m = compute_metrics(SCORES, np.array(LABELS), n_bootstrap=0)
    return RunResult(ids=tuple(f"t{i}" for i in range(7)), labels=LABELS,
                     methods=(MethodResult("loss", "loss", {}, SCORES, m),), config={},
                     counts={"samples": 7}, timings={}, models={}, corpus=check)


def test_metrics_without_the_contradicted_texts_by_hand():
    reasons = (None, None, None, "non-member found", None, None, None)
    got = metrics_without(reasons, range(7), {"loss": SCORES}, LABELS, 0, 0)["loss"]
    # left: members 0.9 0.2 0.6, non-members 0.1 0.7 0.3; pairs won: 0.9 beats 3, 0.2 beats
    # 1 (0.1), 0.6 beats 2 (0.1, 0.3): 6 of 9
    assert got.auc == pytest.approx(6 / 9, abs=EXACT) and (got.n_members, got.n_nonmembers) == (3, 3)
    # one class left: no metrics, never a crash
    gone = ("member not found",) * 3 + (None,) * 4
    assert metrics_without(gone, range(7), {"loss": SCORES}, LABELS, 0, 0) == {"loss": None}
    # only the evaluated texts count (a validation split's test part)
    got = metrics_without(reasons, [0, 1, 3, 4], {"loss": SCORES}, LABELS, 0, 0)["loss"]
    assert got.auc == pytest.approx(1.0, abs=EXACT)  # 0.9 and 0.2 both above 0.1
    assert (got.n_members, got.n_nonmembers) == (2, 1)


def test_counts_line_columns_and_table():
    reasons = (None, None, "member not found", "non-member found", None, None, None)
    check = _check(reasons, metrics={"loss": metrics_without(reasons, range(7), {"loss": SCORES},
                                                             LABELS, 0, 0)["loss"]})
    result = _result(check)
    assert check.counts(LABELS) == {"texts": 7, "checked": 6, "too_short": 1,
                                    "too_short_members": 0, "too_short_nonmembers": 1,
                                    "contradicted": 2, "nonmembers_found": 1,
                                    "members_not_found": 1, "left_out_of_metrics": 2}
    assert check.columns(3) == {"tokens": 20, "ngrams": 8, "ngrams_found": 8, "overlap": 1.0,
                                "longest_match": 20, "count": 1,
                                "contradicted": "non-member found"}
    assert check.columns(6)["overlap"] is None and check.columns(6)["contradicted"] is None
    results = result.to_dict()
    assert results["methods"]["loss"]["metrics_without_contradicted"]["auc"] == \
        pytest.approx(4 / 6, abs=EXACT)
    assert run_tables.corpus_sentence(results) == (
        "labels checked against the corpus (index idx, tokenizer tok): 2 contradicted (1 "
        "non-member with at least 20% of 13-grams found) of 6 checked; 1 text shorter than 13 "
        "tokens has no 13-gram and was not checked")
    table = run_tables.corpus_table(results, terminal=True)
    assert table.rows[0][0] == "loss" and table.rows[0][3].value == pytest.approx(4 / 6, abs=EXACT)
    assert "2 contradicted texts left out" in table.notes[0]


def test_no_table_when_nothing_the_metrics_are_on_was_contradicted():
    reasons = (None, None, None, "non-member found", None, None, None)
    result = _result(_check(reasons, evaluated=(0, 1, 2, 4, 5, 6)))
    assert run_tables.corpus_table(result.to_dict()) is None
    assert "1 contradicted" in run_tables.corpus_sentence(result.to_dict())
