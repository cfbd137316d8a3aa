"""`pddkit infer`: dataset inference (Maini et al. 2024), a p-value for "was this set of
texts in the training data?"."""

from __future__ import annotations

import dataclasses

import click

from pddkit.cli import flag_table, options, study_options
from pddkit.cli.app import cli


@cli.command(short_help="Was this set of texts trained on? A p-value (dataset inference).")
@options.apply(study_options.INFER_OPTIONS)
def infer(model, suspect, reference, text_field, ref_model, freq, mask_model, neighbors_file,
          n_neighbors, alpha, false_positive_check, classifier, clip,
          seed, output, overwrite, cache, batch_size, max_length, revision, adapter, device, dtype,
          trust_remote_code, local_files_only) -> None:
    """Dataset inference (Maini et al. 2024): do the suspect texts look like training data
    to the model, compared with reference texts of the same source it never saw?"""
    from pddkit import output_dir
    from pddkit.reporting.infer_report import terminal_lines
    from pddkit.studies.infer import infer_dataset

    out = output_dir.prepare(output, overwrite)  # before any model loads
    result = infer_dataset(model, suspect, reference, ref_model=ref_model, freq=freq,
                           mask_model=mask_model, neighbors_file=neighbors_file,
                           n_neighbors=n_neighbors, alpha=alpha,
                           false_positive_check=false_positive_check, seed=seed,
                           classifier=classifier, clip=clip,
                           text_field=text_field, cache=cache, batch_size=batch_size,
                           max_length=max_length, device=device, dtype=dtype, revision=revision,
                           adapter=adapter, trust_remote_code=trust_remote_code,
                           local_files_only=local_files_only)
    # notices as a command-line user reads them (flags, not parameter names), saved so too
    result = dataclasses.replace(result, notices=tuple(map(flag_table.for_cli, result.notices)))
    result.write(out)
    click.echo("\n".join(terminal_lines(result.to_dict())))
    click.echo(f"results: {out / 'results.json'}, report: {out / 'report.html'}")
