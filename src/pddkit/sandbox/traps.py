"""Copyright traps in the sandbox (Meeus et al., "Copyright Traps for Large Language Models",
ICML 2024; the steps of studies.traps), with ground truth.

- Generation, once per sandbox: `traps` sequences of each length in `trap_lengths` tokens of
  the sandbox tokenizer, sampled from the sandbox's reference model (trained on the
  reference pool only; the base model with `base_model`), spread over `trap_buckets`
  perplexity buckets of `trap_ppl_range`, half of each bucket to be inserted and half held
  out (studies.traps.generate), seeded by `seed`: OUTPUT/traps/ (traps.jsonl, manifest.json).
- Filter: a trap that occurs verbatim in, or shares a run of 13 lower-cased words with, any
  text of the split (members, non-members, reference pool, background, trap carriers; the
  tokenizer's texts are the reference pool and background), or that occurs inside another
  trap or shares such a run with one kept before it, is dropped and counted
  (OUTPUT/traps/sandbox-filter.json), so that "inserted" and "held out" are literally true.
- Carriers: the member traps go into dedicated carrier documents, never into member
  documents (evaluated windows stay verbatim training text). Carriers are documents the
  split did not use, clean of members, non-members and the reference pool, each joined from
  as many as it takes to hold max(`trap_repeats`) sentence boundaries (sandbox.split). One
  trap per carrier (studies.traps.inject, every repeat count given to as many traps);
  carriers that get a trap are trained on in every run, once per epoch (role
  "trap-carrier" in RUN/train-documents.jsonl), so a trap inserted R times is seen
  R x `epochs` times; a carrier left without a trap is not trained on (counted). The traps
  are never tokenizer text: the tokenizer is trained on the reference pool and background
  before they exist, and carriers are not among its texts.
- Evaluation, per run: inserted vs held-out traps scored by the run's target model
  (studies.traps.detect: AUC per length x repeats and per perplexity bucket; `ref` against
  the sandbox's reference model), written to RUN/traps/ beside the injected trap folder
  (traps.jsonl, manifest.json, trap-info.jsonl, injection.json; results.json, scores.jsonl,
  report.html).
- Ground truth (`verify`, called by ground_truth.verify_run): from the files, each inserted
  trap occurs in RUN/train-documents.jsonl exactly as often as trap-info.jsonl says (sum of
  repeats x occurrences over the rows), all of them in its carrier; no held-out trap occurs
  in, or shares a 13-word run with, any training text; no evaluated trap does so with the
  reference pool or tokenizer texts; each trap is the generated one (OUTPUT/traps) with its
  role.

Perplexity range: the paper's [1, 101) in 10 buckets. The default sandbox reference model
(2 layers, width 128, 4 epochs on 150 reference documents) gives natural text a perplexity
of about 300, so only samples drawn at temperature 0.5-0.75 land in range, but every bucket
fills (a 25-token sample at temperature 0.5 has perplexity 2 to 60): 40 traps of 25 and of
50 tokens take about 3 minutes on 2 CPU cores, most samples being rejected because they do
not re-encode to their own ids. A smaller or shorter-trained reference model may not reach
the low buckets: `trap_ppl_range` and `trap_buckets` set others.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

from pddkit.data.ngrams import N, ngram_hashes
from pddkit.errors import PddkitError
from pddkit.sandbox.split import CARRIER
from pddkit.studies.traps.folder import HELD_OUT, MEMBER, TrapFolder, read_folder

logger = logging.getLogger(__name__)

FOLDER = "traps"  # OUTPUT/traps: the generated traps; RUN/traps: injected, and detect's results
FILTER = "sandbox-filter.json"  # in OUTPUT/traps: the traps dropped before injection, and why


@dataclass(frozen=True)
class SandboxTraps:
    """The traps kept and injected into the carriers, once per sandbox (every run the same)."""

    folder: TrapFolder  # kept traps, with one Insertion per inserted trap
    rows: tuple[dict, ...]  # the carriers' rows of RUN/train-documents.jsonl
    counts: dict  # generated, dropped (by reason), kept, inserted, held out, carriers

    def write(self, run_dir: Path) -> Path:
        """RUN/traps: the injected trap folder."""
        return self.folder.write(Path(run_dir) / FOLDER)


def check_options(cfg) -> None:
    """One sentence for trap options that cannot work, before anything is trained."""
    from pddkit.studies.traps.generate import check_generate_options

    if not isinstance(cfg.traps, int) or cfg.traps < 0:
        raise PddkitError(f"`traps` is a number of traps per length (0: none), not {cfg.traps}")
    if not cfg.traps:
        return
    lengths, repeats = list(cfg.trap_lengths), list(cfg.trap_repeats)
    if not lengths or any(not isinstance(n, int) or n < 1 for n in lengths) \
            or len(set(lengths)) != len(lengths):
        raise PddkitError(f"`trap_lengths` must be distinct token counts of at least 1, not {lengths}")
    if not repeats or any(not isinstance(r, int) or r < 1 for r in repeats) \
            or len(set(repeats)) != len(repeats):
        raise PddkitError(f"`trap_repeats` must be distinct whole numbers of at least 1, not {repeats}")
    if not isinstance(cfg.trap_buckets, int) or cfg.trap_buckets < 1:
        raise PddkitError(f"`trap_buckets` must be at least 1, not {cfg.trap_buckets}")
    if cfg.traps % cfg.trap_buckets:
        low = max(cfg.trap_buckets, cfg.traps // cfg.trap_buckets * cfg.trap_buckets)
        raise PddkitError(f"`traps` {cfg.traps} is not a multiple of `trap_buckets` "
                          f"{cfg.trap_buckets} (each bucket gets traps / buckets of each "
                          f"length): use {low} or {low + cfg.trap_buckets}")
    rng = tuple(cfg.trap_ppl_range)
    if len(rng) != 2 or not all(math.isfinite(x) for x in rng) or not 1.0 <= rng[0] < rng[1]:
        raise PddkitError(f"`trap_ppl_range` must be two perplexities 1 <= low < high, not {list(rng)}")
    if cfg.traps // 2 < len(repeats):
        raise PddkitError(f"`traps` {cfg.traps} gives {cfg.traps // 2} traps of each length to "
                          f"insert, fewer than the {len(repeats)} `trap_repeats`: every repeat "
                          "count needs its own traps")
    if max(lengths) + 1 > cfg.context and not cfg.base_model:
        raise PddkitError(f"`trap_lengths` {max(lengths)} does not fit the models' `context` of "
                          f"{cfg.context} tokens (the start token included)")
    methods_for_traps(cfg.methods)
    check_generate_options(lengths=lengths, count=cfg.traps, ppl_range=rng,
                           buckets=cfg.trap_buckets)


def carriers_needed(cfg) -> int:
    """Carriers for every member trap generation can mark (at most half of each
    (length, bucket) cell, rounded up); 0 without traps."""
    if not cfg.traps:
        return 0
    per_bucket = cfg.traps // cfg.trap_buckets
    return len(cfg.trap_lengths) * cfg.trap_buckets * -(-per_bucket // 2)


def methods_for_traps(methods: str) -> str:
    """`methods` without those traps cannot be scored by (they need a mask model, a probe or
    labelled shots, which traps detect is not given); "all" stays "all" (it skips them)."""
    from pddkit.methods.base import METHODS, Need
    from pddkit.params import parse_spec, split_spec_list

    unmet = {Need.NEIGHBORS, Need.PROBE, Need.SHOTS}  # traps detect is given none of these
    specs = split_spec_list(methods)
    kept = [s for s in specs if parse_spec(s)[0] == "all"
            or not METHODS.get(parse_spec(s)[0]).needs & unmet]
    if not kept:
        raise PddkitError(f"`methods` {methods!r} names no method traps can be scored by (they "
                          "are scored without a mask model, probe data or shots): add e.g. ref")
    if len(kept) < len(specs):
        logger.info("traps are not scored by %s (no mask model, probe data or shots for them)",
                    ", ".join(s for s in specs if s not in kept))
    return ",".join(kept)


def filter_traps(traps, texts: list[str]) -> tuple[list, dict[str, str]]:
    """(traps kept, trap id -> why dropped): a trap occurring verbatim in, or sharing a run
    of 13 words with, one of `texts`, or occurring inside another trap, or sharing such a
    run with a trap kept before it, is dropped."""
    grams: set[int] = set()
    for t in texts:
        grams |= ngram_hashes(t)
    blob = "\x00".join(texts)
    trap_blob = "\x00".join(t.text for t in traps)
    kept, dropped, kept_grams = [], {}, set()
    for t in traps:
        g = ngram_hashes(t.text)
        if t.text in blob:
            dropped[t.id] = "verbatim in a document of the split"
        elif not g.isdisjoint(grams):
            dropped[t.id] = f"shares a {N}-word run with a document of the split"
        elif trap_blob.count(t.text) > 1:
            dropped[t.id] = "occurs inside another trap"
        elif not g.isdisjoint(kept_grams):
            dropped[t.id] = f"shares a {N}-word run with another trap"
        else:
            kept.append(t)
            kept_grams |= g
    return kept, dropped


def prepare(cfg, ref_model, tokenizer, split, out: Path) -> SandboxTraps:
    """Generate the traps with `ref_model` (a LoadedModel), write OUTPUT/traps, drop those
    sharing text with the split, and inject the member traps into the split's carriers."""
    from pddkit.studies.traps.generate import generate_traps

    logger.info("generating %d traps of %s tokens with the reference model", cfg.traps,
                " and ".join(map(str, cfg.trap_lengths)))
    generated = generate_traps(ref_model.model, tokenizer, lengths=cfg.trap_lengths,
                               count=cfg.traps, ppl_range=tuple(cfg.trap_ppl_range),
                               buckets=cfg.trap_buckets, seed=cfg.seed,
                               model_name=ref_model.name)
    return place(generated, split, out, repeats=cfg.trap_repeats, tokenizer=tokenizer,
                 seed=cfg.seed)


