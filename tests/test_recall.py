"""recall and conrecall (SPEC 3b): scores recomputed by hand from plain forwards over
[start] + P + x, the shared prefix cache, the shot protocol and its leak guards, bad input,
the openai backend, the statistics cache and the CLI."""

import json

import numpy as np
import pytest
from tiny_models import small_tokenizer

from pddkit.errors import PddkitError

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "runs", "far", "away"]


def _texts(n: int, seed: int = 0) -> list[str]:
    """Distinct texts of 6-14 words (numbered, so no two share a 13-word run)."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(5, 13)))) + f" n{i}"
            for i in range(n)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random one-layer GPT-2 with a 128-token context and a BPE that knows the words."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    directory = tmp_path_factory.mktemp("recall") / "tiny"
    tok = small_tokenizer(" ".join(WORDS * 3) + " " + " ".join(f"n{i} w{i} v{i}" for i in range(40)))
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(tok),
                               n_positions=128, bos_token_id=0, eos_token_id=0)).save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def lm(tiny):
    from pddkit.backends.hf_loading import load_model

    return load_model(str(tiny), device="cpu", dtype="float32")


def _write(path, texts, labels):
    path.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in zip(texts, labels)))
    return path


def _evaluate(tiny, texts, labels, methods, **kw):
    import pddkit

    kw.setdefault("n_bootstrap", 10)
    return pddkit.evaluate(texts, labels, str(tiny), methods=methods, device="cpu",
                           dtype="float32", blind=False, **kw)


def _plain_ll(lm, prefix_ids: list[int], ids: list[int]) -> float:
    """Mean log p(x_i | start, P, x_<i) over x's tokens, one unbatched forward."""
    import torch

    seq = [0, *prefix_ids, *ids]  # the tiny model's start token is 0 (its BOS)
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(torch.tensor([seq])).logits[0].double(), -1)
    at = range(len(prefix_ids), len(seq) - 1)  # position t predicts seq[t + 1]
    return float(np.mean([logp[t, seq[t + 1]].item() for t in at]))


def _kept(tok, shots: list[str], ids: list[int], limit: int) -> list[int]:
    """SPEC 3b: ids of P after dropping whole shots from the front until [start] + P + x fits."""
    for first in range(len(shots)):
        p = tok("".join(shots[first:]), add_special_tokens=False)["input_ids"]
        if 1 + len(p) + len(ids) <= limit:
            return p
    return []


def test_scores_recomputed_from_plain_forwards_with_prefixes_cut_to_the_context(tiny, lm, tmp_path):
    texts, labels = _texts(12), [i % 2 for i in range(12)]
    texts[5] = " ".join(WORDS * 2)  # a long text: fewer shots fit before it
    shots = [s + " " for s in _texts(8, seed=1)]
    prefix = _write(tmp_path / "shots.jsonl", shots, [1, 0] * 4)
    res = _evaluate(tiny, texts, labels, "recall:shots=4,conrecall:shots=4,gamma=0.3",
                    prefix_data=str(prefix), max_length=72)
    tok, pool = lm.tokenizer, {"member": shots[0::2], "nonmember": shots[1::2]}
    kept = {}
    for i, text in enumerate(texts):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        given = {role: _kept(tok, pool[role], ids, 72) for role in pool}
        kept[i] = len(given["nonmember"])
        own = _plain_ll(lm, [], ids)
        nm, m = _plain_ll(lm, given["nonmember"], ids), _plain_ll(lm, given["member"], ids)
        assert res.scores()["recall"][i] == pytest.approx(nm / own, rel=1e-5)
        assert res.scores()["conrecall"][i] == pytest.approx((nm - 0.3 * m) / own, rel=1e-5)
    by_kept = res.counts["shots"]["prefixes"]["nonmember, shots=4"]["texts_by_shots_kept"]
    assert len(by_kept) > 1 and sum(by_kept.values()) == 12  # the context forced trimming
    rows = [r for r in res.trail["shots.jsonl"] if r["method"] == "recall"]
    assert [r["order"] for r in rows] == list(range(len(rows)))
    assert [r["text"] for r in rows] == pool["nonmember"][4 - len(rows):]
    assert rows[-1]["texts"] == 12 and rows[0]["texts"] < 12  # the last shot: every text's
    assert any("shots were dropped from the front" in n for n in res.notices)


