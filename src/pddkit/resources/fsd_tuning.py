"""FSD's fine-tuning (Zhang et al., ICLR 2025; SPEC 3e): a LoRA adapter (peft) trained on the
calibration non-members, with plain torch and the run's seed.

The recipe is the authors' (run_sft.sh; sft.py:67-121,153-168, through TRL's SFTTrainer and
transformers' Trainer): LoRA r=16, alpha=32, dropout 0.05, no bias, peft's default target
modules for the architecture; AdamW (betas 0.9/0.999, eps 1e-8) at lr 1e-3 with weight
decay 5e-4, 10 linear warm-up steps from 0 then a cosine decay to 0 (transformers'
get_cosine_schedule_with_warmup, stepped after each optimiser step), gradients clipped to
norm 1 (TrainingArguments' default max_grad_norm), 3 epochs of batches of 8 texts drawn in a
seeded random order, the last incomplete batch dropped, each text at most 1024 tokens, no
packing; the loss is the mean over every text token of the batch.

What pddkit does otherwise (docs/methods/fsd.md, the complete list): a text is [start token]
+ its ids (SPEC section 2), as the scoring pass sees it; the base stays in the target's own
dtype (float32 on a CPU) instead of 8-bit, the adapters in float32; on a CUDA GPU a float32
model trains under float16 autocast with a gradient scaler (the authors' `--fp16`), on a
CPU in float32. The adapter is trained on a copy of the target model (the target itself is
never touched), and everything random (adapter initialisation, dropout, batch order) comes
from the seed, without touching the caller's random state."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from pddkit.errors import PddkitError, install_hint

logger = logging.getLogger(__name__)

WEIGHTS = "adapter_model.safetensors"  # peft's file names: `--adapter DIR` loads the folder
CONFIG = "adapter_config.json"
RECORD = "fsd.json"  # how it was trained
MAX_GRAD_NORM = 1.0  # transformers' TrainingArguments default, which sft.py keeps
# bumped whenever the training code changes the adapter it gives: part of the cache key
TUNING_CODE_VERSION = 1


@dataclass(frozen=True)
class TuningSettings:
    """The fine-tuning hyperparameters (fsd's parameters of the same names)."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    lr: float = 1e-3
    epochs: int = 3
    batch: int = 8
    warmup: int = 10
    weight_decay: float = 5e-4
    length: int = 1024  # tokens per text, start token included

    @classmethod
    def of(cls, params: dict) -> TuningSettings:
        return cls(**{f.name: params[f.name] for f in fields(cls)})

    def key(self) -> tuple:
        """What Observation.finetuned is keyed by."""
        return tuple(asdict(self).items())

    def check(self) -> None:
        rules = [(self.r >= 1, f"r must be at least 1, not {self.r}"),
                 (self.alpha > 0, f"alpha must be positive, not {self.alpha}"),
                 (0 <= self.dropout < 1, f"dropout must be in [0, 1), not {self.dropout}"),
                 (self.lr > 0, f"lr must be positive, not {self.lr}"),
                 (self.epochs >= 1, f"epochs must be at least 1, not {self.epochs}"),
                 (self.batch >= 1, f"batch must be at least 1, not {self.batch}"),
                 (self.warmup >= 0, f"warmup must be 0 or more, not {self.warmup}"),
                 (self.weight_decay >= 0, f"weight_decay must be 0 or more, not {self.weight_decay}"),
                 (self.length >= 2, f"length must be at least 2 tokens, not {self.length}")]
        for ok, why in rules:
            if not ok:
                raise PddkitError(why)

    def steps(self, n_texts: int) -> int:
        """Optimiser steps on `n_texts`: whole batches per epoch (the last one dropped)."""
        return (n_texts // self.batch) * self.epochs


@dataclass(frozen=True)
class Adapter:
    """A trained LoRA adapter: its weights (peft's safetensors, bytes), its peft config, and
    what results.json records of its training."""

    weights: bytes
    config: dict
    record: dict = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """sha256 of what the adapter computes: its tensors and its LoRA configuration (not
        where it was saved or which peft wrote it)."""
        keep = {k: self.config.get(k) for k in ("r", "lora_alpha", "lora_dropout", "bias",
                                                "target_modules", "fan_in_fan_out", "use_rslora",
                                                "use_dora", "init_lora_weights")}
        h = hashlib.sha256(self.weights)
        h.update(json.dumps(keep, sort_keys=True, default=str).encode())
        return h.hexdigest()

    def save(self, folder: str | Path) -> Path:
        """A PEFT adapter folder (adapter_config.json, adapter_model.safetensors) and fsd.json:
        `pddkit run --adapter FOLDER` or peft's PeftModel.from_pretrained load it."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        (out / WEIGHTS).write_bytes(self.weights)
        (out / CONFIG).write_text(json.dumps(self.config, indent=2, sort_keys=True, default=str))
        (out / RECORD).write_text(json.dumps(self.record, indent=2, sort_keys=True))
        return out

    @classmethod
    def load(cls, folder: str | Path) -> Adapter | None:
        """The adapter saved in `folder`, or None when it holds none (or an unreadable one)."""
        d = Path(folder)
        try:
            return cls((d / WEIGHTS).read_bytes(), json.loads((d / CONFIG).read_text()),
                       json.loads((d / RECORD).read_text()))
        except (OSError, ValueError):
            return None


def _peft():
    try:
        import peft
    except ImportError:
        raise PddkitError("fsd trains a LoRA adapter with peft: " + install_hint("lora")) from None
    return peft


def lora_config(settings: TuningSettings):
    peft = _peft()
    return peft.LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                           bias="none", task_type="CAUSAL_LM")


def _with_lora(model, settings: TuningSettings):
    """A copy of `model` with fresh LoRA adapters (float32; initialised from the current
    random state), the copy's own weights frozen."""
    peft = _peft()
    try:
        with warnings.catch_warnings():  # GPT-2's Conv1D: peft sets fan_in_fan_out itself
            warnings.filterwarnings("ignore", message="fan_in_fan_out is set to False")
            tuned = peft.get_peft_model(copy.deepcopy(model), lora_config(settings))
    except ValueError as e:  # an architecture peft has no default target modules for
        raise PddkitError(f"fsd cannot put LoRA adapters on {type(model).__name__}: {e}") from None
    for p in tuned.parameters():
        if p.requires_grad:
            p.data = p.data.float()
    return tuned


def cosine_factor(step: int, warmup: int, total: int) -> float:
    """The learning-rate factor at `step` (0-based) of transformers' cosine schedule with
    warm-up: step / warmup during the warm-up, then 0.5 (1 + cos(pi progress))."""
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def train_adapter(model, start_id: int, ids: Sequence[Sequence[int]], settings: TuningSettings,
                  seed: int, base_name: str = "") -> Adapter:
    """A LoRA adapter for `model` trained on the token ids of the fine-tuning texts (no start
    token: it is prepended here), with `settings` and `seed` (module docstring)."""
    import torch

    settings.check()
    total = settings.steps(len(ids))
    if total == 0:
        raise PddkitError(f"fsd fine-tunes on batches of {settings.batch} calibration "
                          f"non-members and has {len(ids)}: give more non-members, or a "
                          f"smaller batch (fsd:batch={max(1, len(ids))})")
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        tuned = _with_lora(model, settings)
        losses = _train(tuned, start_id, ids, settings, seed, total)
    from peft import get_peft_model_state_dict
    from safetensors.torch import save

    state = {k: v.detach().to("cpu").contiguous()
             for k, v in get_peft_model_state_dict(tuned).items()}
    config = tuned.peft_config["default"].to_dict()
    config["base_model_name_or_path"] = base_name
    config = json.loads(json.dumps(config, default=_plain))
    record = {"texts": len(ids), "steps": total, "settings": asdict(settings), "seed": seed,
              "cut_to_length": sum(len(s) + 1 > settings.length for s in ids),
              "first_loss": losses[0], "last_loss": losses[-1],
              "precision": _precision(tuned)}
    logger.info("fsd: adapter trained on %d non-members in %d steps (loss %.4f -> %.4f)",
                len(ids), total, losses[0], losses[-1])
    return Adapter(save(state), config, record)


def _plain(value):
    """A peft config value JSON keeps (sets sorted, enums by value)."""
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return getattr(value, "value", str(value))


def _amp(model) -> bool:
    """Float16 autocast: a float32 model on a CUDA GPU (the authors' `--fp16`)."""
    import torch

    p = next(model.parameters())
    return p.device.type == "cuda" and _base_dtype(model) == torch.float32


def _base_dtype(model):
    return next(p for p in model.parameters() if not p.requires_grad).dtype


def _precision(model) -> str:
    dtype = str(_base_dtype(model)).replace("torch.", "")
    return f"{dtype} base, float32 adapters" + (", float16 autocast" if _amp(model) else "")


def _train(tuned, start_id: int, ids, settings: TuningSettings, seed: int,
           total: int) -> list[float]:
    import torch

    device = next(tuned.parameters()).device
    params = [p for p in tuned.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=settings.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=settings.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: cosine_factor(s, settings.warmup, total))
    amp = _amp(tuned)
    scaler = torch.amp.GradScaler("cuda") if amp else None
    order = torch.Generator().manual_seed(seed)
    rows = [[start_id, *list(s)][:settings.length] for s in ids]
    per_epoch = len(rows) // settings.batch
    losses: list[float] = []
    tuned.train()
    for _ in range(settings.epochs):
        perm = torch.randperm(len(rows), generator=order).tolist()
        for b in range(per_epoch):
            batch = [rows[i] for i in perm[b * settings.batch:(b + 1) * settings.batch]]
            width = max(len(r) for r in batch)
            x = torch.zeros((len(batch), width), dtype=torch.long)
            mask = torch.zeros_like(x)
            for j, r in enumerate(batch):
                x[j, :len(r)] = torch.tensor(r)
                mask[j, :len(r)] = 1
            labels = x.masked_fill(mask == 0, -100)
            with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
                loss = tuned(input_ids=x.to(device), attention_mask=mask.to(device),
                             labels=labels.to(device)).loss  # mean over the batch's text tokens
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM)
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM)
                opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
    tuned.eval()
    return losses


