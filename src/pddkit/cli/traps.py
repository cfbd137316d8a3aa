"""`pddkit traps generate | inject | detect`: copyright traps (Meeus et al., "Copyright
Traps for Large Language Models", ICML 2024): generate unique trap sequences, insert them
many times into documents before publishing, and later test whether a model memorised
them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from pddkit.cli import flag_table, flag_values, options, study_options
from pddkit.cli.app import cli
from pddkit.cli.sections import StepsGroup
from pddkit.errors import PddkitError


@cli.group(short_help="Copyright traps: generate, inject, detect (Meeus et al. 2024).",
           cls=StepsGroup)
def traps() -> None:
    """Copyright traps (Meeus et al. 2024): `generate` trap sequences of exact token
    lengths over a perplexity range, `inject` half of them into documents, `detect` whether
    a model trained on the documents memorised them (inserted vs held-out traps)."""


def number_range(text: str, option: str) -> tuple[float, ...]:
    """'0.5:4:0.25' -> 0.5, 0.75, ..., 4.0 (the stop included when a step lands on it), or
    a comma list '0.7,1,1.5'; `option` names the flag in errors."""
    if ":" not in text:
        return flag_values.floats(text, option)
    try:
        start, stop, step = (float(v) for v in text.split(":"))
    except ValueError:
        raise PddkitError(f"{option} {text!r} must be start:stop:step, three numbers") from None
    if not step > 0 or stop < start:
        raise PddkitError(f"{option} {text!r} needs a positive step and stop >= start")
    n = int((stop - start) / step + 1e-9) + 1
    return tuple(round(start + i * step, 12) for i in range(n))


def _trap_output(output, overwrite: bool) -> Path:
    """--output made ready (output_dir.prepare) and, for a trap folder, one that already
    holds one is refused unless --overwrite, which removes its trap files first."""
    from pddkit import output_dir
    from pddkit.studies.traps.folder import INJECTION, MANIFEST, TRAP_INFO, TRAPS

    out = output_dir.prepare(output, overwrite)
    old = [out / n for n in (TRAPS, MANIFEST, TRAP_INFO, INJECTION) if (out / n).exists()]
    if old and not overwrite:
        raise PddkitError(f"`output` {out} already holds a trap folder; choose another folder "
                          "or pass `overwrite=True` to replace it")
    for p in old:
        p.unlink()
    return out


@traps.command(short_help="Trap sequences of exact token lengths over a perplexity range.")
@options.apply(study_options.TRAPS_GENERATE_OPTIONS)
def generate(model, lengths, count, ppl_range, buckets, temperatures, jaccard, retokenize,
             batch_size, max_tries, seed, output, overwrite, device, dtype, trust_remote_code,
             local_files_only, revision) -> None:
    """Sample --count traps of each of --lengths tokens from --model over a sweep of
    --temperatures, spread evenly over --buckets perplexity buckets of --ppl-range,
    de-duplicated (--jaccard); half marked to be inserted, half held out (Meeus et al.
    2024, section 4.1). Writes traps.jsonl and manifest.json to --output."""
    from pddkit.backends.hf_loading import load_model
    from pddkit.studies.traps.generate import check_generate_options, generate_traps

    lengths = flag_values.whole_numbers(lengths, "--lengths")
    rng = flag_values.floats(ppl_range, "--ppl-range")
    if len(rng) != 2:
        raise PddkitError(f"--ppl-range {ppl_range!r} must be two numbers, low,high")
    temps = number_range(temperatures, "--temperatures")
    check_generate_options(lengths=lengths, count=count, ppl_range=rng, buckets=buckets,
                           temperatures=temps, jaccard=jaccard, batch_size=batch_size,
                           max_tries=max_tries)
    out = _trap_output(output, overwrite)  # before any model loads
    lm = load_model(model, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                    local_files_only=local_files_only, revision=revision)
    folder = generate_traps(lm.model, lm.tokenizer, lengths=lengths, count=count, ppl_range=rng,
                            buckets=buckets, temperatures=temps, jaccard=jaccard,
                            retokenize=retokenize, seed=seed, batch_size=batch_size,
                            max_tries=max_tries, model_name=model)
    folder.write(out)
    for length in sorted(lengths):
        c = folder.manifest["counts"][str(length)]
        click.echo(f"length {length}: {c['kept']} traps ({c['members']} to insert, "
                   f"{c['held_out']} held out) from {c['sampled']} samples")
    click.echo(f"traps: {out / 'traps.jsonl'}, manifest: {out / 'manifest.json'}")


@traps.command(short_help="Member traps inserted R times each into documents.")
@options.apply(study_options.TRAPS_INJECT_OPTIONS)
def inject(traps, documents, repeats, min_tokens, text_field, id_field, tokenizer, seed, output,
           overwrite, trust_remote_code, local_files_only) -> None:
    """Insert each member trap of a --traps folder --repeats times into one document of
    --documents at seeded random sentence boundaries (Meeus et al. 2024, section 4.2).
    Writes the documents (same format and name), and the trap folder with trap-info.jsonl
    (trap, document, repeats, positions), to --output."""
    from pddkit.backends.hf_tokenizers import load_tokenizer
    from pddkit.studies.traps.documents import read_documents, write_documents
    from pddkit.studies.traps.folder import read_folder
    from pddkit.studies.traps.inject import check_repeats, inject_traps

    counts = check_repeats(flag_values.whole_numbers(repeats, "--repeats"))
    if Path(output).expanduser().resolve() == Path(traps).expanduser().resolve():
        raise PddkitError(f"--output {output} is the --traps folder: inject into another folder "
                          "(the generated traps stay as they are)")
    source = Path(documents).expanduser().resolve()
    if (Path(output).expanduser() / source.name).resolve() == source:  # before reading them
        raise PddkitError(f"--output {output} holds the --documents file {documents}: writing "
                          "the injected documents there would replace it; choose another folder")
    folder = read_folder(traps)
    table = read_documents(documents, id_field=id_field, text_field=text_field)
    out = _trap_output(output, overwrite)
    tok = None
    if min_tokens > 0 or tokenizer is not None:  # the traps' own, by default from their manifest
        name = (tokenizer or (folder.manifest.get("tokenizer") or {}).get("name")
                or folder.manifest.get("model"))
        if not name:
            raise PddkitError(f"{traps}/manifest.json names no tokenizer to count --min-tokens "
                              "with: pass --tokenizer")
        tok = load_tokenizer(str(name), trust_remote_code=trust_remote_code,
                             local_files_only=local_files_only)
    docs, injected = inject_traps(folder, table.documents, repeats=counts, tokenizer=tok,
                                  min_tokens=min_tokens, seed=seed)
    written = write_documents(table, docs, out)
    injected.write(out)
    c = injected.injection["counts"]
    per = ", ".join(f"{n} traps x{r}" for r, n in c["traps_per_repeats"].items())
    click.echo(f"inserted {c['inserted']} of {c['member_traps']} member traps ({per}; "
               f"{c['copies']} copies) into {c['with_trap']} of {c['documents']} documents "
               f"({c['too_short']} under {min_tokens} tokens"
               + (f", {c['without_text']} rows without text skipped" if c["without_text"] else "")
               + ")"
               + (f"; {c['not_inserted']} member traps left out so every repeat count gets "
                  "as many" if c["not_inserted"] else ""))
    click.echo("a model trained E epochs on these documents sees a trap inserted R times "
               "R x E times (its exposures): give `pddkit traps detect --epochs E` when known")
    click.echo(f"documents: {written}, trap folder: {out}")


@traps.command(short_help="Inserted vs held-out traps: AUC per length x repeats x perplexity.")
@options.apply(study_options.TRAPS_DETECT_OPTIONS)
def detect(model, ref_model, traps, methods, freq, epochs, n_bootstrap, seed, output, overwrite,
           cache, batch_size, max_length, device, dtype, trust_remote_code, local_files_only,
           revision, adapter) -> None:
    """Score every trap of an injected trap folder under --model (and --ref-model for the
    paper's `ref`) with every method, and give the AUC of inserted against held-out traps
    per length x repeats (Meeus et al. 2024, Table 2) and per perplexity bucket; with
    --epochs, each repeat count's exposures (repeats x epochs)."""
    from pddkit import output_dir
    from pddkit.reporting.traps_report import terminal_lines
    from pddkit.studies.traps.detect import check_epochs, detect_traps

    check_epochs(epochs)  # before the output folder is made
    out = output_dir.prepare(output, overwrite)  # before any model loads
    result = detect_traps(traps, model, ref_model=ref_model, freq=freq, methods=methods,
                          epochs=epochs, n_bootstrap=n_bootstrap, seed=seed, cache=cache,
                          batch_size=batch_size, max_length=max_length, device=device,
                          dtype=dtype, revision=revision, adapter=adapter,
                          trust_remote_code=trust_remote_code, local_files_only=local_files_only)
    # notices as a command-line user reads them (flags, not parameter names), saved so too
    result = dataclasses.replace(result, notices=tuple(map(flag_table.for_cli, result.notices)))
    result.write(out)
    click.echo("\n".join(terminal_lines(result.to_dict())))
    click.echo(f"results: {out / 'results.json'}, scores: {out / 'scores.jsonl'}, "
               f"report: {out / 'report.html'}")
