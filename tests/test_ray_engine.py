"""The Ray executor on a local Ray started here: one actor (torch threads 1: two one-CPU
actors on two cores deadlock), the same batches as the local pass, so statistics equal
the local engine's bit for bit; the cache sends only its misses, all in one Ray pass; the
driver never loads the model (tokenizer only; fingerprint and facts from an actor); one
sentence for a batch that kills its actor twice, a model handed over in memory, an actor
that cannot load the model, an unreachable cluster and Ray missing."""

import builtins
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import gutenberg_paragraphs, shared_path

from pddkit.errors import PddkitError

ray = pytest.importorskip("ray")  # installed by `make test` (the test extra); see pyproject

from pddkit.engine.ray_actors import StatsWorker  # noqa: E402 (needs ray)

POISON_TEXT = "Poison pill: this text kills the actor that scores it."
POISON = [18833, 1653, 9582, 25]  # its first GPT-2 tokens


class CrashingWorker(StatsWorker):
    """An actor whose process dies (os._exit, as on an out-of-memory kill) on any batch
    holding the poison text, noting each death beside the model folder."""

    def stats(self, seqs):
        if any(list(s[:len(POISON)]) == POISON for s in seqs):
            with open(Path(self.spec.model).parent / "deaths.txt", "a") as f:
                f.write("died\n")
            os._exit(1)
        return super().stats(seqs)


class PidWorker(StatsWorker):
    """A StatsWorker that says which process it is and which model it has built."""

    def pid(self) -> int:
        return os.getpid()

    def built(self) -> str | None:
        return None if self._built is None else self.spec.model


# Ray's workers cannot import this test module: CrashingWorker travels by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def fail_to_load(*args, **kwargs):
    raise AssertionError("the driver loaded the model")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from pddkit.sandbox.training import gpt2_tokenizer

    tok = gpt2_tokenizer(shared_path("tokenizers", "gpt2"))
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("ray") / "tiny"
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_layer=2, n_embd=32, n_head=2, n_positions=128,
                               initializer_range=0.5)).save_pretrained(d)
    tok.save_pretrained(d)
    return d


def same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.array_equal(x.ids, y.ids) and x.truncated == y.truncated
        for k in ("L", "H", "M2", "var"):
            assert np.array_equal(getattr(x, k), getattr(y, k)), k


@pytest.mark.slow
def test_ray_equals_local_bit_for_bit_and_the_cache_sends_misses_only(local_ray, model_dir, tmp_path,
                                                                     monkeypatch):
    """Loading the model is made to fail on the driver once the local engine has run: the
    Ray engine still encodes (tokenizer only), looks up the cache (fingerprint from an
    actor), reports the model's facts and decodes truncated spans, with statistics equal
    to the local engine's bit for bit."""
    from pddkit.backends.caching import CachingBackend
    from pddkit.backends.hf import HFBackend
    from pddkit.cache import StatsStore
    from pddkit.engine.executors import LocalExecutor
    from pddkit.engine.executors_ray import RayExecutor
    from pddkit.engine.passes import describe

    texts = [*gutenberg_paragraphs(9, seed=5), "Short.", " ".join(gutenberg_paragraphs(3, seed=6))]
    names = [f"t{i}" for i in range(len(texts))]
    backend = HFBackend.load(str(model_dir), device="cpu", dtype="float32", batch_size=3)
    local = LocalExecutor().token_stats(backend, texts, names, "target pass")
    assert any(st.truncated for st in local)  # the long one is cut to the 128-token context
    facts = describe(backend)
    monkeypatch.setattr("pddkit.backends.hf_loading.load_model", fail_to_load)
    driver = HFBackend.load(str(model_dir), device="cpu", dtype="float32", batch_size=3,
                            engine="ray")
    ray_ex = RayExecutor(actors=1)
    remote = ray_ex.token_stats(driver, texts, names, "target pass")
    same(local, remote)
    # behind the cache, the same calls give the same statistics on both engines: a subset
    # first (5 misses), then all texts (5 hits, 6 misses computed remotely, in two chunks
    # of 3 that one Ray pass serves: one actor pool, one model load)
    results, starts = {}, []
    start = ray_ex._start
    monkeypatch.setattr(ray_ex, "_start", lambda *a: starts.append(1) or start(*a))
    for name, ex, b in (("local", LocalExecutor(), backend), ("ray", ray_ex, driver)):
        cached = ex.prepare(CachingBackend(b, StatsStore.open(tmp_path / name), chunk=3))
        assert describe(cached) == facts  # device, dtype, context, tokenizer (ray: from the actor)
        results[name] = [ex.token_stats(cached, texts[:5], names[:5], "target pass"),
                         ex.token_stats(cached, texts, names, "target pass")]
        assert cached.counts()["target pass"] == (5, len(texts))  # hits 5, misses 5 + 6
        assert cached.calls == 4  # chunks computed: 2 + 2
        assert cached.decode(results[name][1][-1].ids.tolist()) == backend.decode(local[-1].ids.tolist())
    assert len(starts) == 2  # one Ray pass per call
    for a, b in zip(results["local"], results["ray"]):
        same(a, b)
    assert driver._lm is None  # never loaded here
    ray_ex.close()


