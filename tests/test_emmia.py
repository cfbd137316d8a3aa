"""EM-MIA (`emmia`, SPEC 3e): the N x N conditional scores against plain transformers forwards
of [start] + x_j + x_i (prefixes cut to a short context counted by hand), the EM loop against
numbers worked out by hand and against a transcription of the authors' emmia.py:17-21,
103-117 written here (sklearn's roc_curve and auc, scipy's kendalltau and rankdata), Kendall's
tau-b and the rank distance against pair counting written here; batch 1 against 16; the
statistics cache; labels never read; the cap (one sentence with the cost, through the CLI)
and the seeded sample; an end-to-end `pddkit run` on unlabelled data; the openai backend."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl
from tiny_models import save_word_gpt2

from pddkit.errors import PddkitError
from pddkit.methods.emmia import em_scores, prefix_scores

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "runs", "far",
         "away"]


def _texts(n: int, seed: int = 0, long: int = 0) -> list[str]:
    """Distinct texts of 5-12 words and a numbered word; `long` of them have 30 words."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=30 if i < long else int(rng.integers(5, 13))))
            + f" n{i}" for i in range(n)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random one-layer GPT-2 with a 128-token context and a BPE that knows the words."""
    return save_word_gpt2(tmp_path_factory.mktemp("emmia") / "tiny", WORDS)


@pytest.fixture(scope="module")
def lm(tiny):
    from pddkit.backends.hf_loading import load_model

    return load_model(str(tiny), device="cpu", dtype="float32")


def _evaluate(tiny, texts, labels, methods, **kw):
    import pddkit

    kw.setdefault("n_bootstrap", 10)
    return pddkit.evaluate(texts, labels, str(tiny), methods=methods, device="cpu",
                           dtype="float32", blind=False, **kw)


# ---------------------------------------------------------------- written here, independently


def _plain_mean_logp(lm, ids: list[int], scored_from: int) -> float:
    """Mean log p(seq[t + 1] | seq[:t + 1]) over t >= scored_from, seq = [0] + ids (the tiny
    model's start token is 0, its BOS), one unbatched float32 forward, log-softmax in float64."""
    import torch

    seq = [0, *ids]
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(torch.tensor([seq])).logits[0].double(), -1)
    return float(np.mean([logp[t, seq[t + 1]].item() for t in range(scored_from, len(seq) - 1)]))


def _authors_em(R: np.ndarray, init: np.ndarray, iters: int, metric: str,
                snap: bool = False) -> np.ndarray:
    """emmia.py:17-21 and 103-117 transcribed: calc_auc(x, y) = auc(*roc_curve(y, x)[:2])
    (eval.py:18-19) with labels y > median(y); kendalltau(x, y).statistic; RankDist; the
    membership scores -prefix_scores with NaN set to 0, the init's NaN set to 0 first.
    `snap`: each prefix score rounded to 12 decimals, so that two texts whose AUCs are the
    same fraction get the same float (the trapezoids over sklearn's ROC points leave them
    unequal in the last bit, which decides on which side of the median such a tie falls:
    docs/methods/emmia.md, differences)."""
    from scipy.stats import kendalltau, rankdata
    from sklearn.metrics import auc, roc_curve

    def calc_auc(scores, labels):
        return auc(*roc_curve(labels, scores)[:2])

    fn = {"auc": lambda x, y: calc_auc(x, y > np.median(y)),
          "kendall": lambda x, y: kendalltau(x, y).statistic,
          "rankdist": lambda x, y: 1. - np.abs(rankdata(x, axis=-1) - rankdata(y, axis=-1)).mean()
          / (x.shape[-1] - 1)}[metric]
    m = np.array(init, dtype=np.float64)
    m[np.isnan(m)] = 0
    with warnings.catch_warnings():  # one class after the median split: sklearn warns, NaN
        warnings.simplefilter("ignore")
        for _ in range(iters):
            p = np.array([fn(R[idx], m) for idx in range(len(R))])
            p = np.round(p, 12) if snap else p
            m = -p
            m[np.isnan(m)] = 0
    return m


def _avg_ranks(a) -> np.ndarray:
    """1 + how many are smaller + (how many are equal - 1) / 2, by counting."""
    a = list(a)
    return np.array([1 + sum(b < x for b in a) + (sum(b == x for b in a) - 1) / 2 for x in a])


