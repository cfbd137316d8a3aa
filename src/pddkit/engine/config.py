"""RunConfig: everything a run depends on besides the data; written into results.json."""

from __future__ import annotations

from dataclasses import dataclass

from pddkit.corpus.overlap import DEFAULT_MAX_OVERLAP, DEFAULT_N
from pddkit.errors import PddkitError

DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class RunConfig:
    """Options of one run. Names are parameters, not CLI flags (the CLI maps its flags)."""

    model: str
    methods: str = "all"
    backend: str = "hf"  # backends registry name: "hf" (a local causal LM) or "openai"
    ref_model: str | None = None
    ref_backend: str | None = None  # default: "hf"
    freq: str | None = None
    batch_size: int | str = 8  # or "auto": the largest the device holds, found once per run
    max_length: int | None = None
    device: str = "auto"
    dtype: str = "auto"
    padding_side: str = "right"
    trust_remote_code: bool = False
    local_files_only: bool = False
    revision: str | None = None
    adapter: str | None = None  # a PEFT adapter (folder or hub id) loaded onto `model` (hf)
    ref_adapter: str | None = None  # ... and onto `ref_model`
    quantize: str | None = None  # "8bit" or "4bit": hf models loaded with bitsandbytes (CUDA)
    tokenizer: str | None = None  # the API backend's local tokenizer (default: the model name)
    api_base: str | None = None  # the API backend's URL, e.g. http://127.0.0.1:8000/v1
    api_key_env: str | None = "OPENAI_API_KEY"  # the variable holding the API key (never stored)
    api_concurrency: int = 8  # requests in flight at once
    api_timeout: float = 60.0  # seconds to wait for one answer
    api_retries: int = 5  # retries of a request that failed with 429, 502-504, a timeout or no connection
    api_prompt: str = "auto"  # prompts as token ids or text: "auto" (ids, text where refused), "ids", "text"
    cache: str | None = None  # statistics cache directory (content-addressed, resumable)
    engine: str = "local"  # where the statistics passes run: "local" or "ray"
    ray_address: str | None = None  # an existing Ray cluster (default: start a local one)
    actors: int = 1  # Ray actors, each holding one copy of the model
    gpus_per_actor: float = 0.0
    n_bootstrap: int = 1000
    seed: int = 0
    blind: bool = True  # the model-free baseline, for every labelled run
    blind_max_texts: int | None = None  # the blind baseline on a stratified sample of N texts
    val_fraction: float | None = None  # hyperparameters chosen on this stratified share
    val_data: str | None = None  # ... or on this labelled file (recorded; loaded by the caller)
    mask_model: str | None = None  # masked LM for `neighbor` (roberta-base when it is named)
    neighbors_file: str | None = None  # reuse neighbours saved by an earlier run
    prefix_data: str | None = None  # labelled shots of recall / conrecall (SPEC 3b)
    calibration: str | None = None  # labelled texts methods fit on, never evaluated (SPEC 3e)
    probe_data: str | None = None  # auxiliary non-member texts for the probe's proxy model
    probe_load: str | None = None  # a probe saved by an earlier run (OUTPUT/probe)
    probe_lrs: tuple[float, ...] = (1e-4, 1e-3)  # proxy learning rates, chosen on held-out rows
    probe_lora: bool = False
    probe_standardize: str = "per_set"  # each set of activations with its own mean/std, or "train"
    on_invalid: str = "error"  # auxiliary texts that are also under test: refused, or left out
    # document level (SPEC 3c): any of "mean", "share", "classifier" over the texts' `group`
    documents: tuple[str, ...] = ()
    split_words: int | None = None  # each input row a document, cut into N-word texts
    max_texts: int | None = None  # ... at most this many (the first) per document
    doc_features: str = "histogram"  # the document classifier's features, or "aggregate"
    paraphrases: str | None = None  # decop: a file of 3 paraphrases per text (id, paraphrases)
    paraphraser: str | None = None  # ... or the model that writes them (local dir, hub id, served name)
    paraphraser_backend: str = "hf"  # "hf" (loaded here) or "openai" (served)
    paraphraser_api_base: str | None = None  # the served paraphraser's URL (default: `api_base`)
    paraphraser_tokenizer: str | None = None  # the served paraphraser's tokenizer (default: its name)
    # the labels checked against the training corpus (engine/corpus_stage.py): an infini-gram
    # index, one folder per worker of a sharded one; its tokenizer (only for an index without
    # pddkit's manifest); the n-gram length; a non-member at or above `max_overlap` of its
    # n-grams found is contradicted; with `whole_training_set`, a member with none found too
    index: tuple[str, ...] = ()
    index_tokenizer: str | None = None
    index_n: int = DEFAULT_N
    max_overlap: float = DEFAULT_MAX_OVERLAP
    whole_training_set: bool = False

    @property
    def fixed_batch_size(self) -> int:
        """The batch size of the passes that do not search for one (probe, neighbours)."""
        return 8 if self.batch_size == "auto" else int(self.batch_size)

    def _index_rules(self) -> list[tuple[bool, str]]:
        given = "" if self.index else "; give `index` too"
        return [
            (not isinstance(self.index, str),
             f"`index` is a list of index folders such as ({self.index!r},), not one string"),
            (self.index_n >= 1, f"`index_n` must be at least 1 token, not {self.index_n}"),
            (0 < self.max_overlap <= 1,
             f"`max_overlap` must be a share in (0, 1], not {self.max_overlap}"),
            (self.index_tokenizer is None or bool(self.index),
             f"`index_tokenizer` names the tokenizer of a corpus index{given}"),
            (not self.whole_training_set or bool(self.index),
             f"`whole_training_set` says what a corpus index holds{given}"),
        ]

    def check(self) -> RunConfig:
        """Every option's value, checked before anything loads; errors name the parameter."""
        rules = [
            (self.batch_size == "auto" or (isinstance(self.batch_size, int) and self.batch_size >= 1),
             f"`batch_size` must be a whole number of at least 1 or 'auto', not {self.batch_size!r}"),
            (self.batch_size != "auto" or self.engine != "ray",
             "the Ray engine needs a fixed `batch_size` (each actor runs the same batches)"),
            (self.max_length is None or self.max_length >= 2,
             f"`max_length` {self.max_length} leaves no room for a text token after the start token"),
            (self.padding_side in ("left", "right"),
             f"`padding_side` must be 'left' or 'right', not {self.padding_side!r}"),
            (self.dtype in DTYPES, f"`dtype` must be one of {', '.join(DTYPES)}, not {self.dtype!r}"),
            (self.n_bootstrap >= 0, f"`n_bootstrap` must be 0 or more, not {self.n_bootstrap}"),
            (self.blind_max_texts is None or self.blind_max_texts >= 20,
             f"`blind_max_texts` must be at least 20 (10 texts of each class), not "
             f"{self.blind_max_texts}"),
            (self.val_fraction is None or 0 < self.val_fraction < 1,
             f"`val_fraction` must be between 0 and 1, not {self.val_fraction}"),
            (self.val_fraction is None or self.val_data is None,
             "give at most one of `val_fraction` and `val_data`"),
            (self.probe_standardize in ("per_set", "train"),
             f"`probe_standardize` must be 'per_set' or 'train', not {self.probe_standardize!r}"),
            (len(self.probe_lrs) > 0 and all(lr > 0 for lr in self.probe_lrs),
             f"`probe_lrs` must be positive learning rates, not {self.probe_lrs}"),
            (self.split_words is None or self.split_words >= 1,
             f"`split_words` must be at least 1 word per text, not {self.split_words}"),
            (self.max_texts is None or self.max_texts >= 1,
             f"`max_texts` must be at least 1 text per document, not {self.max_texts}"),
            (self.max_texts is None or self.split_words is not None,
             "`max_texts` limits the texts `split_words` cuts from each document; give both"),
            (self.on_invalid in ("error", "skip"),
             f"`on_invalid` must be 'error' or 'skip', not {self.on_invalid!r}"),
            (self.engine in ("local", "ray"), f"`engine` must be 'local' or 'ray', not {self.engine!r}"),
            (self.actors >= 1, f"`actors` must be at least 1, not {self.actors}"),
            (self.gpus_per_actor >= 0, f"`gpus_per_actor` must be 0 or more, not {self.gpus_per_actor}"),
            (self.api_concurrency >= 1, f"`api_concurrency` must be at least 1, not {self.api_concurrency}"),
            (self.api_timeout > 0, f"`api_timeout` must be positive, not {self.api_timeout}"),
            (self.api_retries >= 0, f"`api_retries` must be 0 or more, not {self.api_retries}"),
            (self.api_prompt in ("auto", "ids", "text"),
             f"`api_prompt` must be auto, ids or text, not {self.api_prompt!r}"),
            (self.backend != "openai" or bool(self.api_base),
             "the openai backend needs `api_base`, the server's URL (e.g. http://127.0.0.1:8000/v1)"),
            (not self.api_base or "openai" in (self.backend, self.ref_backend),
             f"`api_base` is the address of a served model (`backend='openai'`); the "
             f"{self.backend} backend loads `model` here and would ignore it"),
            (self.adapter is None or self.backend == "hf",
             f"`adapter` loads a PEFT adapter onto a model loaded here (backend hf), not onto "
             f"a {self.backend} model: serve the model with its adapter instead"),
            (self.ref_adapter is None or self.ref_model is not None,
             "`ref_adapter` goes onto the reference model: give `ref_model` too"),
            (self.ref_adapter is None or (self.ref_backend or "hf") == "hf",
             "`ref_adapter` loads a PEFT adapter onto a reference model loaded here (backend "
             "hf), not onto a served one"),
            (self.quantize is None or self.quantize in ("8bit", "4bit"),
             f"`quantize` must be 8bit or 4bit, not {self.quantize!r}"),
            (self.quantize is None or self.backend == "hf" or (self.ref_model is not None and
                                                              (self.ref_backend or "hf") == "hf"),
             "`quantize` quantises the models loaded here (backend hf); a served model is "
             "quantised by its server"),
            (not (self.paraphrases and self.paraphraser),
             "give at most one of `paraphrases` (a file) and `paraphraser` (a model)"),
            (self.paraphraser_backend in ("hf", "openai"),
             f"`paraphraser_backend` must be hf or openai, not {self.paraphraser_backend!r}"),
            (self.paraphraser_backend != "openai" or not self.paraphraser
             or bool(self.paraphraser_api_base or self.api_base),
             "a served `paraphraser` needs `paraphraser_api_base`, its server's URL"),
        ]
        rules += self._index_rules()
        for ok, message in rules:
            if not ok:
                raise PddkitError(message)
        if self.quantize is not None and self.engine == "local":  # one sentence before loading
            from pddkit.backends.devices import check_quantize

            check_quantize(self.quantize, self.device)
        if self.adapter is not None or self.ref_adapter is not None:  # a local adapter's files
            from pddkit.backends.adapters import resolve_adapter

            for name, adapter, role in ((self.model, self.adapter, "model"),
                                        (self.ref_model, self.ref_adapter, "reference model")):
                if adapter is not None and isinstance(name, str):
                    resolve_adapter(name, adapter, role=role, hub=False)
        from pddkit.evaluation.document_level import DOC_FEATURES, check_aggregations

        if isinstance(self.documents, str):
            raise PddkitError(f"`documents` is a list of aggregations such as ('mean',), not the "
                              f"string {self.documents!r}")
        check_aggregations(self.documents)
        if self.doc_features not in DOC_FEATURES:
            raise PddkitError(f"`doc_features` must be one of {', '.join(DOC_FEATURES)}, not "
                              f"{self.doc_features!r}")
        from pddkit.backends import get_backend

        get_backend(self.backend)  # an unknown backend is one sentence
        if self.ref_backend is not None:
            get_backend(self.ref_backend)
        return self