def test_a_text_with_no_room_for_a_shot_is_counted_and_scored_with_an_empty_prefix(tiny, tmp_path):
    texts, labels = _texts(8), [i % 2 for i in range(8)]
    texts[2] = " ".join(WORDS * 4)  # ~100 tokens: cut to the 63 max_length allows
    prefix = _write(tmp_path / "p.jsonl", [s + " " for s in _texts(4, seed=8)], [1, 0] * 2)
    res = _evaluate(tiny, texts, labels, "recall:shots=2,conrecall:shots=2", prefix_data=str(prefix),
                    max_length=64)
    assert res.scores()["recall"][2] == 1.0
    assert res.scores()["conrecall"][2] == pytest.approx(0.5)  # (LL - 0.5 LL) / LL
    assert np.isfinite(res.scores()["recall"]).all() and (res.scores()["recall"] != 1.0).sum() == 7
    assert res.counts["fallbacks"]["recall"] == {
        "leave no room in the context for a single shot: scored with an empty prefix "
        "(LL(x | P) = LL(x)); a smaller `max_length` leaves room": 1}
    assert any(n.startswith("recall: 1 of 8 texts (12%) leave no room") for n in res.notices)


def test_the_shared_prefix_cache_equals_the_plain_pass_and_any_batch(lm):
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.prefix_pass import plain_prefix_stats

    texts = _texts(20)
    prefix = lm.tokenizer("".join(_texts(2, seed=2)), add_special_tokens=False)["input_ids"]
    results = []
    for size in (1, 16):
        backend = HFBackend(lm, batch_size=size)
        enc = backend.encode(texts, [str(i) for i in range(20)])
        results.append(backend.stats_given_prefix(prefix, enc.ids, enc.truncated))
        assert backend._shared_prefix is True
    want = plain_prefix_stats(HFBackend(lm).runner, prefix, enc.ids, enc.truncated)
    for a, b, w in zip(*results, want):
        np.testing.assert_array_equal(a.ids, w.ids)
        for got in (a, b):
            np.testing.assert_allclose(got.L, w.L, atol=2e-5)
            np.testing.assert_allclose(got.H, w.H, atol=2e-5)
        np.testing.assert_allclose(a.L, b.L, atol=1e-5)  # batch 1 and 16


def test_same_scores_for_batch_1_and_16(tiny):
    texts, labels = _texts(24), [i % 2 for i in range(24)]
    a = _evaluate(tiny, texts, labels, "recall:shots=3,conrecall:shots=3", batch_size=1)
    b = _evaluate(tiny, texts, labels, "recall:shots=3,conrecall:shots=3", batch_size=16)
    assert a.ids == b.ids
    for label in ("recall", "conrecall"):
        np.testing.assert_allclose(a.scores()[label], b.scores()[label], rtol=1e-5)


def test_drawn_shots_and_as_many_of_the_other_class_are_never_scored(tiny):
    texts, labels = _texts(30), [i % 2 for i in range(30)]
    res = _evaluate(tiny, texts, labels, "loss,recall:shots=4", ids=[f"t{i}" for i in range(30)])
    shots = [r["text"] for r in res.trail["shots.jsonl"]]
    scored = {texts[int(i[1:])] for i in res.ids}
    assert len(shots) <= 4 and not set(shots) & scored  # kept after trimming: never scored
    assert res.counts["shots"]["left_out"] == {"shots": 4, "other_class": 4,
                                              "sharing_a_run_with_a_shot": 0,
                                              "same_document_as_a_shot": 0}
    assert len(res.ids) == 22 and sorted(res.labels).count(1) == 11  # 4 non-members, 4 members out
    assert res.counts["samples"] == 22 and res.counts["shots"]["source"] == "drawn"
    again = _evaluate(tiny, texts, labels, "loss,recall:shots=4", ids=[f"t{i}" for i in range(30)])
    assert again.ids == res.ids  # seeded