def _tau_b(x, y) -> float:
    """Kendall's tau-b by counting pairs: (C - D) / sqrt((P - Tx)(P - Ty))."""
    c = d = tx = ty = 0
    n = len(x)
    for i in range(n):
        for k in range(i + 1, n):
            dx, dy = np.sign(x[i] - x[k]), np.sign(y[i] - y[k])
            tx += dx == 0
            ty += dy == 0
            c += dx * dy > 0
            d += dx * dy < 0
    pairs = n * (n - 1) / 2
    den = np.sqrt((pairs - tx) * (pairs - ty))
    return float("nan") if den == 0 else (c - d) / den


# ---------------------------------------------------------------- the EM loop


@pytest.mark.slow
def test_the_em_loop_on_a_hand_made_matrix_worked_out_by_hand():
    R = np.array([[0.9, 0.8, 0.7, 0.6], [0.6, 0.7, 0.8, 0.9], [0.9, 0.6, 0.8, 0.7],
                  [0.7, 0.7, 0.7, 0.6]])
    s0 = np.array([4.0, 3.0, 2.0, 1.0])  # median 2.5: texts 0, 1 called members
    # row 0 ranks both members above both others: AUC 1; row 1 below: 0; row 2: 0.9 beats
    # 0.8 and 0.7, 0.6 beats neither: 2/4; row 3: each 0.7 ties 0.7 (1/2) and beats 0.6: 3/4
    np.testing.assert_array_equal(prefix_scores(R, s0, "auc"), [1.0, 0.0, 0.5, 0.75])
    np.testing.assert_array_equal(em_scores(R, s0, 1, "auc"), [-1.0, 0.0, -0.5, -0.75])
    # s1 = [-1, 0, -0.5, -0.75], median -0.625: members 1 and 2; row 0 {0.8, 0.7} against
    # {0.9, 0.6}: 2/4; row 1 {0.7, 0.8} against {0.6, 0.9}: 2/4; row 2 {0.6, 0.8} against
    # {0.9, 0.7}: 1/4; row 3 {0.7, 0.7} against {0.7, 0.6}: 3/4
    np.testing.assert_array_equal(em_scores(R, s0, 2, "auc"), [-0.5, -0.5, -0.25, -0.75])
    # every score equal: no text above the median, one class, AUC NaN, every score 0
    np.testing.assert_array_equal(em_scores(R, np.ones(4), 3, "auc"), np.zeros(4))
    # a NaN init counts as 0 (emmia.py:104): [nan, 3, 2, 1] is [0, 3, 2, 1], median 1.5
    np.testing.assert_array_equal(em_scores(R, np.array([np.nan, 3, 2, 1]), 1, "auc"),
                                  em_scores(R, np.array([0.0, 3, 2, 1]), 1, "auc"))


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["auc", "kendall", "rankdist"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_em_loop_is_the_authors_on_random_matrices_with_ties(metric, seed):
    rng = np.random.default_rng(seed)
    n = 9 + seed * 6
    R = np.round(rng.normal(1.0, 0.05, size=(n, n)), 2)  # rounded: ties within rows
    R[seed] = 1.0  # a constant row: Kendall NaN -> 0
    init = rng.normal(size=n)
    init[1] = np.nan
    # AUC by average ranks (Mann-Whitney) against sklearn's trapezoids over the ROC points,
    # Kendall's statistic against scipy's: the same rationals to a few float64 roundings of
    # values <= 1 (~1e-16 each); 1e-12 leaves a wide margin, and a flipped median split would
    # be an error of order 1/n, not 1e-12. One iteration: the authors' code as it is
    np.testing.assert_allclose(em_scores(R, init, 1, metric), _authors_em(R, init, 1, metric),
                               rtol=0, atol=1e-12)
    for iters in (3, 10):  # later iterations split at the median: equal fractions snapped
        # the snap moves each score by <= 5e-13, and pddkit's are exact to 1e-16: 1e-11
        np.testing.assert_allclose(em_scores(R, init, iters, metric),
                                   _authors_em(R, init, iters, metric, snap=True),
                                   rtol=0, atol=1e-11)


def test_kendall_and_rankdist_against_counting_pairs_and_ranks():
    rng = np.random.default_rng(5)
    R = np.round(rng.normal(size=(6, 11)), 1)
    s = np.round(rng.normal(size=11), 1)
    # exact counts in float64: atol 1e-12 as above
    np.testing.assert_allclose(prefix_scores(R, s, "kendall"), [_tau_b(r, s) for r in R],
                               rtol=0, atol=1e-12)
    want = [1 - np.abs(_avg_ranks(r) - _avg_ranks(s)).mean() / 10 for r in R]
    np.testing.assert_allclose(prefix_scores(R, s, "rankdist"), want, rtol=0, atol=1e-12)


# ---------------------------------------------------------------- R from the model


def _pair_matrix(lm, texts, batch_size: int, max_length: int | None = None):
    from pddkit.backends.hf import HFBackend
    from pddkit.engine.emmia_pass import pair_matrix
    from pddkit.engine.executors import LocalExecutor
    from pddkit.engine.pass_context import PassContext

    backend = HFBackend(lm, batch_size=batch_size, max_length=max_length)
    ex = LocalExecutor()
    names = [f"text {i}" for i in range(len(texts))]
    ctx = PassContext(texts=list(texts), names=names, ids=names, calls=(), config=None,
                      target=backend, executor=ex, load_backend=None)
    ctx.fields["target"] = ex.token_stats(backend, texts, names, "target pass")
    R, counts = pair_matrix(ctx)
    return R, counts, ctx


def test_r_is_the_ratio_of_plain_forwards_with_prefixes_cut_to_a_short_context(lm):
    texts = _texts(6, seed=1, long=1)
    limit = 20  # max_length: [start] + prefix + text within 20 tokens
    R, counts, ctx = _pair_matrix(lm, texts, 4, max_length=limit)
    ids = [st.ids.tolist() for st in ctx.fields["target"]]
    assert len(ids[0]) == limit - 1 and ctx.fields["target"][0].truncated  # the long text, cut
    want = np.empty_like(R)
    cut = no_room = 0
    for i, x in enumerate(ids):
        own = _plain_mean_logp(lm, x, 0)  # SPEC 2: x_1 predicted from the start token
        for j, p in enumerate(ids):
            keep = min(len(p), limit - 1 - len(x))  # the prefix's last tokens that fit
            if keep <= 0:
                want[j, i], no_room = 1.0, no_room + 1
                continue
            cut += keep < len(p)
            # the same n_i tokens of x_i, the first predicted from the prefix's last token
            want[j, i] = _plain_mean_logp(lm, p[len(p) - keep:] + x, keep) / own
    assert no_room >= len(ids) and cut > 0  # the long text has no room; some prefixes were cut
    np.testing.assert_array_equal(R[:, 0], 1.0)  # the long text: an empty prefix, R = 1
    assert (counts["pairs_without_room"], counts["pairs_prefix_cut"]) == (no_room, cut)
    # float32 forwards, batched with a shared cache against one unbatched pass: logits agree to
    # ~1e-6 relative, so the mean log-probabilities (~-4.6, a 100-token vocabulary) to ~5e-6 and
    # their ratio to ~2e-6 relative; 2e-5 leaves a factor of 10
    np.testing.assert_allclose(R, want, rtol=2e-5)
    assert counts["conditional_passes"] == 36 and counts["tokens"] == 6 * sum(map(len, ids))


@pytest.mark.slow
def test_r_is_the_same_for_batch_1_and_16(lm):
    texts = _texts(10, seed=2)
    one, _, _ = _pair_matrix(lm, texts, 1)
    many, _, _ = _pair_matrix(lm, texts, 16)
    # float32 forwards padded to different widths: ~1e-6 relative (as above); 1e-5
    np.testing.assert_allclose(one, many, rtol=1e-5)


@pytest.mark.slow
def test_scores_are_the_same_for_batch_1_and_16_and_follow_from_r(tiny, lm):
    texts = _texts(10, seed=2)
    labels = [i % 2 for i in range(10)]
    a = _evaluate(tiny, texts, labels, "emmia,minkpp", batch_size=1)
    b = _evaluate(tiny, texts, labels, "emmia,minkpp", batch_size=16)
    # the EM scores are AUCs (multiples of 1/25 here): equal unless R's 1e-6 noise swaps two
    # values of a row, which these texts' R (spread ~1e-2) does not
    np.testing.assert_array_equal(a.scores()["emmia"], b.scores()["emmia"])
    R, _, _ = _pair_matrix(lm, texts, 8)
    # the authors' loop on this R, equal AUC fractions snapped (see _authors_em): 1e-11 as in
    # the loop's own test
    np.testing.assert_allclose(a.scores()["emmia"],
                               _authors_em(R, a.scores()["minkpp"], 10, "auc", snap=True),
                               rtol=0, atol=1e-11)


# ---------------------------------------------------------------- runs


@pytest.mark.slow
def test_labels_are_never_read(tiny):
    import pddkit

    texts = _texts(10, seed=3)
    methods = "emmia:iters=3,emmia:prefix_score=kendall,emmia:init=loss"
    one = _evaluate(tiny, texts, [i % 2 for i in range(10)], methods)
    other = _evaluate(tiny, texts, [int(i < 5) for i in range(10)], methods)
    none = pddkit.score(texts, str(tiny), methods=methods, device="cpu", dtype="float32")
    assert len(one.scores()) == 3
    for label, s in one.scores().items():
        np.testing.assert_array_equal(other.scores()[label], s)
        np.testing.assert_array_equal(none[label], s)


def test_a_rerun_with_the_cache_computes_no_pair(tiny, tmp_path):
    texts, labels = _texts(8, seed=4), [i % 2 for i in range(8)]
    first = _evaluate(tiny, texts, labels, "emmia", cache=str(tmp_path / "c"))
    assert first.counts["cache"]["emmia pair pass"] == {"hits": 0, "misses": 64}
    again = _evaluate(tiny, texts, labels, "emmia:prefix_score=rankdist,emmia",
                      cache=str(tmp_path / "c"))
    assert again.counts["cache"]["emmia pair pass"] == {"hits": 64, "misses": 0}
    assert again.counts["cache"]["target pass"]["misses"] == 0
    np.testing.assert_array_equal(again.scores()["emmia:init=minkpp,iters=10,prefix_score=auc,"
                                                 "max_texts=200,subset=False"],
                                  first.scores()["emmia"])


def test_bad_values_are_one_sentence(tiny):
    texts, labels = _texts(6), [i % 2 for i in range(6)]
    for spec, msg in (("emmia:iters=0", "iters must be a whole number of at least 1, not 0"),
                      ("emmia:prefix_score=tau", "prefix_score must be one of auc, kendall, "
                                                 "rankdist, not 'tau'"),
                      ("emmia:init=ref", "init must name a single-pass method (gapk, loss, maxk, "
                                         "mink, minkpp, surp, zlib), not 'ref' (ref needs a "
                                         "reference model)"),
                      ("emmia:init=nope", "init must name a single-pass method (gapk, loss, "
                                          "maxk, mink, minkpp, surp, zlib), not 'nope'"),
                      ("emmia:max_texts=1", "max_texts must be a whole number of at least 2")):
        with pytest.raises(PddkitError, match=f"method {spec.split(':')[0]}: " + _re(msg)):
            _evaluate(tiny, texts, labels, spec)


def _re(text: str) -> str:
    import re

    return re.escape(text)


def test_more_texts_than_the_cap_is_one_line_with_the_cost(tiny, tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in _texts(12)])
    code, _, err = run_cli(capsys, "run", "--model", tiny, "--data", data, "--methods",
                           "emmia:max_texts=10", "--output", tmp_path / "out", "--no-report",
                           "--no-blind", "--device", "cpu")
    assert code == 1
    assert err.count("pddkit: error:") == 1 and err.splitlines()[-1] == (
        "pddkit: error: method emmia on 12 texts would run 144 conditional passes (each text "
        "given each of the 12: about 12 times the tokens of the target pass), more than its cap "
        "max_texts=10 allows: raise the cap (emmia:max_texts=12) to pay that, or score a seeded "
        "sample of 10 texts (emmia:subset=true)")
    assert not (tmp_path / "out" / "scores.jsonl").exists()


