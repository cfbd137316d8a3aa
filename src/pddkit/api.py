"""Python API: `score(texts, model=...)` -> {method: scores} and
`evaluate(texts, labels, model=...)` -> RunResult with metrics; every option of
`pddkit run` as an explicit keyword argument (engine.config.RunConfig's fields).

`model` (and `ref_model`) may be what a Hugging Face user holds: a local directory or a
hub id, a loaded `PreTrainedModel` with `tokenizer=` (or a `(model, tokenizer)` pair), a
`backends.hf_loading.LoadedModel`, or any `backends.Backend`. With `backend="openai"`,
`model` is the served model's name and `tokenizer` its tokenizer's directory or hub id
(default: the model name)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

import numpy as np

from pddkit.data.samples import Dataset, Sample, make_dataset
from pddkit.engine.config import RunConfig
from pddkit.errors import PddkitError
from pddkit.evaluation.results import RunResult


def _dataset(texts: Sequence[str], labels: Sequence[int] | None, ids: Sequence[str] | None,
             groups: Sequence[str | None] | None, subsets: Sequence[str | None] | None = None,
             language: str | None = None) -> Dataset:
    if isinstance(texts, str):
        raise PddkitError("texts must be a list of strings, not one string")
    for what, values in (("labels", labels), ("ids", ids), ("groups", groups), ("subsets", subsets)):
        if values is not None and len(values) != len(texts):
            raise PddkitError(f"{len(texts)} texts but {len(values)} {what}")
    samples = []
    for i, t in enumerate(texts):
        name = f"text {i}" if ids is None else f"text {i} (id {ids[i]})"
        if not isinstance(t, str) or not t.strip():
            raise PddkitError(f"{name} is empty, whitespace only or not a string")
        lab = None if labels is None else _label(labels[i], name)
        samples.append(Sample(id=str(i) if ids is None else str(ids[i]), text=t, label=lab,
                              source=name, group=None if groups is None else groups[i],
                              subset=None if subsets is None else subsets[i]))
    from pddkit.data.records import without_contradictions

    samples, _ = without_contradictions(samples, "texts", "error")  # one text, both labels: refused
    return make_dataset("texts", samples, [], meta={} if language is None else {"language": language})


def _label(value, name: str) -> int:
    """0 or 1 as the command line reads a label column (0/1, True/False, and the strings
    "member"/"nonmember", "true"/"false"); anything else, "yes" included, one sentence."""
    from pddkit.data.records import BadRow, parse_label

    try:
        return parse_label(value.item() if isinstance(value, np.generic) else value)
    except BadRow as e:
        raise PddkitError(f"{name} {e}") from None


def _model(model, tokenizer, role: str):
    """A name (loaded later), or a model object made into a LoadedModel / Backend."""
    from pddkit.backends.base import Backend
    from pddkit.backends.hf_loading import LoadedModel

    if isinstance(model, tuple) and len(model) == 2:
        model, tokenizer = model
    if model is None or isinstance(model, (str, LoadedModel, Backend)):
        if tokenizer is not None:
            raise PddkitError(f"{role}: give a tokenizer only with a loaded Hugging Face model "
                              "(a name, a LoadedModel or a backend brings its own)")
        return model
    if not hasattr(model, "forward") or not hasattr(model, "config"):
        raise PddkitError(f"{role} must be a path, a hub id, a loaded Hugging Face model with "
                          f"its tokenizer, or a (model, tokenizer) pair, not {type(model).__name__}")
    if tokenizer is None:
        raise PddkitError(f"{role} is a loaded model: pass its tokenizer too (tokenizer=... or "
                          "a (model, tokenizer) pair)")
    param = next(model.parameters())
    return LoadedModel(model.eval(), tokenizer,
                       getattr(model, "name_or_path", "") or type(model).__name__,
                       str(param.device), str(param.dtype).replace("torch.", ""))


def _name(model) -> str | None:
    return model if model is None or isinstance(model, str) else model.name


def _run(texts, labels, model, tokenizer, ref_model, ref_tokenizer, ids, groups, val_data,
         options: dict) -> RunResult:
    from pddkit import progress
    from pddkit.engine.run import run_dataset

    if not progress.enabled():  # transformers' own bars follow PDDKIT_PROGRESS too
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    options = dict(options)
    if options.get("backend", "hf") != "hf" and isinstance(model, str):
        if tokenizer is not None and not isinstance(tokenizer, str):
            raise PddkitError(f"with backend={options['backend']!r}, `tokenizer` names the served "
                              "model's tokenizer (a directory or hub id), not a loaded tokenizer")
        options["tokenizer"], tokenizer = tokenizer, None  # loaded by the backend, by name
    else:
        options["tokenizer"] = None  # a loaded model's tokenizer travels with it
    target = _model(model, tokenizer, "model")
    reference = _model(ref_model, ref_tokenizer, "ref_model")
    names = {f.name for f in fields(RunConfig)} - {"model", "ref_model"}
    cfg = RunConfig(model=_name(target), ref_model=_name(reference),
                    **{k: v for k, v in options.items() if k in names})
    val_dataset = None
    if val_data is not None:
        from pddkit.data.tables import load_table

        val_dataset = load_table(val_data, on_invalid=cfg.on_invalid)
    return run_dataset(_dataset(texts, labels, ids, groups, options.get("subsets"),
                                options.get("language")), cfg,
                       model=None if isinstance(target, str) else target,
                       ref_model=None if reference is None or isinstance(reference, str) else reference,
                       val_dataset=val_dataset)


def score(texts: Sequence[str], model, methods: str = "all", *, tokenizer=None,
          ids: Sequence[str] | None = None, groups: Sequence[str | None] | None = None,
          language: str | None = None, ref_model=None, ref_tokenizer=None, backend: str = "hf",
          api_base: str | None = None,
          api_key_env: str | None = "OPENAI_API_KEY", api_concurrency: int = 8,
          api_timeout: float = 60.0, api_retries: int = 5, revision: str | None = None,
          adapter: str | None = None, ref_adapter: str | None = None,
          quantize: str | None = None, cache: str | None = None, freq: str | None = None,
          mask_model: str | None = None,
          neighbors_file: str | None = None, prefix_data: str | None = None,
          probe_data: str | None = None, probe_load: str | None = None,
          probe_lrs: Sequence[float] = (1e-4, 1e-3), probe_lora: bool = False,
          probe_standardize: str = "per_set", batch_size: int | str = 8,
          max_length: int | None = None, padding_side: str = "right", device: str = "auto",
          dtype: str = "auto", trust_remote_code: bool = False, local_files_only: bool = False,
          on_invalid: str = "error", engine: str = "local", ray_address: str | None = None,
          actors: int = 1, gpus_per_actor: float = 0.0, seed: int = 0) -> dict[str, np.ndarray]:
    """Scores per method (higher = more likely a member) for `texts` under `model`.

    `mask_model` (a fill-mask model) enables `neighbor` (`neighbors_file` reuses saved
    neighbours); `probe_data` (a JSONL of texts absent from pre-training) or `probe_load`
    (a saved probe folder) enables `probe`; `prefix_data` (a labelled table) gives the shots
    of `recall` and `conrecall` (labelled texts put before each text); `probe_standardize`
    "per_set" standardises the texts' activations with their own statistics (so a text's
    probe score depends on the texts scored with it), "train" with the probe's training
    rows'. `cache` (a folder) keeps every pass's statistics, so a rerun does no forward pass
    for texts it has seen.
    `backend="openai"` scores with a served model (`api_base`; `model` is its served name,
    `tokenizer` the directory or hub id of its tokenizer, default: `model`).
    `adapter` (a PEFT adapter folder or hub id, `pip install 'pddkit[adapters]'`) is loaded
    onto `model`, unmerged; a `model` folder holding an adapter alone (adapter_config.json)
    loads the base model it names with it; `ref_adapter` does the same for `ref_model`.
    `quantize` ("8bit" or "4bit", `pip install 'pddkit[quantize]'`) loads the models with
    bitsandbytes on a CUDA GPU. The cache keys cover the adapter's weights and the
    quantisation.
    """
    options = dict(locals())
    options["probe_lrs"] = tuple(probe_lrs)
    return _run(texts, None, model, tokenizer, ref_model, ref_tokenizer, ids, groups, None,
                {**options, "blind": False}).scores()


def evaluate(texts: Sequence[str], labels: Sequence[int], model, methods: str = "all", *,
             tokenizer=None, ids: Sequence[str] | None = None,
             groups: Sequence[str | None] | None = None,
             subsets: Sequence[str | None] | None = None, language: str | None = None,
             ref_model=None, ref_tokenizer=None,
             backend: str = "hf", api_base: str | None = None,
             api_key_env: str | None = "OPENAI_API_KEY", api_concurrency: int = 8,
          api_timeout: float = 60.0, api_retries: int = 5, revision: str | None = None,
             adapter: str | None = None, ref_adapter: str | None = None,
             quantize: str | None = None, cache: str | None = None, freq: str | None = None,
             mask_model: str | None = None,
             neighbors_file: str | None = None, prefix_data: str | None = None,
             probe_data: str | None = None, probe_load: str | None = None,
             probe_lrs: Sequence[float] = (1e-4, 1e-3), probe_lora: bool = False,
             probe_standardize: str = "per_set",
             val_fraction: float | None = None, val_data: str | None = None,
             batch_size: int | str = 8, max_length: int | None = None, padding_side: str = "right",
             device: str = "auto", dtype: str = "auto", trust_remote_code: bool = False,
             local_files_only: bool = False, on_invalid: str = "error", engine: str = "local",
             ray_address: str | None = None, actors: int = 1, gpus_per_actor: float = 0.0,
             n_bootstrap: int = 1000, seed: int = 0, blind: bool = True,
             blind_max_texts: int | None = None,
             documents: Sequence[str] | str = (), doc_features: str = "histogram",
             split_words: int | None = None, max_texts: int | None = None) -> RunResult:
    """Like `score`, with labels (1 member, 0 non-member): returns typed metrics per method.
    With `val_fraction` (or `val_data`, a labelled JSONL), hyperparameters are chosen on
    the validation texts and every metric is measured on the rest (`RunResult.validation`);
    `groups` (the document each text was cut from) keeps a document on one side; `subsets`
    (a domain, field or length per text) get their own metrics beside the pooled ones;
    `language` ("en", "zh", ...) skips the methods meaningless for it. `documents` ("mean",
    "share", "classifier", or several) adds document-level scores and metrics over `groups`
    (`RunResult.documents`); `split_words` cuts each text into consecutive texts of
    that many words, grouped by their text (at most `max_texts` each). `adapter`,
    `ref_adapter` and `quantize` as in `score`. `blind_max_texts` fits the blind baseline
    on a stratified sample of that many texts (the others scored by a model fitted on it)."""
    options = dict(locals())
    options["probe_lrs"] = tuple(probe_lrs)
    if isinstance(documents, str):
        options["documents"] = tuple(d.strip() for d in documents.split(",") if d.strip())
    else:
        options["documents"] = tuple(documents)
    return _run(texts, labels, model, tokenizer, ref_model, ref_tokenizer, ids, groups, val_data,
                options)
