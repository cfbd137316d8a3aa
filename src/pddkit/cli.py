"""Command line: wires data, runner, methods and evaluation together; nothing else."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from pddkit import progress
from pddkit.errors import PddkitError
from pddkit.version import __version__

logger = logging.getLogger("pddkit")


def _setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbose else logging.INFO)
    logging.basicConfig(level=level, format="pddkit: %(message)s", stream=sys.stderr, force=True)
    for noisy in ("transformers", "huggingface_hub", "datasets", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        if not progress.enabled():
            hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pddkit")
@click.option("-v", "--verbose", count=True, help="More log output.")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors.")
def cli(verbose: int, quiet: bool) -> None:
    """pddkit: was this text in this language model's pre-training data?"""
    _setup_logging(verbose, quiet)


def _model_options(fn):
    for opt in reversed([
        click.option("--device", default="auto", show_default=True,
                     help="cpu, cuda, cuda:N, mps or auto."),
        click.option("--dtype", default="auto", show_default=True,
                     type=click.Choice(["auto", "float32", "bfloat16", "float16"]),
                     help="Model weights' dtype (statistics are always float32)."),
        click.option("--trust-remote-code", is_flag=True,
                     help="Allow a model's own code from the hub to run (off by default)."),
        click.option("--local-files-only", is_flag=True,
                     help="Never contact the hub; use local directories and the cache."),
    ]):
        fn = opt(fn)
    return fn


@cli.command(short_help="Score texts; metrics when they are labelled.")
@click.option("--model", required=True,
              help="Target model: local directory or hub id (--backend openai: the served name).")
@click.option("--backend", default="hf", show_default=True, type=click.Choice(["hf", "openai"]),
              help="hf: a causal LM loaded here; openai: an OpenAI-compatible server (--api-base).")
@click.option("--api-base", default=None,
              help="The server's URL for --backend openai, e.g. http://127.0.0.1:8000/v1.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="Environment variable holding the API key (the key is never logged or saved).")
@click.option("--tokenizer", default=None,
              help="Tokenizer (directory or hub id) of the served model [default: --model].")
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit) of --model.")
@click.option("--cache", type=click.Path(), default=None, envvar="PDDKIT_CACHE",
              help="Statistics cache folder: a rerun recomputes only what it lacks [env PDDKIT_CACHE].")
@click.option("--engine", default="local", show_default=True, type=click.Choice(["local", "ray"]),
              help="Where the statistics passes run: this process, or Ray actors (pddkit[ray]).")
@click.option("--ray-address", default=None, help="An existing Ray cluster (default: start one here).")
@click.option("--actors", default=1, show_default=True, type=int,
              help="Ray actors, each with its own copy of the model.")
@click.option("--gpus-per-actor", default=0.0, show_default=True, type=float)
@click.option("--limit", default=None, type=int,
              help="Score only this many texts (a seeded sample, both classes kept) for a quick try.")
@click.option("--ref-model", default=None, help="Reference model for `ref`.")
@click.option("--freq", type=click.Path(), default=None,
              help="Frequency table for `dcpdd` (from `pddkit freq build`).")
@click.option("--data", type=click.Path(), default=None, help="JSONL file of texts.")
@click.option("--benchmark", default=None, help="Benchmark NAME[:k=v,...], e.g. wikimia:length=64.")
@click.option("--data-dir", type=click.Path(), default=None,
              help="Local folder with the benchmark's files (else the hub).")
@click.option("--methods", default="all", show_default=True,
              help="all, or name[:k=v,...] separated by commas (see `pddkit list`).")
@click.option("--output", required=True, type=click.Path(), help="Folder for the results.")
@click.option("--batch-size", default=8, show_default=True, type=int)
@click.option("--max-length", default=None, type=int,
              help="Cut texts to this many tokens, start token included (default: context).")
@click.option("--padding-side", default="right", show_default=True,
              type=click.Choice(["right", "left"]))
