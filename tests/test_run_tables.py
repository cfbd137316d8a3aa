"""The run's metrics table (reporting/run_tables.py) says what its numbers are: a TPR@FPR
column whose rate allows no false positive with this many non-members is marked, with the
rule, and keeps its number; the blind row's bootstrap CI is told apart from its verdict's
interval, in the terminal and in the report."""

import numpy as np

from pddkit.evaluation.metrics import compute_metrics, false_positives_allowed, nonmembers_needed
from pddkit.evaluation.results import MethodResult, RunResult
from pddkit.reporting.run_tables import metrics_table
from pddkit.reporting.table import to_markdown, to_text


def _result(n_nonmembers: int, blind: bool = False) -> RunResult:
    """10 members scoring 25.5, 26.5, ..., 34.5 and non-members scoring 0, 1, ..., n0 - 1."""
    members = np.arange(10) + 25.5
    scores = np.concatenate([members, np.arange(n_nonmembers, dtype=float)])
    labels = np.array([1] * 10 + [0] * n_nonmembers)
    methods = [MethodResult("loss", "loss", {}, scores, compute_metrics(scores, labels, 50))]
    if blind:
        methods.append(MethodResult("blind", "blind", {}, -scores, compute_metrics(-scores, labels, 50)))
    return RunResult(ids=tuple(map(str, range(len(labels)))), labels=tuple(labels.tolist()),
                     methods=tuple(methods), config={}, counts={}, timings={}, models={})


def test_the_rule_by_hand():
    # floor(t x n): 1% of 99 is 0.99 -> 0, of 100 -> 1, of 250 -> 2; 5% of 19 -> 0, of 20 -> 1
    assert [false_positives_allowed(0.01, n) for n in (30, 99, 100, 250)] == [0, 0, 1, 2]
    assert [false_positives_allowed(0.05, n) for n in (19, 20, 41)] == [0, 1, 2]
    assert [false_positives_allowed(0.10, n) for n in (9, 10, 30)] == [0, 1, 3]
    assert [nonmembers_needed(t) for t in (0.01, 0.05, 0.10)] == [100, 20, 10]


def test_tpr_at_1_percent_with_30_nonmembers_is_marked_and_kept():
    table = metrics_table(_result(30).to_dict(), terminal=True)
    assert table.header[2:] == ("TPR@1%FPR†", "TPR@5%FPR", "TPR@10%FPR")
    text = "\n".join(to_text(table))
    assert ("† TPR@1%FPR with 30 non-members: no false positive allowed (floor(1% x 30) = 0; "
            "allowing one takes 100 non-members), so it is the share of members scoring above "
            "the highest-scoring non-member.") in text
    # the number stays: members above the top non-member (29) are 29.5 ... 34.5, 6 of 10
    assert text.splitlines()[2].split()[4].rstrip("*") == "0.600"


def test_several_rates_and_none():
    table = metrics_table(_result(15).to_dict())  # the report's form
    assert table.header[2:] == ("TPR@1% FPR [95% CI]†", "TPR@5% FPR [95% CI]†",
                                "TPR@10% FPR [95% CI]")
    assert any(n.startswith("† TPR@1% FPR and TPR@5% FPR with 15 non-members: no false "
                            "positive allowed (floor(1% x 15) = floor(5% x 15) = 0; allowing "
                            "one takes 100 and 20 non-members), so each is") for n in table.notes)
    plenty = metrics_table(_result(100).to_dict(), terminal=True)
    assert not any("†" in h for h in plenty.header) and not any("†" in n for n in plenty.notes)


def test_the_blind_rows_interval_is_told_apart_from_its_verdicts():
    res = _result(30, blind=True)
    terminal = "\n".join(to_text(metrics_table(res.to_dict(), terminal=True)))
    assert ("CI: 95% bootstrap over the texts, 50 resamples; blind's CI holds its out-of-fold "
            "scores fixed, the wider interval of its verdict below allows for refitting the "
            "classifier too") in terminal
    report = "\n".join(to_markdown(metrics_table(res.to_dict())))
    assert ("Intervals: 95% percentile bootstrap over the texts; blind's holds its out-of-fold "
            "scores fixed, and the verdict above gives the wider 95% interval allowing for the "
            "classifier's refitting on every fold.") in report
    alone = "\n".join(to_text(metrics_table(_result(30).to_dict(), terminal=True)))
    assert "blind's" not in alone  # no blind row, nothing to tell apart


def test_the_notes_speak_only_of_what_the_table_holds():
    """Without a blind row the notes do not explain one; counts of one are singular."""
    terminal = "\n".join(to_text(metrics_table(_result(30).to_dict(), terminal=True)))
    assert "10 members, 30 non-members; * = best detection method in column; CI" in terminal
    assert "blind" not in terminal
    report = metrics_table(_result(30).to_dict())
    assert report.notes[0] == "▲ best detection method in the column. Intervals: 95% percentile " \
                              "bootstrap over the texts."
    with_blind = "\n".join(to_text(metrics_table(_result(30, blind=True).to_dict(), terminal=True)))
    assert "* = best detection method in column (blind baseline excluded)" in with_blind
    one = RunResult(ids=("a", "b"), labels=(1, 0), methods=(MethodResult(
        "loss", "loss", {}, np.array([1.0, 0.0]), compute_metrics(np.array([1.0, 0.0]),
                                                                  np.array([1, 0]), 50)),),
        config={}, counts={}, timings={}, models={})
    assert "1 member, 1 non-member;" in "\n".join(to_text(metrics_table(one.to_dict(), terminal=True)))
