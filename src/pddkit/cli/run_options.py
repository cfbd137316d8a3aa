"""The flags of `pddkit run` (RUN_OPTIONS), its --help in sections (RUN_SECTIONS) and the
combinations of them that cannot work (check_run); the groups it shares with other
commands (model, data, corpus index) are in cli/options.py."""

from __future__ import annotations

import click

from pddkit.cli.flag_values import batch_size
from pddkit.cli.options import DATA_OPTIONS, MODEL_OPTIONS, index_options
from pddkit.errors import PddkitError

RUN_OPTIONS = [
    click.option("--model", required=True,
        help="Target model: local directory or hub id (--backend openai: the served name)."),
    click.option("--backend", default="hf", show_default=True, type=click.Choice(["hf", "openai"]),
        help="hf: a causal LM loaded here; openai: an OpenAI-compatible server (--api-base)."),
    click.option("--api-base", default=None,
        help="The server's URL for --backend openai, e.g. http://127.0.0.1:8000/v1."),
    click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
        help="Environment variable holding the API key (the key is never logged or saved)."),
    click.option("--api-concurrency", type=int, default=8, show_default=True,
        help="Requests in flight at once (--backend openai)."),
    click.option("--api-timeout", type=float, default=60.0, show_default=True,
        help="Seconds to wait for one answer (--backend openai)."),
    click.option("--api-retries", type=int, default=5, show_default=True,
        help="Retries, with exponential backoff, after HTTP 429, 502-504, a timeout or a "
             "refused connection (--backend openai)."),
    click.option("--api-prompt", default="auto", show_default=True,
        type=click.Choice(["auto", "ids", "text"]),
        help="Prompts as token ids, or as text that the server tokenises (its tokens are then "
             "checked against --tokenizer's); auto: ids, text where the server refuses ids."),
    click.option("--tokenizer", default=None,
        help="Tokenizer (directory or hub id) of the served model [default: --model]."),
    click.option("--revision", default=None, help="Hub revision (branch, tag or commit) of --model."),
    click.option("--adapter", default=None,
        help="PEFT adapter (folder or hub id) loaded onto --model, unmerged "
             "(needs peft: the extra adapters); "
        "a folder holding an adapter alone may also be given as --model."),
    click.option("--quantize", default=None, type=click.Choice(["8bit", "4bit"]),
        help="Load the models in 8 or 4 bits with bitsandbytes, on a CUDA GPU "
             "(needs bitsandbytes: the extra quantize)."),
    click.option("--cache", type=click.Path(), default=None, envvar="PDDKIT_CACHE",
        help="Statistics cache folder: a rerun recomputes only what it lacks [env PDDKIT_CACHE]."),
    click.option("--engine", default="local", show_default=True, type=click.Choice(["local", "ray"]),
        help="Where the statistics passes run: this process, or Ray actors (needs Ray: the extra ray)."),
    click.option("--ray-address", default=None, help="An existing Ray cluster (default: start one here)."),
    click.option("--actors", default=1, show_default=True, type=int,
        help="Ray actors, each with its own copy of the model."),
    click.option("--gpus-per-actor", default=0.0, show_default=True, type=float,
        help="GPUs each Ray actor holds (a fraction shares one GPU between actors; 0: CPU)."),
    click.option("--limit", default=None, type=int,
        help="Score only this many texts (a seeded sample, both classes kept) for a quick try."),
    click.option("--ref-model", default=None, help="Reference model for `ref`."),
    click.option("--ref-adapter", default=None,
        help="PEFT adapter (folder or hub id) loaded onto --ref-model."),
    click.option("--freq", type=click.Path(), default=None,
        help="Frequency table for `dcpdd` (from `pddkit freq build`)."),
    *DATA_OPTIONS,
    click.option("--methods", default="all", show_default=True,
        help="all, or name[:k=v,...] separated by commas (see `pddkit list`)."),
    click.option("--output", required=True, type=click.Path(), help="Folder for the results."),
    click.option("--batch-size", default="8", show_default=True, callback=lambda c, p, v: batch_size(v),
        help="Texts per batch, or auto: the largest the device holds, found once."),
    click.option("--max-length", default=None, type=int,
        help="Cut texts to this many tokens, start token included (default: context)."),
    click.option("--padding-side", default="right", show_default=True,
        type=click.Choice(["right", "left"]),
        help="Side a batch's shorter texts are padded on; scores do not depend on it (within "
        "float32 rounding)."),
    click.option("--on-invalid", default="error", show_default=True,
        type=click.Choice(["error", "skip"]),
        help="A bad input line stops the run, or is left out and counted."),
    click.option("--bootstrap", "n_bootstrap", default=1000, show_default=True, type=int,
        help="Bootstrap resamples for the confidence intervals."),
    click.option("--seed", default=0, show_default=True, type=int,
        help="Seed of the run's random choices: the --limit sample, the validation split, "
        "shots, word-swapped copies, sampled continuations, the blind baseline's folds and "
        "the bootstrap."),
    click.option("--val-fraction", type=float, default=None,
        help="Choose hyperparameters on this stratified share of the labelled data."),
    click.option("--val-data", type=click.Path(), default=None,
        help="...or on this labelled table (any file --data reads); metrics are then on "
        "--data only."),
    click.option("--mask-model", default=None,
        help="Masked LM for `neighbor` (default roberta-base; local directory or hub id)."),
    click.option("--neighbors", "neighbors_file", type=click.Path(), default=None,
        help="Reuse the neighbors.jsonl an earlier run saved."),
    click.option("--prefix-data", type=click.Path(), default=None,
        help="Labelled shots for `recall` / `conrecall` (any table --data reads); without "
        "it, shots are drawn from --data and left out of the evaluation."),
    click.option("--calibration", type=click.Path(), default=None,
        help="Labelled texts (any table --data reads) that methods marked calibration "
        "(`acmia` without beta) fit on, never evaluated; without it, a seeded stratified 30% "
        "of --data is held out. Written to calibration.jsonl."),
    click.option("--paraphrases", type=click.Path(), default=None,
        help="`decop`: JSONL or CSV with each text's id and `paraphrases` (a list of 3 "
        "strings), optionally title and author."),
    click.option("--paraphraser", default=None,
        help="`decop`: the model that writes 3 paraphrases per text instead (local directory, "
        "hub id, or served name with --paraphraser-backend openai); cached with --cache, "
        "written to paraphrases.jsonl."),
    click.option("--paraphraser-backend", default="hf", show_default=True,
        type=click.Choice(["hf", "openai"]), help="How --paraphraser is run."),
    click.option("--paraphraser-api-base", default=None,
        help="The served --paraphraser's URL (default: --api-base)."),
    click.option("--paraphraser-tokenizer", default=None,
        help="The served --paraphraser's tokenizer, a folder or hub id (default: its name)."),
    click.option("--documents", default=None,
        help="Document-level scores and metrics over each text's --group-field: mean (of "
        "its texts' scores), share (of its texts above a threshold fitted on a seeded half "
        "of the documents), classifier (Meeus et al.'s random forest), or several, "
        "comma-separated."),
    click.option("--doc-features", default="histogram", show_default=True,
        type=click.Choice(["histogram", "aggregate"]),
        help="The document classifier's features: a 1000-bin histogram of the normalised "
        "token probabilities, or their summary statistics."),
    click.option("--split-words", type=int, default=None,
        help="Each input row is a document: cut it into consecutive texts of N words "
        "(verbatim), its group the row's group or id."),
    click.option("--max-texts", type=int, default=None,
        help="With --split-words: keep the first K texts of each document."),
    click.option("--probe-data", type=click.Path(), default=None,
        help="JSONL of auxiliary texts absent from pre-training (trains the `probe`)."),
    click.option("--probe-load", type=click.Path(), default=None,
        help="A probe saved by an earlier run (its OUTPUT/probe folder)."),
    click.option("--probe-lrs", default="1e-4,1e-3", show_default=True,
        help="Proxy fine-tuning learning rates; the best on held-out rows is kept."),
    click.option("--probe-lora", is_flag=True, help="Fine-tune the proxy with LoRA (needs peft)."),
    click.option("--probe-standardize", default="per-set", show_default=True,
        type=click.Choice(["per-set", "train"]),
        help="Standardise each set of probe activations with its own mean and std (as Liu "
        "et al.'s code), or all with the probe's training rows' statistics."),
    click.option("--no-blind", is_flag=True, help="Skip the model-free blind baseline."),
    click.option("--blind-max-texts", type=int, default=None,
        help="Fit the blind baseline on a stratified sample of N texts (out-of-fold there, "
        "the other texts scored by a model fitted on the sample): cheaper on large data."),
    click.option("--no-report", is_flag=True, help="Skip report.html / report.md."),
    click.option("--overwrite", is_flag=True,
        help="Replace the pddkit results already in --output (else such a folder is refused)."),
    *MODEL_OPTIONS,
    *index_options("each text's overlap with the corpus goes into scores.jsonl, each label "
                   "is checked, and the metrics are also given with the contradicted texts "
                   "left out", "contradicted"),
    click.option("--whole-training-set", is_flag=True,
        help="--index holds all the model was trained on: a member with no n-gram in it is "
        "contradicted too."),
]


