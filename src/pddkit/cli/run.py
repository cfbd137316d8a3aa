"""`pddkit run`: data -> engine -> results, tables and report."""

from __future__ import annotations

import dataclasses
import logging

import click

from pddkit.cli import flag_table, flag_values, options, run_options
from pddkit.cli.app import cli
from pddkit.cli.sections import SectionedCommand

logger = logging.getLogger("pddkit")


@cli.command(short_help="Score texts; metrics when they are labelled.", cls=SectionedCommand,
             sections=run_options.RUN_SECTIONS)
@options.apply(run_options.RUN_OPTIONS)
def run(model, backend, api_base, api_key_env, api_concurrency, api_timeout, api_retries,
        api_prompt,
        tokenizer, revision, adapter, quantize, cache, engine, ray_address, actors, gpus_per_actor,
        limit, ref_model, ref_adapter,
        freq, data, benchmark, data_dir, text_field, label_field, id_field, group_field,
        subset_field, data_split, language, methods, output, batch_size, max_length, padding_side, on_invalid,
        n_bootstrap, seed, val_fraction, val_data,
        mask_model, neighbors_file, prefix_data, calibration, paraphrases, paraphraser,
        paraphraser_backend, paraphraser_api_base, paraphraser_tokenizer, documents, doc_features,
        split_words, max_texts,
        probe_data, probe_load, probe_lrs, probe_lora,
        probe_standardize,
        no_blind, blind_max_texts, no_report, overwrite, device, dtype, trust_remote_code,
        local_files_only, index, index_tokenizer, index_n, max_overlap, whole_training_set) -> None:
    """Score texts with every requested method; metrics when they are labelled."""
    from pddkit import output_dir
    from pddkit.data import load_table
    from pddkit.engine.config import RunConfig
    from pddkit.engine.run import run_dataset
    from pddkit.reporting.run_files import write_results, write_run
    from pddkit.reporting.terminal import summary

    run_options.check_run(data, benchmark, backend, api_base, val_fraction, val_data)
    options.check_index_flags(index)
    output_dir.prepare(output, overwrite)  # before any model loads: fail early, lose nothing
    if quantize is not None and engine == "local":  # no GPU: one sentence before data loads
        from pddkit.backends.devices import check_quantize

        check_quantize(quantize, device)
    dataset = options.data_source(data, benchmark, data_dir, text_field, label_field, id_field,
                                  group_field, subset_field, data_split, language,
                                  on_invalid).load()
    if dataset.skipped:
        logger.warning("left out %d invalid lines (listed in results.json), e.g. %s: %s",
                       len(dataset.skipped), dataset.skipped[0].source, dataset.skipped[0].reason)
    if limit is not None:
        dataset = dataset.limit(limit, seed)
    config = RunConfig(model=model, methods=methods, ref_model=ref_model, freq=freq,
                       backend=backend, api_base=api_base, api_key_env=api_key_env,
                       api_concurrency=api_concurrency, api_timeout=api_timeout,
                       api_retries=api_retries, api_prompt=api_prompt,
                       tokenizer=tokenizer, revision=revision, adapter=adapter,
                       ref_adapter=ref_adapter, quantize=quantize, cache=cache, engine=engine,
                       ray_address=ray_address, actors=actors, gpus_per_actor=gpus_per_actor,
                       batch_size=batch_size, max_length=max_length, device=device, dtype=dtype,
                       padding_side=padding_side, trust_remote_code=trust_remote_code,
                       local_files_only=local_files_only, n_bootstrap=n_bootstrap, seed=seed,
                       blind=not no_blind, blind_max_texts=blind_max_texts,
                       val_fraction=val_fraction, val_data=val_data,
                       mask_model=mask_model, neighbors_file=neighbors_file, prefix_data=prefix_data,
                       calibration=calibration, paraphrases=paraphrases, paraphraser=paraphraser,
                       paraphraser_backend=paraphraser_backend,
                       paraphraser_api_base=paraphraser_api_base,
                       paraphraser_tokenizer=paraphraser_tokenizer, probe_data=probe_data,
                       probe_load=probe_load,
                       probe_lrs=flag_values.floats(probe_lrs, "--probe-lrs"), probe_lora=probe_lora,
                       probe_standardize=probe_standardize.replace("-", "_"), on_invalid=on_invalid,
                       documents=flag_values.names(documents, "--documents"), doc_features=doc_features,
                       split_words=split_words, max_texts=max_texts, index=tuple(index),
                       index_tokenizer=index_tokenizer, index_n=index_n, max_overlap=max_overlap,
                       whole_training_set=whole_training_set)
    val_dataset = load_table(val_data, on_invalid=on_invalid) if val_data else None

    def for_cli(r):  # notices as a command-line user reads them (flags, not parameter names)
        return dataclasses.replace(r, notices=tuple(map(flag_table.for_cli, r.notices)))

    # the scores are written before the optional stages (blind baseline, document level, ...)
    result = for_cli(run_dataset(dataset, config, val_dataset=val_dataset,
                                 on_scored=lambda r: write_run(for_cli(r), output)))
    out = write_run(result, output)
    preview = None
    if not result.labelled:  # the likeliest members are shown with their texts
        # by id: the run may have cut the rows into texts (split_words) or left some out
        scored = dataset
        if split_words is not None:
            from pddkit.data.split_words import split_documents

            scored = split_documents(dataset, split_words, max_texts)
        text_of = {s.id: s.text for s in scored.samples}
        preview = [text_of[i] for i in result.ids]
    click.echo(summary(result, texts=preview))
    click.echo(f"results: {out / 'results.json'}, scores: {out / 'scores.jsonl'}")
    if result.labelled and not no_report:  # an optional stage: a failure is a notice
        from pddkit.engine.stages import REPORT, Stage, run_stages
        from pddkit.reporting.report import report_stage

        result = run_stages(result, [Stage(REPORT, report_stage(out))])
        write_results(result, out)  # the report's time, or why there is no report
        if result.stages[REPORT]["status"] == "done":
            click.echo(f"report: {out / 'report.html'}")
