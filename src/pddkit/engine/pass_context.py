"""What the passes share: the context they read and write (PassContext), the providers'
registry (`@provider(Need.X)`), running the registered providers, and the observations
built from what they filled. Every pass module imports this one; engine/passes.py holds the
target-side passes and imports every other pass module, so nothing here imports a pass."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pddkit.backends.base import Backend
from pddkit.data.samples import Dataset
from pddkit.engine.config import RunConfig
from pddkit.engine.executors import Executor
from pddkit.errors import PddkitError
from pddkit.methods.base import MethodCall, Need
from pddkit.stats import Observation, TokenStats


@dataclass
class PassContext:
    """What the providers read and write for one run (mutable: filled pass by pass)."""

    texts: list[str]
    names: list[str]  # each text's name in errors ("FILE line 3")
    ids: list[str]
    calls: tuple[MethodCall, ...]
    config: RunConfig
    target: Backend  # the target model's backend (behind the cache when there is one)
    executor: Executor
    load_backend: Callable[[str, object], Backend]  # (role, given model or None) -> Backend
    ref_model: object = None  # a preloaded reference model, if the caller gave one
    aux: Dataset | None = None  # the probe's auxiliary texts
    sets: list[np.ndarray] = field(default_factory=list)  # validation / test indices
    spans: list[str] = field(default_factory=list)  # the scored span of each text
    fields: dict = field(default_factory=dict)  # Observation field -> per-text values
    # neighbour sets, probe search and grid; "trail": file name -> rows written beside
    # scores.jsonl (shots.jsonl, augmentations.jsonl, samples.jsonl)
    extras: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    given_neighbors: dict | None = None  # id -> neighbour texts the data set carries (meta)
    shots: object | None = None  # data.shots.ShotPool of recall / conrecall (SPEC 3b)
    language: str | None = None  # the data set's declared language ("zh": jieba words)
    calibration: object | None = None  # data.calibration.CalibrationSet (SPEC 3e)
    # id -> the data's title, author and source columns (decop; data/paraphrases.py)
    document_fields: dict | None = None

    def stats(self, backend: Backend, texts: list[str], names: list[str], desc: str,
              fields: frozenset[str] = frozenset()) -> list[TokenStats]:
        """TokenStats of `texts` under `backend`, through the executor; never non-finite.
        `fields`: the optional TokenStats fields the methods read (executors.py)."""
        out = self.executor.token_stats(backend, texts, names, desc, fields=fields)
        finite = backend.capabilities.full_distribution
        for st, name in zip(out, names):
            bad = not np.isfinite(st.L).all() or (
                finite and not (np.isfinite(st.H).all() and np.isfinite(st.M2).all()
                                and (st.Lmax is None or np.isfinite(st.Lmax).all())
                                and (st.tempered is None or np.isfinite(st.tempered).all())))
            if bad:
                raise PddkitError(f"{backend.name} gave non-finite log-probabilities for {name} "
                                  "(a float16 overflow? try `dtype='float32'`)")
        return out


PROVIDERS: dict[Need | None, Callable[[PassContext], None]] = {}


def provider(need: Need | None):
    """Register the provider of `need` (None: the target pass, always run)."""

    def wrap(fn: Callable[[PassContext], None]) -> Callable[[PassContext], None]:
        PROVIDERS[need] = fn
        return fn

    return wrap


def run_providers(ctx: PassContext, needs: list[Need]) -> None:
    """The target pass, then one provider per need, each timed, by the providers registered
    (engine/passes.py imports every pass module; run_passes there is the entry point)."""
    for need in [None, *needs]:
        t0 = time.perf_counter()
        PROVIDERS[need](ctx)
        ctx.timings[_TIMING[need]] = time.perf_counter() - t0


_TIMING = {None: "target_pass", Need.LOWERCASE: "lowercase_pass", Need.REFERENCE: "reference_pass",
           Need.FREQUENCY: "frequency_table", Need.NEIGHBORS: "neighbors", Need.PROBE: "probe",
           Need.SHOTS: "conditioned_pass", Need.AUGMENTATIONS: "augmentation_pass",
           Need.SAMPLES: "sampling", Need.INFILL: "infill_passes",
           Need.CALIBRATION: "calibration_passes", Need.FINETUNED: "fsd",
           Need.REPEATED: "repeated_pass", Need.PAIRS: "emmia_pairs_pass",
           Need.QUIZ: "decop_quiz"}


def observations(ctx: PassContext) -> list[Observation]:
    """One Observation per text from the fields the passes filled."""
    f = ctx.fields
    return [Observation(text=ctx.spans[i], target=f["target"][i],
                        lower=f["lower"][i] if "lower" in f else None,
                        reference=f["reference"][i] if "reference" in f else None,
                        log_freq=f.get("log_freq"),
                        neighbors=f["neighbors"][i] if "neighbors" in f else None,
                        probe=f["probe"][i] if "probe" in f else None,
                        conditioned=f["conditioned"][i] if "conditioned" in f else None,
                        augmented=f["augmented"][i] if "augmented" in f else None,
                        samples=f["samples"][i] if "samples" in f else None,
                        infill=f["infill"][i] if "infill" in f else None,
                        finetuned=f["finetuned"][i] if "finetuned" in f else None,
                        repeated=f["repeated"][i] if "repeated" in f else None,
                        emmia=f["emmia"][i] if "emmia" in f else None,
                        quiz=f["quiz"][i] if "quiz" in f else None)
            for i in range(len(ctx.texts))]


def text_sets_stats(ctx: PassContext, sets: dict, what: str, desc: str):
    """(per text {key: its texts' TokenStats}, distinct texts, of them truncated) for
    `sets` (key -> per text, a tuple of texts: neighbours, pac's copies): every distinct text
    of every set scored once, in one batched pass of the target; `what` names them in
    errors ("a neighbour of")."""
    unique: dict[str, str] = {}  # text -> its name in errors
    for key, per_text in sets.items():
        for name, texts in zip(ctx.names, per_text):
            for t in texts:
                unique.setdefault(t, f"{what} {name} ({key.label()})")
    flat = list(unique)
    stats = ctx.stats(ctx.target, flat, list(unique.values()), desc)
    by_text = dict(zip(flat, stats))
    fields = [{key: tuple(by_text[t] for t in per_text[i]) for key, per_text in sets.items()}
              for i in range(len(ctx.texts))]
    return fields, len(flat), sum(st.truncated for st in stats)


def _inner(backend: Backend) -> Backend:
    """The backend itself, behind the statistics cache if there is one."""
    return getattr(backend, "backend", backend)
