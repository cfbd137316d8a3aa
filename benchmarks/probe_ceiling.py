"""How far can any linear probe on the prompt's last-token activation go on a sandbox model?

The `probe` method (Liu et al. 2024) trains its probe on a proxy model and applies it to
the target. Its AUC can only exceed chance if the target's activations at that token
encode membership linearly at all. This script measures that ceiling directly: per layer,
a logistic regression trained on the *target's own* member / non-member activations
(5-fold cross-validation with a document's windows kept in one fold, an oracle no real
user has), beside the `probe` method as pddkit runs it (proxy fine-tuned on the sandbox's
reference pool) and the `loss` method, on the same windows. The oracle is also given the
mean of each layer's hidden states over the text's own tokens (the prompt's text span),
a feature the paper does not use, to see whether membership is linear anywhere in them.

    pddkit sandbox --corpus ../shared/corpora/gutenberg --output SB --windows 64
    python benchmarks/probe_ceiling.py SB [--run run] [--words 32] [--per-doc 6]
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np


def sandbox_windows(sandbox: Path, words: int, per_doc: int):
    """The sandbox's member / non-member windows, rebuilt from its corpus and split.json."""
    from pddkit.sandbox.corpus import load_corpus
    from pddkit.sandbox.split import Split, windows

    cfg = json.loads((sandbox / "summary.json").read_text())["config"]
    split = json.loads((sandbox / "split.json").read_text())
    corpus = load_corpus(cfg["corpus"], cfg["section_words"])
    role = split["documents"]
    docs = {r: tuple(d for d in corpus.documents if role.get(d.id) == r)
            for r in ("member", "nonmember", "reference")}
    return windows(Split(docs["member"], docs["nonmember"], docs["reference"], (), 0,
                         split["seed"]), words, per_doc=per_doc, seed=split["seed"])


def mean_text_activations(model, tokenizer, texts, batch_size: int = 32) -> np.ndarray:
    """[N, layers + 1, d]: each layer's hidden states averaged over the text's tokens
    inside the probe's prompt (prompt words and padding excluded)."""
    import torch

    from pddkit.resources.probe import PROMPT

    head, tail = PROMPT.split("{text}")
    pre = tokenizer(head, verbose=False)["input_ids"]
    post = tokenizer(tail, add_special_tokens=False, verbose=False)["input_ids"]
    out = []
    for b in range(0, len(texts), batch_size):
        body = tokenizer(texts[b:b + batch_size], add_special_tokens=False, verbose=False)["input_ids"]
        seqs = [pre + t + post for t in body]
        T = max(map(len, seqs))
        x = torch.zeros((len(seqs), T), dtype=torch.long)
        mask = torch.zeros_like(x)
        span = torch.zeros((len(seqs), T))  # [B, T] 1 on the text's own tokens
        for r, (s, t) in enumerate(zip(seqs, body)):
            x[r, :len(s)], mask[r, :len(s)] = torch.tensor(s), 1
            span[r, len(pre):len(pre) + len(t)] = 1
        with torch.inference_mode():
            dev = next(model.parameters()).device
            hs = model(input_ids=x.to(dev), attention_mask=mask.to(dev),
                       output_hidden_states=True).hidden_states
        H = torch.stack(hs, 1).float().cpu()  # [B, layers + 1, T, d]
        w = span / span.sum(1, keepdim=True)  # [B, T]
        out.append(torch.einsum("bltd,bt->bld", H, w).numpy())  # [B, layers + 1, d]
    return np.concatenate(out)


def main() -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from pddkit.backends.hf_loading import load_model
    from pddkit.engine.config import RunConfig
    from pddkit.engine.run import run_dataset
    from pddkit.resources.probe import activations

    ap = argparse.ArgumentParser()
    ap.add_argument("sandbox", type=Path)
    ap.add_argument("--run", default="run", help="the run folder inside the sandbox output")
    ap.add_argument("--words", type=int, default=32)
    ap.add_argument("--per-doc", type=int, default=6)
    ap.add_argument("--probe-lrs", default="1e-4,1e-3,1e-2")
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda[:N] or mps")
    a = ap.parse_args()

    ds = sandbox_windows(a.sandbox, a.words, a.per_doc)
    texts = [s.text for s in ds.samples]
    y = np.array(ds.labels)
    groups = [s.group for s in ds.samples]
    model_dir = a.sandbox / a.run / "target-model"
    lm = load_model(str(model_dir), device=a.device, dtype="float32")
    cfg = lm.model.config
    print(f"target {model_dir}: {cfg.n_layer} layers x {cfg.n_embd} wide; {len(texts)} windows "
          f"of {a.words} words ({int(y.sum())} members) from {len(set(groups))} documents")

    t0 = time.perf_counter()
    rc = RunConfig(model=str(model_dir), methods="loss,probe", n_bootstrap=100, blind=False,
                   device=a.device,
                   probe_data=str(a.sandbox / "reference-pool.jsonl"),
                   probe_lrs=tuple(float(v) for v in a.probe_lrs.split(",")))
    result = run_dataset(ds, rc, model=lm)
    m = result.metrics()
    print(f"loss AUC {m['loss'].auc:.3f}; probe (proxy on the reference pool, layer "
          f"{result.probe.layer_}, proxy lr {result.probe.proxy_lr_:g}) AUC {m['probe'].auc:.3f}"
          f"  [{time.perf_counter() - t0:.0f} s]")

    features = {"last prompt token": activations(lm.model, lm.tokenizer, texts, batch_size=32),
                "mean over the text's tokens": mean_text_activations(lm.model, lm.tokenizer, texts)}
    for what, X in features.items():  # X [N, layers + 1, d]
        for C in (0.01, 0.1, 1.0):
            aucs = []
            for layer in range(X.shape[1]):
                clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=3000))
                p = cross_val_predict(clf, X[:, layer], y, groups=groups, cv=GroupKFold(5),
                                      method="predict_proba")[:, 1]
                aucs.append(roc_auc_score(y, p))
            print(f"oracle ceiling ({what}; probe trained on the target's own labels), C={C:g}, "
                  f"AUC per layer 0..{X.shape[1] - 1}: " + " ".join(f"{v:.3f}" for v in aucs))


if __name__ == "__main__":
    main()
