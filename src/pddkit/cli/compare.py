"""`pddkit compare`: the unlearning audit (Shi et al. 2024, section 7)."""

from __future__ import annotations

import click

from pddkit.cli import flag_table, options, study_options
from pddkit.cli.app import cli


@cli.command(short_help="Unlearning audit: which chunks an unlearned model did not forget.")
@options.apply(study_options.COMPARE_OPTIONS)
def compare(model, model_b, chunks, books, words, method, band, continuations, prompt_words,
            seed, output, overwrite, cache, batch_size, max_length, device, dtype,
            trust_remote_code, local_files_only) -> None:
    """Score chunks under an original and an unlearned model; flag each chunk whose score
    ratio lies inside (1/band, band) as not removed (Shi et al. 2024, section 7)."""
    from pddkit import output_dir
    from pddkit.reporting.compare_report import terminal_text, write_outputs
    from pddkit.studies.compare import compare_models

    output_dir.prepare(output, overwrite)  # before any model loads: fail early, lose nothing
    result = compare_models(model, model_b, chunks=chunks, books=books, words=words,
                            method=method, band=band, continuations=continuations,
                            prompt_words=prompt_words, seed=seed, batch_size=batch_size,
                            max_length=max_length, device=device, dtype=dtype,
                            trust_remote_code=trust_remote_code,
                            local_files_only=local_files_only, cache=cache)
    path = write_outputs(result, output)
    click.echo(flag_table.for_cli(terminal_text(result)))
    click.echo(f"results: {path}, flagged chunks: {path.parent / 'flagged.csv'}, "
               f"report: {path.parent / 'report.html'}")