# `pddkit run --help` in sections (cli/sections.py), each option under one heading by its
# flag; tests/test_flags.py checks that every option of RUN_OPTIONS is placed exactly once
RUN_SECTIONS = (
    ("Model", ("--model", "--revision", "--adapter", "--tokenizer", "--quantize", "--dtype",
               "--trust-remote-code", "--local-files-only", "--backend", "--api-base",
               "--api-key-env", "--api-concurrency", "--api-timeout", "--api-retries",
               "--api-prompt")),
    ("Data", ("--data", "--benchmark", "--data-dir", "--text-field", "--label-field",
              "--id-field", "--group-field", "--subset-field", "--data-split", "--language",
              "--on-invalid", "--limit", "--split-words", "--max-texts", "--max-length")),
    ("Methods", ("--methods", "--ref-model", "--ref-adapter", "--freq", "--mask-model",
                 "--neighbors", "--prefix-data", "--calibration", "--paraphrases",
                 "--paraphraser", "--paraphraser-backend", "--paraphraser-api-base",
                 "--paraphraser-tokenizer",
                 "--probe-data", "--probe-load",
                 "--probe-lrs", "--probe-lora", "--probe-standardize")),
    ("Evaluation", ("--val-fraction", "--val-data", "--bootstrap", "--seed", "--documents",
                    "--doc-features", "--no-blind", "--blind-max-texts", "--index",
                    "--index-tokenizer", "--index-n", "--max-overlap", "--whole-training-set")),
    ("Output", ("--output", "--overwrite", "--no-report")),
    ("Engine", ("--device", "--batch-size", "--padding-side", "--cache", "--engine",
                "--ray-address", "--actors", "--gpus-per-actor")),
)


def check_run(data, benchmark, backend: str, api_base, val_fraction, val_data) -> None:
    """Combinations of `pddkit run` flags that cannot work, before anything is read."""
    if (data is None) == (benchmark is None):
        raise PddkitError("give exactly one of --data FILE and --benchmark NAME")
    if backend == "openai" and not api_base:
        raise PddkitError("--backend openai needs --api-base URL (the server's /v1 address)")
    if val_fraction is not None and val_data is not None:
        raise PddkitError("give at most one of --val-fraction and --val-data")
