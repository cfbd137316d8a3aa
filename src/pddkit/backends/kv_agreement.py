"""How closely a shared key/value path (infill's per-text cache, recall's shared prefix)
must reproduce the plain pass over the same tokens for the backend to keep it.

Both paths compute the same numbers in the model's dtype, with the attention over cached
keys instead of recomputed ones, so they differ by the dtype's rounding carried through
the layers. In float32 that is ~1e-6 on a log-probability, and 1e-3 leaves a wide margin.
In bfloat16 (8 significant bits, machine epsilon 2^-7) it is far larger: a random-init
Llama-3.2-1B shape on the CPU put the shared infill window 0.047 from the plain pass on
one log-probability (benchmarks/kv_paths.py), while the shared path's score was closer to
a float32 pass (5e-4) than the plain bfloat16 pass's was (0.0165): the difference is the
plain pass's own rounding, not a fault of the cache. The tolerance is therefore
16 epsilons of the dtype (bfloat16: 0.125 nats, float16: 0.0156), and never below 1e-3. A
broken cache (keys at the wrong positions, a cache not cropped, a prefix not expanded)
moves log-probabilities of a trained model by whole nats, far above either.
"""

from __future__ import annotations

FLOAT32_ATOL = 1e-3  # log-probabilities, float32 and float64 models
EPSILONS = 16  # bfloat16 / float16: the tolerance in units of the dtype's machine epsilon


def agreement_atol(model) -> float:
    """The largest |log p| or |H| difference allowed between the shared and plain paths
    of `model` (a torch module), from the dtype of its parameters."""
    return dtype_atol(next(model.parameters()).dtype)


def dtype_atol(dtype) -> float:
    """The same for a torch dtype: 16 machine epsilons of it, at least 1e-3."""
    import torch

    if not dtype.is_floating_point:  # quantised weights: judged at their compute precision
        return FLOAT32_ATOL
    return max(FLOAT32_ATOL, EPSILONS * torch.finfo(dtype).eps)
