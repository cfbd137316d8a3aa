"""The device and dtype a model runs with: `auto` resolved to what this machine has, a
named device it lacks or a `quantize` it cannot run refused in one sentence before anything
loads. torch is imported only inside the functions that need it."""

from __future__ import annotations

from pddkit.errors import PddkitError, install_hint

DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZE = ("8bit", "4bit")  # bitsandbytes, on a CUDA GPU


def pick_device(device: str) -> str:
    """`device` as torch will use it: "auto" picks CUDA, then MPS, then the CPU; a named
    device this machine does not have is one sentence (check_device)."""
    import torch

    if device != "auto":
        return check_device(device)
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def check_device(device: str) -> str:
    """`device` when this machine has it ("cpu", "cuda", "cuda:1", "mps", ...); else one
    sentence saying what it has, before anything loads."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise PddkitError(f"`device` {device!r} is not a device torch knows (use auto, cpu, "
                          "cuda, cuda:N or mps)") from None
    have = available_devices()
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise PddkitError(f"`device` {device} is not available: this machine has no CUDA GPU "
                              f"usable by torch {torch.__version__} (available: {have})")
        if dev.index is not None and dev.index >= n:
            raise PddkitError(f"`device` {device} is not available: this machine has {n} CUDA "
                              f"GPU{'s' if n > 1 else ''} (cuda:0 to cuda:{n - 1})")
    elif dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if not (mps and mps.is_available()):
            raise PddkitError(f"`device` {device} is not available: this machine has no Apple "
                              f"MPS device usable by torch (available: {have})")
    elif dev.type != "cpu":
        backend = getattr(torch, dev.type, None)
        usable = getattr(backend, "is_available", None)
        if usable is None or not usable():
            raise PddkitError(f"`device` {device} is not available on this machine "
                              f"(available: {have})")
    return device


def available_devices() -> str:
    """The devices torch can use here, as `device` names them ("cpu, cuda:0, cuda:1")."""
    import torch

    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps and mps.is_available():
        found.append("mps")
    return ", ".join(found)


def pick_dtype(dtype: str, device: str):
    import torch

    if dtype not in DTYPES:
        raise PddkitError(f"`dtype` must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if dtype == "auto":
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return getattr(torch, dtype)


def resolve_device_dtype(device: str, dtype: str) -> tuple[str, str]:
    """(device, dtype) as loading resolves them, importing torch only when the answer
    depends on the hardware ("auto" device, or "auto" dtype on CUDA)."""
    if dtype not in DTYPES:
        raise PddkitError(f"`dtype` must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if device != "auto" and (dtype != "auto" or not device.startswith("cuda")):
        return device, "float32" if dtype == "auto" else dtype
    device = pick_device(device)
    return device, str(pick_dtype(dtype, device)).replace("torch.", "")


def check_quantize(quantize: str | None, device: str) -> None:
    """`quantize` ("8bit" or "4bit") needs bitsandbytes and a CUDA GPU: one sentence, before
    anything loads, when either is missing. Imports torch only when `quantize` is set."""
    if quantize is None:
        return
    if quantize not in QUANTIZE:
        raise PddkitError(f"`quantize` must be one of {', '.join(QUANTIZE)}, not {quantize!r}")
    if device == "cpu" or device.startswith("mps"):
        raise PddkitError(f"`quantize` {quantize} needs a CUDA GPU (bitsandbytes), not `device` "
                          f"{device}")
    resolved = pick_device(device)
    if not resolved.startswith("cuda"):
        raise PddkitError(f"`quantize` {quantize} needs a CUDA GPU (bitsandbytes) and this "
                          f"machine has none (available: {available_devices()})")
    from importlib.util import find_spec

    if find_spec("bitsandbytes") is None:
        raise PddkitError(f"`quantize` {quantize} needs bitsandbytes: "
                          f"{install_hint('quantize')}")
