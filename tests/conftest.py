"""Shared fixtures: real text from ../shared and tiny GPT-2-shaped models trained on it."""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("PDDKIT_PROGRESS", "0")
if os.environ.get("PYTEST_XDIST_WORKER"):  # parallel workers (make test: -n 2) share the cores:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread each, set before torch loads
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

# the test processes keep freed memory for the next large array, as the pddkit executable
# does (cli/heap.py): the toy models' training and passes run ~25% faster on 2 cores
from pddkit.cli.heap import keep_freed_memory

keep_freed_memory()

SHARED = Path(os.environ.get("PDDKIT_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def shared_path(*parts: str) -> Path:
    """A path under ../shared. Missing: a failure under CI (which always has ../shared, so
    a green run cannot hide 58 skipped tests), a skip on a developer's machine."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        if under_ci():
            pytest.fail(f"{p} is missing: CI must run with ../shared beside the project "
                        "(set PDDKIT_SHARED to its location)", pytrace=False)
        pytest.skip(f"{p} is not here (CI always has ../shared)")
    return p


@dataclass(frozen=True)
class ToyWorld:
    """A tiny target model trained on `members`, a reference model trained on `pool`
    (same tokenizer), a frequency table from `pool`, and held-out `nonmembers`."""

    target_dir: Path
    ref_dir: Path
    freq_path: Path
    members: list[str]
    nonmembers: list[str]
    pool: list[str]
    data_path: Path  # JSONL of members (label 1) and non-members (label 0)


def gutenberg_paragraphs(n: int, seed: int = 0) -> list[str]:
    """`n` distinct paragraphs of 40-120 words from Doyle's and Austen's books."""
    from pddkit.data.gutenberg import strip_gutenberg
    from pddkit.sandbox.corpus import paragraphs

    root = shared_path("corpora", "gutenberg")
    paras: list[str] = []
    for author in ("Doyle, Arthur Conan", "Austen, Jane"):
        for f in sorted((root / author).glob("*.txt"))[:4]:
            text = strip_gutenberg(f.read_text(encoding="utf-8", errors="replace"))
            paras += [p for p in paragraphs(text, 40) if len(p.split()) <= 120]
    paras = sorted(set(paras))
    random.Random(seed).shuffle(paras)
    assert len(paras) >= n, len(paras)
    return paras[:n]


def assert_no_shared_runs(members, nonmembers, pool) -> None:
    """SPEC section 7 for the test world: no 13-word run is shared between the members
    (trained on), the non-members and the pool (reference model, frequency table, tokenizer)."""
    from pddkit.data.ngrams import ngram_hashes

    sets = [set().union(*map(ngram_hashes, part)) for part in (members, nonmembers, pool)]
    for i in range(3):
        for j in range(i + 1, 3):
            assert sets[i].isdisjoint(sets[j]), f"toy world roles {i} and {j} share a 13-word run"


def shared_build(tmp_path_factory, name: str, build) -> Path:
    """`build(root)` run once per test session into a folder named `name`: with parallel
    workers (pytest -n), the first worker builds it under a file lock and the others wait
    for it and read it; a worker never sees a half-built folder (`done` is written last)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.mktemp(name)
        build(root)
        return root
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp().parent  # shared by the session's workers
    root = base / name
    with FileLock(str(base / f"{name}.lock")):
        if not (root / "done").is_file():
            root.mkdir(exist_ok=True)
            build(root)
            (root / "done").write_text("built\n")
    return root


@pytest.fixture(autouse=True)
def _blind_baseline_inline_beside_other_workers(request, monkeypatch):
    """With parallel workers (make test: -n 2) no core is idle: a run's blind baseline (and
    one the sandbox starts before training) is fitted inline instead of in a child process
    (engine/blind_job.py `where_to_run`, `BlindJob.start`), which would only add an
    interpreter's start and imports on a core another worker uses. Its scores are the same
    either way (tests/test_blind_job.py, which keeps the default)."""
    if os.environ.get("PYTEST_XDIST_WORKER") and request.path.name != "test_blind_job.py":
        from pddkit.engine import blind_job

        where = blind_job.where_to_run
        monkeypatch.setattr(blind_job, "where_to_run", lambda config, model_given=False: (
            "inline" if where(config, model_given) == "process" else where(config, model_given)))
        start = blind_job.BlindJob.start.__func__  # the sandbox's early start asks for a process

        def start_here(cls, dataset, config, test_idx, where=None, model_given=False):
            return start(cls, dataset, config, test_idx,
                         "inline" if where == "process" else where, model_given)

        monkeypatch.setattr(blind_job.BlindJob, "start", classmethod(start_here))


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray (2 CPUs) per test session (per xdist worker; `make test` gives every
    RAY_FILES file to one worker), started on first use and shared by every test that runs
    the Ray engine: `ray.init` and `ray.shutdown` cost about
    5-10 s on 2 cores, once instead of once per test file. RayExecutor finds it running
    and uses it (its own `ray.init` is skipped when Ray is initialised)."""
    ray = pytest.importorskip("ray")  # installed by `make test` (the test extra)
    from pddkit.engine.executors_ray import keep_actors

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    with keep_actors():  # a run's actors serve the next test's run (no new interpreters)
        yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def toy_world(tmp_path_factory) -> ToyWorld:
    texts = gutenberg_paragraphs(240)
    members, nonmembers, pool = texts[:60], texts[60:120], texts[120:240]
    assert_no_shared_runs(members, nonmembers, pool)  # ground truth, checked
    root = shared_build(tmp_path_factory, "toy",
                        lambda r: _build_toy_world(r, members, nonmembers, pool))
    rows = [{"id": f"m{i}", "text": t, "label": 1} for i, t in enumerate(members)]
    rows += [{"id": f"n{i}", "text": t, "label": 0} for i, t in enumerate(nonmembers)]
    data = root / "data.jsonl"
    assert data.read_text() == "".join(json.dumps(r) + "\n" for r in rows)  # the same world
    return ToyWorld(root / "target", root / "ref", root / "freq.npz", members, nonmembers, pool,
                    data)


def _build_toy_world(root: Path, members: list[str], nonmembers: list[str],
                     pool: list[str]) -> None:
    """The target trained on `members`, the reference on `pool`, the tokenizer and the
    frequency table from `pool`, and data.jsonl of the members and non-members."""
    from pddkit.resources.frequency import build_frequency_table
    from pddkit.sandbox.training import build_gpt2, save, train_bpe_tokenizer, train_causal_lm

    tok = train_bpe_tokenizer(pool, vocab_size=1024)  # never sees members or non-members
    # no dropout, as today's pre-training runs: 45 s instead of 71 s for both models (one thread)
    target = build_gpt2(tok, n_layer=2, n_embd=64, n_positions=512, seed=0, dropout=0.0)
    train_causal_lm(target, tok, members, epochs=40, lr=3e-3, batch_size=12, seed=0)
    ref = build_gpt2(tok, n_layer=2, n_embd=64, n_positions=512, seed=1, dropout=0.0)
    train_causal_lm(ref, tok, pool, epochs=8, lr=3e-3, batch_size=12, seed=1)
    target_dir = save(target, tok, root / "target")
    save(ref, tok, root / "ref")
    pool_file = root / "pool.jsonl"
    pool_file.write_text("".join(json.dumps({"text": t}) + "\n" for t in pool))
    build_frequency_table(tok, str(target_dir), [pool_file]).save(root / "freq.npz")
    rows = [{"id": f"m{i}", "text": t, "label": 1} for i, t in enumerate(members)]
    rows += [{"id": f"n{i}", "text": t, "label": 0} for i, t in enumerate(nonmembers)]
    (root / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="session")
def toy_lm(toy_world):
    from pddkit.backends.hf_loading import load_model

    return load_model(str(toy_world.target_dir), device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def mask_model_dir(tmp_path_factory, toy_world):
    """A tiny RoBERTa-shaped fill-mask model (random weights) with a byte-level BPE that
    has <mask> and character offsets, saved as an ordinary HF directory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaForMaskedLM

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(toy_world.members + toy_world.pool, trainers.BpeTrainer(
        vocab_size=800, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>", mask_token="<mask>",
                                   model_max_length=512)
    import torch

    torch.manual_seed(0)
    model = RobertaForMaskedLM(RobertaConfig(
        vocab_size=len(fast), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=514, pad_token_id=1, bos_token_id=0,
        eos_token_id=2))
    out = tmp_path_factory.mktemp("mlm")
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return out


# fixtures that train or build models or start Ray: a test that uses one is `slow` (fast lane: -m "not slow")
SLOW_FIXTURES = {"toy_world", "toy_lm", "mask_model_dir", "corpus_file", "llama_base",
                 "family_lm", "bos_ne_eos", "no_bos", "result", "local_ray"}


# the test files whose tests run the Ray engine (the local_ray fixture): `make test` hands
# them to one worker as one unit, so that one local Ray starts in the session, not one per
# worker, and the actors a test's run leaves (keep_actors) serve the next file's run too
RAY_FILES = ("test_camia_run.py", "test_ray_engine.py", "test_emmia.py", "test_infill.py",
             "test_recall.py", "test_samia.py")  # the first trains the toy world


@pytest.hookimpl(optionalhook=True)  # pytest without xdist (-p no:xdist) knows no such hook
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, with RAY_FILES one unit (xdist's scheduler hook; the controller
    loads this file before it schedules)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class RayFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "ray engine files" if Path(scope).name in RAY_FILES else scope

    return RayFilesTogether(config, log)


# the Ray unit first, then the test files that take longest, longest first (`make test
# --durations`, 2026-11-27): `make test` hands whole files to its two workers in collection order
# (--dist loadfile --no-loadscope-reorder), so these start first and the two workers end
# together, instead of one running a 2-minute file alone at the end. The Ray files' worker
# trains the toy world (shared_build, ~40 s) while the other runs the two heavy files
# that do not need it (test_corpus, test_compare), so that normally neither waits on the
# other's lock
HEAVY_FIRST = (*RAY_FILES, "test_corpus.py", "test_compare.py", "test_sandbox.py", "test_infer.py",
               "test_benchmark_scripts.py", "test_cache_memo.py", "test_llama_server.py",
               "test_blind_scale.py", "test_cli.py", "test_probe.py", "test_openai_backend.py",
               "test_blind_job.py", "test_validation.py", "test_neighbor.py", "test_run_index.py",
               "test_run_inputs.py", "test_contamination.py", "test_acmia.py", "test_cache.py",
               "test_blind.py", "test_document_level.py")


def pytest_runtest_setup(item):
    """A test that starts Ray in a file outside RAY_FILES fails with one sentence (here, not
    at collection: a worker's collection error reaches xdist's controller without its text)."""
    if "local_ray" in getattr(item, "fixturenames", ()) and item.path.name not in RAY_FILES:
        pytest.fail(f"{item.nodeid} starts Ray: add {item.path.name} to RAY_FILES in "
                    "tests/conftest.py", pytrace=False)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest in order