@pytest.mark.slow
def test_a_batch_that_kills_its_actor_twice_is_one_sentence_naming_its_texts(local_ray, model_dir):
    """The actor dies on the batch holding the poison text: it is replaced and the batch
    sent once more (Ray itself restarts and retries nothing), and the second death ends
    the pass with one sentence naming both texts of that batch."""
    from pddkit.backends.hf import HFBackend
    from pddkit.engine.executors_ray import RayExecutor
    from pddkit.sandbox.training import gpt2_tokenizer

    tok = gpt2_tokenizer(shared_path("tokenizers", "gpt2"))
    assert tok(POISON_TEXT, add_special_tokens=False)["input_ids"][:len(POISON)] == POISON
    texts = ["A short text about the sea and the ships on it.", POISON_TEXT,
             *gutenberg_paragraphs(3, seed=4)]
    names = ["calm", "poison", "p1", "p2", "p3"]
    deaths = model_dir.parent / "deaths.txt"
    deaths.unlink(missing_ok=True)
    backend = HFBackend.load(str(model_dir), device="cpu", dtype="float32", batch_size=2)
    ex = RayExecutor(actors=1, worker=CrashingWorker)
    with pytest.raises(PddkitError) as err:
        ex.token_stats(backend, texts, names, "target pass")
    msg = str(err.value)
    assert msg.startswith("target pass: the batch of ") and "killed its Ray actor 2 times" in msg, msg
    named = msg.removeprefix("target pass: the batch of ").split(" killed")[0].split(", ")
    assert "poison" in named and len(named) == 2 and "\n" not in msg  # its batch: two texts
    assert deaths.read_text().count("died") == 2
    ex.close()


