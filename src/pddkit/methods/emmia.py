"""EM-MIA (Kim et al., "Detecting Training Data of Large Language Models via Expectation
Maximization", EACL 2026, arXiv 2410.07582; the authors' code gyuwankim/em-mia at c0ee78b,
`emmia.py`, `run.py`, `modeling_utils.py`): label-free. Every text is used as a ReCaLL
prefix for every text, R[j, i] = LL(x_i | x_j) / LL(x_i); starting from any single-pass
method's scores s, each iteration scores every text as a prefix by how well its row R[j, .]
ranks the texts that s currently calls members (p_j), and the texts' new scores are -p_j.

Where the cross-text computation lives. A method is a pure function of one text's
Observation; EM-MIA's score of a text depends on every text of the run. So the work is split:
- engine/emmia_pass.py, the provider of Need.PAIRS, computes R through the run's executor and
  statistics cache (each text's key/value cache computed once as a prefix and expanded across
  the batch of targets: backends/prefix_pass.py), the init method's scores on the same
  target statistics, and runs `em_scores` (below) once per distinct (init, iters,
  prefix_score); it fills Observation.emmia of every text with its result;
- this module holds the mathematics, pure numpy functions of R and s (`prefix_scores`,
  `em_scores`), tested against a transcription of emmia.py, and the registered method,
  which reads the text's own entry of Observation.emmia.
Nothing here or there reads a label: the texts under test may be unlabelled.

Cost: N^2 conditional passes over the texts' tokens (N per text), the N prefixes' caches
computed once each, plus the init method (the target pass it shares); the EM loop is CPU
work on the N x N matrix (at N = 200, under a second; seconds with `kendall`, one
`kendalltau` per row). `max_texts` caps N; above it a run is refused with its cost in one
sentence, or, with `subset=true`, scores a seeded uniform sample of `max_texts` texts
(engine/emmia_pass.py `emmia_texts`: the texts left out are counted in results.json and
listed in emmia_left_out.jsonl). Every difference from the authors' code, marked by whether
it changes scores: docs/methods/emmia.md.
"""

from __future__ import annotations

import numpy as np

from pddkit.errors import PddkitError
from pddkit.methods.base import Need, register_method
from pddkit.stats import Observation

PREFIX_SCORES = ("auc", "kendall", "rankdist")  # emmia.py:17-21 (AUC-ROC, Kendall-Tau, RankDist)
# 200 texts: 40,000 conditional passes, 200 times the target pass's tokens, and about 40,000
# cache entries; the module docstring and docs/methods/emmia.md say why this default
MAX_TEXTS = 200


def em_key(init: str, iters: int, prefix_score: str) -> tuple:
    """The key of Observation.emmia: what the EM result depends on (max_texts and subset
    decide which texts are scored, not how)."""
    return (str(init), int(iters), str(prefix_score))


def single_pass_methods() -> list[str]:
    """The registered methods that need nothing beyond the target pass, with their defaults."""
    from pddkit.methods.base import METHODS, MethodCall

    return sorted(s.name for s in METHODS if s.reads_target and s.name != "emmia"
                  and not MethodCall(s, dict(s.defaults)).needs)


def check_init(init: str) -> None:
    """`init` must name a registered method that needs nothing beyond the target pass
    (a single-pass method: its scores come from the statistics EM-MIA's pass already has)."""
    from pddkit.methods.base import METHODS, MethodCall

    names = single_pass_methods()
    if init in names:
        return
    spec = next((s for s in METHODS if s.name == init), None)
    needs = [] if spec is None else sorted(MethodCall(spec, dict(spec.defaults)).needs)
    why = f" ({init} needs {needs[0].with_article})" if needs else ""
    raise PddkitError(f"init must name a single-pass method ({', '.join(names)}), "
                      f"not {init!r}{why}")