def place(generated: TrapFolder, split, out: Path, *, repeats, tokenizer=None,
          seed: int = 0) -> SandboxTraps:
    """Write the generated traps to OUTPUT/traps, drop those sharing text with the split
    (or another trap), and inject the member traps kept into the split's carriers, one
    each, `repeats` in turn (studies.traps.inject with `tokenizer`, the traps' own)."""
    from pddkit.studies.traps.inject import inject_traps

    generated.write(out / FOLDER)
    texts = [d.text for d in (*split.members, *split.nonmembers, *split.reference,
                              *split.background, *split.carriers)]
    kept, dropped = filter_traps(generated.traps, texts)
    reasons = {r: sum(v == r for v in dropped.values()) for r in sorted(set(dropped.values()))}
    sandbox_filter = {"generated": len(generated.traps), "kept": len(kept),
                      "dropped": len(dropped), "dropped_by_reason": reasons, "ngram": N,
                      "dropped_traps": dropped}
    (out / FOLDER / FILTER).write_text(json.dumps(sandbox_filter, indent=2) + "\n")
    members = [t for t in kept if t.role == MEMBER]
    held = [t for t in kept if t.role == HELD_OUT]
    if len(members) < len(repeats) or not held:
        raise PddkitError(f"{len(dropped)} of the {len(generated.traps)} traps share text with "
                          f"the corpus, leaving {len(members)} to insert and {len(held)} held "
                          f"out: more `traps` are needed for {len(repeats)} "
                          "`trap_repeats` and held-out traps")
    manifest = {**generated.manifest, "sandbox_filter": {k: v for k, v in sandbox_filter.items()
                                                         if k != "dropped_traps"}}
    folder = dataclasses.replace(generated, traps=tuple(kept), manifest=manifest)
    docs, folder = inject_traps(folder, [(c.id, c.text) for c in split.carriers],
                                repeats=list(repeats), tokenizer=tokenizer,
                                min_tokens=0, seed=seed)
    with_trap = {i.document_id for i in folder.insertions}
    rows = tuple({"id": i, "role": CARRIER, "repeats": 1, "text": text}
                 for i, text in docs if i in with_trap)
    counts = {**{k: v for k, v in sandbox_filter.items() if k != "dropped_traps"},
              "members": len(members), "held_out": len(held), "inserted": len(folder.insertions),
              "not_inserted": len(members) - len(folder.insertions),
              "traps_per_repeats": folder.injection["counts"]["traps_per_repeats"],
              "copies": folder.injection["counts"]["copies"],
              "carriers": len(split.carriers), "carriers_with_trap": len(rows),
              "carrier_documents": sum(len(p) for c, p in zip(split.carriers, split.carrier_parts)
                                       if c.id in with_trap)}
    logger.info("traps: %d generated, %d dropped for sharing text with the split or another "
                "trap; %d inserted into carriers (%s per repeat count), %d held out",
                len(generated.traps), len(dropped), len(folder.insertions),
                counts["traps_per_repeats"], len(held))
    return SandboxTraps(folder, rows, counts)