@click.option("--on-invalid", default="error", show_default=True,
              type=click.Choice(["error", "skip"]),
              help="A bad input line stops the run, or is left out and counted.")
@click.option("--bootstrap", "n_bootstrap", default=1000, show_default=True, type=int,
              help="Bootstrap resamples for the confidence intervals.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--val-fraction", type=float, default=None,
              help="Choose hyperparameters on this stratified share of the labelled data.")
@click.option("--val-data", type=click.Path(), default=None,
              help="...or on this labelled JSONL file; metrics are then on --data only.")
@click.option("--mask-model", default=None,
              help="Masked LM for `neighbor` (default roberta-base; local directory or hub id).")
@click.option("--neighbors", "neighbors_file", type=click.Path(), default=None,
              help="Reuse the neighbors.jsonl an earlier run saved.")
@click.option("--probe-data", type=click.Path(), default=None,
              help="JSONL of auxiliary texts absent from pre-training (trains the `probe`).")
@click.option("--probe-load", type=click.Path(), default=None,
              help="A probe saved by an earlier run (its OUTPUT/probe folder).")
@click.option("--probe-lrs", default="1e-4,1e-3", show_default=True,
              help="Proxy fine-tuning learning rates; the best on held-out rows is kept.")
@click.option("--probe-lora", is_flag=True, help="Fine-tune the proxy with LoRA (needs peft).")
@click.option("--probe-standardize", default="per-set", show_default=True,
              type=click.Choice(["per-set", "train"]),
              help="Standardise each set of probe activations with its own mean and std (as Liu "
                   "et al.'s code), or all with the probe's training rows' statistics.")
@click.option("--no-blind", is_flag=True, help="Skip the model-free blind baseline.")
@click.option("--no-report", is_flag=True, help="Skip report.html / report.md.")
@click.option("--overwrite", is_flag=True,
              help="Replace the pddkit results already in --output (else such a folder is refused).")
@_model_options
def run(model, backend, api_base, api_key_env, tokenizer, revision, cache, engine, ray_address,
        actors, gpus_per_actor, limit, ref_model, freq, data,
        benchmark, data_dir, methods, output, batch_size, max_length, padding_side, on_invalid,
        n_bootstrap, seed, val_fraction, val_data,
        mask_model, neighbors_file, probe_data, probe_load, probe_lrs, probe_lora, probe_standardize,
        no_blind, no_report, overwrite, device, dtype, trust_remote_code, local_files_only) -> None:
    """Score texts with every requested method; metrics when they are labelled."""
    from pddkit import output_dir
    from pddkit.data import load_benchmark, load_jsonl
    from pddkit.engine.config import RunConfig
    from pddkit.engine.run import run_dataset
    from pddkit.evaluation.table import (
        metrics_table,
        scored_line,
        unlabelled_summary,
        validation_table,
    )

    if (data is None) == (benchmark is None):
        raise PddkitError("give exactly one of --data FILE and --benchmark NAME")
    output_dir.prepare(output, overwrite)  # before any model loads: fail early, lose nothing
    dataset = (load_jsonl(data, on_invalid=on_invalid) if data else
               load_benchmark(benchmark, data_dir=data_dir, on_invalid=on_invalid))
    if dataset.skipped:
        logger.warning("left out %d invalid lines (listed in results.json), e.g. %s: %s",
                       len(dataset.skipped), dataset.skipped[0].source, dataset.skipped[0].reason)
    if limit is not None:
        dataset = dataset.limit(limit, seed)
    if backend == "openai" and not api_base:
        raise PddkitError("--backend openai needs --api-base URL (the server's /v1 address)")
    config = RunConfig(model=model, methods=methods, ref_model=ref_model, freq=freq,
                       backend=backend, api_base=api_base, api_key_env=api_key_env,
                       tokenizer=tokenizer, revision=revision, cache=cache, engine=engine,
                       ray_address=ray_address, actors=actors, gpus_per_actor=gpus_per_actor,
                       batch_size=batch_size, max_length=max_length, device=device, dtype=dtype,
                       padding_side=padding_side, trust_remote_code=trust_remote_code,
                       local_files_only=local_files_only, n_bootstrap=n_bootstrap, seed=seed,
                       blind=not no_blind, val_fraction=val_fraction, val_data=val_data,
                       mask_model=mask_model, neighbors_file=neighbors_file,
                       probe_data=probe_data, probe_load=probe_load,
                       probe_lrs=_floats(probe_lrs, "--probe-lrs"), probe_lora=probe_lora,
                       probe_standardize=probe_standardize.replace("-", "_"), on_invalid=on_invalid)
    if val_fraction is not None and val_data is not None:
        raise PddkitError("give at most one of --val-fraction and --val-data")
    val_dataset = load_jsonl(val_data, on_invalid=on_invalid) if val_data else None
    result = run_dataset(dataset, config, val_dataset=val_dataset)
    out = result.write(output)
    click.echo(scored_line(result))
    if result.labelled:
        click.echo(metrics_table(result))
    else:
        click.echo(unlabelled_summary(result, top=10, texts=[s.text for s in dataset.samples]))
    if result.validation:
        click.echo(validation_table(result))
    click.echo(f"results: {out / 'results.json'}, scores: {out / 'scores.jsonl'}")
    if result.labelled and not no_report:
        import json
        import time

        from pddkit.evaluation.report import write_report

        t0 = time.perf_counter()
        html, _ = write_report(out)
        saved = json.loads((out / "results.json").read_text())  # the report's time, recorded
        saved["timings_s"]["report"] = time.perf_counter() - t0
        (out / "results.json").write_text(json.dumps(saved, indent=2) + "\n")
        click.echo(f"report: {html}")


