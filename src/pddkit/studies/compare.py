"""Unlearning audit (Shi et al. 2024, section 7): did "unlearning" remove a text?

Every chunk is scored under the original and the unlearned model (one engine run each,
each model with its own tokenizer). With `method` a mean of token log-probabilities
(`mink`, `loss`, `surp`: always <= 0, in nats), the score ratio is

    ratio = score_unlearned / score_original
          = (mean -log p under the unlearned model) / (mean -log p under the original),

so ratio > 1 means the unlearned model finds the text less likely (the text was
unlearned), ratio < 1 more likely, and ratio near 1 that its likelihood barely moved. A
chunk with 1/band < ratio < band is flagged "not removed", as the paper flags chunks
with a Min-K% Prob ratio inside (1/1.15, 1.15). Optionally, `continuations` sampled
continuations of each flagged chunk's first `prompt_words` words by the unlearned model
are compared with the true rest of the chunk by ROUGE-L recall (the paper's check).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from pddkit.errors import PddkitError
from pddkit.studies.continuations import (  # noqa: F401  (re-exported)
    continue_all,
    generation_batch,
    lcs_length,
    rouge_l_recall,
    sample_continuations,
)
from pddkit.studies.registry import register_study

logger = logging.getLogger(__name__)
PAPER = "Shi et al. 2024 (Min-K% Prob), unlearning audit"

RATIO_METHODS = ("mink", "loss", "surp")  # means of token log-probabilities: always <= 0
EPS = 1e-12  # nats: the magnitude a score of 0 counts as, so a ratio is always finite


@dataclass(frozen=True)
class Chunk:
    id: str
    text: str
    source: str  # the book (or the table's group) it was cut from; "" when unknown


@dataclass(frozen=True)
class ChunkResult:
    id: str
    source: str
    words: int
    score_original: float
    score_unlearned: float
    ratio: float  # score_unlearned / score_original (module docstring)
    flagged: bool  # 1/band < ratio < band: "not removed"
    rouge_l: tuple[float, ...] = ()  # ROUGE-L recall of each sampled continuation
    continuations: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        return "not removed" if self.flagged else ("removed" if self.ratio >= 1 else "more likely")


@dataclass(frozen=True)
class CompareResult:
    config: dict
    chunks: tuple[ChunkResult, ...]
    models: dict  # "original" / "unlearned" -> name, tokenizer, vocab_size, truncated
    same_tokenizer: bool | None  # None when a tokenizer could not be compared
    counts: dict
    notices: tuple[str, ...] = field(default_factory=tuple)
    provenance: dict | None = None  # pddkit.provenance.Provenance.to_dict()
    timings: dict = field(default_factory=dict)  # seconds per stage

    @property
    def flagged(self) -> tuple[ChunkResult, ...]:
        return tuple(c for c in self.chunks if c.flagged)

    @property
    def verdict(self) -> str:
        """One sentence (two with continuations) for a reader who is not a specialist
        (reporting/compare_report.py writes it)."""
        from pddkit.reporting.compare_report import compare_verdict

        return compare_verdict(self)

    def to_json(self) -> dict:
        from pddkit.version import __version__

        return {"study": "compare", "paper": PAPER, "pddkit_version": __version__,
                "configuration": self.config,
                "models": self.models, "same_tokenizer": self.same_tokenizer,
                "counts": self.counts, "verdict": self.verdict, "notices": list(self.notices),
                "flagged": [_row(c) for c in self.flagged], "timings_s": self.timings,
                "provenance": self.provenance}


def _row(c: ChunkResult) -> dict:
    row = {k: v for k, v in asdict(c).items() if k not in ("rouge_l", "continuations")}
    if c.rouge_l:
        row["rouge_l_mean"], row["rouge_l_max"] = float(np.mean(c.rouge_l)), max(c.rouge_l)
    return row


# -- pure pieces: ratios, flags, ROUGE-L ------------------------------------------------


def score_ratios(original, unlearned) -> np.ndarray:
    """score_unlearned / score_original for scores that are means of log-probabilities
    (<= 0); a score of 0 (a text predicted with certainty) counts as -EPS, so every ratio
    is finite (1 when both are 0)."""
    a, b = (np.asarray(x, dtype=float) for x in (original, unlearned))
    return np.where(b < 0, b, -EPS) / np.where(a < 0, a, -EPS)


def not_removed(ratios, band: float) -> np.ndarray:
    """True where 1/band < ratio < band (the likelihood barely moved)."""
    r = np.asarray(ratios, dtype=float)
    return (r > 1.0 / band) & (r < band)


# -- chunks -----------------------------------------------------------------------------


def _books(path: Path) -> list[tuple[str, str]]:
    """(name, text) of a folder of .txt books, one .txt book, or a JSONL of `book`, `text`
    (lines of one book joined in order); Gutenberg headers stripped."""
    from pddkit.data.builders.dolma_book import book_files
    from pddkit.data.gutenberg import strip_gutenberg

    if path.is_dir() or path.suffix.lower() == ".txt":
        found = [(n, f.read_bytes().decode("utf-8", errors="replace")) for n, f in
                 book_files(path, "books")]
    elif path.is_file():
        texts: dict[str, list[str]] = {}
        for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                obj = None
            if not (isinstance(obj, dict) and isinstance(obj.get("book"), str)
                    and isinstance(obj.get("text"), str)):
                raise PddkitError(f"{path} line {i} is not a JSON object with string fields "
                                  "book and text")
            texts.setdefault(obj["book"], []).append(obj["text"])
        found = [(n, "\n\n".join(t)) for n, t in texts.items()]
    else:
        raise PddkitError(f"`books` {path} does not exist")
    return [(n, strip_gutenberg(t.replace("\r\n", "\n"))) for n, t in found]


def book_chunks(books: str | Path, words: int) -> tuple[list[Chunk], dict]:
    """Consecutive `words`-word chunks of every book (verbatim text, the rest of a book
    dropped), and counts; a book shorter than one chunk is skipped and counted."""
    from pddkit.data.builders.words import snippet, word_spans

    found = _books(Path(books))
    chunks, short, longest = [], 0, 0
    for name, text in found:
        spans = word_spans(text)
        longest = max(longest, len(spans))
        if len(spans) < words:
            short += 1
        for i in range(len(spans) // words):
            chunks.append(Chunk(f"{name}#{i}", snippet(text, spans, i * words, words), name))
    if not chunks:
        raise PddkitError(f"none of the {len(found)} books holds a chunk of {words} words (the "
                          f"longest has {longest}), so there is nothing to compare; lower `words`")
    return chunks, {"books": len(found), "books_too_short": short}


def table_chunks(path: str | Path) -> tuple[list[Chunk], dict]:
    """The texts of a table file (pddkit.data.load_table), used as they are."""
    from pddkit.data.tables import load_table

    dataset = load_table(path)
    return [Chunk(s.id, s.text, s.group or "") for s in dataset.samples], {}


# -- models: scoring and sampling ---------------------------------------------------------


@dataclass(frozen=True)
class EngineOptions:
    """What both models are loaded and scored with (RunConfig's names)."""

    batch_size: int | str = 8
    max_length: int | None = None
    device: str = "auto"
    dtype: str = "auto"
    trust_remote_code: bool = False
    local_files_only: bool = False
    cache: str | None = None


def _fingerprint(model, opts: EngineOptions) -> str | None:
    """The vocabulary fingerprint of a model's tokenizer (None when it has no local one)."""
    from pddkit.backends.hf_loading import LoadedModel
    from pddkit.backends.hf_tokenizers import load_tokenizer
    from pddkit.cache.fingerprint import vocab_fingerprint

    tok = model.tokenizer if isinstance(model, LoadedModel) else None
    if isinstance(model, str):
        tok = load_tokenizer(model, trust_remote_code=opts.trust_remote_code,
                             local_files_only=opts.local_files_only)
    return None if tok is None else vocab_fingerprint(tok)


def _score(chunks: list[Chunk], model, method: str, opts: EngineOptions, seed: int):
    """(scores, model description with its truncation count, provenance) of one engine run."""
    from pddkit.data.samples import Sample, make_dataset
    from pddkit.engine.config import RunConfig
    from pddkit.engine.run import run_dataset

    dataset = make_dataset("chunks", [Sample(c.id, c.text, source=f"chunk {c.id}")
                                      for c in chunks], [])
    cfg = RunConfig(model=model if isinstance(model, str) else model.name, methods=method,
                    blind=False, n_bootstrap=0, seed=seed, **asdict(opts))
    result = run_dataset(dataset, cfg, model=None if isinstance(model, str) else model)
    if len(result.methods) != 1:
        raise PddkitError(f"`method` {method!r} could not be scored with this model")
    info = dict(result.models.get("target", {}))
    info["truncated"] = int(result.counts.get("truncated", {}).get("target", 0))
    return result.methods[0].scores, info, result.provenance


def _same_model(a, b) -> bool:
    """Whether `model` and `model_b` are one model: one name (adapters.same_model) or
    one object."""
    from pddkit.backends.adapters import same_model
    from pddkit.backends.hf_loading import LoadedModel

    if isinstance(a, str) and isinstance(b, str):
        return same_model(a, b)
    if isinstance(a, LoadedModel) and isinstance(b, LoadedModel):
        return a.model is b.model
    return a is b


def _local_model(model, opts: EngineOptions):
    """The unlearned model loaded here, for sampling: a local directory or a loaded model."""
    from pddkit.backends.hf_loading import LoadedModel, load_model

    if isinstance(model, LoadedModel):
        return model
    if not (isinstance(model, str) and Path(model).expanduser().is_dir()):
        raise PddkitError("`continuations` need `model_b` as a local Hugging Face model "
                          "directory or a loaded model, not a hub id or a served model")
    return load_model(model, device=opts.device, dtype=opts.dtype, role="model_b",
                      trust_remote_code=opts.trust_remote_code, local_files_only=True)


# -- the study ----------------------------------------------------------------------------


@register_study("compare", "Did unlearning remove a text? Chunks whose likelihood barely moved "
                "from the original to the unlearned model", PAPER)
def compare_models(model, model_b, *, chunks: str | Path | None = None,
                   books: str | Path | None = None, words: int = 512, method: str = "mink",
                   band: float = 1.15, continuations: int = 0, prompt_words: int = 200,
                   seed: int = 0, tokenizer=None, tokenizer_b=None, batch_size: int | str = 8,
                   max_length: int | None = None, device: str = "auto", dtype: str = "auto",
                   trust_remote_code: bool = False, local_files_only: bool = False,
                   cache: str | None = None) -> CompareResult:
    """Score `chunks` (a table file) or `books` (a folder of .txt, or a JSONL of `book`,
    `text`, cut into consecutive `words`-word chunks) under the original `model` and the
    unlearned `model_b`; flag each chunk whose ratio score_unlearned / score_original lies
    inside (1/band, band) as "not removed" (Shi et al. 2024, section 7; module docstring).
    Models: a local directory or hub id, a LoadedModel, or a loaded model with its
    tokenizer; each scores with its own tokenizer."""
    from pddkit.api import _model
    from pddkit.params import parse_spec, split_spec_list
    from pddkit.provenance import Provenance, now

    started, t_start = now(), time.perf_counter()
    specs = split_spec_list(method)
    rules = [((chunks is None) != (books is None), "give exactly one of `chunks` and `books`"),
             (len(specs) == 1 and parse_spec(specs[0])[0] in RATIO_METHODS,
              f"`method` must be one of {', '.join(RATIO_METHODS)} (a mean of token "
              f"log-probabilities, so the ratio of two scores means something), not {method!r}"),
             (band > 1, f"`band` must be greater than 1, not {band}"),
             (words >= 1, f"`words` must be at least 1, not {words}"),
             (continuations >= 0, f"`continuations` must be 0 or more, not {continuations}"),
             (prompt_words >= 1, f"`prompt_words` must be at least 1, not {prompt_words}")]
    for ok, message in rules:
        if not ok:
            raise PddkitError(message)
    if books is not None and continuations and words <= prompt_words:
        raise PddkitError(f"`continuations` continue each chunk after its first {prompt_words} "
                          f"words, so `words` ({words}) must be more than `prompt_words`")
    opts = EngineOptions(batch_size, max_length, device, dtype, trust_remote_code,
                         local_files_only, cache)
    original, unlearned = _model(model, tokenizer, "model"), _model(model_b, tokenizer_b, "model_b")
    found, counts = book_chunks(books, words) if books is not None else table_chunks(chunks)
    t0 = time.perf_counter()
    lm_b = _local_model(unlearned, opts) if continuations else None
    timings = {"load_sampling_model": time.perf_counter() - t0} if continuations else {}

    notices = []
    if _same_model(original, unlearned):
        notices.append("`model` and `model_b` are the same model, so every ratio is 1 and every "
                       "chunk is flagged as not removed; give the unlearned model as `model_b`")
        logger.warning(notices[-1])
    said = len(notices)  # logged already
    same = None
    prints = [_fingerprint(m, opts) for m in (original, unlearned)]
    if None not in prints:
        same = prints[0] == prints[1]
        if not same:
            notices.append("the two models have different tokenizers: each chunk is scored by "
                           "each model with its own, so the ratio compares mean log-probabilities "
                           "over different tokens")
    logger.info("scoring %d chunks with the original model", len(found))
    t0 = time.perf_counter()
    s_a, info_a, prov_a = _score(found, original, method, opts, seed)
    timings["score_original"] = time.perf_counter() - t0
    logger.info("scoring %d chunks with the unlearned model", len(found))
    t0 = time.perf_counter()
    s_b, info_b, prov_b = _score(found, lm_b or unlearned, method, opts, seed)
    timings["score_unlearned"] = time.perf_counter() - t0
    ratios = score_ratios(s_a, s_b)
    flags = not_removed(ratios, band)
    results = [ChunkResult(c.id, c.source, len(c.text.split()), float(a), float(b), float(r),
                           bool(f)) for c, a, b, r, f in zip(found, s_a, s_b, ratios, flags)]
    short = 0
    if continuations:
        flagged = [c for c, f in zip(found, flags) if f]
        per_batch = generation_batch(batch_size, continuations)
        logger.info("sampling %d continuations of each of %d flagged chunks, %d chunks per batch",
                    continuations, len(flagged), per_batch)
        t0 = time.perf_counter()
        got = continue_all([c.text for c in flagged], lm_b, continuations, prompt_words, seed, per_batch)
        timings["continuations"] = time.perf_counter() - t0
        at = [i for i, f in enumerate(flags) if f]
        for k, (recalls, texts) in got.items():
            results[at[k]] = ChunkResult(**{**asdict(results[at[k]]), "rouge_l": recalls,
                                            "continuations": texts})
        short = len(flagged) - len(got)
        if short:
            notices.append(f"{short} flagged chunks have at most {prompt_words} words and get "
                           "no continuations")
    for role, info in (("original", info_a), ("unlearned", info_b)):
        if info["truncated"]:
            notices.append(f"{info['truncated']} chunks are longer than the {role} model's "
                           "context: only their first tokens were scored")
    for line in notices[said:]:
        logger.warning(line)
    n_flag = int(flags.sum())
    counts = {"chunks": len(found), "not_removed": n_flag,
              "removed": int((ratios >= band).sum()), "more_likely": int((ratios <= 1 / band).sum()),
              "no_continuation": short, **counts}
    config = {"model": info_a.get("name"), "model_b": info_b.get("name"),
              "chunks": None if chunks is None else str(chunks),
              "books": None if books is None else str(books),
              "words": words if books is not None else None, "method": method, "band": band,
              "continuations": continuations, "prompt_words": prompt_words, "seed": seed,
              **asdict(opts)}
    return CompareResult(config, tuple(results), {"original": info_a, "unlearned": info_b}, same,
                         counts, tuple(notices),
                         Provenance.of_runs(started, {"original": prov_a, "unlearned": prov_b})
                         .to_dict(), {**timings, "total": time.perf_counter() - t_start})