def test_a_text_sharing_a_13_word_run_with_a_drawn_shot_leaves_too():
    from pddkit.data.ngrams import shares_run
    from pddkit.data.samples import Sample, make_dataset
    from pddkit.data.shots import draw

    runs = [" ".join(f"r{i}x{k}" for k in range(13)) for i in range(10)]
    samples = [Sample(id=f"n{i}", text=f"non member {i} " + runs[i], label=0, source=f"n{i}")
               for i in range(10)]  # each member below holds a non-member's 13-word run
    samples += [Sample(id=f"m{i}", text=f"member {i} " + runs[i] + " end", label=1, source=f"m{i}")
                for i in range(10)]
    kept, pool = draw(make_dataset("twins", samples, []), {"nonmember": 2}, seed=3)
    shots = pool.shots["nonmember"]
    assert len(shots) == 2 and not {s.text for s in kept.samples} & set(shots)
    assert not any(shares_run(s.text, shot) for s in kept.samples for shot in shots)
    left = pool.left_out
    assert left["shots"] == 2 and left["other_class"] == 2
    out_other = {s.id for s in samples if s.label == 1} - {s.id for s in kept.samples}
    twins = {f"m{i}" for i in range(10) if any(runs[i] in shot for shot in shots)}
    assert len(twins) == 2 and twins <= out_other  # the shots' twins never stay
    # out of the members: the 2 drawn to balance the classes, then the twins not among them
    assert left["sharing_a_run_with_a_shot"] == len(out_other) - 2 > 0  # seed 3: twins stayed
    assert len(kept.samples) == 20 - 4 - left["sharing_a_run_with_a_shot"]


def test_the_other_texts_of_a_drawn_shots_document_leave_too():
    from pddkit.data.samples import Sample, make_dataset
    from pddkit.data.shots import draw

    samples = [Sample(id=f"d{d}w{w}", text=" ".join(f"d{d}w{w}x{k}" for k in range(8)),
                      label=d % 2, source=f"d{d}w{w}", group=f"d{d}")
               for d in range(8) for w in range(3)]
    kept, pool = draw(make_dataset("windows", samples, []), {"nonmember": 2}, seed=0)
    shot_docs = {s.group for s in samples if s.text in pool.shots["nonmember"]}
    assert len(shot_docs) <= 2 and not any(s.group in shot_docs for s in kept.samples)
    assert pool.left_out["same_document_as_a_shot"] == sum(
        s.group in shot_docs for s in samples) - 2 - sum(
        s.group in shot_docs and s.label == 1 for s in samples)


@pytest.mark.parametrize("how", ["equal", "13-word run"])
def test_prefix_data_overlapping_a_text_under_test_is_refused(tiny, tmp_path, how):
    texts, labels = _texts(10), [i % 2 for i in range(10)]
    leak = texts[3]
    if how != "equal":
        texts[3] = texts[3] + " " + " ".join(f"v{k}" for k in range(13))
        leak = "shot start " + " ".join(f"v{k}" for k in range(13))
    prefix = _write(tmp_path / "p.jsonl", [leak, *_texts(4, seed=5)], [0, 1, 0, 1, 0])
    with pytest.raises(PddkitError, match=r"p\.jsonl: the shot at .* (is|shares a 13-word run "
                                          r"with) text 3 .*under test.*leak"):
        _evaluate(tiny, texts, labels, "recall:shots=2", prefix_data=str(prefix))