def _floats(text: str, option: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise PddkitError(f"{option} {text!r} must be numbers separated by commas") from None
    if not values:
        raise PddkitError(f"{option} needs at least one value")
    return values


@cli.group(short_help="Token frequency tables for DC-PDD.")
def freq() -> None:
    """Token frequency tables for DC-PDD."""


@freq.command("build")
@click.option("--tokenizer", "tokenizer_name", required=True,
              help="Model (directory or hub id) whose tokenizer to count with.")
@click.option("--output", required=True, type=click.Path(), help="Table file to write (.npz).")
@click.option("--batch-docs", default=256, show_default=True, type=int,
              help="Documents encoded per batch.")
@click.option("--trust-remote-code", is_flag=True)
@click.option("--local-files-only", is_flag=True)
@click.argument("corpus", nargs=-1, required=True, type=click.Path())
def freq_build(tokenizer_name, output, batch_docs, trust_remote_code, local_files_only,
               corpus) -> None:
    """Count token ids over CORPUS (.txt / .jsonl files or folders of them)."""
    from pddkit.runner.frequency import build_frequency_table
    from pddkit.runner.loading import load_tokenizer

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


@cli.command(short_help="Train on chosen documents, then detect them.")
@click.option("--corpus", type=click.Path(), default=None,
              help="Folder of .txt files or a JSONL file (default: Python's own documentation).")
@click.option("--output", default="sandbox-output", show_default=True, type=click.Path())
@click.option("--tokenizer", type=click.Path(), default=None,
              help="Tokenizer directory (default: a BPE trained on the reference pool and background, "
                   "never on members or non-members).")
@click.option("--sweep", default=None,
              help="KNOB=v1,v2,...: one model per value (repeats, lr, background, epochs, width).")
@click.option("--members", default=150, show_default=True, help="Member documents (as many non-members).")
@click.option("--reference", default=150, show_default=True, help="Reference-pool documents.")
@click.option("--background", default=0, show_default=True, help="Extra training documents (dilution).")
@click.option("--repeats", default=1, show_default=True, help="Copies of each member per epoch.")
@click.option("--epochs", default=12, show_default=True, help="Epochs of the target's training.")
@click.option("--ref-epochs", default=4, show_default=True,
              help="Epochs of the reference model's training on the reference pool.")
@click.option("--lr", type=float, default=None,
              help="Learning rate [default: 2e-3 from scratch, 3e-5 with --base-model].")
@click.option("--base-model", default=None,
              help="A pretrained causal LM (directory or hub id) to go on pre-training on the "
                   "members instead of a small model from scratch; it is also the reference model.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda[:N] or mps.")
@click.option("--layers", default=2, show_default=True)
@click.option("--width", default=128, show_default=True)
@click.option("--context", default=512, show_default=True, help="Model context in tokens.")
@click.option("--vocab-size", default=2048, show_default=True)
@click.option("--section-words", default=200, show_default=True,
              help="Long files are cut into documents of about this many words.")
@click.option("--windows", default="32,64,128", show_default=True, help="Window lengths in words.")
@click.option("--windows-per-doc", default=2, show_default=True)
@click.option("--methods", default="all", show_default=True)
@click.option("--mask-model", default=None,
              help="Fill-mask model (local directory or hub id) for `neighbor`; without one "
                   "`all` skips it.")
@click.option("--probe-lrs", default="1e-4,1e-3", show_default=True,
              help="Proxy learning rates for `probe` (its auxiliary data is the reference pool).")
@click.option("--bootstrap", "n_bootstrap", default=1000, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--overwrite", is_flag=True,
              help="Replace the sandbox results already in --output (else such a folder is refused).")
def sandbox(corpus, output, tokenizer, sweep, members, reference, background, repeats, epochs,
            ref_epochs, lr, base_model, device, layers, width, context, vocab_size, section_words, windows,
            windows_per_doc, methods, mask_model, probe_lrs, n_bootstrap, seed, overwrite) -> None:
    """Train a model on chosen documents (from scratch, or going on from --base-model),
    then detect them (ground truth)."""
    from pddkit.sandbox.experiment import SandboxConfig, run_sandbox
    from pddkit.sandbox.summary import summary_text

    try:
        wins = tuple(sorted({int(w) for w in windows.split(",") if w.strip()}))
    except ValueError:
        raise PddkitError(f"--windows {windows!r} must be whole numbers of words") from None
    if not wins or min(wins) < 1:
        raise PddkitError(f"--windows {windows!r} must be positive numbers of words")
    cfg = SandboxConfig(corpus=corpus, tokenizer=tokenizer, vocab_size=vocab_size,
                        section_words=section_words, members=members, reference=reference,
                        background=background, repeats=repeats, epochs=epochs,
                        ref_epochs=ref_epochs, lr=lr,
                        layers=layers, width=width, context=context, windows=wins,
                        windows_per_doc=windows_per_doc, methods=methods,
                        mask_model=mask_model, probe_lrs=_floats(probe_lrs, "--probe-lrs"),
                        n_bootstrap=n_bootstrap, seed=seed, base_model=base_model,
                        device=device)
    from pddkit import output_dir

    output_dir.prepare(output, overwrite)  # before any training: fail early, lose nothing
    summary = run_sandbox(cfg, output, sweep=sweep)
    click.echo(summary_text(summary))
    click.echo(f"sandbox finished in {summary['seconds']:.0f} s; report: {summary['report']}")


@cli.command(short_help="Rebuild the reports of a results folder.")
@click.argument("directory", type=click.Path())
def report(directory) -> None:
    """Rebuild report.html / report.md from a results folder (or a whole sandbox folder)."""
    import json

    from pddkit.evaluation.report import write_report

    d = Path(directory)
    if (d / "summary.json").is_file():
        from pddkit.sandbox.summary import write_summary

        summary = json.loads((d / "summary.json").read_text())
        for r in summary["runs"]:
            for w in r["windows"].values():
                write_report(w["dir"])
        click.echo(f"report: {write_summary(d, summary)}")
        return
    html, md = write_report(d)
    click.echo(f"report: {html} and {md}")


@cli.command(short_help="Model-free check for a distribution shift.")
@click.option("--data", type=click.Path(), default=None, help="Labelled JSONL file of texts.")
@click.option("--benchmark", default=None, help="Benchmark NAME[:k=v,...], e.g. wikimia:length=64.")
@click.option("--data-dir", type=click.Path(), default=None,
              help="Local folder with the benchmark's files (else the hub).")
@click.option("--on-invalid", default="error", show_default=True,
              type=click.Choice(["error", "skip"]),
              help="A bad input line stops the run, or is left out and counted.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--bootstrap", "n_bootstrap", default=1000, show_default=True, type=int,
              help="Bootstrap resamples for the confidence intervals.")
@click.option("--output", type=click.Path(), default=None,
              help="Folder for results.json and scores.jsonl (optional).")
@click.option("--overwrite", is_flag=True,
              help="Replace the pddkit results already in --output (else such a folder is refused).")
def blind(data, benchmark, data_dir, on_invalid, seed, n_bootstrap, output, overwrite) -> None:
    """Model-free check for a distribution shift between members and non-members."""
    from pddkit import output_dir
    from pddkit.evaluation.blind_run import run_blind

    if output is not None:
        output_dir.prepare(output, overwrite)  # before the work: fail early, lose nothing

    run_blind(data, benchmark, data_dir, on_invalid, seed, n_bootstrap, output, echo=click.echo)


@cli.group(short_help="The statistics cache: info, clear.")
def cache() -> None:
    """The statistics cache (--cache DIR / PDDKIT_CACHE)."""


@cache.command("info")
@click.argument("directory", type=click.Path())
def cache_info_cmd(directory) -> None:
    """What a cache folder holds: shards, entries, size, per model."""
    from pddkit.cache import cache_info

    for line in cache_info(directory).lines():
        click.echo(line)


@cache.command("clear")
@click.argument("directory", type=click.Path())
def cache_clear_cmd(directory) -> None:
    """Remove the cache's own files from a folder (nothing else in it)."""
    from pddkit.cache import cache_clear

    click.echo(f"removed {cache_clear(directory)} cache files from {directory}")


@cli.command("list", short_help="Methods, baselines and benchmarks.")
def list_cmd() -> None:
    """Methods with their needs and defaults, and benchmarks."""
    from pddkit.data import BENCHMARKS
    from pddkit.methods import METHODS

    rows: list = ["methods:"]
    for m in METHODS:
        needs = ", ".join(sorted(n.value for n in m.needs)) or "target model"
        if m.requires:
            needs += " (" + ", ".join(sorted(r.replace("_", " ") for r in m.requires)) + ")"
        params = ",".join(f"{k}={v}" for k, v in m.defaults.items()) or "-"
        rows.append((m.name, params, needs, f"{m.paper}: {m.summary}"))
    rows.append("baselines:")
    rows.append(("blind", "folds=5", "labels only",
                 "Das et al. 2024: TF-IDF + bag of words + dates + style, stacked, out-of-fold; "
                 "in every labelled run and as `pddkit blind`"))
    rows.append("benchmarks:")
    for b in BENCHMARKS:
        params = ",".join(f"{k}={v}" for k, v in b.defaults.items()) or "-"
        rows.append((b.name, params, "", b.description))
    cells = [r for r in rows if isinstance(r, tuple)]
    widths = [max(len(c[i]) for c in cells) for i in range(3)]  # aligned columns
    for r in rows:
        if isinstance(r, str):
            click.echo(r)
        else:
            click.echo("  " + "  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3])


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors become one line on stderr and exit code 1."""
    try:
        cli.main(args=argv, prog_name="pddkit", standalone_mode=False)
    except PddkitError as e:
        click.echo(f"pddkit: error: {e}", err=True)
        return 1
    except click.exceptions.Abort:
        click.echo("pddkit: aborted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