@pytest.mark.slow
def test_actors_move_to_another_model_in_their_process_and_keep_actors_hands_them_on(
        local_ray, model_dir, tmp_path, monkeypatch):
    """A pass of another model moves the same actor to it (the old model dropped first);
    with keep_actors() open (local_ray opens it for the session), a run's actor waits for
    the next run, which takes it over with statistics equal to the local engine's; a failed
    run's actor, or any run's outside keep_actors(), stops."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from pddkit.backends.hf import HFBackend
    from pddkit.engine import executors_ray
    from pddkit.engine.executors import LocalExecutor
    from pddkit.engine.executors_ray import RayExecutor

    other = tmp_path / "other"
    torch.manual_seed(1)
    GPT2LMHeadModel(GPT2Config(vocab_size=50257, n_layer=1, n_embd=16, n_head=2,
                               n_positions=64)).save_pretrained(other)
    for f in model_dir.glob("*"):  # the same tokenizer
        if not f.name.startswith(("model", "config")):
            shutil.copy(f, other / f.name)
    texts, names = gutenberg_paragraphs(3, seed=2), ["a", "b", "c"]

    def backend(d):
        return HFBackend.load(str(d), device="cpu", dtype="float32", batch_size=2, engine="ray")

    def actor_facts(ex):
        actor = ex._pool.actors[0]
        return ray.get(actor.pid.remote()), ray.get(actor.built.remote())

    first = RayExecutor(actors=1, worker=PidWorker)
    first.token_stats(backend(model_dir), texts, names, "target pass")
    pid, built = actor_facts(first)
    assert built == str(model_dir)
    first.token_stats(backend(other), texts, names, "reference pass")
    assert actor_facts(first) == (pid, str(other))  # the same process, the other model
    first.close()
    assert executors_ray._parked is not None and len(executors_ray._parked) >= 1
    actor = executors_ray._parked[first._key()][1].actors[0]
    assert ray.get(actor.built.remote()) is None  # waiting without a model
    second = RayExecutor(actors=1, worker=PidWorker)
    got = second.token_stats(backend(model_dir), texts, names, "target pass")
    assert actor_facts(second) == (pid, str(model_dir))  # taken over, the model loaded anew
    want = LocalExecutor().token_stats(
        HFBackend.load(str(model_dir), device="cpu", dtype="float32", batch_size=2),
        texts, names, "target pass")
    same(want, got)
    actor = second._pool.actors[0]
    second.close(failed=True)  # a failed run: its actor stops
    assert stops(actor)
    monkeypatch.setattr(executors_ray, "_parked", None)  # outside keep_actors()
    third = RayExecutor(actors=1, worker=PidWorker)
    third.token_stats(backend(model_dir), texts, names, "target pass")
    actor = third._pool.actors[0]
    third.close()  # outside keep_actors(): stopped, not kept
    assert stops(actor)


def stops(actor, within: float = 60.0) -> bool:
    """Whether the actor is gone within `within` seconds (ray.kill is asynchronous: a call
    made just after it may still be answered)."""
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            ray.get(actor.pid.remote(), timeout=within)
        except ray.exceptions.RayActorError:
            return True
        time.sleep(0.2)
    return False


def test_a_model_in_memory_is_one_sentence(local_ray, model_dir):
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.hf_loading import load_model
    from pddkit.engine.executors_ray import RayExecutor

    backend = HFBackend(load_model(str(model_dir), device="cpu", dtype="float32"))
    with pytest.raises(PddkitError, match="needs a model it can load by name"):
        RayExecutor().token_stats(backend, ["some text here"], ["t"], "target pass")


@pytest.mark.slow
def test_an_actor_that_cannot_load_the_model_is_one_sentence(local_ray, model_dir, tmp_path):
    from pddkit.backends.hf import HFBackend
    from pddkit.engine.executors_ray import RayExecutor

    gone = tmp_path / "gone"
    shutil.copytree(model_dir, gone)
    backend = HFBackend.load(str(gone), device="cpu", dtype="float32")
    assert backend.lm is not None  # loaded here, on the driver (as a pass needing it would)
    shutil.rmtree(gone)  # as on a worker that does not have the model
    with pytest.raises(PddkitError, match=r"a Ray actor failed: model path .*gone does not exist") as info:
        RayExecutor().token_stats(backend, ["some text here"], ["t"], "target pass")
    assert "\n" not in str(info.value)


def test_an_unreachable_cluster_is_one_sentence_in_seconds():
    import socket

    from pddkit.engine.executors_ray import _check_reachable  # before ray.init (Ray retries minutes)

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PddkitError, match=rf"cannot reach the Ray cluster at ray://127.0.0.1:{port}"):
        _check_reachable(f"ray://127.0.0.1:{port}")
    with pytest.raises(PddkitError, match="`ray_address` must be host:port"):
        _check_reachable("head-node:port")
    _check_reachable(None)  # a local Ray: nothing to reach


def test_ray_missing_is_one_sentence(monkeypatch):
    from pddkit.engine.executors_ray import RayExecutor

    real = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ModuleNotFoundError("No module named 'ray'", name="ray")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(PddkitError, match=r"pip install 'ray\[data\]'"):
        RayExecutor()


@pytest.mark.slow
def test_pddkit_run_engine_ray_scores_like_the_local_engine(local_ray, model_dir, tmp_path, capsys,
                                                          monkeypatch):
    import json

    from cli_helpers import run_cli, write_jsonl

    data = write_jsonl(tmp_path / "d.jsonl", [{"text": t, "label": i % 2}
                                              for i, t in enumerate(gutenberg_paragraphs(8, seed=9))])
    # gapk reads Lmax, acmia the tempered means the actors compute only when asked; acmia
    # chooses beta on the calibration texts held out of both runs alike (seeded)
    common = ["run", "--model", model_dir, "--data", data, "--methods",
              "loss,mink,minkpp,lowercase,gapk,acmia",
              "--device", "cpu", "--dtype", "float32", "--no-blind", "--no-report", "--bootstrap", "20"]
    with monkeypatch.context() as m:  # the driver loads no model
        m.setattr("pddkit.backends.hf_loading.load_model", fail_to_load)
        code, _, err = run_cli(capsys, *common, "--engine", "ray", "--actors", "1", "--output",
                               tmp_path / "r")
    assert code == 0, err
    code, _, err = run_cli(capsys, *common, "--output", tmp_path / "l")
    assert code == 0, err
    rows = [(tmp_path / d / "scores.jsonl").read_text().splitlines() for d in "rl"]
    assert [json.loads(x) for x in rows[0]] == [json.loads(x) for x in rows[1]]  # bit for bit
    models = [json.loads((tmp_path / d / "results.json").read_text())["models"] for d in "rl"]
    assert models[0] == models[1] and models[0]["target"]["device"] == "cpu"
