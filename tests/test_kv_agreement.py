"""The tolerance by which a shared key/value path (infill's per-text cache, recall's shared
prefix) must reproduce the plain pass: 1e-3 for float32 models, 16 epsilons of bfloat16 and
float16, so that bfloat16's own rounding (0.047 seen on a Llama-3.2-1B shape) keeps the
shared path while a broken cache (whole nats) is still refused."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pddkit.backends import infill_windows, prefix_pass
from pddkit.backends.kv_agreement import agreement_atol
from pddkit.stats import TokenStats


@pytest.mark.parametrize("dtype, want", [
    (torch.float32, 1e-3), (torch.float64, 1e-3),
    (torch.bfloat16, 16 * 2.0 ** -7),  # bfloat16: 8 significant bits, epsilon 2^-7
    (torch.float16, 16 * 2.0 ** -10),  # float16: 11 significant bits, epsilon 2^-10
])
def test_the_tolerance_follows_the_weights_dtype(dtype, want):
    assert agreement_atol(torch.nn.Linear(2, 2).to(dtype)) == want


def stats(L, shift=0.0):
    L = np.asarray(L, dtype=np.float32) + np.float32(shift)
    return TokenStats(np.arange(len(L)), L=L, H=np.full(len(L), 2.0, np.float32),
                      M2=np.full(len(L), 5.0, np.float32))


def runner(dtype, plain):
    return SimpleNamespace(lm=SimpleNamespace(model=torch.nn.Linear(2, 2).to(dtype), name="m"),
                           run_ids=lambda seqs: [plain for _ in seqs])


L = [-1.0, -2.0, -3.0, -4.0]


@pytest.mark.parametrize("dtype, shift, kept", [
    (torch.float32, 5e-4, True), (torch.float32, 0.05, False),
    (torch.bfloat16, 0.05, True),  # bfloat16's rounding through the layers: kept
    (torch.bfloat16, 0.5, False),  # half a nat: a broken cache, refused
    (torch.float16, 0.01, True), (torch.float16, 0.05, False),
])
def test_infill_keeps_the_shared_cache_within_the_tolerance_only(monkeypatch, dtype, shift, kept):
    monkeypatch.setattr(infill_windows, "windows_of_text",
                        lambda r, base, sample, b: [stats(L, shift) for _ in sample])
    rows = [(1, [1, 2, 3, 4])]
    assert infill_windows.shared_cache_works(runner(dtype, stats(L)), stats(L), rows, 8) is kept


@pytest.mark.parametrize("dtype, shift, kept", [
    (torch.float32, 5e-4, True), (torch.float32, 0.05, False),
    (torch.bfloat16, 0.05, True), (torch.bfloat16, 0.5, False),
])
def test_the_shared_prefix_is_kept_within_the_tolerance_only(monkeypatch, dtype, shift, kept):
    monkeypatch.setattr(prefix_pass, "shared_prefix_stats",
                        lambda r, prefix, sample, flags, b: [stats(L, shift) for _ in sample])
    monkeypatch.setattr(prefix_pass, "plain_prefix_stats",
                        lambda r, prefix, sample, flags: [stats(L) for _ in sample])
    seqs = [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert prefix_pass.shared_prefix_works(runner(dtype, stats(L)), [9, 9], seqs, 8) is kept
