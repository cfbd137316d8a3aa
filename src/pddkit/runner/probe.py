"""White-box probe (Liu et al. 2024, sec. 3.3-3.5, ../shared/papers/probe-arxivmia.txt).

Auxiliary texts known to be absent from pre-training are split (by their labels, or at
random) into a half injected into a proxy model (the target fine-tuned on them: all in
one batch, 2 epochs) and a half that is not; the proxy is fine-tuned with float32 master
weights whatever the model's dtype (SPEC section 3). Activations of the last token of the
prompt below, at every transformer layer, from the proxy train one logistic-regression
probe per layer. Every (proxy learning rate, layer) pair is one grid point: by default the
pair chosen on held-out auxiliary rows is used; with a labelled validation split the
pipeline chooses among all of them instead. Texts under test are read by the *target*
model; the score is the probe's member probability, reported as its log-odds (same
ranking, no saturation at 1.0).

Standardisation (`STANDARDIZE`): "per_set" (default, as the authors' code, probing-lm-data
run_probe.py, does it) standardises each set of activations (the probe's training rows,
the held-out auxiliary rows, the validation texts, the texts under test) with its own
mean and std, label-free; "train" scales every set with the probe's training rows'
statistics (`mean_`, `scale_`), so a text's score does not depend on the other texts.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pddkit import progress
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

PROMPT = "Here is a statement: {text}\nIs the above statement correct? Answer:"
MIN_ROWS = 10
STANDARDIZE = ("per_set", "train")
EPS = 1e-6  # added to every std, so a constant feature scales to 0, not to inf


def standardize_set(X: np.ndarray) -> np.ndarray:
    """[N, d] -> [N, d] z-scores of a set of activations with its own mean and std."""
    return (X - X.mean(0)) / (X.std(0) + EPS)


def _check_mode(mode: str) -> None:
    if mode not in STANDARDIZE:
        raise PddkitError(f"probe standardisation must be one of {', '.join(STANDARDIZE)}, "
                          f"not {mode!r}")


def encode_prompts(model, tokenizer, texts: Sequence[str], name: str = "model",
                   warn: bool = True) -> tuple[list[list[int]], int]:
    """Token ids of every text in PROMPT, and how many texts were cut: a prompt longer
    than the model's context keeps its end (the question the probe reads) and loses the
    tail of the text."""
    from pddkit.runner.loading import context_length

    limit = context_length(model)
    ids = tokenizer([PROMPT.format(text=t) for t in texts], verbose=False)["input_ids"]
    cut = 0
    for i, seq in enumerate(ids):
        if limit is None or len(seq) <= limit:
            continue
        text_ids = tokenizer(texts[i], add_special_tokens=False, verbose=False)["input_ids"]
        keep = len(text_ids) - (len(seq) - limit)
        while keep > 0:
            seq = tokenizer(PROMPT.format(text=tokenizer.decode(text_ids[:keep])),
                            verbose=False)["input_ids"]
            if len(seq) <= limit:
                break
            keep -= len(seq) - limit
        if keep <= 0:
            raise PddkitError(f"the probe's prompt alone does not fit the {limit}-token context "
                              f"of {name}")
        ids[i], cut = seq, cut + 1
    if cut and warn:
        logger.warning("probe: %d of %d texts were cut to fit the prompt into the %d-token "
                       "context of %s", cut, len(texts), limit, name)
    return ids, cut


def _pad(seqs: Sequence[Sequence[int]], pad: int):
    """Right-padded [B, T] ids and attention mask."""
    import torch

    T = max(len(s) for s in seqs)
    x = torch.full((len(seqs), T), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    for r, s in enumerate(seqs):
        x[r, :len(s)] = torch.tensor(s)
        mask[r, :len(s)] = 1
    return x, mask


def _last_token_states(model, tokenizer, ids: Sequence[Sequence[int]], batch_size: int,
                       name: str) -> Iterator[np.ndarray]:
    """Per batch, [B, layers + 1, d] hidden states (embeddings first) of the prompt's
    last real token, in float32; one forward pass per batch."""
    import torch

    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for b in progress.track(range(0, len(ids), batch_size), -(-len(ids) // batch_size),
                            "activations", "batch"):
        seqs = ids[b:b + batch_size]
        x, mask = _pad(seqs, pad)  # right padding: the last real token is at len - 1
        with torch.inference_mode():
            res = model(input_ids=x.to(device), attention_mask=mask.to(device),
                        output_hidden_states=True, use_cache=False)
        hs = getattr(res, "hidden_states", None)
        if not hs:
            raise PddkitError(f"{name} returns no hidden states, so the probe cannot read it")
        last = torch.tensor([len(s) - 1 for s in seqs], device=device)
        rows = torch.arange(len(seqs), device=device)
        yield torch.stack([h[rows, last].float() for h in hs], 1).cpu().numpy()  # [B, L+1, d]


def activations(model, tokenizer, texts: Sequence[str], batch_size: int = 8,
                name: str = "model", layer: int | None = None,
                ids: Sequence[Sequence[int]] | None = None) -> np.ndarray:
    """[N, layers + 1, d] last-token activations; with `layer`, [N, d] of that layer only.
    `ids`: the texts' prompts already encoded by `encode_prompts`."""
    out = []
    if ids is None:
        ids, _ = encode_prompts(model, tokenizer, texts, name)
    for h in _last_token_states(model, tokenizer, ids, batch_size, name):
        if layer is not None and layer >= h.shape[1]:
            raise PddkitError(f"the probe reads layer {layer} but {name} has {h.shape[1]}")
        out.append(h if layer is None else h[:, layer])
    return np.concatenate(out)


