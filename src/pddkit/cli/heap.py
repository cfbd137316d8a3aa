"""The C heap of a pddkit process: large arrays from the heap, freed memory kept for the next.

glibc's malloc serves every allocation above 32 MB (a batch's [positions, vocabulary]
logits, a training step's activations and gradients) with a fresh mmap and returns it to
the system when freed, so the next array of the same size has every page faulted in again:
on 2 cores a fresh 89 MB array cost 46 ms where writing into a kept one cost 10, and a
sandbox training step ran 25-28% faster with the memory kept (benchmarks in
docs/performance.md; the same losses to the last bit). With mmap off for large blocks and a
trim threshold of 1 GB, freed blocks stay in the heap and are reused; the process's peak
memory is unchanged, but it is not given back before the process ends. Only the pddkit
executable does this (cli/app.entry), never `import pddkit`. PDDKIT_MALLOC=default leaves
malloc as it is.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX = -1, -2, -4  # glibc's malloc.h
TRIM_THRESHOLD = 2**30  # freed memory at the top of the heap kept up to this
TOP_PAD = 64 * 2**20  # the heap grows by at least this much at a time


def keep_freed_memory() -> bool:
    """Tune glibc's malloc as the module docstring says; False (nothing changed) on other
    systems and C libraries, or with PDDKIT_MALLOC=default."""
    if not sys.platform.startswith("linux") or os.environ.get("PDDKIT_MALLOC") == "default":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc (musl has none)
    except (OSError, AttributeError):
        return False
    return all(mallopt(param, value) == 1 for param, value in (
        (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD)))