def evaluate(cfg, out: Path, run_dir: Path, lm, ref_lm, device: str) -> dict:
    """Score RUN/traps with the run's target `lm` (traps detect), write its results there,
    and return the run entry's `traps`: counts and AUC per (length, repeats) cell."""
    from pddkit.engine.plan import needs_of
    from pddkit.methods.base import Need
    from pddkit.studies.traps.detect import detect_traps

    folder = run_dir / FOLDER
    methods = methods_for_traps(cfg.methods)
    needs = needs_of(methods)  # the sandbox's reference model and table: given if used
    result = detect_traps(folder, lm, ref_model=ref_lm if Need.REFERENCE in needs else None,
                          freq=str(out / "freq.npz") if Need.FREQUENCY in needs else None,
                          methods=methods, epochs=cfg.epochs, n_bootstrap=cfg.n_bootstrap,
                          seed=cfg.seed, device=device, batch_size=32)
    result.write(folder)

    def ci(m):
        lo, hi = m.auc_ci.low, m.auc_ci.high
        return [lo, hi] if math.isfinite(lo) and math.isfinite(hi) else None

    cells = [{"length": c.length, "repeats": c.repeats, "exposures": c.exposures,
              "members": c.n_members,
              "nonmembers": c.n_nonmembers,
              "auc": {k: None if m is None else m.auc for k, m in c.metrics.items()},
              "auc_ci": {k: None if m is None else ci(m) for k, m in c.metrics.items()}}
             for c in result.table]
    return {"dir": folder.relative_to(out).as_posix(), "methods": list(result.methods),
            "epochs": cfg.epochs,
            "inserted": result.counts["inserted"], "held_out": result.counts["held_out"],
            "cells": cells, "notices": list(result.notices)}


