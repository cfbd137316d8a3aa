"""`pddkit audit`: which books was this model trained on? (Shi et al. 2024, case study on
copyrighted books.)"""

from __future__ import annotations

import dataclasses

import click

from pddkit.cli import flag_table, options, study_options
from pddkit.cli.app import cli


@cli.command(short_help="Which books was a model trained on? Per-book contamination rates.")
@options.apply(study_options.AUDIT_OPTIONS)
def audit(model, method, books, val_data, val_benchmark, data_dir, snippets, words, threshold,
          fdr, assume_no_book_spread, seed, output, overwrite, ref_model, freq, cache,
          batch_size, max_length, revision, adapter, on_invalid, device, dtype, trust_remote_code,
          local_files_only) -> None:
    """Copyrighted-book audit (Shi et al. 2024): a threshold on one method's score chosen on
    labelled validation texts; each book's contamination rate = share of its random
    snippets above it, marked when improbable for a book the model never saw (against
    never-seen validation books' spread, Benjamini-Hochberg at --fdr). Validation texts
    that name no book (no `group` column) give rates but no verdict, unless
    --assume-no-book-spread."""
    from pddkit import output_dir
    from pddkit.reporting.audit_report import terminal_books
    from pddkit.studies.audit import audit_books

    out = output_dir.prepare(output, overwrite)  # before any model loads
    result = audit_books(model, books, method, val_data=val_data, val_benchmark=val_benchmark,
                         data_dir=data_dir, snippets=snippets, words=words, threshold=threshold,
                         fdr=fdr, assume_no_book_spread=assume_no_book_spread, seed=seed,
                         ref_model=ref_model, freq=freq, cache=cache,
                         batch_size=batch_size, max_length=max_length, revision=revision,
                         adapter=adapter, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                         local_files_only=local_files_only, on_invalid=on_invalid)
    # notices and verdict as a command-line user reads them (flags, not parameter names),
    # saved so too
    result = dataclasses.replace(result, notices=tuple(map(flag_table.for_cli, result.notices)),
                                 verdict=flag_table.for_cli(result.verdict))
    result.write(out)
    saved = result.to_dict()
    th, ref = result.threshold, result.reference
    spread = (f"book-to-book sd {100 * ref.between_book_sd:.1f} points, {ref.books} never-seen "
              "validation books" if ref.spread_accounted else "one pooled rate, no spread "
              "between books measured")
    click.echo(f"validation: {th.n_val} texts, {result.method} AUC {th.val_auc:.3f}; threshold "
               f"{th.threshold:.6g} ({th.rule}): TPR {100 * th.val_tpr:.1f}%, expected rate for a "
               f"never-seen book {100 * ref.mean:.1f}% ({ref.out_of_fold.split(':')[0]}; {spread})")
    click.echo("\n".join(terminal_books(saved, top=30)))  # within 100 columns
    for notice in result.notices:
        click.echo(notice)
    click.echo(result.verdict)
    click.echo(f"results: {out / 'results.json'}, table: {out / 'books.csv'}, "
               f"report: {out / 'report.html'}")
