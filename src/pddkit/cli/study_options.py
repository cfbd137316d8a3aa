"""The case studies' command-line flags (`pddkit infer`, `audit`, `compare`, `traps`), beside
cli/options.py and the modules it names, which spell all the others; these lists join the
parameter -> flag table (FLAGS, cli/flag_table.py)."""

from __future__ import annotations

import click

from pddkit.cli.flag_table import FLAGS, flags_of
from pddkit.cli.flag_values import batch_size
from pddkit.cli.options import MODEL_OPTIONS

# the case studies' shared options: where results go, and how the engine scores
STUDY_OUTPUT_OPTIONS = [
    click.option("--seed", default=0, show_default=True, type=int,
        help="Seed of every random choice (splits, samples, the bootstrap): the same seed "
        "gives the same result."),
    click.option("--output", required=True, type=click.Path(), help="Folder for the results."),
    click.option("--overwrite", is_flag=True,
        help="Replace the pddkit results already in --output (else such a folder is refused)."),
]
STUDY_ENGINE_OPTIONS = [
    click.option("--cache", type=click.Path(), default=None, envvar="PDDKIT_CACHE",
        help="Statistics cache folder: a rerun recomputes only what it lacks [env PDDKIT_CACHE]."),
    click.option("--batch-size", default="8", show_default=True, callback=lambda c, p, v: batch_size(v),
        help="Texts per batch, or auto: the largest the device holds, found once."),
    click.option("--max-length", default=None, type=int,
        help="Cut texts to this many tokens, start token included (default: context)."),
]


INFER_OPTIONS = [
    click.option("--model", required=True, help="Target model: local directory or hub id."),
    click.option("--suspect", required=True, type=click.Path(),
        help="Texts suspected of being training data: any table file (JSONL, CSV, Parquet, ...)."),
    click.option("--reference", required=True, type=click.Path(),
        help="Texts of the same source known to be unseen (post-cutoff or paraphrased)."),
    click.option("--text-field", default=None, help="Column of the texts [default: text, else input]."),
    click.option("--ref-model", default=None, help="Reference model: adds the `ref` feature."),
    click.option("--freq", type=click.Path(), default=None,
        help="Frequency table (from `pddkit freq build`): adds the `dcpdd` feature."),
    click.option("--mask-model", default=None,
        help="Masked LM (local directory or hub id, e.g. roberta-base): adds the perturbation "
        "feature `neighbor`."),
    click.option("--neighbors", "neighbors_file", type=click.Path(), default=None,
        help="...or the neighbors.jsonl an earlier infer with --mask-model wrote (same texts)."),
    click.option("--n-neighbors", default=25, show_default=True, type=int,
        help="Neighbours per text for the perturbation feature."),
    click.option("--alpha", type=float, default=0.05, show_default=True,
        help="Significance level: 'used in training' needs a p-value below it."),
    click.option("--false-positive-check/--no-false-positive-check", default=True, show_default=True,
        help="Also test two halves of --reference against each other (should find nothing); "
        "texts of one `group` (document) stay on one side."),
    click.option("--classifier", default="nonnegative", show_default=True,
        type=click.Choice(["nonnegative", "paper"]),
        help="nonnegative: weights >= 0 on member-is-higher features, Welch's t-test; paper: "
        "Maini et al.'s unconstrained fit, Student's t-test."),
    click.option("--clip", default="pooled", show_default=True,
        type=click.Choice(["pooled", "per-set"]),
        help="How features are clipped before the fit. pooled: to the 2.5-97.5% quantiles of "
        "suspect and reference texts together (calibrated with heavy-tailed features); "
        "per-set: each set to its own quantiles, as the authors' code (can find a difference "
        "that is not there when features are heavy-tailed)."),
    *STUDY_OUTPUT_OPTIONS,
    *STUDY_ENGINE_OPTIONS,
    *MODEL_OPTIONS,
    click.option("--revision", default=None, help="Hub revision (branch, tag or commit) of --model."),
    click.option("--adapter", default=None,
        help="PEFT adapter (folder or hub id) loaded onto --model, unmerged "
             "(needs peft: the extra adapters)."),
]
FLAGS.update(flags_of(INFER_OPTIONS), **{"false_positive_check=False": "--no-false-positive-check"})