@dataclass(frozen=True)
class TrapCheck:
    run: str
    inserted: int
    inserted_counted: int  # occur in the training documents exactly as often as inserted
    repeats: tuple[int, ...]  # the repeat counts inserted
    held_out: int
    held_out_in_training: int  # occur in, or share a 13-word run with, training text
    evaluated: int  # inserted + held out
    reference_shared: int  # occur in, or share a run with, the reference pool / tokenizer texts
    outside_source: int  # not the generated trap (OUTPUT/traps) with this id, text and role
    epochs: int | None = None  # the run's epochs (RUN/traps/results.json): copies seen once each

    @property
    def failures(self) -> list[str]:
        out = []
        if self.inserted_counted < self.inserted:
            out.append(f"{self.inserted - self.inserted_counted} of {self.inserted} inserted traps "
                       "do not occur in the training documents exactly as often as inserted, "
                       "all in their carrier")
        for count, total, what in (
                (self.held_out_in_training, self.held_out,
                 f"held-out traps occur in, or share a {N}-word run with, training text"),
                (self.reference_shared, self.evaluated,
                 f"traps occur in, or share a {N}-word run with, the reference pool or "
                 "tokenizer texts"),
                (self.outside_source, self.evaluated,
                 "traps are not the generated trap with their text and role")):
            if count:
                out.append(f"{count} of {total} {what}")
        return out

    def sentence(self, tokenizer_texts: bool = True) -> str:
        seen = ("" if self.epochs is None else
                f", trained {self.epochs} epoch{'' if self.epochs == 1 else 's'}: seen R x "
                f"{self.epochs} times ({', '.join(str(r * self.epochs) for r in self.repeats)})")
        return (f"{self.inserted} inserted, each exactly R times "
                f"({', '.join(map(str, self.repeats))}) in train-documents.jsonl{seen}; "
                f"{self.held_out_in_training} of {self.held_out} held-out traps occur in any "
                "training" + (", reference or tokenizer" if tokenizer_texts else " or reference")
                + " text")


