"""`pddkit corpus index|check`: a model's training corpus as an infini-gram index, and
labels checked against it."""

from __future__ import annotations

import click

from pddkit.cli import corpus_options, options
from pddkit.cli.app import cli


@cli.group(short_help="Training-corpus indexes: build one, check labels against it.")
def corpus() -> None:
    """Infini-gram indexes of a model's training corpus: `index` builds one, `check` measures
    how much of each text the corpus holds and which labels it contradicts."""


@corpus.command("index", short_help="Build an infini-gram index of corpus files.")
@options.apply(corpus_options.CORPUS_INDEX_OPTIONS)
def corpus_index(corpus, tokenizer_name, output, text_field, normalize, shards, workers, worker_id,
                 batch_docs, threads, memory_gb, trust_remote_code, local_files_only) -> None:
    """Tokenize the corpus with the model's tokenizer and build an infini-gram index
    (suffix arrays by the infini-gram package's own binary). Rerun the same command after a
    kill: it resumes. Several workers (--workers, --worker-id) each build their shards."""
    from pddkit.backends.hf_tokenizers import load_tokenizer
    from pddkit.corpus.build import IndexSettings, build_index

    settings = IndexSettings(text_field=text_field, normalize=normalize, shards=shards,
                             workers=workers, worker_id=worker_id, batch_docs=batch_docs,
                             threads=threads, memory_gb=memory_gb)
    settings.check()
    from pathlib import Path

    if Path(tokenizer_name).expanduser().exists():  # the manifest names it from anywhere
        tokenizer_name = str(Path(tokenizer_name).expanduser().resolve())
    tok = load_tokenizer(tokenizer_name, trust_remote_code=trust_remote_code,
                         local_files_only=local_files_only)
    m = build_index(list(corpus), tok, tokenizer_name, output, settings)
    skipped = m["skipped_files"]
    click.echo(
        f"indexed {m['tokens']:,} tokens in {m['documents']:,} documents from "
        f"{len(m['files'])} files into shards {', '.join(m['shard_files'])} of {m['shards']} "
        f"({'normalised' if m['normalize'] else 'not normalised'}; tokenizer {tokenizer_name}): "
        f"{output}")
    if skipped:
        names = ", ".join(f"{s['name']} ({s['why']})" for s in skipped[:5])
        click.echo(f"skipped {len(skipped)} files that are not text: {names}"
                   + (" ..." if len(skipped) > 5 else ""))
    if m["skipped_lines"]:
        click.echo(f"left out {m['skipped_lines']} lines without text, e.g. "
                   f"{m['skipped_examples'][0]}")


@corpus.command("check", short_help="Overlap of labelled texts with an indexed corpus.")
@options.apply(corpus_options.CORPUS_CHECK_OPTIONS)
def corpus_check(index, index_tokenizer, data, benchmark, data_dir, text_field, label_field,
                 id_field, group_field, subset_field, data_split, on_invalid, n, max_overlap,
                 whole_training_set, output, overwrite, local_files_only) -> None:
    """Per text, with the index's tokenizer: the share of its n-grams found in the corpus,
    the longest match and the count of the whole text; the labels the corpus contradicts.
    Writes overlap.jsonl, contradictions.jsonl, summary.json and report.html/.md; exits 0
    with contradictions."""
    from pathlib import Path

    from pddkit import output_dir
    from pddkit.corpus.check import check_dataset, write_check
    from pddkit.corpus.index import open_index
    from pddkit.errors import PddkitError
    from pddkit.provenance import Provenance, now
    from pddkit.reporting.corpus_report import terminal_text, write_report

    if n < 1:
        raise PddkitError("--n must be at least 1")
    if not 0 < max_overlap <= 1:
        raise PddkitError("--max-overlap must be in (0, 1]")
    started = now()
    out = output_dir.prepare(output, overwrite)
    ix = open_index(list(index), tokenizer_name=index_tokenizer, local_files_only=local_files_only)
    source = options.data_source(data, benchmark, data_dir, text_field, label_field, id_field,
                                 group_field, subset_field, data_split, None, on_invalid)
    dataset = source.load()
    check = check_dataset(dataset, ix, n, max_overlap, whole_training_set)
    paths = write_check(check, dataset, out)
    write_report(check, out, provenance=Provenance.collect(started, devices=["cpu"]).to_dict())
    click.echo(terminal_text(check))
    click.echo(f"results: {paths['overlap']}, {paths['contradictions']}, "
               f"{Path(out) / 'report.html'}")
