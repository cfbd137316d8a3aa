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

from pddkit.corpus.overlap import DEFAULT_MAX_OVERLAP, DEFAULT_N
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
          api_timeout: float = 60.0, api_retries: int = 5, api_prompt: str = "auto",
          revision: str | None = None,
          adapter: str | None = None, ref_adapter: str | None = None,
          quantize: str | None = None, cache: str | None = None, freq: str | None = None,
          mask_model: str | None = None,
          neighbors_file: str | None = None, prefix_data: str | None = None,
          calibration: str | None = None,
          paraphrases: str | None = None, paraphraser: str | None = None,
          paraphraser_backend: str = "hf", paraphraser_api_base: str | None = None,
          paraphraser_tokenizer: str | None = None,
          probe_data: str | None = None, probe_load: str | None = None,
          probe_lrs: Sequence[float] = (1e-4, 1e-3), probe_lora: bool = False,
          probe_standardize: str = "per_set", batch_size: int | str = 8,
          max_length: int | None = None, padding_side: str = "right", device: str = "auto",
          dtype: str = "auto", trust_remote_code: bool = False, local_files_only: bool = False,
          on_invalid: str = "error", engine: str = "local", ray_address: str | None = None,
          actors: int = 1, gpus_per_actor: float = 0.0, seed: int = 0) -> dict[str, np.ndarray]:
    """Scores per method (higher = more likely a member) for `texts` under `model`.

    Args:
        texts: The texts to score.
        model: The target model: a local directory or hub id, a loaded `PreTrainedModel`
            with `tokenizer`, a `(model, tokenizer)` pair, a `LoadedModel` or a `Backend`;
            with `backend="openai"`, the served model's name.
        methods: "all", or `name[:k=v,...]` separated by commas (`pddkit list`).
        tokenizer: The tokenizer of a loaded `model`; with `backend="openai"`, the directory
            or hub id of the served model's tokenizer (default: `model`).
        ids: One id per text (default: "1", "2", ...).
        groups: The document each text was cut from: a document's texts stay on one side
            of every split.
        language: The texts' language ("en", "zh", ...): methods meaningless for it are
            skipped.
        ref_model: Reference model for `ref` (as `model`).
        ref_tokenizer: The tokenizer of a loaded `ref_model`.
        backend: "hf" (a causal LM loaded here) or "openai" (an OpenAI-compatible server).
        api_base: The server's URL with `backend="openai"`, e.g. http://127.0.0.1:8000/v1.
        api_key_env: Environment variable holding the server's API key (never logged).
        api_concurrency: Requests in flight at once (`backend="openai"`).
        api_timeout: Seconds to wait for one answer (`backend="openai"`).
        api_retries: Retries, with exponential backoff, after HTTP 429, 502-504, a
            timeout or a refused connection (`backend="openai"`).
        api_prompt: "auto" (token ids; text where the server refuses ids), "ids" or
            "text" (`backend="openai"`): with text, the server's tokens are checked
            against the tokenizer's.
        revision: Hub revision (branch, tag or commit) of `model`.
        adapter: PEFT adapter (folder or hub id) loaded onto `model`, unmerged
            (`pip install -e '.[adapters]'`); a `model` folder holding an adapter alone
            (adapter_config.json) loads the base model it names with it.
        ref_adapter: PEFT adapter loaded onto `ref_model`.
        quantize: "8bit" or "4bit": the models loaded with bitsandbytes on a CUDA GPU
            (`pip install -e '.[quantize]'`).
        cache: Statistics cache folder: a rerun does no forward pass for texts it has seen
            (keys cover the adapter's weights and the quantisation).
        freq: Token frequency table for `dcpdd` (`pddkit freq build`).
        mask_model: Fill-mask model (folder or hub id) for `neighbor`.
        neighbors_file: The neighbors.jsonl an earlier run saved, reused by `neighbor`.
        prefix_data: Labelled table of the shots of `recall` and `conrecall` (labelled texts
            put before each text).
        calibration: Labelled table of texts that calibrated methods (`acmia` without
            `beta`) fit on, never evaluated; without it, a seeded stratified 30% of the
            labelled texts is held out (SPEC 3e).
        paraphrases: `decop`: a JSONL or CSV file with each text's `id`, its `paraphrases`
            (a list of 3 strings) and, for texts given here, its `title` and `author`.
        paraphraser: `decop`: the model that writes 3 paraphrases per text instead (a
            folder or hub id; a served model's name with `paraphraser_backend="openai"`).
        paraphraser_backend: "hf" or "openai", how `paraphraser` runs.
        paraphraser_api_base: The served `paraphraser`'s URL (default: `api_base`).
        paraphraser_tokenizer: The served `paraphraser`'s tokenizer, a folder or hub id
            (default: its name).
        probe_data: JSONL of auxiliary texts absent from pre-training: trains `probe`.
        probe_load: A probe folder an earlier run saved.
        probe_lrs: The proxy model's fine-tuning learning rates; the best on held-out rows
            is kept.
        probe_lora: Fine-tune the proxy with LoRA (needs peft).
        probe_standardize: "per_set" standardises the texts' activations with their own
            statistics (a text's probe score then depends on the texts scored with it),
            "train" with the probe's training rows'.
        batch_size: Texts per batch, or "auto": the largest the device holds, found once.
        max_length: Cut texts to this many tokens, start token included (default: the
            model's context).
        padding_side: "right" or "left"; scores do not depend on it (float32 rounding).
        device: "cpu", "cuda", "cuda:N", "mps" or "auto".
        dtype: The weights' dtype: "auto", "float32", "bfloat16" or "float16"
            (statistics are always float32).
        trust_remote_code: Allow a model's own code from the hub to run.
        local_files_only: Never contact the hub.
        on_invalid: "error" (a bad text stops) or "skip" (left out and counted).
        engine: "local" (this process) or "ray" (Ray actors, `pip install -e '.[ray]'`).
        ray_address: An existing Ray cluster (default: start one here).
        actors: Ray actors, each with its own copy of the model.
        gpus_per_actor: GPUs each Ray actor holds (a fraction shares one; 0: CPU).
        seed: Seed of the random choices (shots, word-swapped copies, sampled
            continuations).

    Returns:
        {method label: one score per text, in the order of `texts`}.
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
          api_timeout: float = 60.0, api_retries: int = 5, api_prompt: str = "auto",
          revision: str | None = None,
             adapter: str | None = None, ref_adapter: str | None = None,
             quantize: str | None = None, cache: str | None = None, freq: str | None = None,
             mask_model: str | None = None,
             neighbors_file: str | None = None, prefix_data: str | None = None,
          calibration: str | None = None,
          paraphrases: str | None = None, paraphraser: str | None = None,
          paraphraser_backend: str = "hf", paraphraser_api_base: str | None = None,
          paraphraser_tokenizer: str | None = None,
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
             split_words: int | None = None, max_texts: int | None = None,
             index: Sequence[str] = (), index_tokenizer: str | None = None,
             index_n: int = DEFAULT_N, max_overlap: float = DEFAULT_MAX_OVERLAP,
             whole_training_set: bool = False) -> RunResult:
    """Like `score`, with labels (1 member, 0 non-member): returns typed metrics per method,
    beside the model-free blind baseline.

    Args:
        texts: The texts to score.
        labels: One label per text: 1 (member) or 0 (non-member), as booleans, numbers or
            the strings member/nonmember, true/false.
        model: The target model: a local directory or hub id, a loaded `PreTrainedModel`
            with `tokenizer`, a `(model, tokenizer)` pair, a `LoadedModel` or a `Backend`;
            with `backend="openai"`, the served model's name.
        methods: "all", or `name[:k=v,...]` separated by commas (`pddkit list`).
        tokenizer: The tokenizer of a loaded `model`; with `backend="openai"`, the directory
            or hub id of the served model's tokenizer (default: `model`).
        ids: One id per text (default: "1", "2", ...).
        groups: The document each text was cut from: a document's texts stay on one side
            of every split.
        subsets: A part per text (domain, field, length): metrics per part beside the
            pooled ones.
        language: The texts' language ("en", "zh", ...): methods meaningless for it are
            skipped.
        ref_model: Reference model for `ref` (as `model`).
        ref_tokenizer: The tokenizer of a loaded `ref_model`.
        backend: "hf" (a causal LM loaded here) or "openai" (an OpenAI-compatible server).
        api_base: The server's URL with `backend="openai"`, e.g. http://127.0.0.1:8000/v1.
        api_key_env: Environment variable holding the server's API key (never logged).
        api_concurrency: Requests in flight at once (`backend="openai"`).
        api_timeout: Seconds to wait for one answer (`backend="openai"`).
        api_retries: Retries, with exponential backoff, after HTTP 429, 502-504, a
            timeout or a refused connection (`backend="openai"`).
        api_prompt: "auto" (token ids; text where the server refuses ids), "ids" or
            "text" (`backend="openai"`): with text, the server's tokens are checked
            against the tokenizer's.
        revision: Hub revision (branch, tag or commit) of `model`.
        adapter: PEFT adapter (folder or hub id) loaded onto `model`, unmerged
            (`pip install -e '.[adapters]'`); a `model` folder holding an adapter alone
            (adapter_config.json) loads the base model it names with it.
        ref_adapter: PEFT adapter loaded onto `ref_model`.
        quantize: "8bit" or "4bit": the models loaded with bitsandbytes on a CUDA GPU
            (`pip install -e '.[quantize]'`).
        cache: Statistics cache folder: a rerun does no forward pass for texts it has seen
            (keys cover the adapter's weights and the quantisation).
        freq: Token frequency table for `dcpdd` (`pddkit freq build`).
        mask_model: Fill-mask model (folder or hub id) for `neighbor`.
        neighbors_file: The neighbors.jsonl an earlier run saved, reused by `neighbor`.
        prefix_data: Labelled table of the shots of `recall` and `conrecall` (labelled texts
            put before each text).
        calibration: Labelled table of texts that calibrated methods (`acmia` without
            `beta`) fit on, never evaluated; without it, a seeded stratified 30% of the
            labelled texts is held out (SPEC 3e).
        paraphrases: `decop`: a JSONL or CSV file with each text's `id`, its `paraphrases`
            (a list of 3 strings) and, for texts given here, its `title` and `author`.
        paraphraser: `decop`: the model that writes 3 paraphrases per text instead (a
            folder or hub id; a served model's name with `paraphraser_backend="openai"`).
        paraphraser_backend: "hf" or "openai", how `paraphraser` runs.
        paraphraser_api_base: The served `paraphraser`'s URL (default: `api_base`).
        paraphraser_tokenizer: The served `paraphraser`'s tokenizer, a folder or hub id
            (default: its name).
        probe_data: JSONL of auxiliary texts absent from pre-training: trains `probe`.
        probe_load: A probe folder an earlier run saved.
        probe_lrs: The proxy model's fine-tuning learning rates; the best on held-out rows
            is kept.
        probe_lora: Fine-tune the proxy with LoRA (needs peft).
        probe_standardize: "per_set" standardises the texts' activations with their own
            statistics (a text's probe score then depends on the texts scored with it),
            "train" with the probe's training rows'.
        batch_size: Texts per batch, or "auto": the largest the device holds, found once.
        max_length: Cut texts to this many tokens, start token included (default: the
            model's context).
        padding_side: "right" or "left"; scores do not depend on it (float32 rounding).
        device: "cpu", "cuda", "cuda:N", "mps" or "auto".
        dtype: The weights' dtype: "auto", "float32", "bfloat16" or "float16"
            (statistics are always float32).
        trust_remote_code: Allow a model's own code from the hub to run.
        local_files_only: Never contact the hub.
        on_invalid: "error" (a bad text stops) or "skip" (left out and counted).
        engine: "local" (this process) or "ray" (Ray actors, `pip install -e '.[ray]'`).
        ray_address: An existing Ray cluster (default: start one here).
        actors: Ray actors, each with its own copy of the model.
        gpus_per_actor: GPUs each Ray actor holds (a fraction shares one; 0: CPU).
        val_fraction: Choose the hyperparameters on this stratified share of the texts;
            every metric is measured on the rest (`RunResult.validation`).
        val_data: ...or on this labelled table; the metrics are then on `texts` only.
        n_bootstrap: Bootstrap resamples for the confidence intervals.
        seed: Seed of the random choices (validation split, shots, the blind baseline's
            folds, the bootstrap).
        blind: Fit the model-free blind baseline.
        blind_max_texts: Fit the blind baseline on a stratified sample of this many texts
            (the others scored by a model fitted on it).
        documents: "mean", "share", "classifier", or several: document-level scores and
            metrics over `groups` (`RunResult.documents`).
        doc_features: The document classifier's features: "histogram" or "aggregate".
        split_words: Cut each text into consecutive texts of this many words, grouped by
            the text they came from.
        max_texts: With `split_words`: keep the first this many texts of each.
        index: An infini-gram index of the training corpus (`pddkit corpus index`, or a
            public one), one folder per worker of a sharded index: each text's overlap
            with the corpus and each label checked (`RunResult.corpus`), and the metrics
            also with the contradicted texts left out.
        index_tokenizer: The tokenizer a public `index` was built with (a pddkit index
            names its own, and refuses another).
        index_n: The n of the token n-grams looked up in `index`.
        max_overlap: A non-member with at least this share of its n-grams in the corpus
            is contradicted.
        whole_training_set: `index` holds all the model was trained on: a member with no
            n-gram in it is contradicted too.

    Returns:
        The scores, metrics (AUC, TPR at low FPR, bootstrap intervals), the blind
            baseline and notices; `pddkit.summary(result)` is the table `pddkit run` prints.
    """
    options = dict(locals())
    options["probe_lrs"] = tuple(probe_lrs)
    if isinstance(documents, str):
        options["documents"] = tuple(d.strip() for d in documents.split(",") if d.strip())
    else:
        options["documents"] = tuple(documents)
    if not isinstance(index, str):  # one string: refused with one sentence (RunConfig.check)
        options["index"] = tuple(str(f) for f in index)
    return _run(texts, labels, model, tokenizer, ref_model, ref_tokenizer, ids, groups, val_data,
                options)
