"""`pddkit sandbox`: train on chosen documents, then detect them (ground truth)."""

from __future__ import annotations

import click

from pddkit.cli import flag_values, options, sandbox_options
from pddkit.cli.app import cli
from pddkit.cli.sections import SectionedCommand


@cli.command(short_help="Train on chosen documents, then detect them.", cls=SectionedCommand,
             sections=sandbox_options.SANDBOX_SECTIONS)
@options.apply(sandbox_options.SANDBOX_OPTIONS)
def sandbox(corpus, output, tokenizer, sweep, members, reference, background, repeats, epochs,
            ref_epochs, lr, base_model, device, layers, width, context, vocab_size, section_words, windows,
            windows_per_doc, documents, methods, mask_model, probe_lrs, shots, n_bootstrap, seed, contaminate,
            contamination_repeats, contamination_poisson, contamination_fraction, traps,
            trap_lengths, trap_repeats, trap_ppl_range, trap_buckets, overwrite) -> None:
    """Train a model on chosen documents (from scratch, or going on from --base-model),
    then detect them (ground truth)."""
    from pddkit.reporting.sandbox_summary import summary_text
    from pddkit.sandbox.experiment import SandboxConfig, run_sandbox

    wins = flag_values.window_lengths(windows)
    cfg = SandboxConfig(corpus=corpus, tokenizer=tokenizer, vocab_size=vocab_size,
                        section_words=section_words, members=members, reference=reference,
                        background=background, repeats=repeats, epochs=epochs,
                        ref_epochs=ref_epochs, lr=lr,
                        layers=layers, width=width, context=context, windows=wins,
                        windows_per_doc=windows_per_doc,
                        documents=flag_values.names(documents, "--documents"), methods=methods,
                        mask_model=mask_model, probe_lrs=flag_values.floats(probe_lrs, "--probe-lrs"),
                        shots=shots, n_bootstrap=n_bootstrap, seed=seed, base_model=base_model,
                        device=device, contaminate=contaminate,
                        contamination_repeats=contamination_repeats,
                        contamination_poisson=contamination_poisson,
                        contamination_fraction=contamination_fraction, traps=traps,
                        trap_lengths=flag_values.whole_numbers(trap_lengths, "--trap-lengths"),
                        trap_repeats=flag_values.whole_numbers(trap_repeats, "--trap-repeats"),
                        trap_ppl_range=flag_values.floats(trap_ppl_range, "--trap-ppl-range"),
                        trap_buckets=trap_buckets)
    from pddkit import output_dir

    output_dir.prepare(output, overwrite)  # before any training: fail early, lose nothing
    summary = run_sandbox(cfg, output, sweep=sweep)
    click.echo(summary_text(summary))
    click.echo(f"sandbox finished in {summary['seconds']:.0f} s; report: {summary['report']}")