def _check(init, iters, prefix_score, max_texts, subset) -> None:
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 1:
        raise PddkitError(f"iters must be a whole number of at least 1, not {iters!r}")
    if prefix_score not in PREFIX_SCORES:
        raise PddkitError(f"prefix_score must be one of {', '.join(PREFIX_SCORES)}, "
                          f"not {prefix_score!r}")
    if isinstance(max_texts, bool) or not isinstance(max_texts, (int, np.integer)) or max_texts < 2:
        raise PddkitError(f"max_texts must be a whole number of at least 2, not {max_texts!r}")
    if not isinstance(subset, bool):
        raise PddkitError(f"subset must be true or false, not {subset!r}")
    check_init(str(init))


def _average_ranks(a: np.ndarray) -> np.ndarray:
    """Ranks 1..N along the last axis, ties sharing their average (scipy.stats.rankdata)."""
    from scipy.stats import rankdata

    return rankdata(a, axis=-1)


def prefix_scores(R: np.ndarray, s: np.ndarray, how: str) -> np.ndarray:
    """p_j for every prefix j (row of R) against the current scores s (emmia.py:17-21, 112):
    `auc`: the AUC of R[j, .] against y = 1[s > median(s)] (NaN when y holds one class),
    `kendall`: Kendall's tau-b of R[j, .] and s (NaN when either is constant),
    `rankdist`: 1 - mean |rank R[j, .] - rank s| / (N - 1). NaN is left for the caller."""
    R = np.asarray(R, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    n = s.shape[0]
    if how == "auc":
        y = s > np.median(s)
        pos = int(y.sum())
        if pos in (0, n):
            return np.full(R.shape[0], np.nan)
        ranks = _average_ranks(R)  # Mann-Whitney: the AUC with ties counted one half
        return (ranks[:, y].sum(axis=1) - pos * (pos + 1) / 2) / (pos * (n - pos))
    if how == "kendall":
        import warnings

        from scipy.stats import kendalltau

        with warnings.catch_warnings():  # a constant row: NaN, and scipy says so
            warnings.simplefilter("ignore")
            return np.array([kendalltau(row, s).statistic for row in R], dtype=np.float64)
    if how == "rankdist":
        return 1.0 - np.abs(_average_ranks(R) - _average_ranks(s)).mean(axis=1) / (n - 1)
    raise PddkitError(f"prefix_score must be one of {', '.join(PREFIX_SCORES)}, not {how!r}")


def em_scores(R: np.ndarray, init: np.ndarray, iters: int, how: str) -> np.ndarray:
    """EM-MIA's membership scores (emmia.py:103-117): s = init with NaN set to 0; `iters`
    times, s = -prefix_scores(R, s), NaN set to 0. R[j, i] = LL(x_i | x_j) / LL(x_i)."""
    s = np.array(init, dtype=np.float64)
    s[np.isnan(s)] = 0.0
    for _ in range(int(iters)):
        s = -prefix_scores(R, s, how)
        s[np.isnan(s)] = 0.0
    return s


@register_method("emmia", needs=(Need.PAIRS,), requires=("first_token",),
                 paper="Kim et al. 2026", named_only=True,
                 cost="+N passes over the texts, each text given each of the N as its prefix "
                      "(N^2 in all; each prefix's cache once; N capped by max_texts)",
                 summary="EM-MIA: ReCaLL of every text given every other, refined by "
                         "expectation-maximisation from an init method; needs no labels")
def emmia(obs: Observation, *, init: str = "minkpp", iters: int = 10, prefix_score: str = "auc",
          max_texts: int = MAX_TEXTS, subset: bool = False) -> float:
    """The text's score after `iters` EM-MIA iterations from the scores of `init` (a
    single-pass method, by name), prefixes scored by `prefix_score` (auc, kendall,
    rankdist); computed for all texts at once by engine/emmia_pass.py (module docstring).
    `max_texts` caps how many texts a run scores (N^2 conditional passes); above it the run
    is refused with its cost, or with `subset=true` a seeded sample of `max_texts` texts is
    scored and the others are counted as left out."""
    _check(init, iters, prefix_score, max_texts, subset)
    if obs.emmia is None:
        raise PddkitError("emmia needs every text's scores given every other "
                          "(engine/emmia_pass.py computes them)")
    return float(obs.emmia[em_key(init, iters, prefix_score)])
