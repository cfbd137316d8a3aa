"""`pddkit freq build`: token frequency tables for DC-PDD."""

from __future__ import annotations

import click

from pddkit.cli import options
from pddkit.cli.app import cli


@cli.group(short_help="Token frequency tables for DC-PDD.")
def freq() -> None:
    """Token frequency tables for DC-PDD."""


@freq.command("build", short_help="Count token ids over text files: a table for dcpdd.")
@options.apply(options.FREQ_BUILD_OPTIONS)
def freq_build(tokenizer_name, output, batch_docs, trust_remote_code, local_files_only,
               corpus) -> None:
    """Count token ids over CORPUS (.txt / .jsonl files or folders of them): the frequency
    table DC-PDD (`dcpdd`, --freq) reads."""
    from pddkit.backends.hf_tokenizers import load_tokenizer
    from pddkit.resources.frequency import build_frequency_table

    tok = load_tokenizer(tokenizer_name, trust_remote_code=trust_remote_code,
                         local_files_only=local_files_only)
    table = build_frequency_table(tok, tokenizer_name, corpus, batch_docs=batch_docs)
    path = table.save(output)
    click.echo(f"counted {table.total_tokens} tokens in {table.documents} documents from "
               f"{len(table.sources)} files (vocabulary {table.vocab_size}"
               + (f", {table.undecodable_lines} lines not UTF-8, decoded with replacement"
                  if table.undecodable_lines else "")
               + (f", {table.skipped_lines} JSONL lines without text left out"
                  if table.skipped_lines else "")
               + f"): {path}")
