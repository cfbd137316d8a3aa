"""Python API: `score(texts, model=...)` -> {method: scores} and
`evaluate(texts, labels, model=...)` -> RunResult with metrics; the options of
`pddkit run` as explicit keyword arguments."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pddkit.data.samples import Dataset, Sample, make_dataset
from pddkit.errors import PddkitError
from pddkit.evaluation.results import RunResult
from pddkit.pipeline import RunConfig, run_dataset


def _dataset(texts: Sequence[str], labels: Sequence[int] | None) -> Dataset:
    if isinstance(texts, str):
        raise PddkitError("texts must be a list of strings, not one string")
    if labels is not None and len(labels) != len(texts):
        raise PddkitError(f"{len(texts)} texts but {len(labels)} labels")
    samples = []
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise PddkitError(f"text {i} is empty, whitespace only or not a string")
        lab = None if labels is None else int(labels[i])
        if lab not in (None, 0, 1):
            raise PddkitError(f"text {i} has label {labels[i]!r}; labels must be 0 or 1")
        samples.append(Sample(id=str(i), text=t, label=lab, source=f"text {i}"))
    return make_dataset("texts", samples, [])


def score(texts: Sequence[str], model, methods: str = "all", *, ref_model=None,
          freq: str | None = None, mask_model: str | None = None, probe_data: str | None = None,
          probe_load: str | None = None, probe_lrs: Sequence[float] = (1e-4, 1e-3),
          probe_standardize: str = "per_set", batch_size: int = 8, max_length: int | None = None,
          device: str = "auto", dtype: str = "auto", seed: int = 0) -> dict[str, np.ndarray]:
    """Scores per method (higher = more likely a member) for `texts` under `model`.

    `model` and `ref_model`: a local directory, a hub id, or a `LoadedModel`.
    `mask_model` (a fill-mask model) enables `neighbor`; `probe_data` (a JSONL of texts
    absent from pre-training) or `probe_load` (a saved probe folder) enables `probe`;
    `probe_standardize` "per_set" standardises the texts' activations with their own
    statistics (so a text's probe score depends on the texts scored with it), "train" with
    the probe's training rows'.
    """
    cfg = RunConfig(model=getattr(model, "name", model), methods=methods,
                    ref_model=getattr(ref_model, "name", ref_model), freq=freq,
                    mask_model=mask_model, probe_data=probe_data, probe_load=probe_load,
                    probe_lrs=tuple(probe_lrs), probe_standardize=probe_standardize,
                    batch_size=batch_size, max_length=max_length,
                    device=device, dtype=dtype, seed=seed)
    return run_dataset(_dataset(texts, None), cfg, model=model, ref_model=ref_model).scores()


def evaluate(texts: Sequence[str], labels: Sequence[int], model, methods: str = "all", *,
             ref_model=None, freq: str | None = None, mask_model: str | None = None,
             probe_data: str | None = None, probe_load: str | None = None,
             probe_lrs: Sequence[float] = (1e-4, 1e-3), probe_standardize: str = "per_set",
             val_fraction: float | None = None,
             batch_size: int = 8, max_length: int | None = None, device: str = "auto",
             dtype: str = "auto", n_bootstrap: int = 1000, seed: int = 0,
             blind: bool = True) -> RunResult:
    """Like `score`, with labels (1 member, 0 non-member): returns typed metrics per method.
    With `val_fraction`, hyperparameters are chosen on that stratified share and every
    metric is measured on the rest (`RunResult.validation`)."""
    cfg = RunConfig(model=getattr(model, "name", model), methods=methods,
                    ref_model=getattr(ref_model, "name", ref_model), freq=freq,
                    mask_model=mask_model, probe_data=probe_data, probe_load=probe_load,
                    probe_lrs=tuple(probe_lrs), probe_standardize=probe_standardize,
                    val_fraction=val_fraction,
                    batch_size=batch_size, max_length=max_length, device=device, dtype=dtype,
                    n_bootstrap=n_bootstrap, seed=seed, blind=blind)
    return run_dataset(_dataset(texts, labels), cfg, model=model, ref_model=ref_model)
