"""Results are data, sentences are reporting's: the blind baseline's verdict and dataset
inference's verdict are numbers and an outcome code below reporting/, and
reporting/blind_verdict_text.py and reporting/dataset_inference_text.py write them as the
sentences results.json, the terminal and the reports show (results.json unchanged: the blind
verdict's `message` after its numbers, before its per-subset verdicts)."""

import json

import numpy as np
import pytest

from pddkit.blind.verdict import NO_SHIFT, SMALL_SHIFT, WARN, BlindVerdict
from pddkit.evaluation.metrics import compute_metrics
from pddkit.evaluation.results import MethodResult, RunResult
from pddkit.reporting.blind_verdict_text import blind_sentence
from pddkit.reporting.dataset_inference_text import verdict_sentence
from pddkit.reporting.run_files import results_json, write_results
from pddkit.studies.dataset_inference import (
    INCONCLUSIVE,
    LESS_FAMILIAR,
    NO_EVIDENCE,
    USED,
    Decision,
    SetTest,
)

HEAD = ("the blind baseline (no model, text features only) reaches AUC 0.812 on 20 member and "
        "21 non-member texts (95% interval allowing for the classifier's refitting on every "
        "fold [0.600, 0.900])")


def _verdict(**kw) -> BlindVerdict:
    fields = {"auc": 0.8123, "low": 0.6, "high": 0.9, "p": 0.0004, "n_members": 20,
              "n_nonmembers": 21, "unit": "texts", "warn": True, "shift": True}
    return BlindVerdict(**{**fields, **kw})


def test_each_blind_outcome_reads_as_written_by_hand():
    warn = _verdict(sample={"texts": 1500, "of": 20000})
    assert warn.outcome == WARN
    assert blind_sentence(warn) == (
        "Warning: " + HEAD + " (fitted on a stratified sample of 1,500 of the 20,000 texts: "
        "out-of-fold there, the others scored by a model fitted on the whole sample): above "
        "chance (p = 4.0e-04): members and non-members differ without the model (a "
        "distribution shift in what the texts say or how they are written), so the other "
        "AUCs here prove little.")
    small = _verdict(p=0.02, warn=False)
    assert small.outcome == SMALL_SHIFT
    assert blind_sentence(small) == (
        "The" + HEAD[3:] + ": above chance (p = 0.020) but below 0.55: a small shift between "
        "members and non-members; detection AUCs well above it still mean something.")
    none = _verdict(p=0.3, warn=False, shift=False)
    assert none.outcome == NO_SHIFT
    assert blind_sentence(none) == (
        "The" + HEAD[3:] + ": not above chance (p = 0.300): this baseline found no shift "
        "between members and non-members; a stronger classifier might.")


def _run(subsets: bool) -> RunResult:
    rng = np.random.default_rng(0)
    labels = np.r_[np.ones(20), np.zeros(20)].astype(int)
    scores = rng.standard_normal(40) + 2.0 * labels  # far apart: the verdict warns
    per = {"a": compute_metrics(scores[::2], labels[::2], 20), "b": None} if subsets else {}
    blind = MethodResult("blind", "blind", {}, scores, compute_metrics(scores, labels, 20), per)
    return RunResult(ids=tuple(map(str, range(40))), labels=tuple(labels.tolist()),
                     methods=(blind,), config={}, counts={"samples": 40}, timings={}, models={})


@pytest.mark.parametrize("subsets", [False, True])
def test_results_json_keeps_the_message_where_it_was(tmp_path, subsets):
    r = _run(subsets)
    data = r.to_dict()["blind_baseline"]
    assert "message" not in data  # the result is data
    numbers = ["auc", "interval", "p", "n_members", "n_nonmembers", "unit", "shift", "warn"]
    assert list(data) == numbers + (["subsets"] if subsets else [])
    written = json.loads((write_results(r, tmp_path) / "results.json").read_text())
    blind = written["blind_baseline"]
    assert list(blind) == numbers + ["message"] + (["subsets"] if subsets else [])
    assert blind["message"] == blind_sentence(r.blind) and blind["warn"]
    assert blind["message"].startswith("Warning: the blind baseline")
    assert written == json.loads(json.dumps(results_json(r)))


def _set_test(p: float) -> SetTest:
    return SetTest(p, 0.0, {}, 0.0, {}, (1, 1), (1, 1), np.zeros(1), np.zeros(1))


OPENINGS = {USED: "Used in training:", NO_EVIDENCE: "No evidence of training",
            INCONCLUSIVE: "Inconclusive:", LESS_FAMILIAR: "No evidence of training"}


@pytest.mark.parametrize("p", [0.01, 0.2])
@pytest.mark.parametrize("check_p", [None, 0.01, 0.2])
@pytest.mark.parametrize("less_p", [None, 0.01, 0.3])
def test_the_dataset_inference_outcome_is_the_verdict_the_sentence_states(p, check_p, less_p):
    alpha = 0.05
    d = Decision(_set_test(p), None if check_p is None else _set_test(check_p), (), (), alpha,
                 p < alpha and (check_p is None or check_p >= alpha), less_p)
    # the rule, by hand: not significant with the mirrored test significant -> less familiar;
    # significant with the check significant -> inconclusive; significant -> used
    want = (LESS_FAMILIAR if p >= alpha and less_p is not None and less_p < alpha else
            INCONCLUSIVE if p < alpha and check_p is not None and check_p < alpha else
            USED if p < alpha else NO_EVIDENCE)
    assert d.outcome == want
    assert d.verdict == verdict_sentence(p, check_p, alpha, less_p)
    assert d.verdict.startswith(OPENINGS[want])
    assert ("LESS familiar" in d.verdict) == (want == LESS_FAMILIAR)
