"""Training the probe (Liu et al., "Probing Language Models for Pre-training Data Detection",
ACL 2024, arXiv 2406.01333, sec. 3.3-3.5).

Auxiliary texts known to be absent from pre-training are split (by their labels, or at
random) into a half injected into a proxy model (the target fine-tuned on them: all in
one batch, 2 epochs) and a half that is not; the proxy is fine-tuned with float32 master
weights whatever the model's dtype. Activations of the last token of the
prompt, at every transformer layer, from the proxy train one logistic-regression probe per
layer. Every (proxy learning rate, layer) pair is one grid point: by default the pair
chosen on held-out auxiliary rows is used; with a labelled validation split the engine
chooses among all of them instead.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence

import numpy as np

from pddkit.errors import PddkitError, install_hint
from pddkit.resources.probe.estimator import LinearProbe, ProbeSearch
from pddkit.resources.probe.features import activations, check_mode, encode_prompts, pad_ids

logger = logging.getLogger(__name__)

MIN_ROWS = 10

def fine_tune_proxy(model, tokenizer, texts: Sequence[str], lr: float, epochs: int = 2,
                    lora: bool = False, lora_rank: int = 8, seed: int = 0, micro_batch: int = 8,
                    master_dtype="float32"):
    """A copy of `model` fine-tuned on `texts` (prompted), all texts in one batch (one
    optimiser step per epoch on the mean loss over all their tokens, accumulated over
    micro-batches of `micro_batch` texts so memory stays bounded); with `lora`, low-rank
    adapters on every linear layer (peft) are trained instead. Seeded (dropout, adapter
    init) without touching the caller's random state.

    The weights AdamW updates are `master_dtype` (float32) whatever the
    model's dtype: the whole copy is float32 and stays so for the activations, since
    casting it back to bfloat16 would round away most of an lr-1e-4 update (a bfloat16
    weight has 8 significant bits). With LoRA only the adapters are float32 (the frozen
    base keeps the model's dtype). Full fine-tuning thus holds 16 bytes per parameter
    (weights, gradients, two Adam moments); use LoRA for large models. `master_dtype=None`
    trains in the model's own dtype (pure bfloat16 AdamW on a bfloat16 model: kept only to
    show, in the tests, what float32 master weights change)."""
    import torch

    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    dtype = None if master_dtype is None else getattr(torch, str(master_dtype).replace("torch.", ""))
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        return _fine_tune(model, tokenizer, texts, lr, epochs, lora, lora_rank, micro_batch, dtype)


def _fine_tune(model, tokenizer, texts, lr, epochs, lora, lora_rank, micro_batch, dtype):
    import torch

    proxy = copy.deepcopy(model)
    if lora:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError:
            raise PddkitError("`probe_lora` needs peft: " + install_hint("lora")) from None
        proxy = get_peft_model(proxy, LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank,
                                                 target_modules="all-linear"))
        if dtype is not None:
            for p in proxy.parameters():
                if p.requires_grad:
                    p.data = p.data.to(dtype)  # the adapters: float32 master weights
    elif dtype is not None:
        proxy.to(dtype=dtype)  # exact for bfloat16 / float16 weights
    ids, _ = encode_prompts(model, tokenizer, texts, "the proxy model", warn=False)  # a subset
    # of the auxiliary texts, whose cuts train_probes reports once
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    n_predicted = sum(len(s) - 1 for s in ids)  # tokens the loss averages over, all texts
    device = next(proxy.parameters()).device
    opt = torch.optim.AdamW([p for p in proxy.parameters() if p.requires_grad], lr=lr)
    proxy.train()
    for _ in range(epochs):
        opt.zero_grad()
        for b in range(0, len(ids), micro_batch):
            x, mask = pad_ids(ids[b:b + micro_batch], pad)  # [B, T] each
            labels = x.masked_fill(mask == 0, -100)
            loss = proxy(input_ids=x.to(device), attention_mask=mask.to(device),
                         labels=labels.to(device)).loss  # mean over this micro-batch's tokens
            (loss * (int(mask[:, 1:].sum()) / n_predicted)).backward()  # -> the all-text mean
        opt.step()
    proxy.eval()
    return proxy


def split_auxiliary(n: int, seed: int = 0, injected: Sequence[int] | None = None,
                    name: str = "`probe_data`") -> tuple[np.ndarray, np.ndarray]:
    """(injected [n] 0/1, held_out [n] bool). `injected` comes from the file's labels when
    it has them (1 = inject into the proxy, 0 = leave out, as in ArxivMIA's
    arxiv_mia_train_real.jsonl), else half the texts at random; a stratified 20% of each
    side is held out to choose the layer and learning rate."""
    if n < MIN_ROWS:
        raise PddkitError(f"{name} has {n} texts; the probe needs at least {MIN_ROWS} "
                          "(half are injected into the proxy)")
    rng = np.random.default_rng(seed)
    if injected is None:
        injected = np.zeros(n, dtype=int)
        injected[rng.permutation(n)[: n // 2]] = 1
    else:
        injected = np.asarray(injected, dtype=int)
        for c, what in ((1, "to inject into the proxy"), (0, "to leave out")):
            if (injected == c).sum() < MIN_ROWS // 2:
                raise PddkitError(
                    f"{name} has {(injected == c).sum()} texts labelled {c} ({what}); the probe "
                    f"needs at least {MIN_ROWS // 2} of each label (or no labels: a random half "
                    "is injected)")
    held_out = np.zeros(n, dtype=bool)
    for c in (0, 1):
        idx = rng.permutation(np.flatnonzero(injected == c))
        held_out[idx[: max(1, len(idx) // 5)]] = True
    return injected, held_out


def train_probes(model, tokenizer, aux_texts: Sequence[str], lrs: Sequence[float] = (1e-4, 1e-3),
                 seed: int = 0, lora: bool = False, batch_size: int = 8, epochs: int = 2,
                 aux_labels: Sequence[int] | None = None,
                 standardize: str = "per_set") -> ProbeSearch:
    """One proxy per learning rate; per transformer layer 1..L, a probe fitted on 80% of
    the auxiliary rows and scored (AUC) on the other 20% (standardised as one set with its
    own statistics, or with the training rows', per `standardize`). `aux_labels`
    (1 = inject) replaces the random half. The embedding output (hidden_states[0]) is not a grid point:
    at the prompt's last token it holds the token ':' and, with learned absolute
    positions (GPT-2, OPT), the prompt's length, never anything about the text's content."""
    from sklearn.metrics import roc_auc_score

    check_mode(standardize)
    injected, held_out = split_auxiliary(len(aux_texts), seed, aux_labels)
    ids, cut = encode_prompts(model, tokenizer, aux_texts, "the proxy model")
    fit_rows = ~held_out
    probes, aucs = [], []
    for lr in lrs:
        proxy = fine_tune_proxy(model, tokenizer, [aux_texts[i] for i in np.flatnonzero(injected)],
                                lr, epochs=epochs, lora=lora, seed=seed, micro_batch=batch_size)
        X = activations(proxy, tokenizer, aux_texts, batch_size, "the proxy model", ids=ids)  # [N, L+1, d]
        del proxy
        for layer in range(1, X.shape[1]):  # X [N, L+1, d]; 0, the embeddings, is left out
            p = LinearProbe().fit(X[fit_rows, layer], injected[fit_rows], layer, lr,
                                  meta={"aux_texts": len(aux_texts), "aux_texts_cut": cut,
                                        "proxy_epochs": epochs, "lora": lora,
                                        "injected": int(injected.sum()),
                                        "split": "labels" if aux_labels is not None else "random",
                                        "standardize": standardize})
            aucs.append(float(roc_auc_score(injected[held_out],
                                            p.decision_function(X[held_out, layer], standardize))))
            probes.append(p)
        logger.info("probe: proxy lr %g, held-out auxiliary AUC per layer 1..%d: %s", lr,
                    X.shape[1] - 1, " ".join(f"{a:.3f}" for a in aucs[1 - X.shape[1]:]))
    search = ProbeSearch(tuple(probes), np.array(aucs))
    for p, a in zip(probes, aucs):
        p.meta_.update({"aux_val_auc": a, "lr_grid": [float(x) for x in lrs]})
    return search