def with_adapter(model, adapter: Adapter, settings: TuningSettings):
    """A copy of `model` with `adapter` on it (unmerged, eval mode), as it was trained."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load

    tuned = _with_lora(model, settings)
    found = set_peft_model_state_dict(tuned, load(adapter.weights))
    unexpected = getattr(found, "unexpected_keys", None)
    if unexpected:
        raise PddkitError(f"the fsd adapter does not fit {type(model).__name__} (unexpected "
                          f"weights {sorted(unexpected)[:3]}): remove it from the cache")
    for p in tuned.parameters():
        p.requires_grad_(False)
    return tuned.eval()


def adapter_key(target_fingerprint: str, ids: Sequence[Sequence[int]], settings: TuningSettings,
                seed: int, device: str) -> str:
    """What a trained adapter is stored under in the statistics cache: the target model (its
    cache fingerprint), the fine-tuning texts' token ids in order, the settings, the seed, the
    device kind it trains on (a CUDA GPU trains under float16 autocast) and
    TUNING_CODE_VERSION."""
    h = hashlib.sha256()
    for s in ids:
        h.update(json.dumps([int(i) for i in s]).encode() + b"\n")
    parts = {"target": target_fingerprint, "texts": h.hexdigest(), "settings": asdict(settings),
             "seed": int(seed), "device": device, "code": TUNING_CODE_VERSION}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
