"""White-box probe (Liu et al. 2024, sec. 3.3-3.5, ../shared/papers/probe-arxivmia.txt).

Auxiliary texts known to be absent from pre-training are split at random into a half
injected into a proxy model (the target fine-tuned on them: all in one batch, 2 epochs)
and a half that is not. Activations of the last token of the prompt below, at every
layer, from the proxy train one logistic-regression probe per layer (features
standardised with the probe's own training rows only); the layer and the proxy's
learning rate are chosen on held-out auxiliary rows. Texts under test are read by the
*target* model at that layer; the score is the probe's member probability.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pddkit import progress
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

PROMPT = "Here is a statement: {text}\nIs the above statement correct? Answer:"
MIN_ROWS = 10


def activations(model, tokenizer, texts: Sequence[str], batch_size: int = 8,
                name: str = "model", layer: int | None = None) -> np.ndarray:
    """[N, layers + 1, d] hidden states of the prompt's last real token (embeddings first);
    with `layer`, [N, d] of that layer only."""
    import torch

    prompts = [PROMPT.format(text=t) for t in texts]
    ids = tokenizer(prompts, verbose=False)["input_ids"]
    device = next(model.parameters()).device
    out = []
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for b in progress.track(range(0, len(ids), batch_size), -(-len(ids) // batch_size),
                            "activations", "batch"):
        seqs = ids[b:b + batch_size]
        T = max(len(s) for s in seqs)
        x = torch.full((len(seqs), T), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), T), dtype=torch.long)
        for r, s in enumerate(seqs):  # right padding: the last real token is at len - 1
            x[r, :len(s)] = torch.tensor(s)
            mask[r, :len(s)] = 1
        with torch.inference_mode():
            res = model(input_ids=x.to(device), attention_mask=mask.to(device),
                        output_hidden_states=True, use_cache=False)
        hs = getattr(res, "hidden_states", None)
        if not hs:
            raise PddkitError(f"{name} returns no hidden states, so the probe cannot read it")
        last = torch.tensor([len(s) - 1 for s in seqs], device=device)
        rows = torch.arange(len(seqs), device=device)
        if layer is not None:
            if layer >= len(hs):
                raise PddkitError(f"the probe reads layer {layer} but {name} has {len(hs)}")
            out.append(hs[layer][rows, last].float().cpu().numpy())  # [B, d]
        else:
            out.append(torch.stack([h[rows, last].float() for h in hs], 1).cpu().numpy())  # [B, L, d]
    return np.concatenate(out)


def fine_tune_proxy(model, tokenizer, texts: Sequence[str], lr: float, epochs: int = 2,
                    lora: bool = False, lora_rank: int = 8):
    """A copy of `model` fine-tuned on `texts` (prompted), all texts in one batch."""
    import torch

    proxy = copy.deepcopy(model)
    if lora:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError:
            raise PddkitError("--probe-lora needs `pip install peft`") from None
        proxy = get_peft_model(proxy, LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank,
                                                 target_modules="all-linear"))
    enc = tokenizer([PROMPT.format(text=t) for t in texts], padding=True, return_tensors="pt")
    labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
    device = next(proxy.parameters()).device
    opt = torch.optim.AdamW([p for p in proxy.parameters() if p.requires_grad], lr=lr)
    proxy.train()
    for _ in range(epochs):
        loss = proxy(input_ids=enc["input_ids"].to(device),
                     attention_mask=enc["attention_mask"].to(device), labels=labels.to(device)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    proxy.eval()
    return proxy


class LinearProbe:
    """One logistic-regression probe per layer; `fit(...) -> self` chooses the layer on
    validation rows. State: layer_, coef_ [d], intercept_, mean_ [d], scale_ [d]."""

    def __init__(self, C: float = 1.0) -> None:
        self.C = C

    def fit(self, X: np.ndarray, y: np.ndarray, X_val: np.ndarray, y_val: np.ndarray,
            meta: dict | None = None) -> LinearProbe:
        """X [N, layers, d]; standardisation uses X (the probe's training rows) only."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.metrics import roc_auc_score

        aucs, fits = [], []
        for layer in range(X.shape[1]):
            mean = X[:, layer].mean(0)
            scale = X[:, layer].std(0) + 1e-6
            clf = LogisticRegression(C=self.C, max_iter=2000).fit((X[:, layer] - mean) / scale, y)
            p = clf.predict_proba((X_val[:, layer] - mean) / scale)[:, 1]
            aucs.append(float(roc_auc_score(y_val, p)))
            fits.append((clf.coef_[0].copy(), float(clf.intercept_[0]), mean, scale))
        self.layer_ = int(np.argmax(aucs))
        self.coef_, self.intercept_, self.mean_, self.scale_ = fits[self.layer_]
        self.val_auc_ = aucs
        self.meta_ = meta or {}
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Member probability from [N, d] activations of layer `layer_`."""
        if X.shape[-1] != self.coef_.shape[0]:
            raise PddkitError(f"the probe expects {self.coef_.shape[0]}-wide activations, the "
                              f"model gives {X.shape[-1]}: was it trained for another model?")
        z = ((X - self.mean_) / self.scale_) @ self.coef_ + self.intercept_
        return 1.0 / (1.0 + np.exp(-z))

    def save(self, directory: str | Path) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        np.savez(d / "probe.npz", coef=self.coef_, mean=self.mean_, scale=self.scale_)
        (d / "probe.json").write_text(json.dumps({
            "format": "pddkit-probe/1", "layer": self.layer_, "intercept": self.intercept_,
            "C": self.C, "val_auc_per_layer": self.val_auc_, **self.meta_}, indent=2) + "\n")
        return d

    @classmethod
    def load(cls, directory: str | Path) -> LinearProbe:
        d = Path(directory)
        if not (d / "probe.json").is_file() or not (d / "probe.npz").is_file():
            raise PddkitError(f"{d} is not a saved probe (probe.json and probe.npz)")
        meta = json.loads((d / "probe.json").read_text())
        with np.load(d / "probe.npz", allow_pickle=False) as z:
            probe = cls(C=meta.get("C", 1.0))
            probe.coef_, probe.mean_, probe.scale_ = z["coef"], z["mean"], z["scale"]
        probe.layer_, probe.intercept_ = int(meta["layer"]), float(meta["intercept"])
        probe.val_auc_ = meta.get("val_auc_per_layer", [])
        probe.meta_ = {k: v for k, v in meta.items() if k not in
                       ("format", "layer", "intercept", "C", "val_auc_per_layer")}
        return probe


def train_probe(model, tokenizer, aux_texts: Sequence[str], lrs: Sequence[float] = (1e-4, 1e-3),
                seed: int = 0, lora: bool = False, batch_size: int = 8) -> LinearProbe:
    """Split the auxiliary texts (injected / not), train one proxy per learning rate, fit
    per-layer probes on 80% of the rows and choose (lr, layer) on the other 20%."""
    if len(aux_texts) < MIN_ROWS:
        raise PddkitError(f"--probe-data has {len(aux_texts)} texts; the probe needs at least "
                          f"{MIN_ROWS} (half are injected into the proxy)")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(aux_texts))
    injected = np.zeros(len(aux_texts), dtype=int)
    injected[order[: len(order) // 2]] = 1
    val = np.zeros(len(aux_texts), dtype=bool)
    for c in (0, 1):  # stratified 20% held out for choosing the layer and lr
        idx = rng.permutation(np.flatnonzero(injected == c))
        val[idx[: max(1, len(idx) // 5)]] = True
    best = None
    for lr in lrs:
        proxy = fine_tune_proxy(model, tokenizer,
                                [aux_texts[i] for i in np.flatnonzero(injected == 1)], lr,
                                lora=lora)
        X = activations(proxy, tokenizer, aux_texts, batch_size, name="the proxy model")
        probe = LinearProbe().fit(X[~val], injected[~val], X[val], injected[val],
                                  meta={"proxy_lr": lr, "aux_texts": len(aux_texts)})
        logger.info("probe: proxy lr %g -> best layer %d, validation AUC %.3f", lr, probe.layer_,
                    max(probe.val_auc_))
        if best is None or max(probe.val_auc_) > max(best.val_auc_):
            best = probe
        del proxy
    best.meta_["lr_grid"] = list(lrs)
    return best
