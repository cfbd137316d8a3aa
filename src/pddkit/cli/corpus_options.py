"""The flags of `pddkit corpus index|check`, beside cli/options.py; these lists
join the parameter -> flag table (FLAGS, cli/flag_table.py)."""

from __future__ import annotations

import click

from pddkit.cli.flag_table import FLAGS, flags_of
from pddkit.cli.options import data_options

CORPUS_INDEX_OPTIONS = [
    click.option("--corpus", "corpus", multiple=True, required=True, type=click.Path(),
        help="Corpus file or folder (repeat the flag for several): text files (one document "
        "each), JSONL or Parquet tables (one per line or row), .gz or .zst compressed."),
    click.option("--tokenizer", "tokenizer_name", required=True,
        help="Model (directory or hub id) whose tokenizer the index counts tokens of."),
    click.option("--output", required=True, type=click.Path(), help="Index folder to write."),
    click.option("--text-field", default="text", show_default=True,
        help="Field of the texts in JSONL and Parquet files."),
    click.option("--normalize/--no-normalize", default=True, show_default=True,
        help="Index NFC text with whitespace runs as one space (recorded; texts checked "
        "against the index are normalised the same way)."),
    click.option("--shards", default=1, show_default=True, type=int,
        help="Shards of the index (document g goes to shard g mod shards)."),
    click.option("--workers", default=1, show_default=True, type=int,
        help="Processes or machines that build the index together (divides --shards)."),
    click.option("--worker-id", default=0, show_default=True, type=int,
        help="Which worker this is, 0 .. workers-1: it builds shards s with s mod workers = id."),
    click.option("--batch-docs", default=256, show_default=True, type=int,
        help="Documents encoded per batch."),
    click.option("--threads", default=None, type=int,
        help="Suffix-array jobs at once [all cores]."),
    click.option("--memory-gb", default=4, show_default=True, type=int,
        help="Memory the suffix-array jobs may use, in GiB."),
    click.option("--trust-remote-code", is_flag=True,
        help="Allow the tokenizer's own code from the hub to run (off by default)."),
    click.option("--local-files-only", is_flag=True,
        help="Never contact the hub; use a local directory or the cache."),
]

CORPUS_CHECK_OPTIONS = [
    click.option("--index", "index", multiple=True, required=True, type=click.Path(),
        help="Index folder (repeat the flag for an index built by several workers)."),
    click.option("--index-tokenizer", default=None,
        help="The tokenizer a public index (one without pddkit's manifest) was built with."),
    *data_options(group="only carried into the outputs", subset="carried into the outputs",
                  language=None),
    click.option("--on-invalid", default="error", show_default=True,
        type=click.Choice(["error", "skip"]),
        help="A bad input line stops the check, or is left out and counted."),
    click.option("--n", "n", default=13, show_default=True, type=int,
        help="Length of the n-grams (in tokens) whose share found in the corpus is the overlap."),
    click.option("--max-overlap", default=0.2, show_default=True, type=float,
        help="A non-member with at least this overlap is contradicted by the corpus."),
    click.option("--whole-training-set", is_flag=True,
        help="The corpus is all the model was trained on: a member with no n-gram found is "
        "contradicted too."),
    click.option("--output", required=True, type=click.Path(), help="Folder for the results."),
    click.option("--overwrite", is_flag=True,
        help="Replace the pddkit results already in --output (else such a folder is refused)."),
    click.option("--local-files-only", is_flag=True,
        help="Never contact the hub; use a local directory or the cache."),
]

FLAGS.update(flags_of(CORPUS_INDEX_OPTIONS, CORPUS_CHECK_OPTIONS))
