"""Every command-line flag pddkit has, spelled here (the case studies' flags in
cli/study_options.py) and nowhere else: the commands (cli/*.py) apply these lists and
turn flags into the parameters lower layers know by their Python names. Also the parsing
of flag values that name the flag in their errors, and the way back: FLAGS (parameter ->
flag) and for_cli, which shows lower layers' messages, which name parameters
(`batch_size`), with the flags (--batch-size)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import click

from pddkit.errors import PddkitError

MODEL_OPTIONS = [
    click.option("--device", default="auto", show_default=True,
                 help="cpu, cuda, cuda:N, mps or auto."),
    click.option("--dtype", default="auto", show_default=True,
                 type=click.Choice(["auto", "float32", "bfloat16", "float16"]),
                 help="Model weights' dtype (statistics are always float32)."),
    click.option("--trust-remote-code", is_flag=True,
                 help="Allow a model's own code from the hub to run (off by default)."),
    click.option("--local-files-only", is_flag=True,
                 help="Never contact the hub; use local directories and the cache."),
]


def data_options(group: str = "kept on one side of every split",
                 subset: str = "reported on its own",
                 language: str | None = "methods meaningless for it are skipped") -> list:
    """The data flags of `run` and `blind`; `group`, `subset`, `language`: what the command
    does with that column (each command's --help says only what it does; `language=None`:
    no --language)."""
    found = [
    click.option("--data", type=click.Path(), default=None,
        help="Texts: JSONL, CSV, TSV, Parquet, a datasets save_to_disk folder, or a hub id."),
    click.option("--benchmark", default=None, help="Benchmark NAME[:k=v,...], e.g. wikimia:length=64."),
    click.option("--data-dir", type=click.Path(), default=None,
        help="Local folder with the benchmark's files (else the hub)."),
    click.option("--text-field", default=None, help="Column of the texts [default: text, else input]."),
    click.option("--label-field", default="label", show_default=True,
        help="Column of the labels: 1/0, true/false or member/nonmember."),
    click.option("--id-field", default="id", show_default=True, help="Column of the text ids."),
    click.option("--group-field", default="group", show_default=True,
        help=f"Column naming the document a text was cut from ({group})."),
    click.option("--subset-field", default="subset", show_default=True,
        help=f"Column of a part (domain, field, length, position), {subset}."),
    click.option("--data-split", default=None,
        help="Split of a hub id or datasets folder [default: its only split, else train]."),
    ]
    if language is not None:
        found.append(click.option("--language", default=None,
                                  help=f"Language of the texts (en, zh, ...): {language}."))
    return found


DATA_OPTIONS = data_options()


def data_source(data, benchmark, data_dir, text_field, label_field, id_field, group_field,
                subset_field, data_split, language, on_invalid):
    """The DATA_OPTIONS as one DataSource."""
    from pddkit.data.records import Fields
    from pddkit.data.sources import DataSource

    fields = Fields(text=text_field, label=label_field, id=id_field, group=group_field,
                    subset=subset_field)
    return DataSource(data=data, benchmark=benchmark, data_dir=data_dir, fields=fields,
                      data_split=data_split, language=language, on_invalid=on_invalid)


def index_options(use: str, verdict: str) -> list:
    """The corpus-index flags of `run` and `build`; `use`: what the command does with the
    texts the corpus contains, `verdict`: what becomes of a non-member found (each
    command's --help says only what it does)."""
    return [
    click.option("--index", multiple=True, type=click.Path(),
        help="An infini-gram index of the training corpus (from `pddkit corpus index`, or a "
        f"public one): {use}; repeatable, one folder per worker of a sharded index."),
    click.option("--index-tokenizer", default=None,
        help="The tokenizer (folder or hub id) a public --index was built with [default: the "
        "one its pddkit manifest names; another is refused]."),
    click.option("--index-n", default=13, show_default=True, type=int,
        help="--index: the n of the n-grams looked up (tokens of the index's tokenizer)."),
    click.option("--max-overlap", default=0.2, show_default=True, type=float,
        help="--index: a non-member with at least this share of its n-grams in the corpus "
        f"is {verdict}."),
    ]


def check_index_flags(index) -> None:
    """--index-n or --max-overlap typed without --index: one sentence, not ignored."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    typed = [f"--{n.replace('_', '-')}" for n in ("index_n", "max_overlap")
             if ctx.get_parameter_source(n) in (ParameterSource.COMMANDLINE,
                                                ParameterSource.ENVIRONMENT)]
    if typed and not index:
        raise PddkitError(f"{' and '.join(typed)} set{'s' if len(typed) == 1 else ''} how "
                          "texts are checked against a corpus index; give --index too")


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


BLIND_OPTIONS = [
    *data_options(group="its texts stay in one cross-validation fold",
                  subset="where the baseline is also fitted within each part", language=None),
    click.option("--on-invalid", default="error", show_default=True,
        type=click.Choice(["error", "skip"]),
        help="A bad input line stops the check, or is left out and counted."),
    click.option("--seed", default=0, show_default=True, type=int,
        help="Seed of the cross-validation folds and the bootstrap."),
    click.option("--bootstrap", "n_bootstrap", default=1000, show_default=True, type=int,
        help="Bootstrap resamples for the confidence intervals."),
    click.option("--blind-max-texts", type=int, default=None,
        help="Fit the blind baseline on a stratified sample of N texts (out-of-fold there, "
        "the other texts scored by a model fitted on the sample): cheaper on large data."),
    click.option("--output", type=click.Path(), default=None,
        help="Folder for results.json and scores.jsonl (optional)."),
    click.option("--overwrite", is_flag=True,
        help="Replace the pddkit results already in --output (else such a folder is refused)."),
]


FREQ_BUILD_OPTIONS = [
    click.option("--tokenizer", "tokenizer_name", required=True,
        help="Model (directory or hub id) whose tokenizer to count with."),
    click.option("--output", required=True, type=click.Path(), help="Table file to write (.npz)."),
    click.option("--batch-docs", default=256, show_default=True, type=int,
        help="Documents encoded per batch."),
    click.option("--trust-remote-code", is_flag=True,
        help="Allow the tokenizer's own code from the hub to run (off by default)."),
    click.option("--local-files-only", is_flag=True,
        help="Never contact the hub; use a local directory or the cache."),
    click.argument("corpus", nargs=-1, required=True, type=click.Path()),
]


def config_option(callback: Callable) -> click.Option:
    """--config FILE.yaml, which every command with options gets (cli/config_file.py reads it)."""
    return click.Option(["--config"], type=click.Path(), default=None, is_eager=True,
        expose_value=False, callback=callback, metavar="FILE.yaml",
        help="Run file: YAML whose keys are this command's long option names without the "
        "dashes (option-name: value), e.g. a results folder's run.yaml; flags given here override it.")


def apply(options: Sequence[Callable]) -> Callable:
    """Decorator applying a list of click options, first listed = first in --help."""

    def wrap(fn: Callable) -> Callable:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return wrap


def _flag_table(*more: Sequence[Callable]) -> dict[str, str]:
    """Parameter name -> flag, read off the option lists above, so the table cannot drift
    from the flags; a name that two commands spell differently is refused here."""
    table: dict[str, str] = {}
    for options in (RUN_OPTIONS, SANDBOX_OPTIONS, BLIND_OPTIONS, FREQ_BUILD_OPTIONS, *more):
        holder = apply(options)(lambda: None)
        for p in holder.__click_params__:
            if isinstance(p, click.Option):
                flag = max(p.opts, key=len)
                if table.setdefault(p.name, flag) != flag:
                    raise ValueError(f"parameter {p.name} is {table[p.name]} and {flag}")
    return table


# Lower layers (and the Python API's errors) name parameters as Python spells them, in
# backticks: "`batch_size` must be at least 1", "use `on_invalid='skip'`". For the command
# line, `for_cli` turns each one the table knows into its flag. Keys are parameter names
# (RunConfig's, SandboxConfig's, run_sandbox's, ...) or "name=value" where the flag differs.
FLAGS: dict[str, str] = {**_flag_table(), "blind=False": "--no-blind"}

_PARAMETER = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(=[^`\s]+)?`")


def for_cli(message: str) -> str:
    """A message as a command-line user reads it: `name` -> its flag ("--batch-size"),
    `name='value'` -> flag and value ("--on-invalid skip"), `name=True` -> the flag; other
    backticked text (method names, `pip install ...`) stays as it is, backticks included."""

    def flag(m: re.Match) -> str:
        name, value = m.group(1), m.group(2)
        if f"{name}{value or ''}" in FLAGS:
            return FLAGS[f"{name}{value or ''}"]
        if name not in FLAGS or value == "=False":
            return m.group(0)
        if value is None or value == "=True":
            return FLAGS[name]
        return f"{FLAGS[name]} {value[1:].strip(chr(39) + chr(34))}"

    return _PARAMETER.sub(flag, message)


def batch_size(text: str) -> int | str:
    """--batch-size: a whole number, or "auto" (checked with the other options)."""
    text = str(text).strip().lower()
    if text == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither a whole number nor auto") from None


def floats(text: str, option: str) -> tuple[float, ...]:
    """'1e-4,1e-3' -> (1e-4, 1e-3); `option` names the flag in the error."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise PddkitError(f"{option} {text!r} must be numbers separated by commas") from None
    if not values:
        raise PddkitError(f"{option} needs at least one value")
    return values


def whole_numbers(text: str, option: str) -> tuple[int, ...]:
    """'25,50,100' -> (25, 50, 100), each at least 1; `option` names the flag in errors."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise PddkitError(f"{option} {text!r} must be whole numbers separated by commas") from None
    if not values or min(values) < 1:
        raise PddkitError(f"{option} {text!r} must be whole numbers of at least 1")
    return values


def names(text: str | None, option: str) -> tuple[str, ...]:
    """'mean,share' -> ('mean', 'share'); None -> (); `option` names the flag in the error."""
    if text is None:
        return ()
    values = tuple(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    if not values:
        raise PddkitError(f"{option} needs at least one value")
    return values


def window_lengths(text: str) -> tuple[int, ...]:
    """--windows '32,64,128' -> (32, 64, 128)."""
    try:
        wins = tuple(sorted({int(w) for w in text.split(",") if w.strip()}))
    except ValueError:
        raise PddkitError(f"--windows {text!r} must be whole numbers of words") from None
    if not wins or min(wins) < 1:
        raise PddkitError(f"--windows {text!r} must be positive numbers of words")
    return wins


def check_run(data, benchmark, backend: str, api_base, val_fraction, val_data) -> None:
    """Combinations of `pddkit run` flags that cannot work, before anything is read."""
    if (data is None) == (benchmark is None):
        raise PddkitError("give exactly one of --data FILE and --benchmark NAME")
    if backend == "openai" and not api_base:
        raise PddkitError("--backend openai needs --api-base URL (the server's /v1 address)")
    if val_fraction is not None and val_data is not None:
        raise PddkitError("give at most one of --val-fraction and --val-data")


BUILD_OPTIONS = [
    click.argument("builder"),
    click.option("--members", multiple=True, type=click.Path(),
        help="dolma-book: folder of member books (.txt), or book files; repeatable."),
    click.option("--nonmembers", multiple=True, type=click.Path(),
        help="dolma-book: folder of non-member books (.txt), or book files; repeatable."),
    click.option("--input", "inputs", multiple=True, type=click.Path(),
        help="cutoff, patentmia: JSONL of documents with text and dates (2023-01-05 or "
        "20230105); repeatable."),
    click.option("--words", default=None,
        help="Lengths in words, comma-separated [dolma-book: 512,1024; cutoff: 32,64,128,256; "
        "patentmia: 512]."),
    click.option("--member-before", default=None,
        help="cutoff: members are dated before this ISO date [patentmia: 2023-01-01]."),
    click.option("--nonmember-after", default=None,
        help="cutoff: non-members are dated after this ISO date [patentmia: 2024-03-01]."),
    click.option("--date-field", default=None,
        help="cutoff: the documents' date field, compared with both dates [default: date; "
        "patentmia: the two below]."),
    click.option("--member-date-field", default=None,
        help="cutoff: the date field compared with --member-before [default: --date-field; "
        "patentmia: publication_date]."),
    click.option("--nonmember-date-field", default=None,
        help="cutoff: the date field compared with --nonmember-after [default: --date-field; "
        "patentmia: priority_date]."),
    click.option("--text-field", default=None,
        help="cutoff: the documents' text field [default: text, else input]."),
    click.option("--snippet", default=None, type=click.Choice(["random", "first"]),
        help="cutoff: a seeded random N-word snippet per document, or its first N words "
        "(WikiMIA) [default: random]."),
    click.option("--language", default=None,
        help="en (whitespace words) or zh (jieba words) [default: the builder's, en; patentmia zh]."),
    click.option("--seed", default=None, type=int, help="Seed of the random choices [default: 0]."),
    click.option("--output", required=True, type=click.Path(),
        help="Folder for data.jsonl and manifest.json."),
    click.option("--overwrite", is_flag=True, help="Replace a build already in --output."),
    *index_options("non-members the corpus contains are dropped (cutoff, patentmia, "
                   "dolma-book), counted in the manifest", "dropped"),
]
FLAGS.update(_flag_table(BUILD_OPTIONS))  # BUILD_OPTIONS' parameters too (checked against the rest)