def probe_scores(model, tokenizer, texts: Sequence[str], probes: Sequence[LinearProbe],
                 batch_size: int = 8, name: str = "model", standardize: str = "per_set",
                 sets: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, int]:
    """[N, G] member log-odds of every probe (each reads its own layer), from one forward
    pass over the texts, and the number of texts cut to fit the context. Log-odds rank
    exactly as the probability does, but do not round to 1.0 (a tie) for the confident
    texts, as float probabilities do past ~37.

    `standardize="per_set"`: each set of texts (`sets`, index arrays that partition the
    texts, e.g. validation and test; default all texts as one set) is standardised with
    its own statistics, so the [N, layers read, d] activations are kept until the end;
    "train": with the probe's training rows' statistics, batch by batch."""
    _check_mode(standardize)
    layers = sorted({p.layer_ for p in probes})
    kept, out = [], []
    ids, cut = encode_prompts(model, tokenizer, texts, name)
    for h in _last_token_states(model, tokenizer, ids, batch_size, name):  # [B, L+1, d]
        if layers[-1] >= h.shape[1]:
            raise PddkitError(f"the probe reads layer {layers[-1]} but {name} has "
                              f"{h.shape[1]}: was it trained for another model?")
        if standardize == "train":
            out.append(np.stack([p.decision_function(h[:, p.layer_]) for p in probes], 1))  # [B, G]
        else:
            kept.append(h[:, layers])  # [B, U, d], the layers the probes read
    if standardize == "train":
        return np.concatenate(out), cut
    X = np.concatenate(kept)  # [N, U, d]
    sets = [np.arange(len(texts))] if sets is None else [np.asarray(s) for s in sets]
    if sorted(np.concatenate(sets).tolist()) != list(range(len(texts))):
        raise ValueError("probe_scores: `sets` must partition the texts")
    scores = np.empty((len(texts), len(probes)))  # [N, G]
    for rows in sets:
        if len(rows) < 2:
            raise PddkitError(f"per-set standardisation of the probe's activations needs at least "
                              f"2 texts in a set, not {len(rows)}; use the 'train' standardisation")
        for g, p in enumerate(probes):
            scores[rows, g] = p.decision_function(X[rows, layers.index(p.layer_)], "per_set")
    return scores, cut