def test_a_shot_in_the_validation_data_is_refused(tiny, tmp_path):
    texts, labels = _texts(10), [i % 2 for i in range(10)]
    shots = _texts(4, seed=7)
    prefix = _write(tmp_path / "p.jsonl", shots, [1, 0, 1, 0])
    val = _write(tmp_path / "v.jsonl", [shots[1], *_texts(5, seed=11)], [0, 1, 0, 1, 0, 1])
    with pytest.raises(PddkitError, match=r"nonmember shot 1 \(from .*p\.jsonl\) is .* of "
                                          r"`val_data` .*leak into the choice of hyperparameters"):
        _evaluate(tiny, texts, labels, "conrecall:shots=2", prefix_data=str(prefix),
                  val_data=str(val))


def test_unlabelled_data_needs_prefix_data_and_prefix_data_needs_labels(tiny, tmp_path):
    import pddkit

    with pytest.raises(PddkitError, match=r"method recall needs labelled shots: pass "
                                          r"`prefix_data` \(or labelled data to draw them from\)"):
        pddkit.score(_texts(6), str(tiny), methods="recall", device="cpu")
    unlabelled = tmp_path / "u.jsonl"
    unlabelled.write_text("".join(json.dumps({"text": t}) + "\n" for t in _texts(4, seed=9)))
    with pytest.raises(PddkitError, match="has no labels: they say which shots are members"):
        pddkit.score(_texts(6), str(tiny), methods="recall", device="cpu",
                     prefix_data=str(unlabelled))
    # with labelled prefix data, unlabelled texts are scored, none left out
    prefix = _write(tmp_path / "l.jsonl", _texts(4, seed=9), [1, 0, 1, 0])
    scores = pddkit.score(_texts(6), str(tiny), methods="recall:shots=2", device="cpu",
                          prefix_data=str(prefix))
    assert scores["recall"].shape == (6,) and np.isfinite(scores["recall"]).all()


def test_bad_input_is_one_sentence(tiny, tmp_path):
    texts, labels = _texts(10), [i % 2 for i in range(10)]
    with pytest.raises(PddkitError, match="method recall: shots must be a whole number of at "
                                          "least 1, not 0"):
        _evaluate(tiny, texts, labels, "recall:shots=0")
    with pytest.raises(PddkitError, match=r"holds 5 member texts: drawing 5 shots .* would leave "
                                          "none to evaluate"):
        _evaluate(tiny, texts, labels, "conrecall:shots=5")
    prefix = _write(tmp_path / "p.jsonl", _texts(4, seed=3), [1, 0, 1, 0])
    with pytest.raises(PddkitError, match="holds 2 nonmember shots; shots=3 needs 3"):
        _evaluate(tiny, texts, labels, "recall:shots=3", prefix_data=str(prefix))
    with pytest.raises(PddkitError, match=r"no shot fits the context of 12 tokens: the shortest "
                                          r"text under test has \d+ tokens and the shortest prefix "
                                          r"\(the last shot alone\) \d+"):
        _evaluate(tiny, texts, labels, "recall:shots=2", prefix_data=str(prefix), max_length=12)


@pytest.mark.slow
def test_the_openai_backend_scores_recall_as_the_hf_backend(tiny, lm, tmp_path):
    from openai_server import FakeOpenAIServer

    import pddkit

    texts, labels = _texts(8), [i % 2 for i in range(8)]
    prefix = _write(tmp_path / "p.jsonl", _texts(6, seed=4), [1, 0] * 3)
    local = _evaluate(tiny, texts, labels, "recall:shots=3,conrecall:shots=3",
                      prefix_data=str(prefix))
    with FakeOpenAIServer(lm.model, name="tiny", tokenizer=lm.tokenizer, max_model_len=128) as server:
        far = pddkit.evaluate(texts, labels, "tiny", methods="recall:shots=3,conrecall:shots=3",
                              backend="openai", api_base=server.api_base, api_key_env=None,
                              tokenizer=str(tiny), prefix_data=str(prefix), n_bootstrap=10,
                              blind=False)
    for label in ("recall", "conrecall"):
        np.testing.assert_allclose(far.scores()[label], local.scores()[label], rtol=1e-4)
    assert far.trail["shots.jsonl"] == local.trail["shots.jsonl"]


