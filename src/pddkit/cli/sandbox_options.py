"""The flags of `pddkit sandbox` (SANDBOX_OPTIONS) and its --help in sections
(SANDBOX_SECTIONS, as cli/run_options.py's RUN_SECTIONS)."""

from __future__ import annotations

import click

SANDBOX_OPTIONS = [
    click.option("--corpus", type=click.Path(), default=None,
        help="Folder of .txt files or a JSONL file (default: Python's own documentation)."),
    click.option("--output", default="sandbox-output", show_default=True, type=click.Path(),
        help="Folder for the models, the windows with their ground truth, results and report."),
    click.option("--tokenizer", type=click.Path(), default=None,
        help="Tokenizer directory (default: a BPE trained on the reference pool and background, "
        "never on members or non-members)."),
    click.option("--sweep", default=None,
        help="KNOB=v1,v2,...: one model per value (repeats, lr, background, epochs, width, "
        "contamination-repeats)."),
    click.option("--members", default=150, show_default=True, help="Member documents (as many non-members)."),
    click.option("--reference", default=150, show_default=True, help="Reference-pool documents."),
    click.option("--background", default=0, show_default=True, help="Extra training documents (dilution)."),
    click.option("--repeats", default=1, show_default=True, help="Copies of each member per epoch."),
    click.option("--epochs", default=12, show_default=True, help="Epochs of the target's training."),
    click.option("--ref-epochs", default=4, show_default=True,
        help="Epochs of the reference model's training on the reference pool."),
    click.option("--lr", type=float, default=None,
        help="Learning rate [default: 2e-3 from scratch, 3e-5 with --base-model]."),
    click.option("--base-model", default=None,
        help="A pretrained causal LM (directory or hub id) to go on pre-training on the "
        "members instead of a small model from scratch; it is also the reference model."),
    click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda[:N] or mps."),
    click.option("--layers", default=2, show_default=True,
        help="Transformer layers of the models trained from scratch."),
    click.option("--width", default=128, show_default=True,
        help="Hidden size of the models trained from scratch."),
    click.option("--context", default=512, show_default=True, help="Model context in tokens."),
    click.option("--vocab-size", default=2048, show_default=True,
        help="Vocabulary of the BPE tokenizer trained here (without --tokenizer)."),
    click.option("--section-words", default=200, show_default=True,
        help="Long files are cut into documents of about this many words."),
    click.option("--windows", default="32,64,128", show_default=True, help="Window lengths in words."),
    click.option("--windows-per-doc", default=2, show_default=True,
        help="Windows of each length cut from each member and non-member document (seeded)."),
    click.option("--documents", default=None,
        help="Also score each document from its windows (its group): mean, share or "
        "classifier, comma-separated (as `pddkit run --documents`)."),
    click.option("--methods", default="all", show_default=True,
        help="all, or name[:k=v,...] separated by commas (see `pddkit list`)."),
    click.option("--mask-model", default=None,
        help="Fill-mask model (local directory or hub id) for `neighbor`; without one "
        "`all` skips it."),
    click.option("--probe-lrs", default="1e-4,1e-3", show_default=True,
        help="Proxy learning rates for `probe` (its auxiliary data is the reference pool)."),
    click.option("--shots", default=7, show_default=True,
        help="recall / conrecall: member documents held out of the evaluation for member "
        "shots, and as many reference-pool documents for non-member shots."),
    click.option("--bootstrap", "n_bootstrap", default=1000, show_default=True,
        help="Bootstrap resamples for the confidence intervals."),
    click.option("--seed", default=0, show_default=True,
        help="Seed of every random choice: the member/non-member split, training, windows, "
        "shots, traps and the bootstrap."),
    click.option("--contaminate", type=click.Path(), default=None,
        help="Table (JSONL, CSV, ...) of formatted benchmark examples, one text a row: half "
        "are inserted whole into the training documents, half held out; detection is "
        "evaluated on them too (Min-K% Prob paper, section 6)."),
    click.option("--contamination-repeats", default=1, show_default=True, type=int,
        help="Copies of each contaminant per epoch: mean of a Poisson draw (a contaminant "
        "drawn 0 times is never inserted and counts as held out), or exact with "
        "--contamination-exact."),
    click.option("--contamination-poisson/--contamination-exact", default=True, show_default=True,
        help="Draw each contaminant's copies from a Poisson distribution, or use exactly "
        "--contamination-repeats."),
    click.option("--contamination-fraction", default=0.5, show_default=True, type=float,
        help="Share of the examples inserted as contaminants (the rest are held out)."),
    click.option("--traps", default=0, show_default=True, type=int,
        help="Copyright traps per length (Meeus et al. 2024), generated with the reference "
        "model: half inserted into carrier documents the target trains on, half held out; "
        "each run is also evaluated on them (0: no traps)."),
    click.option("--trap-lengths", default="25,50", show_default=True,
        help="Trap lengths in tokens of the sandbox tokenizer, comma-separated."),
    click.option("--trap-repeats", default="1,4,16", show_default=True,
        help="Copies of an inserted trap in its carrier (per epoch), given in turn to equal "
        "numbers of traps, comma-separated."),
    click.option("--trap-ppl-range", default="1,101", show_default=True,
        help="low,high: the perplexity range [low, high) under the reference model the traps "
        "cover (the paper's 1,101)."),
    click.option("--trap-buckets", default=10, show_default=True, type=int,
        help="Equal-width perplexity buckets over --trap-ppl-range; --traps must be a "
        "multiple."),
    click.option("--overwrite", is_flag=True,
        help="Replace the sandbox results already in --output (else such a folder is refused)."),
]


SANDBOX_SECTIONS = (  # `pddkit sandbox --help` in sections, as RUN_SECTIONS
    ("Corpus and ground truth", ("--corpus", "--members", "--reference", "--background",
                                 "--section-words", "--windows", "--windows-per-doc",
                                 "--tokenizer", "--vocab-size")),
    ("Training", ("--repeats", "--epochs", "--ref-epochs", "--lr", "--base-model", "--layers",
                  "--width", "--context", "--device", "--sweep")),
    ("Methods", ("--methods", "--mask-model", "--probe-lrs", "--shots")),
    ("Evaluation", ("--bootstrap", "--seed", "--documents")),
    ("Benchmark contamination", ("--contaminate", "--contamination-repeats",
                                 "--contamination-poisson", "--contamination-fraction")),
    ("Copyright traps", ("--traps", "--trap-lengths", "--trap-repeats", "--trap-ppl-range",
                         "--trap-buckets")),
    ("Output", ("--output", "--overwrite")),
)