AUDIT_OPTIONS = [
    click.option("--model", required=True, help="Target model: local directory or hub id."),
    click.option("--method", default="mink", show_default=True,
        help="One method, name[:k=v,...] (see `pddkit list`); higher score = member."),
    click.option("--books", required=True, type=click.Path(),
        help="Books to audit: a folder of .txt files (searched recursively), one .txt, or a "
        "JSONL with book and text."),
    click.option("--val-data", type=click.Path(), default=None,
        help="Labelled validation texts (1 member, 0 never seen) that choose the threshold; "
        "a group column naming each text's book lets books be marked."),
    click.option("--val-benchmark", default=None,
        help="...or a labelled benchmark as validation, e.g. bookmia (see `pddkit list`)."),
    click.option("--data-dir", type=click.Path(), default=None,
        help="Local folder with the benchmark's files (else the hub)."),
    click.option("--snippets", default=100, show_default=True, type=int,
        help="Random non-overlapping snippets per book (fewer when a book is short)."),
    click.option("--words", default=512, show_default=True, type=int, help="Words per snippet."),
    click.option("--threshold", default="accuracy", show_default=True,
        help="accuracy (the threshold maximising validation accuracy) or fpr=X (the "
        "validation false-positive rate at most X)."),
    click.option("--fdr", default=0.05, show_default=True, type=float,
        help="False-discovery rate over the audited books (Benjamini-Hochberg): a book is "
        "marked when its rate is improbable for a never-seen book at this level."),
    click.option("--assume-no-book-spread", is_flag=True,
        help="Mark books even when the validation texts name no book (no group column): "
        "assume books the model never saw do not differ in their rates, and test each book "
        "against one pooled never-seen rate. Unchecked; where never-seen books do differ it "
        "marks more of them than --fdr says. Without it, such an audit gives rates but no "
        "verdict."),
    *STUDY_OUTPUT_OPTIONS,
    click.option("--ref-model", default=None, help="Reference model, for --method ref."),
    click.option("--freq", type=click.Path(), default=None,
        help="Frequency table (from `pddkit freq build`), for --method dcpdd."),
    *STUDY_ENGINE_OPTIONS,
    *MODEL_OPTIONS,
    click.option("--revision", default=None, help="Hub revision (branch, tag or commit) of --model."),
    click.option("--adapter", default=None,
        help="PEFT adapter (folder or hub id) loaded onto --model, unmerged "
             "(needs peft: the extra adapters)."),
    click.option("--on-invalid", default="error", show_default=True,
        type=click.Choice(["error", "skip"]),
        help="A bad validation line (or one that is also a book snippet) stops the audit, or "
        "is left out and counted."),
]
FLAGS.update(flags_of(AUDIT_OPTIONS))  # AUDIT_OPTIONS' parameters too (checked against the rest)


COMPARE_OPTIONS = [
    click.option("--model", required=True, help="Original model: local directory or hub id."),
    click.option("--model-b", required=True,
        help="Unlearned model (the original after unlearning): local directory or hub id."),
    click.option("--data", "chunks", type=click.Path(), default=None,
        help="Chunks to check, used as they are: any table file (JSONL, CSV, Parquet, ...)."),
    click.option("--books", type=click.Path(), default=None,
        help="...or books cut into consecutive --words chunks: a folder of .txt files "
        "(searched recursively), one .txt, or a JSONL with book and text."),
    click.option("--words", default=512, show_default=True, type=int, help="Words per chunk (--books)."),
    click.option("--method", default="mink", show_default=True,
        help="mink, loss or surp, name[:k=v,...]: a mean log-probability, so ratios compare."),
    click.option("--band", default=1.15, show_default=True, type=float,
        help="A chunk whose score ratio unlearned/original lies inside (1/band, band) is "
        "flagged 'not removed'."),
    click.option("--continue", "continuations", default=0, show_default=True, type=int,
        help="Sample N continuations of each flagged chunk from the unlearned model (local "
        "directory) and compare them with the true text (ROUGE-L recall)."),
    click.option("--prompt-words", default=200, show_default=True, type=int,
        help="Words of each flagged chunk given as the prompt for --continue."),
    *STUDY_OUTPUT_OPTIONS,
    *STUDY_ENGINE_OPTIONS,
    *MODEL_OPTIONS,
]
FLAGS.update(flags_of(COMPARE_OPTIONS))  # COMPARE_OPTIONS' parameters too (checked against the rest)


