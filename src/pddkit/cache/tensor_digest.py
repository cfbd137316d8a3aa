"""Content digest of a model object in memory: every parameter and buffer (persistent or
not), by name, dtype, shape and bytes.

A model handed over through the Python API may have been changed after it was loaded
(fine-tuned, LoRA-merged, noise added), so the files it came from do not name it: its
tensors do. Each distinct tensor is hashed once (sha256 over its raw bytes, moved to the
CPU in 64 MiB chunks; bfloat16 and other dtypes numpy lacks are read as bytes), and the
digests are combined with the tensors' names, dtypes and shapes.

The digest is remembered per model object while nothing visible changed: the same
tensor objects under the same names, each with the same data pointer, dtype, shape,
stride and version counter (PyTorch bumps it on every in-place write through the tensor,
optimizer steps and `load_state_dict` included), and the same bytes in a sample of blocks
spread over each tensor. Writes through `.data` (PEFT's merge uses them) do not bump the
version counter; the sample catches those that change much of a tensor (a merge, noise,
fine-tuning), not a `.data` write to a few values outside it: `forget(model)` drops the
remembered digest.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import weakref

from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

_CHUNK = 64 * 2**20  # bytes moved to the CPU at a time
_SAMPLE_BLOCKS, _SAMPLE_BYTES = 16, 4096  # the memo's check: blocks per tensor, bytes per block
_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> (signature, sample, digest)


def named_tensors(model) -> list[tuple[str, object]]:
    """(kind:name, tensor) of every parameter and buffer, tied ones under each name, sorted."""
    if hasattr(model, "named_parameters") and hasattr(model, "named_buffers"):
        found = [(f"parameter:{n}", p) for n, p in model.named_parameters(remove_duplicate=False)]
        found += [(f"buffer:{n}", b) for n, b in model.named_buffers(remove_duplicate=False)]
    else:  # not an nn.Module: what its state_dict holds
        found = [(f"state:{n}", t) for n, t in model.state_dict().items()]
    return sorted(found, key=lambda kv: kv[0])


def tensor_digest(model) -> str:
    """Hex sha256 of the model's tensors (see the module docstring); remembered per object."""
    tensors = named_tensors(model)
    signature, sample = _signature(tensors), _sample(tensors)
    remembered = None
    with contextlib.suppress(TypeError):  # not weak-referenceable: never remembered
        remembered = _MEMO.get(model)
    if remembered is not None and remembered[0] == signature:
        if remembered[1] == sample:
            return remembered[2]
        logger.info("the model's tensors changed without a version bump (a write through "
                    "`.data`?): hashing them again")
    digest = _digest(tensors)
    with contextlib.suppress(TypeError):
        _MEMO[model] = (signature, sample, digest)
    return digest


def forget(model) -> None:
    """Drop the digest remembered for `model` (after a change the memo cannot see)."""
    with contextlib.suppress(TypeError):
        _MEMO.pop(model, None)


def _signature(tensors) -> tuple:
    return tuple((name, id(t), t.data_ptr(), _version(t), str(t.dtype), tuple(t.shape),
                  tuple(t.stride()), t.storage_offset(), str(t.device)) for name, t in tensors)


def _version(t) -> object:
    """The tensor's version counter; for a tensor without one (made in inference mode) a
    new object, equal to nothing: such a model is hashed on every call."""
    try:
        return t._version
    except RuntimeError:
        return object()


def _raw(name: str, t):
    """The tensor's bytes as a flat uint8 tensor on its device."""
    import torch

    t = t.detach()
    if t.device.type == "meta":
        raise PddkitError(f"the model's tensor {name.split(':', 1)[1]} has no data in memory "
                          "(meta device, offloaded): pddkit cannot fingerprint it for the cache, "
                          "so run without a cache or load the model by name")
    if t.is_quantized:
        t = t.int_repr()
    flat = t.reshape(-1)  # [numel]
    if not flat.is_contiguous():
        flat = flat.contiguous()
    if flat.numel() == 0:
        return flat.new_zeros(0, dtype=torch.uint8)
    return flat.view(torch.uint8)  # [nbytes]


def _digest(tensors) -> str:
    """sha256 over (name, dtype, shape, sha256 of bytes) lines; shared storage hashed once."""
    logger.info("hashing the tensors of a model handed over in memory (%d tensors)", len(tensors))
    per_view: dict[tuple, str] = {}
    h = hashlib.sha256()
    for name, t in tensors:
        view = (t.data_ptr(), str(t.dtype), tuple(t.shape), tuple(t.stride()), str(t.device))
        if view not in per_view:
            per_view[view] = _bytes_digest(_raw(name, t))
        h.update(f"{name}|{str(t.dtype).replace('torch.', '')}|{tuple(t.shape)}|"
                 f"{per_view[view]}\n".encode())
    return h.hexdigest()


def _bytes_digest(raw) -> str:
    h = hashlib.sha256()
    if raw.device.type == "cpu":
        h.update(raw.numpy())
        return h.hexdigest()
    for start in range(0, raw.numel(), _CHUNK):
        h.update(raw[start:start + _CHUNK].cpu().numpy())
    return h.hexdigest()


def _sample(tensors) -> str:
    """sha256 of up to _SAMPLE_BLOCKS blocks of each tensor, spread evenly over its bytes."""
    import torch

    h = hashlib.sha256()
    for name, t in tensors:
        raw = _raw(name, t)
        n = raw.numel()
        if n <= _SAMPLE_BLOCKS * _SAMPLE_BYTES:
            part = raw
        else:
            step = (n - _SAMPLE_BYTES) // (_SAMPLE_BLOCKS - 1)
            part = torch.cat([raw[i * step:i * step + _SAMPLE_BYTES] for i in range(_SAMPLE_BLOCKS)])
        h.update(part.cpu().numpy())
    return h.hexdigest()