def present(out: Path, run_dir: Path) -> bool:
    """Whether the run was given traps (RUN/traps; OUTPUT/traps alone may be left over from
    an earlier sandbox in the folder, which `overwrite` does not remove)."""
    return (run_dir / FOLDER).is_dir()


def verify(out: Path, run_dir: Path, train: list[dict], ref_texts: list[str],
           ref_grams: set[int]) -> TrapCheck:
    """Check a run's traps (module docstring) from RUN/traps, OUTPUT/traps and the run's
    training rows `train`; raises PddkitError on any failure."""
    generated = {t.id: t for t in read_folder(out / FOLDER).traps}
    folder = read_folder(run_dir / FOLDER)
    inserted = {i.trap_id: i for i in folder.insertions}
    train_grams: set[int] = set()
    for r in train:
        train_grams |= ngram_hashes(r["text"])
    ref_blob = "\x00".join(ref_texts)
    n = {"i": 0, "ic": 0, "h": 0, "hs": 0, "e": 0, "rs": 0, "out": 0}
    for t in folder.traps:
        ins = inserted.get(t.id)
        if ins is None and t.role != HELD_OUT:
            continue  # marked to be inserted, left out by the injection: not evaluated
        grams = ngram_hashes(t.text)
        copies = sum(r["repeats"] * r["text"].count(t.text) for r in train)
        src = generated.get(t.id)
        n["e"] += 1
        n["out"] += src is None or (src.text, src.role) != (t.text, t.role)
        n["rs"] += t.text in ref_blob or not grams.isdisjoint(ref_grams)
        if ins is not None:
            own = sum(r["repeats"] * r["text"].count(t.text) for r in train
                      if r["id"] == ins.document_id and r["role"] == CARRIER)
            n["i"] += 1
            n["ic"] += copies == own == ins.repeats >= 1 and t.role == MEMBER
        else:
            n["h"] += 1
            n["hs"] += copies > 0 or not grams.isdisjoint(train_grams)
    results = run_dir / FOLDER / "results.json"  # traps detect's, written by `evaluate`
    epochs = json.loads(results.read_text()).get("epochs") if results.is_file() else None
    check = TrapCheck(run=run_dir.name, inserted=n["i"], inserted_counted=n["ic"],
                      repeats=tuple(sorted({i.repeats for i in folder.insertions})),
                      held_out=n["h"], held_out_in_training=n["hs"], evaluated=n["e"],
                      reference_shared=n["rs"], outside_source=n["out"], epochs=epochs)
    if check.failures:
        raise PddkitError(f"ground truth check failed for {run_dir / FOLDER}: "
                          + "; ".join(check.failures))
    return check
