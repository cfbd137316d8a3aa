"""The statistics cache: store, CachingBackend, fingerprints, kill-and-resume."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import gutenberg_paragraphs, shared_path
from tiny_models import save_tiny_gpt2, small_tokenizer

from pddkit.backends.base import Capabilities, Encoded, token_stats
from pddkit.backends.caching import CachingBackend
from pddkit.cache import (
    StatsStore,
    cache_clear,
    cache_info,
    fingerprint_of,
    hf_fingerprint,
    text_key,
    tokenizer_digest,
    weights_digest,
)
from pddkit.cache import fingerprint as fpmod
from pddkit.errors import PddkitError
from pddkit.reporting.cache_info_text import cache_info_lines
from pddkit.stats import TokenStats

SRC = Path(__file__).resolve().parents[1] / "src"


class FakeBackend:
    """Deterministic statistics from ids; records every stats_for_ids call."""

    name = "fake"
    kind = "fake"
    capabilities = Capabilities()

    def __init__(self, fp: str = "f" * 64, batch_size: int = 1) -> None:
        self.fp = fp
        self.batch_size = batch_size
        self.calls: list[list[list[int]]] = []

    def fingerprint(self) -> str:
        return self.fp

    def encode(self, texts, names, what="statistics") -> Encoded:
        return Encoded(ids=[[ord(c) for c in t] for t in texts], truncated=[False] * len(texts))

    def stats_for_ids(self, ids, truncated, desc="statistics") -> list[TokenStats]:
        self.calls.append([list(s) for s in ids])
        out = []
        for s, t in zip(ids, truncated):
            a = np.asarray(s, dtype=np.int64)  # [n]
            out.append(TokenStats(a, (-np.log1p(a) / 3).astype(np.float32),  # [n] each
                                  np.sqrt(a).astype(np.float32), (a / 7).astype(np.float32), t))
        return out

    def decode(self, ids) -> str:
        return "".join(map(chr, ids))


def same_bits(a: TokenStats, b: TokenStats) -> bool:
    return all(x.dtype == y.dtype and x.tobytes() == y.tobytes()
               for x, y in ((a.ids, b.ids), (a.L, b.L), (a.H, b.H), (a.M2, b.M2), (a.var, b.var))) \
        and a.truncated == b.truncated


def one_sentence(e: pytest.ExceptionInfo, path) -> None:
    msg = str(e.value)
    assert str(path) in msg and "\n" not in msg and msg.count(". ") == 0, msg


def shards(d: Path) -> list[Path]:
    return sorted(d.glob("shard-*.npz"))


# ---------------------------------------------------------------- store


def test_store_round_trip_is_bit_for_bit(tmp_path):
    rng = np.random.default_rng(0)
    special = np.array([np.nan, -0.0, np.inf, -np.inf, 1e-45, np.finfo(np.float32).max], np.float32)
    items = {}
    for i in range(5):
        n = 1 + 7 * i
        L = rng.standard_normal(n).astype(np.float32)
        L[: min(n, 6)] = special[: min(n, 6)]
        items[f"{i:064x}"] = TokenStats(rng.integers(0, 2**62, n), L,
                                        rng.random(n, dtype=np.float32),
                                        rng.random(n, dtype=np.float32), truncated=i % 2 == 1)
    with StatsStore.open(tmp_path / "c", flush_every=2) as store:
        for k, st in items.items():
            store.put(k, st, fingerprint="a" * 64, model="m")
    assert len(shards(tmp_path / "c")) == 3  # 2 + 2 + 1 on close
    got = StatsStore.open(tmp_path / "c").get([*items, "0" * 64])
    assert set(got) == set(items)
    assert all(same_bits(got[k], st) for k, st in items.items())


def test_flush_policy_and_flush_at_exit(tmp_path):
    store = StatsStore.open(tmp_path, flush_every=3, flush_seconds=3600)
    st = TokenStats.from_lists([1, 2], [-1.0, -2.0])
    for i in range(4):
        store.put(f"{i:064x}", st)
    assert len(shards(tmp_path)) == 1 and len(store) == 4  # one buffered, still readable
    assert set(store.get([f"{i:064x}" for i in range(4)])) == {f"{i:064x}" for i in range(4)}
    store.flush_seconds = 0.0
    store.put(f"{9:064x}", st)
    assert len(shards(tmp_path)) == 2
    store.put(f"{10:064x}", st)
    store.flush_seconds = 3600
    store.put(f"{11:064x}", st)
    del store
    gc.collect()  # an unclosed store writes its buffer when collected (or at exit)
    assert len(StatsStore.open(tmp_path)) == 7


def test_two_writers_in_one_directory_are_both_readable(tmp_path):
    a, b = StatsStore.open(tmp_path, flush_every=2), StatsStore.open(tmp_path, flush_every=2)
    for i in range(4):
        a.put(f"a{i:063x}", TokenStats.from_lists([i], [-float(i)]), fingerprint="1" * 64)
        b.put(f"b{i:063x}", TokenStats.from_lists([i, i], [-1.0, -2.0]), fingerprint="2" * 64)
    a.close()
    b.close()
    assert len({p.name for p in shards(tmp_path)}) == 4
    c = StatsStore.open(tmp_path)
    assert len(c) == 8
    assert c.get(["b" + f"{3:063x}"])["b" + f"{3:063x}"].L.tolist() == [-1.0, -2.0]
    info = cache_info(tmp_path)
    assert (info.shards, info.entries) == (4, 8)
    assert sorted(m.entries for m in info.models) == [4, 4]
    assert any("8 texts" in line for line in cache_info_lines(info))


def test_stray_temporary_and_broken_files_are_ignored(tmp_path, caplog):
    with StatsStore.open(tmp_path) as store:
        store.put("1" * 64, TokenStats.from_lists([5], [-1.0]))
    (tmp_path / ".shard-123-456-abcd.npz.99.beef.tmp").write_bytes(b"PK\x03\x04 half a shard")
    (tmp_path / "shard-9-9-9.npz.tmp").write_bytes(b"junk")
    (tmp_path / "shard-0-0-broken.npz").write_bytes(b"not a zip")
    (tmp_path / "shard-0-1-broken.npz").write_bytes(b"PK\x03\x04 cut short")
    store = StatsStore.open(tmp_path)
    assert len(store) == 1 and store.get(["1" * 64])["1" * 64].ids.tolist() == [5]
    assert "skipping unreadable cache shard" in caplog.text
    assert sorted(store.skipped) == ["shard-0-0-broken.npz", "shard-0-1-broken.npz"]
    info = cache_info(tmp_path)
    assert (info.shards, info.entries, info.unfinished, info.unreadable) == (1, 1, 1, 2)
    assert any("2 unreadable shards" in line for line in cache_info_lines(info))


def damage(shard: Path, member: str) -> None:
    """Overwrite the middle of one array of a shard (its CRC no longer matches)."""
    import zipfile

    with zipfile.ZipFile(shard) as z:
        info = z.getinfo(member + ".npy")
    data = bytearray(shard.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.compress_size // 2
    data[start:start + 8] = b"\xff" * 8
    shard.write_bytes(bytes(data))


def test_a_shard_whose_arrays_cannot_be_read_is_skipped_and_its_texts_computed_again(tmp_path, caplog):
    fake = FakeBackend()
    ids = [[1, 2, 3], [4, 5], [6]]
    first = CachingBackend(fake, StatsStore.open(tmp_path)).stats_for_ids(ids, [False] * 3)
    gc.collect()
    (shard,) = shards(tmp_path)
    damage(shard, "L")  # its index still reads: the damage shows when the statistics are read
    again = FakeBackend()
    backend = CachingBackend(again, StatsStore.open(tmp_path))
    keys = [text_key(backend.fingerprint(), s) for s in ids]
    assert all(k in backend.store._index for k in keys)  # indexed...
    assert not any(k in backend.store for k in keys)  # ...but not served (the Ray engine asks so)
    out = backend.stats_for_ids(ids, [False] * 3)
    assert again.calls == [ids] and all(same_bits(a, b) for a, b in zip(out, first))
    assert backend.store.skipped == [shard.name] and "unreadable cache shard" in caplog.text
    assert "1 unreadable shard(s) skipped" in backend.notices()[0]
    backend.close()
    third = FakeBackend()  # the recomputed entries were stored anew
    assert CachingBackend(third, StatsStore.open(tmp_path)).stats_for_ids(ids, [False] * 3)
    assert third.calls == []


def test_a_shard_whose_arrays_do_not_fit_together_is_skipped_and_a_copy_elsewhere_served(tmp_path):
    st = TokenStats.from_lists([7, 8], [-1.0, -2.0])
    a, b = StatsStore.open(tmp_path), StatsStore.open(tmp_path)  # two writers, the same entry
    for store in (a, b):
        store.put("1" * 64, st)
        store.close()
    bad, _ = shards(tmp_path)  # the one the index serves it from
    with np.load(bad) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["offsets"] = arrays["offsets"] + np.array([0, 5])  # points past the ids
    with open(bad, "wb") as f:
        np.savez(f, **arrays)
    store = StatsStore.open(tmp_path)
    got = store.get(["1" * 64])["1" * 64]
    assert same_bits(got, st) and store.skipped == [bad.name] and "1" * 64 in store


def test_a_shard_without_variances_is_refused_not_read_with_m2_minus_h2(tmp_path, caplog):
    """A shard written before TokenStats.var (pddkit's statistics format 1) holds M2 but no
    variance: its entries are never served with a variance derived from M2 - H^2 (which
    cancels in float32), and the statistics format in every key moved on (STATS_FORMAT)."""
    from pddkit.backends.base import STATS_FORMAT

    assert STATS_FORMAT >= 2  # 2: TokenStats.var; keys of format-1 entries never match
    st = TokenStats(np.array([7, 8]), np.array([-1.0, -2.0], np.float32),
                    np.array([10.0, 10.0], np.float32), np.array([100.0, 100.0], np.float32),
                    var=np.array([1e-4, 2e-4], np.float32))
    with StatsStore.open(tmp_path) as store:
        store.put("1" * 64, st)
    (shard,) = shards(tmp_path)
    with np.load(shard) as z:
        assert np.array_equal(z["var"], st.var)  # the variance itself is stored
        arrays = {k: z[k] for k in z.files if k != "var"}
    with open(shard, "wb") as f:
        np.savez(f, **arrays)
    store = StatsStore.open(tmp_path)
    assert store.get(["1" * 64]) == {} and "1" * 64 not in store
    assert store.skipped == [shard.name] and "no variances" in caplog.text


def test_clear_removes_only_its_own_files(tmp_path):
    d = tmp_path / "c"
    with StatsStore.open(d, flush_every=1) as store:
        store.put("1" * 64, TokenStats.from_lists([5], [-1.0]))
        store.put("2" * 64, TokenStats.from_lists([6], [-1.0]))
    (d / ".shard-1-2-3.npz.4.5.tmp").write_bytes(b"")
    (d / "notes.txt").write_text("mine")
    assert cache_clear(d) == 4  # two shards, a temporary file, the manifest
    assert [p.name for p in d.iterdir()] == ["notes.txt"]
    (d / "notes.txt").unlink()
    with StatsStore.open(d) as store:
        store.put("1" * 64, TokenStats.from_lists([5], [-1.0]))
        store.flush()
        store.put("2" * 64, TokenStats.from_lists([5], [-1.0]))  # buffered: dropped
        assert store.clear() == 2 and not d.exists()
    assert not d.exists()


def test_bad_directories_are_one_sentence(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    with pytest.raises(PddkitError) as e:
        StatsStore.open(tmp_path / "file")
    one_sentence(e, tmp_path / "file")
    old = tmp_path / "old"
    old.mkdir()
    (old / "manifest.json").write_text(json.dumps({"format": "pddkit-stats-cache", "version": 999}))
    for call in (StatsStore.open, cache_info):
        with pytest.raises(PddkitError, match="version 999") as e:
            call(old)
        one_sentence(e, old)
    (old / "manifest.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(PddkitError, match="not a pddkit statistics cache"):
        StatsStore.open(old)
    with pytest.raises(PddkitError, match="does not exist") as e:
        cache_info(tmp_path / "nowhere")
    one_sentence(e, tmp_path / "nowhere")

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "write_bytes", refuse)
    with pytest.raises(PddkitError, match="not writable") as e:
        StatsStore.open(tmp_path / "ro")
    one_sentence(e, tmp_path / "ro")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes anywhere")
def test_read_only_directory_is_one_sentence(tmp_path):
    d = tmp_path / "ro"
    StatsStore.open(d).close()
    d.chmod(0o555)
    try:
        with pytest.raises(PddkitError, match="not writable") as e:
            StatsStore.open(d)
        one_sentence(e, d)
    finally:
        d.chmod(0o755)


# ---------------------------------------------------------------- CachingBackend


def test_hits_do_no_backend_call_and_partial_hits_only_the_misses(tmp_path):
    fake = FakeBackend(batch_size=2)
    texts = ["alpha", "bravo!", "charlie", "dx", "echo"]
    cached = CachingBackend(fake, StatsStore.open(tmp_path, flush_every=100))
    first = token_stats(cached, texts[:3], desc="target")
    cached.close()
    assert len(fake.calls) == 1 and cached.counts() == {"target": (0, 3)}

    fake2 = FakeBackend(batch_size=2)
    again = CachingBackend(fake2, StatsStore.open(tmp_path))
    enc = again.encode(texts, list(texts))
    flags = [False, True, False, True, False]
    out = again.stats_for_ids(enc.ids, flags, desc="target")
    assert fake2.calls == [[enc.ids[4], enc.ids[3]]]  # only the misses, longest first
    assert [s.truncated for s in out] == flags  # the caller's flags, hits included
    assert all(same_bits(a, b) for a, b in zip(out[:3], first) if not a.truncated)
    plain = FakeBackend().stats_for_ids(enc.ids, flags)
    assert all(same_bits(a, b) for a, b in zip(out, plain))
    assert again.hits == {"target": 3} and again.misses == {"target": 2}
    again.stats_for_ids(enc.ids, flags, desc="lowercase")
    assert len(fake2.calls) == 1 and again.counts()["lowercase"] == (5, 0)


def test_misses_are_computed_in_chunks_of_whole_batches(tmp_path):
    fake = FakeBackend(batch_size=3)
    backend = CachingBackend(fake, StatsStore.open(tmp_path, flush_every=4))
    assert backend.chunk == 6  # flush_every rounded up to whole batches
    ids = [[i] * (1 + i % 5) for i in range(14)]
    out = backend.stats_for_ids(ids, [False] * 14)
    assert [len(c) for c in fake.calls] == [6, 6, 2]
    assert [len(s) for s in ids] == [len(s) for s in out]
    assert len(shards(tmp_path)) == 2  # flushed between chunks only, never inside one


def test_other_fingerprint_misses(tmp_path):
    CachingBackend(FakeBackend("a" * 64), StatsStore.open(tmp_path)).stats_for_ids([[1, 2]], [False])
    gc.collect()
    other = FakeBackend("b" * 64)
    CachingBackend(other, StatsStore.open(tmp_path)).stats_for_ids([[1, 2]], [False])
    assert len(other.calls) == 1
    assert text_key("a" * 64, [1, 2]) != text_key("b" * 64, [1, 2]) != text_key("b" * 64, [2, 1])


# ---------------------------------------------------------------- fingerprints


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A random one-layer GPT-2 with a 300-token BPE: a complete causal LM folder."""
    return save_tiny_gpt2(tmp_path_factory.mktemp("tiny"))


def load(d):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(d), AutoTokenizer.from_pretrained(d)


def count_hashing(monkeypatch) -> list[Path]:
    read: list[Path] = []
    real = fpmod.hash_file

    def counting(path):
        read.append(path)
        return real(path)

    monkeypatch.setattr(fpmod, "hash_file", counting)
    return read


def test_fingerprint_tracks_dtype_start_tokenizer_and_weights(tiny_dir, tmp_path, monkeypatch):
    import torch

    memo = tmp_path / "memo.json"
    model, tok = load(tiny_dir)

    def fp(m=model, t=tok, **over):
        args = {"start_id": 0, "dtype": "float32", "backend": "hf", "stats_format": 1} | over
        return hf_fingerprint(m, t, memo_path=memo, **args)

    base = fp()
    assert base == fp() and len(base) == 64
    assert len({base, fp(dtype="bfloat16"), fp(start_id=1), fp(backend="openai"),
                fp(stats_format=2), fp(t=small_tokenizer(" zebra quagga"))}) == 6
    bigger = small_tokenizer()
    bigger.add_tokens(["<extra>"])
    assert tokenizer_digest(bigger) != tokenizer_digest(tok) == tokenizer_digest(small_tokenizer())

    copy = tmp_path / "copy"  # another path, other mtimes, same content: same fingerprint
    shutil.copytree(tiny_dir, copy)
    assert fp(*load(copy)) == base
    changed, _ = load(copy)
    with torch.no_grad():
        changed.transformer.h[0].mlp.c_fc.weight[0, 0] += 1e-3
    changed.save_pretrained(copy)
    reread = count_hashing(monkeypatch)
    assert fp(*load(copy)) != base
    assert [p.name for p in reread] == ["model.safetensors"]
    reread.clear()
    assert fp(*load(copy)) != base and reread == []  # memoised by path, size and mtime
    assert str((copy / "model.safetensors").resolve()) in memo.read_text()


def test_model_built_in_memory_hashes_its_tensors(tiny_dir):
    import torch

    model, _ = load(tiny_dir)
    model.config._name_or_path, model.name_or_path = "", ""
    digest = weights_digest(model)
    assert digest.startswith("tensors:") and digest == weights_digest(model)
    with torch.no_grad():
        model.lm_head.weight[3, 2] += 1e-4
    assert weights_digest(model) != digest


def test_hub_cache_blob_names_are_used_without_reading(tiny_dir, tmp_path, monkeypatch):
    import huggingface_hub.constants

    repo = tmp_path / "hub" / "models--someone--tiny"
    snap = repo / "snapshots" / ("c" * 40)
    (repo / "blobs").mkdir(parents=True)
    snap.mkdir(parents=True)
    for f in tiny_dir.iterdir():
        blob = hashlib.sha256(f.read_bytes()).hexdigest()
        shutil.copy(f, repo / "blobs" / blob)
        (snap / f.name).symlink_to(Path("..", "..", "blobs", blob))

    def no_reading(path):
        raise AssertionError(f"read {path}")

    model, _ = load(snap)
    monkeypatch.setattr(fpmod, "hash_file", no_reading)
    digest = weights_digest(model, memo_path=tmp_path / "memo.json")
    assert digest.startswith("files:")
    # a hub id with a commit: found in the hub cache the same way
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    model.config._name_or_path = model.name_or_path = "someone/tiny"
    model.config._commit_hash = "c" * 40
    assert weights_digest(model) == digest
    assert not (tmp_path / "memo.json").exists()


def test_fingerprint_of_is_order_free():
    assert fingerprint_of({"a": 1, "b": "x"}) == fingerprint_of({"b": "x", "a": 1})
    assert fingerprint_of({"a": 1}) != fingerprint_of({"a": 2})


# ---------------------------------------------------------------- kill and resume

SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from pddkit.backends.base import token_stats
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.caching import CachingBackend
    from pddkit.cache import StatsStore
    from pddkit.backends.hf_loading import load_model

    model_dir, texts_file, cache_dir, out, pause = sys.argv[1:6]
    texts = json.load(open(texts_file))
    lm = load_model(model_dir, device="cpu", dtype="float32")
    backend = CachingBackend(HFBackend(lm, batch_size=2), StatsStore.open(cache_dir, flush_every=4))
    plain = HFBackend(lm, batch_size=2)
    got, ref = [], []
    for c in range(0, len(texts), 8):
        got += token_stats(backend, texts[c:c + 8])
        time.sleep(float(pause))
    backend.close()
    for c in range(0, len(texts), 8):  # the same calls without a cache
        ref += token_stats(plain, texts[c:c + 8])
    arrays = {f"{w}{i}_{f}": getattr(s, f) for w, run in (("got", got), ("ref", ref))
              for i, s in enumerate(run) for f in ("ids", "L", "H", "M2", "var", "truncated")}
    np.savez(out, **arrays)
    json.dump({"hits": backend.hits, "misses": backend.misses, "calls": backend.calls,
               "fingerprint": backend.fingerprint()}, open(out + ".json", "w"))
""")


@pytest.mark.slow
def test_killed_run_resumes_and_equals_an_uncached_run_bit_for_bit(tmp_path, monkeypatch):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from pddkit.sandbox.training import gpt2_tokenizer

    tok = gpt2_tokenizer(shared_path("tokenizers", "gpt2"))
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(tok),
                                       n_positions=64))
    model_dir, cache = tmp_path / "model", tmp_path / "cache"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    texts = gutenberg_paragraphs(40, seed=3)
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    (tmp_path / "run.py").write_text(SCRIPT)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the weights digest memo
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}

    def start(out: str, pause: str):
        return subprocess.Popen([sys.executable, str(tmp_path / "run.py"), str(model_dir),
                                 str(tmp_path / "texts.json"), str(cache), str(tmp_path / out),
                                 pause], env=env, cwd=tmp_path, stderr=subprocess.PIPE)

    first = start("first.npz", "2")
    # a deadline against a hang only: the subprocess imports torch and loads a model,
    # seconds on an idle machine, minutes on a loaded one (60 s failed at a load of 15)
    deadline = time.monotonic() + 600
    while not (cache.is_dir() and shards(cache)) and first.poll() is None:
        assert time.monotonic() < deadline, "no shard appeared"
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert first.returncode == -signal.SIGKILL, first.stderr.read().decode()[-2000:]
    assert not (tmp_path / "first.npz").exists()
    done = len(StatsStore.open(cache))
    assert 0 < done < len(texts) and done % 4 == 0  # whole flushes only

    second = start("second.npz", "0")
    _, err = second.communicate(timeout=600)  # against a hang only, as above
    assert second.returncode == 0, err.decode()[-2000:]
    counts = json.loads((tmp_path / "second.npz.json").read_text())
    assert sum(counts["misses"].values()) == len(texts) - done
    assert sum(counts["hits"].values()) == done
    z = np.load(tmp_path / "second.npz", allow_pickle=False)
    for i in range(len(texts)):
        for f in ("ids", "L", "H", "M2", "var", "truncated"):
            got, ref = z[f"got{i}_{f}"], z[f"ref{i}_{f}"]
            assert got.dtype == ref.dtype and got.tobytes() == ref.tobytes(), (i, f)
    assert any(z[f"got{i}_truncated"] for i in range(len(texts)))  # 64-token context: some cut

    # a third run in this process: no forward pass at all, the same bits
    from pddkit.backends.hf import HFBackend
    from pddkit.backends.hf_loading import load_model

    inner = HFBackend(load_model(str(model_dir), device="cpu", dtype="float32"), batch_size=2)
    third = CachingBackend(inner, StatsStore.open(cache))
    assert third.fingerprint() == counts["fingerprint"]
    out = token_stats(third, texts)
    assert third.calls == 0 and third.hits == {"statistics": len(texts)}
    # models handed over: named by their tensors, no weight file was hashed
    assert not (tmp_path / "xdg" / "pddkit" / "weights-digests.json").exists()
    assert all(s.L.tobytes() == z[f"ref{i}_L"].tobytes() for i, s in enumerate(out))