def test_a_subset_is_a_seeded_sample_counted_and_listed(tiny, tmp_path, capsys):
    texts = _texts(12)
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": f"t{i}", "text": t} for i, t in enumerate(texts)])
    outs = []
    for k in range(2):
        out = tmp_path / f"out{k}"
        code, _, err = run_cli(capsys, "run", "--model", tiny, "--data", data, "--methods",
                               "emmia:max_texts=8,subset=true,loss", "--output", out,
                               "--no-report", "--no-blind", "--device", "cpu", "--seed", "3")
        assert code == 0, err
        outs.append(out)
    rows = [json.loads(x) for x in (outs[0] / "scores.jsonl").read_text().splitlines()]
    left = [json.loads(x) for x in (outs[0] / "emmia_left_out.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and len(left) == 4
    assert sorted([r["id"] for r in rows] + [r["id"] for r in left]) == sorted(f"t{i}" for i in range(12))
    saved = json.loads((outs[0] / "results.json").read_text())
    assert saved["counts"]["emmia_sample"] == {"texts_given": 12, "scored": 8, "left_out": 4,
                                               "max_texts": 8, "seed": 3}
    assert saved["counts"]["emmia"]["conditional_passes"] == 64
    assert any("a seeded sample of 8 is scored" in n for n in saved["notices"])
    assert (outs[1] / "scores.jsonl").read_text() == (outs[0] / "scores.jsonl").read_text()


def test_pddkit_run_on_unlabelled_data_end_to_end(tiny, tmp_path, capsys):
    texts = _texts(9, seed=6)
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": f"t{i}", "text": t} for i, t in enumerate(texts)])
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", "--model", tiny, "--data", data, "--methods",
                           "emmia:init=zlib,zlib", "--output", out, "--no-report", "--no-blind",
                           "--device", "cpu")
    assert code == 0, err
    assert "emmia: 9 texts: 81 conditional passes over" in err  # the cost, before the passes
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"t{i}" for i in range(9)]
    s = np.array([r["emmia"] for r in rows])
    assert np.isfinite(s).all() and s.std() > 0
    saved = json.loads((out / "results.json").read_text())
    assert saved["counts"]["emmia"]["texts"] == 9 and "emmia_pairs_pass" in saved["timings_s"]
    assert saved["methods"]["emmia"]["metrics"] is None  # no labels, no metrics
    assert saved["methods"]["emmia"]["params"]["init"] == "zlib"


