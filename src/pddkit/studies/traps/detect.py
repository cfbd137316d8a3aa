"""`traps detect`: were the inserted traps memorised? (Meeus et al., "Copyright Traps for
Large Language Models", ICML 2024, arXiv 2402.09363, Table 2 and Figure 3.)

Members are the traps `traps inject` inserted (trap-info.jsonl: repeated R >= 1 times into
one document); non-members are the held-out traps, generated alongside them and never
inserted. Every trap is scored once, alone, through the engine with every method pddkit
has (the paper's is `ref`: mean log-probability under the target minus under the reference
model, i.e. minus the log of their "Ratio" attack, target perplexity / reference
perplexity: the same ranking, so the same AUC). Then the AUC per cell, with the protocol of
the authors' notebooks (computationalprivacy/copyright-traps):

- Table 2 (notebooks/table_2_mia_auc.ipynb): per length L x repeats R, the members of
  length L inserted R times, of every perplexity bucket, against the held-out traps of
  the same length L, of every bucket (the same non-members for every R).
- Figure 3 (notebooks/figure_3_perplexity.ipynb): per L x R x perplexity bucket b, the
  members of (L, R, b) against the held-out traps of the same length and bucket. The
  bucket is the one the trap was generated in (its perplexity under the generating model).

Where pddkit differs from the authors' code: the notebooks cut both classes to the first
n = min(members, non-members) rows of their table (in bucket order) before the Table 2
AUC; pddkit keeps every trap (an AUC needs no balanced classes), so where held-out traps
outnumber a cell's members the two differ. Their perplexity drops the start token and
scores a trap from its second token on; pddkit's statistics pass prepends a start token
(BOS, else EOS) and scores every token. 95% intervals (stratified bootstrap) are
given where each class of a cell has at least CI_MIN_PER_CLASS traps; the paper gives none.

Exposures: a trap inserted R times into a document is seen R times per pass over that
document, so R x E times by a model trained E epochs on it (the sandbox trains 12 by
default). The paper's repetitions (Table 2) are copies per document, as `repeats` here.
`epochs` states E: every cell and scores.jsonl then give the exposures R x E; without it
they are null in results.json and a notice says they are unknown, never guessed.

The target may have another tokenizer than the model that generated the traps: the
authors generate with LLaMA-2 and detect in CroissantLLM, decoding with one tokenizer and
re-encoding with the other (table_2_mia_auc.ipynb), as a publisher testing a third party's
model always does. That is a notice, not a refusal: a trap keeps its generated length L
(the cells' key), and its token count under the target's tokenizer is in scores.jsonl.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pddkit.errors import PddkitError
from pddkit.evaluation.metrics import Metrics, compute_metrics
from pddkit.evaluation.results import _finite
from pddkit.studies.registry import register_study
from pddkit.studies.traps.folder import HELD_OUT, TRAP_INFO, TrapFolder, read_folder
from pddkit.studies.traps.tokenizer_check import check_tokenizer, tokenizer_of

logger = logging.getLogger(__name__)

PAPER = "Meeus et al. 2024, Copyright Traps for Large Language Models, ICML 2024"
STUDY = "traps detect"
PAPER_METHOD = "ref"  # their Ratio attack
CI_MIN_PER_CLASS = 5  # bootstrap intervals only for cells with this many traps of each class
PROTOCOL = ("length x repeats (Table 2): members of length L inserted R times, all perplexity "
            "buckets, against every held-out trap of length L; length x repeats x bucket "
            "(Figure 3): members of (L, R, bucket) against the held-out traps of length L in "
            "that bucket. No class is cut to the other's size (the authors' notebook keeps "
            "the first min(members, non-members) of each).")


@dataclass(frozen=True)
class TrapScore:
    """One scored trap: what scores.jsonl holds."""

    id: str
    length: int
    repeats: int  # 0 for a held-out trap
    bucket: int
    perplexity: float  # under the generating model (the bucket's measure)
    label: int  # 1 inserted, 0 held out
    document: str | None  # the document it was inserted into
    tokens: int  # its length when re-encoded with the target model's tokenizer
    scores: dict[str, float]  # method label -> score, higher = member
    exposures: int | None = None  # repeats x epochs; 0 held out; None: epochs unknown


@dataclass(frozen=True)
class Cell:
    """Members of (length, repeats[, bucket]) against held-out traps of (length[, bucket]);
    `bucket` None: every bucket (Table 2). `metrics`: method label -> Metrics, None when
    `reason` says why there is no AUC (a class without traps, scores not finite)."""

    length: int
    repeats: int
    bucket: int | None
    n_members: int
    n_nonmembers: int
    metrics: dict[str, Metrics | None]
    reasons: dict[str, str] = field(default_factory=dict)  # method label -> why no AUC
    exposures: int | None = None  # repeats x epochs the model trained; None: epochs unknown

    @property
    def ci(self) -> bool:
        return min(self.n_members, self.n_nonmembers) >= CI_MIN_PER_CLASS

    def to_dict(self) -> dict:
        return {"length": self.length, "repeats": self.repeats, "exposures": self.exposures,
                "bucket": self.bucket, "n_members": self.n_members, "n_nonmembers": self.n_nonmembers,
                "ci": self.ci,
                "metrics": {k: None if m is None else m.to_dict() for k, m in self.metrics.items()},
                "reasons": dict(self.reasons)}


@dataclass(frozen=True)
class TrapsResult:
    """What `detect_traps` found, with everything results.json records."""

    traps: tuple[TrapScore, ...]
    methods: tuple[str, ...]  # method labels, in the engine's order
    table: tuple[Cell, ...]  # length x repeats (Table 2)
    by_bucket: tuple[Cell, ...]  # length x repeats x bucket (Figure 3)
    config: dict
    models: dict
    counts: dict
    notices: tuple[str, ...] = ()
    timings: dict = field(default_factory=dict)
    tokenizer: dict = field(default_factory=dict)  # generating vs target tokenizer (check_tokenizer)
    provenance: dict | None = None  # pddkit.provenance.Provenance.to_dict()
    epochs: int | None = None  # passes of the model over the injected documents; None: unknown

    @property
    def primary(self) -> str:
        """The method the terminal shows in full: the paper's when it ran."""
        return PAPER_METHOD if PAPER_METHOD in self.methods else self.methods[0]

    def auc(self, length: int, repeats: int, method: str, bucket: int | None = None) -> float | None:
        cells = self.table if bucket is None else self.by_bucket
        for c in cells:
            if (c.length, c.repeats, c.bucket) == (length, repeats, bucket):
                m = c.metrics.get(method)
                return None if m is None else m.auc
        raise KeyError((length, repeats, bucket))

    def to_dict(self) -> dict:
        from pddkit.version import __version__

        return _finite({
            "study": STUDY, "paper": PAPER, "pddkit_version": __version__,
            "protocol": PROTOCOL, "ci_min_per_class": CI_MIN_PER_CLASS,
            "methods": list(self.methods), "primary_method": self.primary,
            "lengths": sorted({c.length for c in self.table}),
            "repeats": sorted({c.repeats for c in self.table}),
            "epochs": self.epochs,
            "exposures": None if self.epochs is None
            else sorted({c.repeats * self.epochs for c in self.table}),
            "buckets": sorted({c.bucket for c in self.by_bucket}),
            "table": [c.to_dict() for c in self.table],
            "by_bucket": [c.to_dict() for c in self.by_bucket],
            "configuration": self.config, "models": self.models, "counts": self.counts,
            "tokenizer": self.tokenizer,
            "notices": list(self.notices), "timings_s": self.timings,
            "provenance": self.provenance})

    def write(self, out: str | Path, report: bool = True) -> Path:
        """results.json, scores.jsonl (one line per trap) and, with `report`, report.html
        and report.md with their figures, in `out` (made ready with output_dir.prepare
        first); returns the folder."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        with (out / "scores.jsonl").open("w", encoding="utf-8") as fh:
            for t in self.traps:
                row = {"id": t.id, "length": t.length, "repeats": t.repeats,
                       "exposures": t.exposures, "bucket": t.bucket,
                       "perplexity": t.perplexity, "label": t.label, "document": t.document,
                       "tokens": t.tokens}
                row.update({k: _finite(v) for k, v in t.scores.items()})
                fh.write(json.dumps(row) + "\n")
        if report:
            from pddkit.reporting.traps_report import write_traps_report

            write_traps_report(out)
        return out


def evaluation_traps(folder: TrapFolder, where: str) -> tuple[list, dict, dict]:
    """(traps under evaluation, trap id -> Insertion, counts): the inserted traps and the
    held-out ones. A folder never injected, an insertion of an unknown or held-out trap, a
    trap inserted twice or fewer than once, or no held-out trap at all is one sentence."""
    if not folder.insertions:
        raise PddkitError(f"trap folder {where} holds no {TRAP_INFO}: its traps were never "
                          "inserted into documents; inject them first (pddkit traps inject)")
    by_id = {t.id: t for t in folder.traps}
    inserted: dict = {}
    for ins in folder.insertions:
        trap = by_id.get(ins.trap_id)
        if trap is None:
            raise PddkitError(f"{where}/{TRAP_INFO} names trap {ins.trap_id}, which its "
                              "traps.jsonl does not hold")
        if trap.role == HELD_OUT:
            raise PddkitError(f"{where}/{TRAP_INFO} inserts trap {ins.trap_id}, which "
                              "traps.jsonl marks held out")
        if ins.trap_id in inserted:
            raise PddkitError(f"{where}/{TRAP_INFO} inserts trap {ins.trap_id} twice")
        if ins.repeats < 1:
            raise PddkitError(f"{where}/{TRAP_INFO} inserts trap {ins.trap_id} {ins.repeats} "
                              "times: an inserted trap has at least 1 repeat")
        inserted[ins.trap_id] = ins
    held = [t for t in folder.traps if t.role == HELD_OUT]
    if not held:
        raise PddkitError(f"trap folder {where} holds no held-out traps: inserted traps "
                          "need never-inserted ones of the same lengths to be compared with")
    chosen = [t for t in folder.traps if t.id in inserted or t.role == HELD_OUT]
    counts = {"traps": len(folder.traps), "inserted": len(inserted), "held_out": len(held),
              "not_inserted": len(folder.traps) - len(chosen)}
    return chosen, inserted, counts


UNKNOWN_EPOCHS = ("the epochs the model was trained on the injected documents are not "
                  "given (`epochs`), so the exposures are unknown: a trap inserted R times "
                  "is seen R x epochs times, not R times once the model trained more than "
                  "one epoch")


def check_epochs(epochs) -> int | None:
    """`epochs` as given (None: unknown); one sentence for anything but a whole number >= 1."""
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int)
                               or epochs < 1):
        raise PddkitError(f"`epochs` is the number of passes the model made over the injected "
                          f"documents, a whole number of at least 1 (leave it out if unknown), "
                          f"not {epochs!r}")
    return epochs


def exposures(repeats: int, epochs: int | None) -> int | None:
    """How often a trap inserted `repeats` times was seen by a model trained `epochs` on its
    document (0 for a held-out trap); None when the epochs are unknown."""
    return None if epochs is None else repeats * epochs


def table_cells(traps: list[TrapScore], methods: tuple[str, ...], n_bootstrap: int,
                seed: int, epochs: int | None = None) -> tuple[tuple[Cell, ...], tuple[Cell, ...]]:
    """(length x repeats cells, length x repeats x bucket cells) over the scored traps,
    as the module docstring says; cells in sorted order, one per (length, repeats) of an
    inserted trap and, within it, one per bucket that its length's traps occupy; each
    with its exposures (repeats x `epochs`, None when `epochs` is)."""
    members = [t for t in traps if t.label == 1]
    pairs = sorted({(t.length, t.repeats) for t in members})
    table, by_bucket = [], []
    for length, repeats in pairs:
        pos = [t for t in members if (t.length, t.repeats) == (length, repeats)]
        neg = [t for t in traps if t.label == 0 and t.length == length]
        seen = exposures(repeats, epochs)
        table.append(_cell(length, repeats, None, pos, neg, methods, n_bootstrap, seed, seen))
        for b in sorted({t.bucket for t in traps if t.length == length}):
            by_bucket.append(_cell(length, repeats, b, [t for t in pos if t.bucket == b],
                                   [t for t in neg if t.bucket == b], methods, n_bootstrap, seed,
                                   seen))
    return tuple(table), tuple(by_bucket)


def _cell(length, repeats, bucket, pos, neg, methods, n_bootstrap, seed, seen) -> Cell:
    metrics: dict[str, Metrics | None] = {}
    reasons: dict[str, str] = {}
    where = f"length {length}" + ("" if bucket is None else f", bucket {bucket}")
    for m in methods:
        if not pos or not neg:
            metrics[m] = None
            reasons[m] = (f"no traps inserted {repeats} times" if not pos
                          else "no held-out traps") + f" of {where}"
            continue
        s = np.array([t.scores[m] for t in pos + neg], dtype=float)
        y = np.array([1] * len(pos) + [0] * len(neg))
        bad = ~np.isfinite(s)
        if bad.any():  # one method's undefined scores: no AUC for it here, said
            metrics[m] = None
            n_bad = int(bad.sum())
            reasons[m] = (f"1 trap has no finite {m} score" if n_bad == 1
                          else f"{n_bad} traps have no finite {m} score")
            continue
        enough = min(len(pos), len(neg)) >= CI_MIN_PER_CLASS
        metrics[m] = compute_metrics(s, y, n_bootstrap=n_bootstrap if enough else 0, seed=seed)
    return Cell(length, repeats, bucket, len(pos), len(neg), metrics, reasons, seen)


@register_study("traps detect", "Were the inserted copyright traps memorised? AUC per length "
                "x repeats x perplexity bucket", PAPER)
def detect_traps(folder, model, *, ref_model=None, freq: str | None = None,
                 methods: str = "all", tokenizer=None, epochs: int | None = None,
                 n_bootstrap: int = 1000, seed: int = 0,
                 cache: str | None = None, batch_size: int | str = 8,
                 max_length: int | None = None, device: str = "auto", dtype: str = "auto",
                 revision: str | None = None, adapter: str | None = None,
                 trust_remote_code: bool = False, local_files_only: bool = False) -> TrapsResult:
    """Score the traps of `folder` (a path written by `traps inject`, or a TrapFolder)
    under `model` (a path, hub id, LoadedModel, Backend, or a loaded HF model with
    `tokenizer`) with `methods` ("all" or "loss,ref,..."; `ref_model` adds the paper's
    `ref`, `freq` adds `dcpdd`), and compute the AUC of inserted against held-out traps
    per length x repeats and per length x repeats x perplexity bucket (Meeus et al. 2024,
    Table 2 and Figure 3; the module docstring gives the protocol and where it differs from
    the authors' notebooks), with `n_bootstrap` stratified bootstrap resamples (seeded
    with `seed`) for cells of at least CI_MIN_PER_CLASS traps per class. `epochs`: the
    passes the model made over the injected documents, so that each cell gives its
    exposures (repeats x epochs); None (unknown) says so in a notice. `adapter`: a PEFT
    adapter loaded onto a `model` given by name."""
    from pddkit.api import _model, _name
    from pddkit.data.samples import Sample, make_dataset
    from pddkit.engine.config import RunConfig
    from pddkit.engine.run import run_dataset
    from pddkit.provenance import now

    t0, started = time.perf_counter(), now()
    if not isinstance(n_bootstrap, int) or n_bootstrap < 0:
        raise PddkitError(f"`n_bootstrap` must be 0 or more, not {n_bootstrap!r}")
    epochs = check_epochs(epochs)
    where = str(folder) if not isinstance(folder, TrapFolder) else "(given in memory)"
    if not isinstance(folder, TrapFolder):
        folder = read_folder(folder)
    traps, inserted, counts = evaluation_traps(folder, where)
    notices: list[str] = [] if epochs is not None else [UNKNOWN_EPOCHS]
    if counts["not_inserted"]:
        line = (f"{counts['not_inserted']} traps marked to be inserted were not (no line in "
                f"{TRAP_INFO}): they are neither members nor non-members and are not scored")
        logger.warning(line)
        notices.append(line)
    target = _model(model, tokenizer, "model")
    model_name = _name(target)
    tokens, tok_record = check_tokenizer(
        folder, traps, tokenizer_of(target, revision, trust_remote_code, local_files_only,
                                     adapter if isinstance(target, str) else None),
        model_name, where, notices)
    counts["reencoded_other_length"] = sum(tokens[t.id] != t.length for t in traps)
    samples = [Sample(id=t.id, text=t.text, source=f"trap {t.id}") for t in traps]
    config = RunConfig(model=model_name, methods=methods,
                       ref_model=ref_model if ref_model is None or isinstance(ref_model, str)
                       else getattr(ref_model, "name", str(ref_model)),
                       freq=freq, cache=cache, batch_size=batch_size, max_length=max_length,
                       device=device, dtype=dtype, revision=revision, adapter=adapter,
                       trust_remote_code=trust_remote_code, local_files_only=local_files_only,
                       n_bootstrap=0, seed=seed, blind=False)
    run = run_dataset(make_dataset("traps", samples, []), config,
                      model=None if isinstance(target, str) else target,
                      ref_model=None if ref_model is None or isinstance(ref_model, str) else ref_model)
    t1 = time.perf_counter()
    labels = tuple(m.label for m in run.methods)
    scored = []
    for i, t in enumerate(traps):
        ins = inserted.get(t.id)
        repeats = 0 if ins is None else ins.repeats
        scored.append(TrapScore(t.id, t.length, repeats, t.bucket,
                                t.perplexity, int(ins is not None),
                                None if ins is None else ins.document_id, tokens[t.id],
                                {m.label: float(m.scores[i]) for m in run.methods},
                                exposures(repeats, epochs)))
    table, by_bucket = table_cells(scored, labels, n_bootstrap, seed, epochs)
    for c in table:
        if c.n_nonmembers == 0:
            notices.append(f"no held-out traps of length {c.length}: inserted traps of that "
                           "length get no AUC")
    notices = list(dict.fromkeys([*notices, *run.notices]))
    counts.update(truncated=run.counts.get("truncated", {}),
                  lengths=sorted({t.length for t in traps}))
    cfg = {"traps": where, "model": config.model, "ref_model": config.ref_model, "freq": freq,
           "methods": methods, "methods_resolved": list(labels), "epochs": epochs,
           "n_bootstrap": n_bootstrap,
           "seed": seed, "batch_size": batch_size, "max_length": max_length, "device": device,
           "dtype": dtype, "cache": cache, "revision": revision,
           **({"adapter": adapter} if adapter is not None else {}),
           "generated": folder.manifest, "injection": folder.injection}
    logger.info("traps detect: %d inserted and %d held-out traps scored by %d methods",
                counts["inserted"], counts["held_out"], len(labels))
    return TrapsResult(tuple(scored), labels, table, by_bucket, cfg, dict(run.models), counts,
                       tuple(notices), {"scoring": t1 - t0, "metrics": time.perf_counter() - t1},
                       tok_record, run.provenance.spanning(started).to_dict(), epochs)

