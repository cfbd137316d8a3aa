"""Dataset inference (Maini et al. 2024, "LLM Dataset Inference: Did you train on my
dataset?"): was a whole set of texts (the suspect set) in the model's training data? One
engine pass scores the suspect texts and texts of the same distribution known to be unseen
(the reference set) with many membership features, each oriented so that higher = more
member-like; a linear classifier fitted on one half of each set scores the other halves,
and a one-sided t-test asks whether suspect texts score higher (`classifier`: pddkit's
non-negative weights and Welch's test, or the paper's unconstrained fit and Student's;
`clip`: features clipped to the quantiles of both sets pooled, or of each set, the
authors' way). A
false-positive check runs the same test on two halves of the reference set, where no
difference should be found: halves of whole documents when the reference texts have a
`group`, text by text otherwise.

The statistics on the feature matrices (the test, its direction, the false-positive check
and the verdict) live in studies/dataset_inference.py; this module scores the texts."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from os import PathLike
from pathlib import Path

import numpy as np

from pddkit.data.samples import Dataset, Sample, make_dataset
from pddkit.errors import PddkitError
from pddkit.studies.dataset_inference import (
    CLASSIFIERS,
    CLIP,
    CLIPS,
    T_TESTS,
    Decision,
    FeatureMatrix,
    check_classifier,
    check_clip,
    check_halves,
    decide,
    require_sizes,
)
from pddkit.studies.registry import register_study

logger = logging.getLogger(__name__)

K_VALUES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)  # Min-K% and Max-K% fractions
PAPER = "Maini et al. 2024"


@dataclass(frozen=True)
class InferenceResult:
    """What `infer_dataset` found, with everything results.json records."""

    decision: Decision
    features: FeatureMatrix
    config: dict
    models: dict
    notices: tuple[str, ...]
    counts: dict
    timings: dict
    # the perturbation feature's neighbour texts (resources.neighbor_sets.NeighborSets) and the
    # ids they belong to, saved as neighbors.jsonl for a later run's `neighbors_file`
    neighbors: object | None = field(default=None, repr=False)
    ids: tuple[str, ...] = ()
    provenance: dict | None = None  # pddkit.provenance.Provenance.to_dict()

    @property
    def p_value(self) -> float:
        return self.decision.test.p_value

    @property
    def verdict(self) -> str:
        return self.decision.verdict

    def to_dict(self) -> dict:
        from pddkit.version import __version__

        d = self.decision
        return {
            "study": "infer", "paper": PAPER, "pddkit_version": __version__,
            "verdict": d.verdict, "used_in_training": d.used_in_training, "alpha": d.alpha,
            "classifier": d.classifier, "classifier_description": CLASSIFIERS[d.classifier],
            "t_test": T_TESTS[d.classifier],
            "clip": d.clip, "clip_description": CLIPS[d.clip],
            "clip_quantiles": [CLIP, 1 - CLIP],
            "p_value": d.test.p_value,
            "false_positive_check_p_value": None if d.check is None else d.check.p_value,
            "less_familiar_p_value": d.less_familiar_p_value,
            "n": {"suspect": int(self.features.suspect.shape[0]),
                  "reference": int(self.features.reference.shape[0])},
            "features": list(self.features.names),
            "test": d.test.to_dict(),
            "false_positive_check": None if d.check is None else d.check.to_dict(),
            "false_positive_check_split": None if d.check_split is None else d.check_split.to_dict(),
            "p_value_curve": [asdict(p) for p in d.curve],
            "false_positive_check_curve": [asdict(p) for p in d.check_curve],
            "configuration": self.config, "models": self.models, "notices": list(self.notices),
            "counts": self.counts, "timings_s": self.timings, "provenance": self.provenance,
        }

    def write(self, out_dir: str | Path) -> Path:
        """results.json, report.html, report.md and their figures in `out_dir` (made
        ready with output_dir.prepare first); returns the folder."""
        from pddkit.reporting.infer_report import write_infer_report

        out = Path(out_dir)
        data = _finite(self.to_dict())
        (out / "results.json").write_text(json.dumps(data, indent=2) + "\n")
        if self.neighbors is not None:
            self.neighbors.save(out / "neighbors.jsonl", self.ids)
        write_infer_report(out, data)
        return out


def feature_methods(ref_model: bool, freq: bool, n_neighbors: int | None = None) -> str:
    """The engine's methods string for the features (one statistics pass, plus the reference
    model's when `ref_model`); with `n_neighbors`, the perturbation feature too: `neighbor`
    (Mattern et al. 2023), the text's log-likelihood minus its mean over that many one-word
    swaps, scored in the same batched pass."""
    ks = [f"{m}:k={k}" for m in ("mink", "maxk", "minkpp") for k in K_VALUES]
    return ",".join(["loss", "zlib", *ks, "surp", *(["dcpdd"] if freq else []),
                     *(["ref"] if ref_model else []),
                     *([f"neighbor:n_neighbors={n_neighbors}"] if n_neighbors else [])])


def _as_dataset(texts, role: str, text_field: str | None) -> Dataset:
    """A table file (or folder, or hub id) read with data.load_table, a Dataset, or texts."""
    if isinstance(texts, Dataset):
        return texts
    if isinstance(texts, (str, PathLike)):
        from pddkit.data.records import Fields
        from pddkit.data.tables import load_table

        return load_table(texts, fields=Fields(text=text_field), name=f"{role} {texts}")
    samples = []
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise PddkitError(f"{role} text {i} is empty, whitespace only or not a string")
        samples.append(Sample(id=str(i), text=t, source=f"{role} text {i}"))
    return make_dataset(role, samples, [])


def _shared(suspect: Dataset, reference: Dataset) -> int:
    from pddkit.data.overlap import normalise as fold

    ref = {fold(s.text) for s in reference.samples}
    return sum(fold(s.text) in ref for s in suspect.samples)


@register_study("infer", "Did the model train on this set of texts? A p-value (dataset inference)",
                PAPER)
def infer_dataset(model, suspect, reference, *, ref_model=None, freq: str | None = None,
                  mask_model: str | None = None, neighbors_file: str | None = None,
                  n_neighbors: int = 25, alpha: float = 0.05, false_positive_check: bool = True,
                  seed: int = 0, classifier: str = "nonnegative", clip: str = "pooled",
                  text_field: str | None = None, cache: str | None = None,
                  batch_size: int | str = 8, max_length: int | None = None,
                  device: str = "auto", dtype: str = "auto", revision: str | None = None,
                  adapter: str | None = None, trust_remote_code: bool = False,
                  local_files_only: bool = False) -> InferenceResult:
    """Maini et al. 2024's dataset inference: `suspect` and `reference` (texts, a Dataset,
    or a table file read with `text_field`) scored in one engine run under `model` (a path,
    hub id, Backend or LoadedModel); `ref_model` and `freq` add the `ref` and `dcpdd`
    features; `mask_model` (neighbours generated with it) or `neighbors_file` (the
    neighbors.jsonl an earlier `infer` with a mask model wrote, for the same suspect and
    reference texts) adds the perturbation feature `neighbor` over `n_neighbors` neighbours.
    `classifier`: "nonnegative" (non-negative weights on member-is-higher features, Welch's
    test) or "paper" (Maini et al.'s unconstrained fit, Student's test). `clip`: "pooled"
    (every feature clipped to the 2.5-97.5% quantiles of both sets pooled) or
    "per-set" (each set to its own quantiles, as the authors' code; not calibrated with
    heavy-tailed features); studies/dataset_inference.py says where pddkit's version
    differs from the authors' code. The false-positive check keeps the reference texts of
    one `group` (document) on one side when they have groups. The verdict says "used in
    training" only when the test's p-value is below `alpha` and the false-positive check's
    is not. `adapter`: a PEFT adapter loaded onto a `model` given by name."""
    from pddkit.engine.config import RunConfig
    from pddkit.engine.run import run_dataset
    from pddkit.provenance import now

    t0, started = time.perf_counter(), now()
    if not 0 < alpha < 1:
        raise PddkitError(f"`alpha` must be between 0 and 1, not {alpha}")
    check_classifier(classifier)
    check_clip(clip)
    if n_neighbors < 1:
        raise PddkitError(f"`n_neighbors` must be at least 1, not {n_neighbors}")
    sus, ref = _as_dataset(suspect, "suspect", text_field), _as_dataset(reference, "reference", text_field)
    shared = _shared(sus, ref)
    if shared:
        raise PddkitError(f"{shared} of the {len(sus.samples)} suspect texts also occur among "
                          f"the {len(ref.samples)} reference texts (after folding whitespace); "
                          "the reference set must hold texts the model never saw")
    require_sizes(len(sus.samples), len(ref.samples), false_positive_check)
    groups = tuple(s.group for s in ref.samples)
    groups = groups if any(g is not None for g in groups) else None
    if false_positive_check:  # documents too few for two halves: said before any model loads
        check_halves(len(groups or ref.samples), seed, groups)
    samples = [Sample(id=f"{role}:{s.id}", text=s.text, source=s.source)
               for role, d in (("suspect", sus), ("reference", ref)) for s in d.samples]
    both = make_dataset("suspect + reference", samples, [],
                        meta={k: v for k, v in sus.meta.items() if k == "language"})
    cfg = RunConfig(model=model if isinstance(model, str) else getattr(model, "name", str(model)),
                    methods=feature_methods(ref_model is not None, freq is not None,
                                            n_neighbors if mask_model or neighbors_file else None),
                    mask_model=mask_model, neighbors_file=neighbors_file,
                    ref_model=ref_model if isinstance(ref_model, str) or ref_model is None
                    else getattr(ref_model, "name", str(ref_model)),
                    freq=freq, cache=cache, batch_size=batch_size, max_length=max_length,
                    device=device, dtype=dtype, revision=revision, adapter=adapter,
                    trust_remote_code=trust_remote_code, local_files_only=local_files_only,
                    n_bootstrap=0, seed=seed, blind=False)
    run = run_dataset(both, cfg, model=None if isinstance(model, str) else model,
                      ref_model=None if ref_model is None or isinstance(ref_model, str) else ref_model)
    scores = run.scores()
    names = tuple(scores)
    X = np.column_stack([scores[k] for k in names])
    n_s = len(sus.samples)
    features = FeatureMatrix(names, X[:n_s], X[n_s:], groups)
    t1 = time.perf_counter()
    decision = decide(features, alpha, false_positive_check, seed, classifier, clip)
    logger.info("dataset inference (%s classifier, %s clipping): p = %.3g (%d suspect, %d "
                "reference texts, %d features)", classifier, clip, decision.test.p_value, n_s,
                len(ref.samples), len(names))
    config = {"model": cfg.model, "suspect": sus.name, "reference": ref.name,
              "ref_model": cfg.ref_model, "freq": freq, "mask_model": mask_model,
              "neighbors_file": neighbors_file,
              "n_neighbors": n_neighbors if mask_model or neighbors_file else None, "alpha": alpha,
              "false_positive_check": false_positive_check, "seed": seed,
              "classifier": classifier, "clip": clip,
              "methods": cfg.methods, "batch_size": batch_size, "max_length": max_length,
              "device": device, "dtype": dtype, "cache": cache,
              **({"adapter": adapter} if adapter is not None else {})}
    return InferenceResult(decision, features, config, run.models, run.notices,
                           {"suspect": n_s, "reference": len(ref.samples),
                            "truncated": run.counts.get("truncated", {})},
                           {"scoring": t1 - t0, "statistics": time.perf_counter() - t1},
                           run.neighbors, run.ids, run.provenance.spanning(started).to_dict())


def _finite(x):
    """NaN and inf as None, for strict JSON."""
    if isinstance(x, float):
        return x if np.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x
