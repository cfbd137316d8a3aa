"""`pddkit blind`: the model-free baseline alone."""

from __future__ import annotations

from pathlib import Path

import click

from pddkit.cli import options
from pddkit.cli.app import cli


@cli.command(short_help="Model-free check for a distribution shift.")
@options.apply(options.BLIND_OPTIONS)
def blind(data, benchmark, data_dir, text_field, label_field, id_field, group_field, subset_field,
          data_split, on_invalid, seed, n_bootstrap, blind_max_texts, output, overwrite) -> None:
    """Model-free check for a distribution shift between members and non-members: the blind
    baseline (Das et al. 2024, "Blind baselines beat membership inference attacks for
    foundation models") tells them apart from the texts alone (word and character
    n-grams, style, dates, nearest neighbours), cross-validated. An AUC above chance for the
    number of texts means the data separates them without any model, so detection AUCs on
    it prove little."""
    from pddkit import output_dir
    from pddkit.engine.blind_run import run_blind

    if output is not None:
        output_dir.prepare(output, overwrite)  # before the work: fail early, lose nothing

    source = options.data_source(data, benchmark, data_dir, text_field, label_field, id_field,
                                 group_field, subset_field, data_split, None, on_invalid)
    result = run_blind(source, seed, n_bootstrap, max_texts=blind_max_texts)
    from pddkit.reporting.run_files import write_run
    from pddkit.reporting.terminal import blind_summary

    if output is not None:
        write_run(result, output)

    click.echo(blind_summary(result, result.config["data"]))
    if output is not None:
        click.echo(f"results: {Path(output) / 'results.json'}, "
                   f"scores: {Path(output) / 'scores.jsonl'}")
