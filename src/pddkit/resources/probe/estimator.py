"""The probe itself (Liu et al. 2024, sec. 3.5): one logistic regression per layer,
`fit(...) -> self`, saved and loaded as probe.json + probe.npz; the grid of fitted probes;
and their scores on texts read by the *target* model, reported as the member log-odds
(same ranking as the probability, no saturation at 1.0)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pddkit.errors import PddkitError
from pddkit.resources.probe.features import (
    EPS,
    check_mode,
    encode_prompts,
    last_token_states,
    standardize_set,
)


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
        check_mode(standardize)
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
    check_mode(standardize)
    layers = sorted({p.layer_ for p in probes})
    kept, out = [], []
    ids, cut = encode_prompts(model, tokenizer, texts, name)
    for h in last_token_states(model, tokenizer, ids, batch_size, name):  # [B, L+1, d]
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