def test_labelled_windows_with_calibration_held_out(tiny):
    """The sandbox's shape: a calibrated method beside emmia holds 30% out; emmia scores the
    rest only."""
    texts = _texts(20, seed=7)
    res = _evaluate(tiny, texts, [i % 2 for i in range(20)], "emmia:init=loss,acmia")
    assert res.counts["emmia"]["texts"] == len(res.ids) == 20 - res.counts["calibration"]["texts"]


@pytest.mark.slow
def test_the_openai_backend_gives_the_hf_backend_scores(tiny, lm, tmp_path):
    from openai_server import FakeOpenAIServer

    import pddkit

    texts, labels = _texts(8, seed=8), [i % 2 for i in range(8)]
    local = _evaluate(tiny, texts, labels, "emmia:init=loss,emmia:init=loss,prefix_score=kendall")
    with FakeOpenAIServer(lm.model, name="tiny", tokenizer=lm.tokenizer, max_model_len=128) as server:
        kw = dict(backend="openai", api_base=server.api_base, api_key_env=None,
                  tokenizer=str(tiny), n_bootstrap=10, blind=False)
        far = pddkit.evaluate(texts, labels, "tiny",
                              methods="emmia:init=loss,emmia:init=loss,prefix_score=kendall", **kw)
        with pytest.raises(PddkitError, match=r"method emmia: its init method cannot run on this "
                                              r"backend .*minkpp.*; pass another init"):
            pddkit.evaluate(texts, labels, "tiny", methods="emmia", **kw)
    # the server's unbatched float32 forwards against the shared cache: R to ~1e-6 relative
    # (as above), far below the gaps between a row's values that the ranks read
    for label, s in local.scores().items():
        np.testing.assert_array_equal(far.scores()[label], s)
    assert far.counts["emmia"]["conditional_passes"] == 64


@pytest.mark.slow
def test_the_ray_engine_runs_the_pairs_as_the_local_engine(tiny, tmp_path, local_ray):
    texts, labels = _texts(6, seed=9), [i % 2 for i in range(6)]
    local = _evaluate(tiny, texts, labels, "emmia:init=loss")
    far = _evaluate(tiny, texts, labels, "emmia:init=loss", engine="ray", actors=1,
                    cache=str(tmp_path / "cache"))
    assert far.counts["cache"]["emmia pair pass"] == {"hits": 0, "misses": 36}
    # the actor's float32 pass against the local one: R to ~1e-6 relative, far below the
    # gaps between a row's values that the ranks read: the same AUCs
    np.testing.assert_array_equal(far.scores()["emmia"], local.scores()["emmia"])
