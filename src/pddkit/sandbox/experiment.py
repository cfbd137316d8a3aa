"""`pddkit sandbox`: train a model on chosen documents, then detect them.

corpus -> seeded split of whole documents (members / non-members / reference pool /
background), no two roles sharing a run of 13 words -> tokenizer (given, or BPE on the
reference pool + background, never on evaluated documents) -> reference model and frequency
table from the reference pool -> one target model per sweep value (members x repeats +
background documents) -> windows of 32/64/128 words cut verbatim from their documents,
scored by every method through the same pipeline as `pddkit run` -> results and reports
per window length -> the ground truth checked from the files written (sandbox.ground_truth).

With `contaminate` (sandbox.contamination), formatted benchmark examples are split into
contaminants, inserted whole into every target's training documents a drawn number of
times, and held-out examples; each run is also evaluated on contaminants vs held-out
examples (RUN/contamination), with the AUC per number of copies.

With `traps` (sandbox.traps), copyright traps are generated once with the reference model,
inserted into dedicated carrier documents that every target trains on, and each run is
also evaluated on inserted vs held-out traps (RUN/traps), with the AUC per length x repeats.

With a base model (`--base-model`, any pretrained causal LM), the target is that model
pre-trained further on the members (its own tokenizer), and the reference model is the
base model itself, as it was before it saw them.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

SWEEPABLE = {"repeats": int, "lr": float, "background": int, "epochs": int, "width": int,
             "contamination-repeats": int}


def _field(knob: str) -> str:
    """The SandboxConfig field a sweep knob sets ("contamination-repeats" -> contamination_repeats)."""
    return knob.replace("-", "_")


@dataclass(frozen=True)
class SandboxConfig:
    corpus: str | None = None  # None: the standard library's documentation (no download)
    tokenizer: str | None = None  # None: a byte-level BPE trained on reference pool + background
    vocab_size: int = 2048
    section_words: int = 200
    members: int = 150  # member documents; as many non-members
    reference: int = 150  # reference-pool documents (reference model, frequency table)
    background: int = 0  # extra training documents that dilute the members
    repeats: int = 1  # copies of each member per epoch
    epochs: int = 12
    lr: float | None = None  # None: 2e-3 from scratch, 3e-5 going on from a base model
    layers: int = 2
    width: int = 128
    heads: int = 4
    context: int = 512
    train_batch: int = 4  # blocks of `context` tokens per step
    ref_epochs: int = 4
    windows: tuple[int, ...] = (32, 64, 128)
    windows_per_doc: int = 2
    methods: str = "all"
    mask_model: str | None = None  # fill-mask model for `neighbor` (skipped without one)
    probe_lrs: tuple[float, ...] = (1e-4, 1e-3)  # `probe`: its auxiliary data is the reference pool
    # recall / conrecall: member documents held out of the evaluation for member shots, and
    # as many reference-pool documents for non-member shots (sandbox.shots); only when
    # `methods` names one of them
    shots: int = 7
    n_bootstrap: int = 1000
    seed: int = 0
    # document level of each window length (SPEC 3c): a document's windows (windows_per_doc)
    # aggregated by "mean", "share" and/or "classifier"
    documents: tuple[str, ...] = ()
    base_model: str | None = None  # pretrained causal LM (directory or hub id) to go on from
    device: str = "auto"  # where models are trained and run
    # benchmark contamination (sandbox.contamination): a table of formatted examples, of
    # which `contamination_fraction` are inserted into the training documents, each a
    # Poisson(`contamination_repeats`) number of times, 0 included: one drawn 0 times is
    # evaluated as held out (or exactly `contamination_repeats` times when not
    # `contamination_poisson`), the rest held out. `seed` seeds every draw of a run (split of
    # documents and examples, copies, initial weights, training order, windows):
    # pddkit.sandbox.seeds aggregates runs that differ only in it
    contaminate: str | None = None
    contamination_repeats: int = 1
    contamination_poisson: bool = True
    contamination_fraction: float = 0.5
    # copyright traps (sandbox.traps): `traps` per length of `trap_lengths` tokens (0: none),
    # generated with the reference model over `trap_buckets` perplexity buckets of
    # `trap_ppl_range`, half inserted into carrier documents, each `trap_repeats` times in turn
    traps: int = 0
    trap_lengths: tuple[int, ...] = (25, 50)
    trap_repeats: tuple[int, ...] = (1, 4, 16)
    trap_ppl_range: tuple[float, float] = (1.0, 101.0)
    trap_buckets: int = 10

    @property
    def learning_rate(self) -> float:
        if self.lr is not None:
            return self.lr
        return 3e-5 if self.base_model else 2e-3


def parse_sweep(text: str | None) -> tuple[str, list] | None:
    """`"repeats=1,2,4,8"` -> ("repeats", [1, 2, 4, 8])."""
    if not text:
        return None
    knob, eq, values = text.partition("=")
    knob = knob.strip().replace("_", "-")
    if knob not in SWEEPABLE:
        raise PddkitError(f"unknown sweep knob {knob!r}; sweepable: {', '.join(SWEEPABLE)}")
    try:
        vals = [SWEEPABLE[knob](v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise PddkitError(f"`sweep` {text!r}: values of {knob} must be "
                          f"{SWEEPABLE[knob].__name__}s") from None
    if not eq or not vals:
        raise PddkitError(f"`sweep` {text!r} has no values; write e.g. {knob}=1,2,4")
    return knob, vals


def run_sandbox(cfg: SandboxConfig, output: str | Path, sweep: str | None = None) -> dict:
    """Run the experiment; returns the summary also written to OUTPUT/summary.json."""
    from pddkit.backends.devices import pick_device
    from pddkit.backends.hf_loading import load_model
    from pddkit.backends.hf_tokenizers import load_tokenizer
    from pddkit.provenance import Provenance, now
    from pddkit.resources.frequency import build_frequency_table
    from pddkit.sandbox import contamination, ground_truth, training, traps
    from pddkit.sandbox.corpus import load_corpus
    from pddkit.sandbox.split import split_documents

    swept = parse_sweep(sweep)
    if swept and getattr(cfg, _field(swept[0])) != getattr(SandboxConfig, _field(swept[0])):
        name = _field(swept[0])
        raise PddkitError(f"`sweep` sets `{name}` for each model ({', '.join(map(str, swept[1]))}), "
                          f"so `{name}` {getattr(cfg, name)} would be ignored: give only one of them")
    if cfg.base_model and cfg.tokenizer:
        raise PddkitError("`tokenizer` and `base_model` exclude each other: a base model "
                          "brings its own tokenizer")
    if cfg.base_model and swept and swept[0] == "width":
        raise PddkitError("a `sweep` of width needs models trained from scratch, not a `base_model`")
    shape = ("layers", "width", "heads", "vocab_size")
    if cfg.base_model and any(getattr(cfg, k) != getattr(SandboxConfig, k) for k in shape):
        raise PddkitError("`layers`, `width` and `vocab_size` shape a model trained from "
                          "scratch; with `base_model` the base model's own shape is used")
    if swept and swept[0] == "contamination-repeats" and not cfg.contaminate:
        raise PddkitError("a `sweep` of contamination-repeats needs `contaminate` (a file of "
                          "benchmark examples to insert)")
    if cfg.contaminate:
        low = min([cfg.contamination_repeats, *(swept[1] if swept and swept[0] ==
                                                "contamination-repeats" else [])])
        if low < 1:
            raise PddkitError(f"`contamination_repeats` must be at least 1, not {low}")
    traps.check_options(cfg)
    from pddkit.engine.plan import needs_of

    needs_of(cfg.methods)  # unknown names and bad hyperparameters: before anything is trained
    if cfg.documents:  # before anything is trained
        from pddkit.evaluation.document_level import check_aggregations

        check_aggregations(cfg.documents)
        if swept:
            logger.warning("`documents` with a `sweep`: each run's results.json and report have "
                           "the document level; the summary's tables show the text level only")
    device = pick_device(cfg.device)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    started = now()
    corpus = load_corpus(cfg.corpus, cfg.section_words)
    n_background = max([cfg.background, *(swept[1] if swept and swept[0] == "background"
                                           else [])])
    split = split_documents(corpus, cfg.members, cfg.reference, n_background,
                            min_words=max(cfg.windows), seed=cfg.seed,
                            carriers=traps.carriers_needed(cfg),
                            carrier_boundaries=max(cfg.trap_repeats) if cfg.traps else 1)
    split.write(out / "split.json")
    nd = split.near_duplicates
    logger.info("corpus %s: %d documents; split %d members, %d non-members, %d reference, "
                "%d background (%d too short for %d-word windows; %d dropped and %d placed with "
                "the role they share a %d-word run with)", corpus.name, len(corpus.documents),
                len(split.members), len(split.nonmembers), len(split.reference),
                len(split.background), split.too_short, max(cfg.windows), nd.dropped, nd.moved,
                nd.ngram)
    tok_rows = None
    if cfg.base_model or cfg.tokenizer:
        tok = load_tokenizer(cfg.base_model or cfg.tokenizer)
    else:  # never on members or non-members
        tok_rows = [{"id": d.id, "text": d.text} for d in split.reference + split.background]
        tok = training.train_bpe_tokenizer([r["text"] for r in tok_rows],
                                           vocab_size=cfg.vocab_size)
    ground_truth.write_split_texts(out, split, tok_rows)
    csplit = None
    if cfg.contaminate:
        csplit = contamination.split_examples(
            contamination.load_examples(cfg.contaminate),
            [d.text for d in split.members + split.nonmembers + split.reference + split.background],
            fraction=cfg.contamination_fraction, seed=cfg.seed, file=str(cfg.contaminate))
        ground_truth.write_jsonl(out / contamination.EXAMPLES, contamination.example_rows(csplit))
        logger.info("contamination: %s", csplit.counts())
    ref_file = out / ground_truth.REFERENCE
    build_frequency_table(tok, cfg.base_model or cfg.tokenizer or "sandbox-bpe",
                          [ref_file]).save(out / "freq.npz")
    if cfg.base_model:  # the base model, before it saw the members, is the reference
        ref_path = cfg.base_model
    else:
        logger.info("training the reference model on the reference pool")
        ref_model = training.build_gpt2(tok, cfg.layers, cfg.width, cfg.heads, cfg.context,
                                        seed=cfg.seed + 1).to(device)
        training.train_causal_lm(ref_model, tok, [d.text for d in split.reference],
                                 epochs=cfg.ref_epochs, lr=cfg.learning_rate,
                                 batch_size=cfg.train_batch, seed=cfg.seed + 1)
        ref_path = str(training.save(ref_model, tok, out / "reference-model"))
    ref_lm = load_model(ref_path, device=device, dtype="float32", role="reference model")
    strap = traps.prepare(cfg, ref_lm, tok, split, out) if cfg.traps else None

    values = swept[1] if swept else [None]
    runs = []
    for value in values:
        run_cfg = replace(cfg, **{_field(swept[0]): value}) if swept else cfg
        run_dir = out / (f"{swept[0]}={value}" if swept else "run")
        runs.append(_train_and_evaluate(run_cfg, split, tok, ref_lm, out, run_dir, device, csplit,
                                        strap))
    truth = ground_truth.verify_sandbox(out, [out / r["dir"] for r in runs], cfg.base_model,
                                        cfg.tokenizer)
    summary = {"ground_truth": truth,
               "config": {**asdict(cfg), "lr": cfg.learning_rate, "windows": list(cfg.windows),
                          "probe_lrs": list(cfg.probe_lrs)},
               "corpus": {"name": corpus.name, "documents": len(corpus.documents),
                          "files": corpus.files, "undecodable_files": corpus.undecodable_files,
                          "too_short": split.too_short,
                          "near_duplicates": {**asdict(nd), "dropped": nd.dropped}},
               "sweep": None if not swept else {"knob": swept[0], "values": swept[1]},
               "contamination": None if csplit is None else {
                   **csplit.counts(), "poisson": cfg.contamination_poisson,
                   "fraction": cfg.contamination_fraction},
               "traps": None if strap is None else strap.counts,
               "runs": runs, "seconds": time.perf_counter() - t_start,
               "provenance": Provenance.collect(started, devices=[device]).to_dict()}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    from pddkit.reporting.sandbox_summary import write_summary

    summary["report"] = str(write_summary(out, summary))
    return summary


def _train_and_evaluate(cfg: SandboxConfig, split, tok, ref_lm, out: Path, run_dir: Path,
                        device: str, csplit=None, strap=None) -> dict:
    from pddkit.backends.hf_loading import load_model
    from pddkit.engine.config import RunConfig
    from pddkit.engine.pipeline import replaced
    from pddkit.engine.plan import needs_of
    from pddkit.engine.run import STAGES, blind_started, run_dataset, start_blind_early
    from pddkit.engine.stages import REPORT, Stage, run_stages
    from pddkit.methods.base import Need
    from pddkit.reporting.report import report_stage
    from pddkit.reporting.run_files import write_results, write_run
    from pddkit.sandbox import contamination, ground_truth, shots, training, traps
    from pddkit.sandbox.split import windows

    crows = cdata = occurrences = None
    if csplit is not None:  # benchmark examples inserted into the training documents
        occurrences = contamination.draw_occurrences(
            len(csplit.contaminants), cfg.contamination_repeats, cfg.contamination_poisson,
            seed=cfg.seed)
        cdata = contamination.dataset(csplit, occurrences)
        ground_truth.write_jsonl(run_dir / contamination.FOLDER / contamination.EVALUATED,
                                 contamination.evaluated_rows(cdata, occurrences))
        crows = contamination.training_rows(csplit, occurrences)
    if strap is not None:  # RUN/traps: the injected trap folder, checked with the rest
        strap.write(run_dir)
    texts = ground_truth.write_train_documents(run_dir, split, cfg.repeats, cfg.background, crows,
                                               strap.rows if strap else ())
    datasets, pools = {}, {}
    evaluated, held = split, ()
    if shots.needs_shots(cfg.methods):  # member shots: trained on, never evaluated
        evaluated, held = shots.hold_out(split, cfg.shots, cfg.seed)
    for w in cfg.windows:
        datasets[w] = windows(evaluated, w, per_doc=cfg.windows_per_doc, seed=cfg.seed)
        ground_truth.write_windows(run_dir / f"window-{w}", datasets[w])
        if held:
            # shots of the shortest window length: seven 128-word shots would leave no room
            # in a 512-token context for the text after them
            pools[w] = ground_truth.write_windows(run_dir / f"window-{w}", shots.pool(
                split, held, min(cfg.windows), cfg.seed), name=shots.POOL)
    # checked from the files before any training; again for the summary at the end
    ground_truth.verify_run(out, run_dir, tokenizer_texts=not (cfg.tokenizer or cfg.base_model))
    logger.info("training the target model%s: %d members x %d repeats + %d background + %d "
                "contaminant copies + %d trap carriers, %d epochs, lr %g",
                f" from {cfg.base_model}" if cfg.base_model else "", len(split.members),
                cfg.repeats, cfg.background, sum(occurrences or ()),
                len(strap.rows) if strap else 0, cfg.epochs, cfg.learning_rate)
    # the blind baselines need no model: started now, they run beside the training
    blind_config = RunConfig(model=str(run_dir / "target-model"), seed=cfg.seed,
                             n_bootstrap=cfg.n_bootstrap)  # the run's blind settings
    early = {w: start_blind_early(datasets[w], blind_config) for w in cfg.windows}
    if cfg.base_model:
        model = load_model(cfg.base_model, device=device, dtype="float32", role="base model").model
    else:
        model = training.build_gpt2(tok, cfg.layers, cfg.width, cfg.heads, cfg.context,
                                    seed=cfg.seed).to(device)
    history = training.train_causal_lm(model, tok, texts, epochs=cfg.epochs, lr=cfg.learning_rate,
                                       batch_size=cfg.train_batch, seed=cfg.seed,
                                       context=cfg.context)
    target_dir = training.save(model, tok, run_dir / "target-model")
    del model
    lm = load_model(str(target_dir), device=device, dtype="float32")
    probe_load = None  # the probe is trained once per model, then reused for every data set
    # the sandbox's own resources, given only to methods that use them (a run says which
    # resources it was given and did not use)
    needs = needs_of(cfg.methods)
    ref_name = ref_lm.name if Need.REFERENCE in needs else None
    freq = str(out / "freq.npz") if (Need.FREQUENCY in needs
                                     or "classifier" in cfg.documents) else None

    def score(dataset, wdir: Path, what: str, prefix_data: Path | None = None, blind=None):
        nonlocal probe_load
        rc = RunConfig(model=str(target_dir), methods=cfg.methods, ref_model=ref_name,
                       freq=freq, batch_size=32, device=device,
                       prefix_data=None if prefix_data is None or Need.SHOTS not in needs
                       else str(prefix_data),
                       n_bootstrap=cfg.n_bootstrap, seed=cfg.seed, mask_model=cfg.mask_model,
                       probe_data=None if probe_load or Need.PROBE not in needs
                       else str(out / "reference-pool.jsonl"),
                       probe_load=probe_load, probe_lrs=cfg.probe_lrs,
                       documents=cfg.documents if what.endswith("windows") else ())
        # the scores are written before the optional stages (blind baseline, documents,
        # report): a stage that fails is a notice, and every score is kept
        result = run_dataset(dataset, rc, model=lm, ref_model=ref_lm,
                             on_scored=lambda r: write_run(r, wdir),
                             stages=replaced(STAGES, "start blind baseline", blind_started(blind)))
        wdir = write_run(result, wdir)
        if result.probe is not None:
            probe_load = str(wdir / "probe")
        result = run_stages(result, [Stage(REPORT, report_stage(
            wdir, title=f"pddkit sandbox: {run_dir.name}, {what}"))])
        write_results(result, wdir)  # the report's time, or why there is no report
        metrics = result.metrics()
        return result, {
            "dir": wdir.relative_to(out).as_posix(), "texts": len(dataset.samples),
            "auc": {k: m.auc for k, m in metrics.items()},
            "auc_ci": {k: [m.auc_ci.low, m.auc_ci.high] for k, m in metrics.items()},
            "tpr@0.05": {k: m.tpr[0.05] for k, m in metrics.items()},
            "blind_warn": None if result.blind is None else result.blind.warn,
            **({"documents": result.documents.to_dict()} if result.documents is not None else {}),
        }

    per_window = {str(w): score(datasets[w], run_dir / f"window-{w}", f"{w}-word windows",
                                pools.get(w), early[w])[1]
                  for w in cfg.windows}
    # folders relative to the sandbox folder: it can be moved and still rebuild its reports
    entry = {"name": run_dir.name, "dir": run_dir.relative_to(out).as_posix(),
             "train_loss": history, "target_model": target_dir.relative_to(out).as_posix(),
             "windows": per_window}
    if cdata is not None:
        result, entry["contamination"] = score(cdata, run_dir / contamination.FOLDER,
                                               "contaminants vs held-out examples")
        drawn = {e.id: k for e, k in zip(csplit.contaminants, occurrences)}
        entry["contamination"].update(_by_occurrences(result, drawn))
    if strap is not None:
        entry["traps"] = traps.evaluate(cfg, out, run_dir, lm, ref_lm, device)
    return entry


def _by_occurrences(result, drawn: dict[str, int]) -> dict:
    """Contaminants per drawn count, and each method's AUC of the contaminants whose count
    lies in a bin (1, 2, 3-4, 5-8, ...) against every held-out example (the paper's
    Figure 5c)."""
    import numpy as np

    from pddkit.evaluation.metrics import weighted_roc

    labels = np.asarray(result.labels)
    occ = np.array([drawn.get(i, 0) for i in result.ids])  # held-out examples: 0
    bins = {}
    for k in sorted(set(drawn.values()) - {0}):  # drawn 0 times: evaluated as held out
        hi = 1 << (k - 1).bit_length()  # the power of two at or above k
        bins.setdefault(str(k) if hi <= 2 else f"{hi // 2 + 1}-{hi}", []).append(k)
    by_bin = {}
    for name, ks in bins.items():
        keep = (labels == 0) | np.isin(occ, ks)
        by_bin[name] = {m: float(weighted_roc(np.asarray(s)[keep], labels[keep],
                                              np.ones((1, int(keep.sum()))))[0][0])
                        for m, s in result.scores().items()}
    return {"occurrences": {name: int(np.isin(occ, ks).sum()) for name, ks in bins.items()},
            "mean_occurrences": float(np.mean(list(drawn.values()))),
            "drawn_zero_times": int(sum(k == 0 for k in drawn.values())),
            "auc_by_occurrences": by_bin}