def fine_tune_proxy(model, tokenizer, texts: Sequence[str], lr: float, epochs: int = 2,
                    lora: bool = False, lora_rank: int = 8, seed: int = 0, micro_batch: int = 8,
                    master_dtype="float32"):
    """A copy of `model` fine-tuned on `texts` (prompted), all texts in one batch (one
    optimiser step per epoch on the mean loss over all their tokens, accumulated over
    micro-batches of `micro_batch` texts so memory stays bounded); with `lora`, low-rank
    adapters on every linear layer (peft) are trained instead. Seeded (dropout, adapter
    init) without touching the caller's random state.

    The weights AdamW updates are `master_dtype` (float32, SPEC section 3) whatever the
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
            raise PddkitError("--probe-lora needs `pip install peft`") from None
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
            x, mask = _pad(ids[b:b + micro_batch], pad)  # [B, T] each
            labels = x.masked_fill(mask == 0, -100)
            loss = proxy(input_ids=x.to(device), attention_mask=mask.to(device),
                         labels=labels.to(device)).loss  # mean over this micro-batch's tokens
            (loss * (int(mask[:, 1:].sum()) / n_predicted)).backward()  # -> the all-text mean
        opt.step()
    proxy.eval()
    return proxy


class LinearProbe:
    """Logistic regression on one layer's activations, `fit(...) -> self`.
    State: layer_, proxy_lr_, coef_ [d], intercept_, mean_ [d], scale_ [d]."""

    def __init__(self, C: float = 1.0) -> None:
        self.C = C

    def fit(self, X: np.ndarray, y: np.ndarray, layer: int, proxy_lr: float = float("nan"),
            meta: dict | None = None) -> LinearProbe:
        """X [N, d] from `layer`; standardisation uses these (training) rows only."""
        from sklearn.linear_model import LogisticRegression

        self.mean_ = X.mean(0)  # [d]; the training rows standardised with their own statistics
        self.scale_ = X.std(0) + EPS  # [d]
        clf = LogisticRegression(C=self.C, max_iter=2000).fit((X - self.mean_) / self.scale_, y)
        self.coef_, self.intercept_ = clf.coef_[0].copy(), float(clf.intercept_[0])
        self.layer_, self.proxy_lr_ = int(layer), float(proxy_lr)
        self.meta_ = dict(meta or {})
        return self

    def decision_function(self, X: np.ndarray, standardize: str = "train") -> np.ndarray:
        """Member log-odds log(P / (1 - P)) from [N, d] activations of layer `layer_`,
        standardised with the training rows' `mean_`/`scale_` ("train") or as one set
        with its own statistics ("per_set", label-free; `mean_`/`scale_` unused)."""
        _check_mode(standardize)
        if X.shape[-1] != self.coef_.shape[0]:
            raise PddkitError(f"the probe expects {self.coef_.shape[0]}-wide activations, the "
                              f"model gives {X.shape[-1]}: was it trained for another model?")
        Z = standardize_set(X) if standardize == "per_set" else (X - self.mean_) / self.scale_
        return Z @ self.coef_ + self.intercept_

    def predict_proba(self, X: np.ndarray, standardize: str = "train") -> np.ndarray:
        """Member probability from [N, d] activations of layer `layer_`."""
        return 1.0 / (1.0 + np.exp(-self.decision_function(X, standardize)))

    def save(self, directory: str | Path) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        np.savez(d / "probe.npz", coef=self.coef_, mean=self.mean_, scale=self.scale_)
        (d / "probe.json").write_text(json.dumps({
            "format": "pddkit-probe/1", "layer": self.layer_, "proxy_lr": self.proxy_lr_,
            "intercept": self.intercept_, "C": self.C, **self.meta_}, indent=2) + "\n")
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
        probe.proxy_lr_ = float(meta.get("proxy_lr", float("nan")))
        probe.meta_ = {k: v for k, v in meta.items()
                       if k not in ("format", "layer", "proxy_lr", "intercept", "C")}
        return probe


@dataclass(frozen=True)
class ProbeSearch:
    """One fitted probe per (proxy learning rate, layer) and its AUC on held-out
    auxiliary rows; `best` is the default choice (best auxiliary AUC, first on ties)."""

    probes: tuple[LinearProbe, ...]
    aux_val_auc: np.ndarray  # [G]

    @property
    def best(self) -> LinearProbe:
        return self.probes[int(np.argmax(self.aux_val_auc))]

    @property
    def grid(self) -> list[dict]:
        return [{"proxy_lr": p.proxy_lr_, "layer": p.layer_} for p in self.probes]


def split_auxiliary(n: int, seed: int = 0, injected: Sequence[int] | None = None,
                    name: str = "--probe-data") -> tuple[np.ndarray, np.ndarray]:
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

    _check_mode(standardize)
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