# `pddkit traps generate | inject | detect` (Meeus et al. 2024, copyright traps)
TRAPS_DETECT_OPTIONS = [
    click.option("--model", required=True, help="Target model: local directory or hub id."),
    click.option("--ref-model", default=None,
        help="Reference model for `ref`, the paper's method (target / reference perplexity)."),
    click.option("--traps", required=True, type=click.Path(),
        help="Trap folder written by `pddkit traps inject` (traps.jsonl, trap-info.jsonl)."),
    click.option("--methods", default="all", show_default=True,
        help="all, or name[:k=v,...] separated by commas (see `pddkit list`)."),
    click.option("--freq", type=click.Path(), default=None,
        help="Frequency table for `dcpdd` (from `pddkit freq build`)."),
    click.option("--epochs", type=int, default=None,
        help="Epochs --model was trained on the injected documents, if known: a trap inserted "
        "R times was then seen R x epochs times (its exposures, shown beside R). Left out, "
        "the exposures are reported as unknown."),
    click.option("--bootstrap", "n_bootstrap", default=1000, show_default=True, type=int,
        help="Bootstrap resamples for the confidence intervals."),
    *STUDY_OUTPUT_OPTIONS,
    *STUDY_ENGINE_OPTIONS,
    *MODEL_OPTIONS,
    click.option("--revision", default=None, help="Hub revision (branch, tag or commit) of --model."),
    click.option("--adapter", default=None,
        help="PEFT adapter (folder or hub id) loaded onto --model, unmerged "
             "(needs peft: the extra adapters)."),
]
FLAGS.update(flags_of(TRAPS_DETECT_OPTIONS))


TRAPS_GENERATE_OPTIONS = [
    click.option("--model", required=True,
        help="Model that samples the traps and measures their perplexity: local directory or hub id."),
    click.option("--lengths", required=True,
        help="Trap lengths in tokens of the model's tokenizer, comma-separated, e.g. 25,50,100."),
    click.option("--count", required=True, type=int,
        help="Traps per length (a multiple of --buckets); half are inserted, half held out."),
    click.option("--ppl-range", default="1,101", show_default=True,
        help="low,high: the perplexity range [low, high) the traps cover."),
    click.option("--buckets", default=10, show_default=True, type=int,
        help="Equal-width perplexity buckets over --ppl-range, each given count / buckets traps."),
    click.option("--temperatures", default="0.5:4:0.25", show_default=True,
        help="Sampling temperatures swept: start:stop:step (stop included) or a comma list."),
    click.option("--jaccard", default=0.2, show_default=True, type=float,
        help="A trap whose token set's Jaccard similarity with a kept trap exceeds this is rejected."),
    click.option("--retokenize/--no-retokenize", default=True, show_default=True,
        help="Keep only traps whose text encodes back to exactly their token ids (else only "
        "to their length)."),
    click.option("--batch-size", default=128, show_default=True, type=int,
        help="Sequences sampled at once per temperature."),
    click.option("--max-tries", default=100_000, show_default=True, type=int,
        help="At most this many samples per length before giving up (with what was reached)."),
    *STUDY_OUTPUT_OPTIONS,
    *MODEL_OPTIONS,
    click.option("--revision", default=None, help="Hub revision (branch, tag or commit) of --model."),
]
FLAGS.update(flags_of(TRAPS_GENERATE_OPTIONS), **{"retokenize=False": "--no-retokenize"})


TRAPS_INJECT_OPTIONS = [
    click.option("--traps", required=True, type=click.Path(),
        help="Trap folder written by `pddkit traps generate`."),
    click.option("--documents", required=True, type=click.Path(),
        help="Documents to insert the member traps into: JSONL, CSV, TSV or Parquet, one a row; "
        "written back in the same format under the same name in --output."),
    click.option("--repeats", required=True,
        help="Times a trap is inserted into its document, comma-separated, e.g. 1,10,100; each "
        "count goes to the same number of traps."),
    click.option("--min-tokens", default=5000, show_default=True, type=int,
        help="Insert only into documents of at least this many tokens of the traps' tokenizer."),
    click.option("--text-field", default="text", show_default=True, help="Column of the texts."),
    click.option("--id-field", default="id", show_default=True, help="Column of the document ids."),
    click.option("--tokenizer", default=None,
        help="Tokenizer (directory or hub id) counting --min-tokens [default: the model the "
        "traps were generated with, from their manifest]; it must be the traps' own."),
    *STUDY_OUTPUT_OPTIONS,
    click.option("--trust-remote-code", is_flag=True,
        help="Allow a tokenizer's own code from the hub to run (off by default)."),
    click.option("--local-files-only", is_flag=True,
        help="Never contact the hub; use local directories and the cache."),
]
FLAGS.update(flags_of(TRAPS_INJECT_OPTIONS))
