"""ACMIA (`acmia`, SPEC 3e): the tempered sums of the statistics pass against numpy written
here (softmax, logsumexp, the authors' mu and sigma of log q, their scoring of
Main_file.py:245-278), on hand-made logits and on a tiny model's plain transformers
forward; batch 1 against 16; beta chosen on calibration data only (the calibration texts
never in scores.jsonl, the chosen beta in results.json); the statistics cache; an
overlapping --calibration refused; no beta and no labelled calibration data: one sentence;
the openai backend skipping acmia."""

from __future__ import annotations

import contextlib
import copy
import json

import numpy as np
import pytest
from cli_helpers import run_cli, write_jsonl
from rounding import EPS32, ROUNDING_FACTOR, float64_default

import pddkit
from pddkit.engine.plan import Resources, make_plan
from pddkit.errors import PddkitError
from pddkit.methods import METHODS
from pddkit.stats import Observation, TokenStats

BETAS = [0.0] + [2.0 ** (0.1 * k) for k in range(-25, 26)]  # com_pro_dis.py:220-224
F32_MAX = float(np.finfo(np.float32).max)


# ---------------------------------------------------------------- numpy, written here


def log_softmax(x: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in x's own dtype: x - max - log(sum exp(x - max))."""
    z = x - x.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def per_token(logits: np.ndarray, ids) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The authors' per-token arrays (com_pro_dis.py:149-207), in logits' dtype: L [n], and
    per b [52, n] the tempered log-probability of x_i, mu = sum q log q and
    sigma = sqrt(sum q (log q - mu)^2) with log q = log_softmax(b log p)."""
    logp = log_softmax(logits)  # [n, V]
    rows = np.arange(len(ids))
    L = logp[rows, ids]
    Lb, mu, sigma = [], [], []
    for b in BETAS:
        lq = log_softmax(logp * logits.dtype.type(b))  # [n, V]
        q = np.exp(lq)
        m = (q * lq).sum(-1)
        Lb.append(lq[rows, ids])
        mu.append(m)
        sigma.append(np.sqrt((q * (lq - m[:, None]) ** 2).sum(-1)))
    return L, np.array(Lb), np.array(mu), np.array(sigma)


def tempered_means(logits: np.ndarray, ids) -> tuple[float, np.ndarray]:
    """(mean_F L, [2, 52]: mean_F L^b and mean_F of the normac term), float64 means of the
    per-token arrays; F by numpy.unique as Main_file.py:190."""
    L, Lb, mu, sigma = (a.astype(np.float64) for a in per_token(logits, ids))
    F = np.unique(np.asarray(ids), return_index=True)[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = np.clip(np.nan_to_num((Lb - mu) / (sigma + 1e-10), nan=0), -F32_MAX, F32_MAX)
    return float(L[F].mean()), np.stack([Lb[:, F].mean(1), norm[:, F].mean(1)])


def authors_scores(mean_L: float, T: np.ndarray) -> dict[str, list]:
    """Main_file.py:259-278 on means over F: Ref_Temp (ac), Temp_diff (derivac),
    Normal_Temp (normac), per grid index (None where the authors compute none)."""
    n = len(BETAS)
    ac, deriv, norm = [], [None], [None]
    for i in range(n):
        if i > 0:
            deriv.append(T[0, i] - T[0, i - 1])
            norm.append(T[1, i])
        diff = T[0, i] - mean_L
        ac.append(-diff if i <= n // 2 else diff)
    return {"ac": ac, "derivac": deriv, "normac": norm}


# ---------------------------------------------------------------- the pass on hand-made logits


def test_tempered_chunk_equals_numpy_on_hand_made_logits():
    import torch

    from pddkit.backends.tempered_stats import tempered_chunk

    rng = np.random.default_rng(0)
    V = 11
    logits = rng.normal(0.0, 3.0, (9, V))
    logits[3] = 0.0  # uniform: sigma is 0 at every b
    logits[4, 2] = 40.0  # near one-hot: q one-hot at large b
    ids = np.array([2, 5, 2, 7, 2, 0, 10, 10, 1])
    Lb, norm = (a.double().numpy() for a in tempered_chunk(
        torch.tensor(logits, dtype=torch.float32), torch.tensor(ids)))  # [9, 52]
    _, want_Lb, mu, sigma = per_token(logits, ids)  # float64
    # Lb = b (L - Lmax) - log S in float32: each term within a few float32 spacings of values
    # below 40 * 5.66 = 230 (b L with L >= -80 at most 460): 2^-23 * 460 * 4 = 2.2e-4
    np.testing.assert_allclose(Lb, want_Lb.T, rtol=0, atol=2.2e-4)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.clip(np.nan_to_num((want_Lb - mu) / (sigma + 1e-10), nan=0), -F32_MAX, F32_MAX).T
    # where sigma is not tiny, the normalised term is a ratio of float32 numbers: the
    # numerator within 2.2e-4 (as Lb), sigma = b sd within 4 spacings relative: 1e-3
    # relative to |value| + 2.2e-4 / sigma; where sigma < 1e-3 (q one-hot) both divide
    # float32 residues by ~1e-10 and only the sign and the b = 0 value are defined
    ok = sigma.T > 1e-3
    np.testing.assert_allclose(norm[ok], want[ok], rtol=1e-3,
                               atol=2.2e-4 / 1e-3)
    assert np.all(norm[:, 0] == 0.0)  # b = 0: (L^0 - mu^0) is exactly 0 in both
    assert np.all(norm[3] == 0.0)  # uniform logits: L^b = mu^b at every b
    assert np.isfinite(norm).all()


# ---------------------------------------------------------------- the method's formula


def stats_of(logits, ids) -> TokenStats:
    _, T = tempered_means(logits, ids)
    L = per_token(logits, ids)[0]
    return TokenStats.from_lists(ids, L, tempered=T)


def test_every_variant_and_beta_equals_the_authors_scoring():
    rng = np.random.default_rng(1)
    for n in (1, 2, 5, 30):
        logits = rng.normal(0.0, 2.5, (n, 13))
        ids = rng.integers(0, 13, n)
        st = stats_of(logits, ids)
        # the method reads mean_F L from the float32 L of TokenStats: the transcription too
        mean_L = float(st.L.astype(np.float64)[np.unique(ids, return_index=True)[1]].mean())
        want = authors_scores(mean_L, st.tempered)
        for variant, values in want.items():
            for j, w in enumerate(values):
                if w is None:
                    continue
                got = METHODS.get("acmia").fn(Observation("x", st), variant=variant, beta=BETAS[j])
                # float64 subtractions of values below 100: 1e-12
                assert got == pytest.approx(w, rel=0, abs=1e-12), (n, variant, j)


def test_ac_at_beta_one_is_zero_and_beta_is_read_from_the_grid():
    rng = np.random.default_rng(2)
    logits, ids = rng.normal(0.0, 2.0, (20, 9)), rng.integers(0, 9, 20)
    st = stats_of(logits, ids)
    fn = METHODS.get("acmia").fn
    # L^1 = L: a float32 L against a float64 one, 20 values of |L| < 15: 15 * 2^-23 * 2
    assert abs(fn(Observation("x", st), beta=1.0)) < 4e-6
    # 2^-0.5 typed to 4 digits is the grid's value 0.70711
    assert fn(Observation("x", st), beta=0.7071) == fn(Observation("x", st), beta=2 ** -0.5)
    with pytest.raises(PddkitError, match=r"^beta=0.8 is not on ACMIA's grid of 52 values .*"
                                          r"the nearest are 0.757858, 0.812252$"):
        fn(Observation("x", st), beta=0.8)
    with pytest.raises(PddkitError, match=r"^variant normac is not defined at beta=0"):
        fn(Observation("x", st), variant="normac", beta=0)


def test_the_fit_chooses_the_best_calibration_auc_ties_to_the_smaller_beta():
    from pddkit.methods.acmia import fit

    rng = np.random.default_rng(4)
    obs, labels = [], []
    for i in range(30):
        logits, ids = rng.normal(0.0, 2.0, (12, 9)), rng.integers(0, 9, 12)
        obs.append(Observation("x", stats_of(logits, ids)))
        labels.append(i % 2)
    labels = np.array(labels)
    from sklearn.metrics import roc_auc_score

    fn = METHODS.get("acmia").fn
    for variant in ("ac", "derivac", "normac"):
        aucs = [np.nan if (variant != "ac" and j == 0) else
                roc_auc_score(labels, [fn(o, variant=variant, beta=b) for o in obs])
                for j, b in enumerate(BETAS)]
        best = int(np.nanargmax(aucs))  # the first of the largest: the smaller beta
        got = fit(obs, labels, variant=variant)
        assert got.params == {"variant": variant, "beta": BETAS[best]}
        assert got.record["calibration_auc"] == pytest.approx(aucs[best], abs=1e-12)
    # all texts alike: every b ties (AUC 0.5), the smallest b wins
    same = [obs[0]] * 6
    assert fit(same, np.array([1, 0] * 3), variant="derivac").params["beta"] == BETAS[1]


def test_bad_input_is_one_sentence():
    with pytest.raises(PddkitError, match=r"^method acmia: variant must be one of ac, derivac, "
                                          r"normac, not 'x'$"):
        make_plan("acmia:variant=x,beta=1", Resources())
    with pytest.raises(PddkitError, match=r"^method acmia: beta='a' is not a number$"):
        make_plan("acmia:beta=a", Resources())
    with pytest.raises(PddkitError) as e:  # unlabelled data, no calibration file
        make_plan("acmia", Resources())
    assert str(e.value) == ("method acmia needs labelled calibration data: pass `calibration` "
                            "(a labelled table; or labelled data to hold 30% out of), or give "
                            "beta (acmia:beta=0.5)")
    no_field = TokenStats.from_lists([1, 2], [-1.0, -2.0])
    with pytest.raises(PddkitError, match="tempered log-probabilities"):
        METHODS.get("acmia").fn(Observation("x", no_field), beta=1.0)


# ---------------------------------------------------------------- a real model


def plain_means(model, start_id: int, seqs, *, float64: bool) -> list[tuple[float, np.ndarray]]:
    """Independent: the model's own forward on [start] + ids, one text at a time, logits in
    float32 (or weights and logits in float64), then tempered_means in numpy."""
    import torch

    m = copy.deepcopy(model).double().eval() if float64 else model
    out = []
    with torch.no_grad(), (float64_default() if float64 else contextlib.nullcontext()):
        for ids in seqs:
            x = torch.tensor([[start_id, *[int(t) for t in ids]]])
            logits = m(input_ids=x).logits[0, :-1]
            logits = logits.double().numpy() if float64 else logits.float().numpy()
            out.append(tempered_means(logits, np.asarray(ids)))
    return out


def tempered_bounds(model, start_id: int, seqs):
    """(float64 plain means per text, the bound per row of `tempered` and for mean_F L):
    tests/rounding.py's rule, ROUNDING_FACTOR x the plain float32-vs-float64 distance on
    these texts, at least 4 float32 spacings of the largest value."""
    p64 = plain_means(model, start_id, seqs, float64=True)
    p32 = plain_means(model, start_id, seqs, float64=False)
    rows = []
    for r in range(2):
        worst = max(float(np.abs(a[1][r] - b[1][r]).max()) for a, b in zip(p32, p64))
        spacing = EPS32 * max(float(np.abs(b[1][r]).max()) for b in p64)
        rows.append(ROUNDING_FACTOR * max(worst, spacing))
    worst_L = max(abs(a[0] - b[0]) for a, b in zip(p32, p64))
    bound_L = ROUNDING_FACTOR * max(worst_L, EPS32 * max(abs(b[0]) for b in p64))
    return p64, np.array(rows), bound_L


@pytest.mark.slow
def test_the_pass_equals_a_plain_forward_and_numpy_and_batch_1_equals_16(toy_lm, toy_world):
    from pddkit.backends.stats_pass import StatsRunner

    texts = toy_world.members[:8] + toy_world.nonmembers[:8] + ["a a a"]
    one = StatsRunner(toy_lm, batch_size=1).run_ids(
        [list(toy_lm.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts],
        tempered=True)
    many = StatsRunner(toy_lm, batch_size=16).run_ids([st.ids.tolist() for st in one],
                                                      tempered=True)
    start = toy_lm.tokenizer.eos_token_id  # GPT-2 shape: no BOS, EOS is the start token
    p64, bound, _ = tempered_bounds(toy_lm.model, start, [st.ids.tolist() for st in one])
    for a, b, (_, want) in zip(one, many, p64):
        assert a.tempered.shape == (2, 52) and a.tempered.dtype == np.float64
        for r in range(2):
            assert np.all(np.abs(a.tempered[r] - want[r]) <= bound[r]), r
            assert np.all(np.abs(a.tempered[r] - b.tempered[r]) <= bound[r]), r
    # without being asked, the pass computes none
    assert StatsRunner(toy_lm).run_ids([one[0].ids.tolist()])[0].tempered is None


@pytest.mark.slow
def test_scores_equal_the_authors_scoring_of_a_plain_forward(toy_lm, toy_world):
    texts = toy_world.members[:6] + toy_world.nonmembers[:6]
    methods = "acmia:variant=ac,beta=0.5,acmia:variant=derivac,beta=2,acmia:variant=normac,beta=2"
    got = pddkit.score(texts, toy_lm, methods=methods, batch_size=4)
    ids = [toy_lm.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    p64, bound, bound_L = tempered_bounds(toy_lm.model, toy_lm.tokenizer.eos_token_id, ids)
    for i, (mean_L, T) in enumerate(p64):
        want = authors_scores(mean_L, T)
        for label, (variant, j, allowed) in {
                "acmia:variant=ac,beta=0.5": ("ac", BETAS.index(0.5), bound_L + bound[0]),
                "acmia:variant=derivac,beta=2": ("derivac", BETAS.index(2.0), 2 * bound[0]),
                "acmia:variant=normac,beta=2": ("normac", BETAS.index(2.0), bound[1])}.items():
            assert abs(got[label][i] - want[variant][j]) <= allowed, (label, i)


@pytest.mark.slow
def test_a_run_holds_out_calibration_texts_and_chooses_beta_on_them_only(toy_lm, toy_world,
                                                                         tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [
        {"id": f"t{i}", "text": t, "label": int(i < 10)}
        for i, t in enumerate(toy_world.members[:10] + toy_world.nonmembers[:10])])
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", "acmia,loss", "--output", out, "--no-blind",
                           "--no-report", "--bootstrap", "10", "--seed", "3")
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    cal = [json.loads(x) for x in (out / "calibration.jsonl").read_text().splitlines()]
    scored = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert len(cal) == 6 and sum(r["label"] for r in cal) == 3  # 30% of each class
    assert not {r["id"] for r in cal} & {r["id"] for r in scored}
    assert len(scored) == 14 and res["counts"]["samples"] == 14
    counts = res["counts"]["calibration"]
    assert {k: counts[k] for k in ("texts", "members", "nonmembers", "source")} == {
        "texts": 6, "members": 3, "nonmembers": 3, "source": "held out 30%"}
    chosen = counts["fitted"]["acmia"]
    assert chosen["chosen"] and chosen["beta"] in BETAS
    assert res["methods"]["acmia"]["params"]["beta"] == chosen["beta"]
    # the choice, redone here on the calibration texts alone: the best AUC, the smaller beta
    from sklearn.metrics import roc_auc_score

    cal_scores = pddkit.score([r["text"] for r in cal], toy_lm, methods=",".join(
        f"acmia:beta={b}" for b in BETAS))
    assert len(cal_scores) == 52  # in the order of BETAS (labels acmia:variant=ac,beta=...)
    aucs = [roc_auc_score([r["label"] for r in cal], s) for s in cal_scores.values()]
    assert chosen["beta"] == BETAS[int(np.argmax(aucs))]
    assert chosen["calibration_auc"] == pytest.approx(max(aucs), abs=1e-12)


@pytest.mark.slow
def test_a_calibration_file_is_used_whole_and_an_overlapping_one_refused(toy_lm, toy_world,
                                                                         tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [
        {"id": f"t{i}", "text": t, "label": int(i < 6)}
        for i, t in enumerate(toy_world.members[:6] + toy_world.nonmembers[:6])])
    cal = write_jsonl(tmp_path / "cal.jsonl", [
        {"id": f"c{i}", "text": t, "label": int(i < 4)}
        for i, t in enumerate(toy_world.members[20:24] + toy_world.nonmembers[20:24])])
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", "acmia:variant=normac", "--calibration", cal,
                           "--output", out, "--no-blind", "--no-report", "--bootstrap", "10")
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())
    assert res["counts"]["samples"] == 12
    assert res["counts"]["calibration"]["source"] == str(cal)
    assert res["counts"]["calibration"]["texts"] == 8
    assert len((out / "calibration.jsonl").read_text().splitlines()) == 8

    words = toy_world.members[2].split()
    leak = write_jsonl(tmp_path / "leak.jsonl", [
        {"text": toy_world.members[30], "label": 1}, {"text": toy_world.nonmembers[30], "label": 0},
        {"text": "Then " + " ".join(words[3:17]) + " again.", "label": 0}])
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", "acmia", "--calibration", leak, "--output",
                           tmp_path / "o2", "--no-blind", "--no-report")
    assert code == 1
    assert (f"--calibration {leak}: the text at {leak} line 3 shares a 13-word run with "
            f"{data} line 3 under test") in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_unlabelled_data_without_beta_is_one_sentence_and_with_beta_runs(toy_world, tmp_path,
                                                                       capsys):
    data = write_jsonl(tmp_path / "u.jsonl", [{"text": t} for t in toy_world.members[:4]])
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", "acmia", "--output", tmp_path / "o")
    assert code == 1
    assert ("method acmia needs labelled calibration data: pass --calibration (a labelled "
            "table; or labelled data to hold 30% out of), or give beta (acmia:beta=0.5)") in err
    code, _, err = run_cli(capsys, "run", "--model", toy_world.target_dir, "--data", data,
                           "--methods", "acmia:beta=0.5", "--output", tmp_path / "o")
    assert code == 0, err
    assert not (tmp_path / "o" / "calibration.jsonl").exists()


@pytest.mark.slow
def test_the_cache_serves_tempered_and_computes_it_again_only_for_acmia(toy_lm, toy_world,
                                                                       tmp_path):
    texts = toy_world.members[:6] + toy_world.nonmembers[:6]
    cache = str(tmp_path / "cache")

    def run(methods):
        res = pddkit.evaluate(texts, [1] * 6 + [0] * 6, toy_lm, methods, cache=cache,
                              blind=False, n_bootstrap=10)
        hm = res.counts["cache"]["target pass"]
        return res.scores(), (hm["hits"], hm["misses"])

    loss, counts = run("loss")  # stored without tempered
    assert counts == (0, 12)
    first, counts = run("loss,acmia:beta=0.5")  # acmia reads tempered: computed again
    assert counts == (0, 12)
    np.testing.assert_array_equal(first["loss"], loss["loss"])
    for methods in ("acmia:beta=0.5,acmia:variant=normac,beta=2", "loss"):
        again, counts = run(methods)  # the entries with tempered serve both
        assert counts == (12, 0), methods
    again, _ = run("acmia:beta=0.5,acmia:variant=normac,beta=2")
    np.testing.assert_array_equal(again["acmia:variant=ac,beta=0.5"], first["acmia"])


@pytest.mark.slow
def test_the_openai_backend_skips_acmia_with_the_notice(toy_lm, toy_world):
    from openai_server import FakeOpenAIServer

    texts = toy_world.members[:3] + toy_world.nonmembers[:3]
    with FakeOpenAIServer(toy_lm.model, name="tiny", tokenizer=toy_lm.tokenizer) as server:
        res = pddkit.evaluate(texts, [1, 1, 1, 0, 0, 0], "tiny", "loss,acmia:beta=1",
                              backend="openai", api_base=server.api_base, api_key_env=None,
                              tokenizer=str(toy_world.target_dir), blind=False, n_bootstrap=20)
    assert set(res.scores()) == {"loss"}
    assert ("skipping acmia: the backend gives only token log-probabilities, not the full "
            "next-token distribution it reads (H, M2, tempered)") in res.notices