def test_a_rerun_with_the_cache_computes_no_conditioned_statistics(tiny, tmp_path):
    texts, labels = _texts(16), [i % 2 for i in range(16)]
    first = _evaluate(tiny, texts, labels, "conrecall:shots=2", cache=str(tmp_path / "c"))
    assert first.counts["cache"]["conditioned pass (member shots)"]["misses"] == len(first.ids)
    again = _evaluate(tiny, texts, labels, "conrecall:shots=2", cache=str(tmp_path / "c"))
    for role in ("member", "nonmember"):
        assert again.counts["cache"][f"conditioned pass ({role} shots)"] == {
            "hits": len(first.ids), "misses": 0}
    np.testing.assert_array_equal(again.scores()["conrecall"], first.scores()["conrecall"])
    other = _evaluate(tiny, texts, labels, "conrecall:shots=1", cache=str(tmp_path / "c"))
    assert other.counts["cache"]["conditioned pass (member shots)"]["misses"] > 0  # another prefix


@pytest.mark.slow
def test_conrecall_gamma_is_chosen_on_validation_data(tiny):
    texts, labels = _texts(40), [i % 2 for i in range(40)]
    res = _evaluate(tiny, texts, labels, "conrecall:shots=2", val_fraction=0.5)
    v = res.validation["conrecall"]
    assert v.chosen in v.grid and len(v.grid) == 11 and {"gamma": 0.5} in v.grid
    # the grid's gamma=0.5 column is conrecall itself (the call's own shots), on the val part
    from pddkit.evaluation.validation import column_aucs

    val = np.array([s == "val" for s in res.splits])
    own = column_aucs(res.scores()["conrecall"][val][:, None], np.array(res.labels)[val])[0]
    assert v.val_auc[v.grid.index({"gamma": 0.5})] == pytest.approx(own)


def test_the_cli_writes_shots_jsonl(tiny, tmp_path):
    from click.testing import CliRunner

    from pddkit.cli import cli

    data = _write(tmp_path / "d.jsonl", _texts(20), [i % 2 for i in range(20)])
    out = tmp_path / "out"
    done = CliRunner().invoke(cli, ["run", "--model", str(tiny), "--data", str(data), "--methods",
                                    "recall:shots=2,conrecall:shots=2", "--output", str(out),
                                    "--no-report", "--no-blind", "--device", "cpu",
                                    "--bootstrap", "10"])
    assert done.exit_code == 0, done.output
    rows = [json.loads(x) for x in (out / "shots.jsonl").read_text().splitlines()]
    assert {r["method"] for r in rows} == {"recall", "conrecall"}
    assert all(set(r) == {"method", "role", "order", "text", "texts"} for r in rows)
    assert {(r["method"], r["role"]) for r in rows} == {
        ("recall", "nonmember"), ("conrecall", "member"), ("conrecall", "nonmember")}
    saved = json.loads((out / "results.json").read_text())
    assert saved["counts"]["shots"]["left_out"]["shots"] == 4
    assert len((out / "scores.jsonl").read_text().splitlines()) == 16


@pytest.mark.slow
def test_the_ray_engine_runs_the_conditioned_pass_as_the_local_engine(tiny, tmp_path):
    pytest.importorskip("ray")
    import ray

    texts, labels = _texts(12), [i % 2 for i in range(12)]
    prefix = _write(tmp_path / "p.jsonl", _texts(4, seed=6), [1, 0] * 2)
    local = _evaluate(tiny, texts, labels, "conrecall:shots=2", prefix_data=str(prefix))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        far = _evaluate(tiny, texts, labels, "conrecall:shots=2", prefix_data=str(prefix),
                        engine="ray", actors=1, cache=str(tmp_path / "cache"))
    finally:
        ray.shutdown()
    assert far.counts["cache"]["conditioned pass (member shots)"]["misses"] == len(texts)
    np.testing.assert_allclose(far.scores()["conrecall"], local.scores()["conrecall"], rtol=1e-5)
