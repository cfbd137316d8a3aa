"""`pddkit traps generate | inject | detect`: copyright traps (Meeus et al., "Copyright
Traps for Large Language Models", ICML 2024): generate unique trap sequences, insert them
many times into documents before publishing, and later test whether a model memorised
them."""

from __future__ import annotations

import dataclasses

import click

from pddkit.cli import options, study_options
from pddkit.cli.app import cli


@cli.group(short_help="Copyright traps: generate, inject, detect (Meeus et al. 2024).")
def traps() -> None:
    """Copyright traps (Meeus et al. 2024): `generate` trap sequences of exact token
    lengths over a perplexity range, `inject` half of them into documents, `detect` whether
    a model trained on the documents memorised them (inserted vs held-out traps)."""


@traps.command(short_help="Inserted vs held-out traps: AUC per length x repeats x perplexity.")
@options.apply(study_options.TRAPS_DETECT_OPTIONS)
def detect(model, ref_model, traps, methods, freq, n_bootstrap, seed, output, overwrite, cache,
           batch_size, max_length, device, dtype, trust_remote_code, local_files_only,
           revision) -> None:
    """Score every trap of an injected trap folder under --model (and --ref-model for the
    paper's `ref`) with every method, and give the AUC of inserted against held-out traps
    per length x repeats (Meeus et al. 2024, Table 2) and per perplexity bucket."""
    from pddkit import output_dir
    from pddkit.reporting.traps_report import terminal_lines
    from pddkit.studies.traps.detect import detect_traps

    out = output_dir.prepare(output, overwrite)  # before any model loads
    result = detect_traps(traps, model, ref_model=ref_model, freq=freq, methods=methods,
                          n_bootstrap=n_bootstrap, seed=seed, cache=cache,
                          batch_size=batch_size, max_length=max_length, device=device,
                          dtype=dtype, revision=revision, trust_remote_code=trust_remote_code,
                          local_files_only=local_files_only)
    # notices as a command-line user reads them (flags, not parameter names), saved so too
    result = dataclasses.replace(result, notices=tuple(map(options.for_cli, result.notices)))
    result.write(out)
    click.echo("\n".join(terminal_lines(result.to_dict())))
    click.echo(f"results: {out / 'results.json'}, scores: {out / 'scores.jsonl'}, "
               f"report: {out / 'report.html'}")
