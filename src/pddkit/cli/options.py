"""Every command-line flag pddkit has is spelled in cli/ and nowhere else: here the groups
several commands share (model, data, corpus index, the --config option), the flags of
`blind`, `freq build` and `build`, and `apply`, which puts a list of them on a command;
`run`'s in cli/run_options.py, `sandbox`'s in cli/sandbox_options.py, the case studies' in
cli/study_options.py, the corpus commands' in cli/corpus_options.py. The commands (cli/*.py)
turn flags into the parameters lower layers know by their Python names; the way back
(parameter -> flag, for lower layers' messages) is cli/flag_table.py, and the parsing of
flag values that name the flag in their errors cli/flag_values.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click

from pddkit.errors import PddkitError

MODEL_OPTIONS = [
    click.option("--device", default="auto", show_default=True,
                 help="cpu, cuda, cuda:N, mps or auto."),
    click.option("--dtype", default="auto", show_default=True,
                 type=click.Choice(["auto", "float32", "bfloat16", "float16"]),
                 help="Model weights' dtype (statistics are always float32)."),
    click.option("--trust-remote-code", is_flag=True,
                 help="Allow a model's own code from the hub to run (off by default)."),
    click.option("--local-files-only", is_flag=True,
                 help="Never contact the hub; use local directories and the cache."),
]


def data_options(group: str = "kept on one side of every split",
                 subset: str = "reported on its own",
                 language: str | None = "methods meaningless for it are skipped") -> list:
    """The data flags of `run` and `blind`; `group`, `subset`, `language`: what the command
    does with that column (each command's --help says only what it does; `language=None`:
    no --language)."""
    found = [
    click.option("--data", type=click.Path(), default=None,
        help="Texts: JSONL, CSV, TSV, Parquet, a datasets save_to_disk folder, or a hub id."),
    click.option("--benchmark", default=None, help="Benchmark NAME[:k=v,...], e.g. wikimia:length=64."),
    click.option("--data-dir", type=click.Path(), default=None,
        help="Local folder with the benchmark's files (else the hub)."),
    click.option("--text-field", default=None, help="Column of the texts [default: text, else input]."),
    click.option("--label-field", default="label", show_default=True,
        help="Column of the labels: 1/0, true/false or member/nonmember."),
    click.option("--id-field", default="id", show_default=True, help="Column of the text ids."),
    click.option("--group-field", default="group", show_default=True,
        help=f"Column naming the document a text was cut from ({group})."),
    click.option("--subset-field", default="subset", show_default=True,
        help=f"Column of a part (domain, field, length, position), {subset}."),
    click.option("--data-split", default=None,
        help="Split of a hub id or datasets folder [default: its only split, else train]."),
    ]
    if language is not None:
        found.append(click.option("--language", default=None,
                                  help=f"Language of the texts (en, zh, ...): {language}."))
    return found


DATA_OPTIONS = data_options()


def data_source(data, benchmark, data_dir, text_field, label_field, id_field, group_field,
                subset_field, data_split, language, on_invalid):
    """The DATA_OPTIONS as one DataSource."""
    from pddkit.data.records import Fields
    from pddkit.data.sources import DataSource

    fields = Fields(text=text_field, label=label_field, id=id_field, group=group_field,
                    subset=subset_field)
    return DataSource(data=data, benchmark=benchmark, data_dir=data_dir, fields=fields,
                      data_split=data_split, language=language, on_invalid=on_invalid)


def index_options(use: str, verdict: str) -> list:
    """The corpus-index flags of `run` and `build`; `use`: what the command does with the
    texts the corpus contains, `verdict`: what becomes of a non-member found (each
    command's --help says only what it does)."""
    return [
    click.option("--index", multiple=True, type=click.Path(),
        help="An infini-gram index of the training corpus (from `pddkit corpus index`, or a "
        f"public one): {use}; repeatable, one folder per worker of a sharded index."),
    click.option("--index-tokenizer", default=None,
        help="The tokenizer (folder or hub id) a public --index was built with [default: the "
        "one its pddkit manifest names; another is refused]."),
    click.option("--index-n", default=13, show_default=True, type=int,
        help="--index: the n of the n-grams looked up (tokens of the index's tokenizer)."),
    click.option("--max-overlap", default=0.2, show_default=True, type=float,
        help="--index: a non-member with at least this share of its n-grams in the corpus "
        f"is {verdict}."),
    ]


def check_index_flags(index) -> None:
    """--index-n or --max-overlap typed without --index: one sentence, not ignored."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    typed = [f"--{n.replace('_', '-')}" for n in ("index_n", "max_overlap")
             if ctx.get_parameter_source(n) in (ParameterSource.COMMANDLINE,
                                                ParameterSource.ENVIRONMENT)]
    if typed and not index:
        raise PddkitError(f"{' and '.join(typed)} set{'s' if len(typed) == 1 else ''} how "
                          "texts are checked against a corpus index; give --index too")


BLIND_OPTIONS = [
    *data_options(group="its texts stay in one cross-validation fold",
                  subset="where the baseline is also fitted within each part", language=None),
    click.option("--on-invalid", default="error", show_default=True,
        type=click.Choice(["error", "skip"]),
        help="A bad input line stops the check, or is left out and counted."),
    click.option("--seed", default=0, show_default=True, type=int,
        help="Seed of the cross-validation folds and the bootstrap."),
    click.option("--bootstrap", "n_bootstrap", default=1000, show_default=True, type=int,
        help="Bootstrap resamples for the confidence intervals."),
    click.option("--blind-max-texts", type=int, default=None,
        help="Fit the blind baseline on a stratified sample of N texts (out-of-fold there, "
        "the other texts scored by a model fitted on the sample): cheaper on large data."),
    click.option("--output", type=click.Path(), default=None,
        help="Folder for results.json and scores.jsonl (optional)."),
    click.option("--overwrite", is_flag=True,
        help="Replace the pddkit results already in --output (else such a folder is refused)."),
]


FREQ_BUILD_OPTIONS = [
    click.option("--tokenizer", "tokenizer_name", required=True,
        help="Model (directory or hub id) whose tokenizer to count with."),
    click.option("--output", required=True, type=click.Path(), help="Table file to write (.npz)."),
    click.option("--batch-docs", default=256, show_default=True, type=int,
        help="Documents encoded per batch."),
    click.option("--trust-remote-code", is_flag=True,
        help="Allow the tokenizer's own code from the hub to run (off by default)."),
    click.option("--local-files-only", is_flag=True,
        help="Never contact the hub; use a local directory or the cache."),
    click.argument("corpus", nargs=-1, required=True, type=click.Path()),
]


BUILD_OPTIONS = [
    click.argument("builder"),
    click.option("--members", multiple=True, type=click.Path(),
        help="dolma-book: folder of member books (.txt), or book files; repeatable."),
    click.option("--nonmembers", multiple=True, type=click.Path(),
        help="dolma-book: folder of non-member books (.txt), or book files; repeatable."),
    click.option("--input", "inputs", multiple=True, type=click.Path(),
        help="cutoff, patentmia: JSONL of documents with text and dates (2023-01-05 or "
        "20230105); repeatable."),
    click.option("--words", default=None,
        help="Lengths in words, comma-separated [dolma-book: 512,1024; cutoff: 32,64,128,256; "
        "patentmia: 512]."),
    click.option("--member-before", default=None,
        help="cutoff: members are dated before this ISO date [patentmia: 2023-01-01]."),
    click.option("--nonmember-after", default=None,
        help="cutoff: non-members are dated after this ISO date [patentmia: 2024-03-01]."),
    click.option("--date-field", default=None,
        help="cutoff: the documents' date field, compared with both dates [default: date; "
        "patentmia: the two below]."),
    click.option("--member-date-field", default=None,
        help="cutoff: the date field compared with --member-before [default: --date-field; "
        "patentmia: publication_date]."),
    click.option("--nonmember-date-field", default=None,
        help="cutoff: the date field compared with --nonmember-after [default: --date-field; "
        "patentmia: priority_date]."),
    click.option("--text-field", default=None,
        help="cutoff: the documents' text field [default: text, else input]."),
    click.option("--snippet", default=None, type=click.Choice(["random", "first"]),
        help="cutoff: a seeded random N-word snippet per document, or its first N words "
        "(WikiMIA) [default: random]."),
    click.option("--language", default=None,
        help="en (whitespace words) or zh (jieba words) [default: the builder's, en; patentmia zh]."),
    click.option("--seed", default=None, type=int, help="Seed of the random choices [default: 0]."),
    click.option("--output", required=True, type=click.Path(),
        help="Folder for data.jsonl and manifest.json."),
    click.option("--overwrite", is_flag=True, help="Replace a build already in --output."),
    *index_options("non-members the corpus contains are dropped (cutoff, patentmia, "
                   "dolma-book), counted in the manifest", "dropped"),
]


def config_option(callback: Callable) -> click.Option:
    """--config FILE.yaml, which every command with options gets (cli/config_file.py reads it)."""
    return click.Option(["--config"], type=click.Path(), default=None, is_eager=True,
        expose_value=False, callback=callback, metavar="FILE.yaml",
        help="Run file: YAML whose keys are this command's long option names without the "
        "dashes (option-name: value), e.g. a results folder's run.yaml; flags given here override it.")


def apply(options: Sequence[Callable]) -> Callable:
    """Decorator applying a list of click options, first listed = first in --help."""

    def wrap(fn: Callable) -> Callable:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return wrap
