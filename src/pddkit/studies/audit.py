"""Copyrighted-book audit (Shi et al. 2024, "Detecting pretraining data from large
language models", case study "detecting copyrighted books"): a threshold on one method's
score is chosen on labelled validation texts (known members vs never-seen texts), then
each audited book's contamination rate is the share of its random snippets scoring above
it, with a Wilson 95% interval. A book is marked when its count is improbable for a book
the model never saw: a one-sided p-value under the spread of never-seen validation books'
out-of-fold rates (a beta-binomial; folds of whole books), Benjamini-Hochberg at `fdr`
over the audited books (studies/book_rates.py). The never-seen rate is always measured
out of fold (cross-fitted thresholds), never on the texts that chose the threshold.
Validation data without books (groups), or with too few never-seen books, measures no
spread between books: then no book is marked and the verdict says why, unless the caller
states that never-seen books do not differ (`assume_no_book_spread`), which tests every
book against one pooled out-of-fold rate and is recorded as an assumption.

Snippets are `words`-word spans cut at word offsets from the book's text (Project
Gutenberg header and licence stripped; spacing and newlines kept), at seeded random
positions that never overlap, so each snippet is separate evidence (the interval treats
them as independent trials). A book with room for fewer than `snippets` such spans gets
as many as fit, and says so; a book shorter than one snippet is skipped and counted.
"""

from __future__ import annotations

import csv
import json
import logging
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path

import numpy as np

from pddkit.errors import PddkitError
from pddkit.evaluation.thresholds import (
    ThresholdSummary,
    parse_rule,
    require_both_classes,
    wilson_interval,
)
from pddkit.reporting.audit_verdict_text import audit_verdict
from pddkit.studies.audit_books import (  # noqa: F401  (re-exported)
    Book,
    Snippet,
    book_name,
    cut_snippets,
    load_books,
)
from pddkit.studies.book_rates import (
    BookJudgement,
    NeverSeenReference,
    judge_books,
    require_out_of_fold,
)
from pddkit.studies.registry import register_study

logger = logging.getLogger(__name__)
PAPER = "Shi et al. 2024 (Min-K% Prob), copyrighted books"


@dataclass(frozen=True)
class BookRate:
    """One audited book: `above` of its `snippets` scored above the threshold."""

    book: str
    words: int
    snippets: int
    above: int
    rate: float
    ci_low: float
    ci_high: float
    p_value: float | None  # P(a never-seen book of `snippets` has `above` or more), one-sided
    q_value: float | None  # Benjamini-Hochberg adjusted over the audited books
    marked: bool | None  # q_value <= fdr: more above than a never-seen book's spread
    # explains; None: no verdict (nothing measured the spread between books, none assumed)


@dataclass(frozen=True)
class SkippedBook:
    book: str
    words: int
    reason: str


@dataclass(frozen=True)
class AuditResult:
    method: str
    threshold: ThresholdSummary
    reference: NeverSeenReference  # what a never-seen book's count looks like
    book_test: dict  # verdict_given, why_not, fdr, cutoff, false_marks_bound, ...
    books: tuple[BookRate, ...]  # ranked: highest rate first
    skipped: tuple[SkippedBook, ...]
    snippets: tuple[Snippet, ...]
    scores: tuple[float, ...]  # one per snippet
    verdict: str
    config: dict
    counts: dict
    models: dict = field(default_factory=dict)
    notices: tuple[str, ...] = ()
    provenance: dict | None = None  # pddkit.provenance.Provenance.to_dict()

    def to_dict(self) -> dict:
        from pddkit.version import __version__

        return {"study": "audit", "paper": PAPER, "pddkit_version": __version__,
                "configuration": self.config, "method": self.method,
                "validation": asdict(self.threshold), "verdict": self.verdict,
                "never_seen_reference": asdict(self.reference), "book_test": self.book_test,
                "books": [asdict(b) for b in self.books],
                "skipped": [asdict(s) for s in self.skipped], "counts": self.counts,
                "models": self.models, "notices": list(self.notices),
                "provenance": self.provenance}

    def write(self, out_dir: str | Path, report: bool = True) -> Path:
        """results.json, books.csv (ranked), snippets.jsonl (each snippet's score) and,
        with `report`, report.html + report.md with their figures."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        with (out / "books.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["rank", "book", "words", "snippets", "above", "rate", "ci_low",
                        "ci_high", "never_seen_rate", "p_value", "q_value", "marked",
                        "verdict"])
            for i, b in enumerate(self.books, 1):
                given = b.marked is not None  # empty p, q and mark: no verdict
                w.writerow([i, b.book, b.words, b.snippets, b.above, f"{b.rate:.4f}",
                            f"{b.ci_low:.4f}", f"{b.ci_high:.4f}",
                            f"{self.reference.mean:.4f}", f"{b.p_value:.3g}" if given else "",
                            f"{b.q_value:.3g}" if given else "", int(b.marked) if given else "",
                            ("marked" if b.marked else "not marked") if given else
                            f"no verdict: {self.book_test['why_not']}; a \"group\" column "
                            "naming each validation text's book gives one"])
        with (out / "snippets.jsonl").open("w") as fh:
            for s, score in zip(self.snippets, self.scores):
                fh.write(json.dumps({"book": s.book, "index": s.index, "start_word": s.start_word,
                                     "score": score,
                                     "member": int(score > self.threshold.threshold)}) + "\n")
        if report:
            from pddkit.reporting.audit_report import write_audit_report

            write_audit_report(out)
        return out


def _validation(val_data, val_benchmark, data_dir, on_invalid):
    from pddkit.data import load_table
    from pddkit.data.benchmarks import load_benchmark

    if val_data is not None:
        dataset = load_table(val_data, on_invalid=on_invalid)
    else:
        dataset = load_benchmark(val_benchmark, data_dir, on_invalid)
    if not dataset.labelled:
        raise PddkitError(f"validation data {dataset.name} has no labels: the threshold is "
                          "chosen on known members (1) and non-members (0)")
    require_both_classes(dataset.labels, f"validation data {dataset.name}")
    return dataset


def _test_summary(judged: BookJudgement) -> dict:
    t, ref = judged.test, judged.reference
    against = ("the never-seen validation books' spread (beta-binomial)" if ref.spread_accounted
               else "one pooled never-seen rate (binomial), by assumption" if t.given else None)
    return {"verdict_given": t.given, "why_not": t.why_not or None, "against": against,
            "assumption": ref.assumption or None, "never_seen_rate": ref.out_of_fold,
            "fdr": t.fdr, "p_values": "one-sided, for a never-seen book of as many snippets, "
            "the reference's parameters' uncertainty included" if t.given else None,
            "correction": "Benjamini-Hochberg over the audited books" if t.given else None,
            "cutoff": t.cutoff if t.given else None,
            "false_marks_bound": t.false_marks_bound if t.given else None,
            "expected_if_none_seen": t.expected_if_none_seen if t.given else None}


def _rates(cut: list[list[Snippet]], lengths: dict, judged: BookJudgement) -> list[BookRate]:
    rates = []
    test = judged.test
    for i, got in enumerate(cut):
        k, n = judged.above[i], judged.snippets[i]
        lo, hi = wilson_interval(k, n)
        rates.append(BookRate(got[0].book, lengths[got[0].book], n, k, k / n, lo, hi,
                              test.p_values[i], test.q_values[i], test.marked[i]))
    return sorted(rates, key=lambda b: (-b.rate, -b.ci_low, b.book))


@register_study("audit", "Which books was the model trained on? Per-book contamination rates",
                PAPER)
def audit_books(model, books: str | Path, method: str = "mink", *, val_data: str | None = None,
                val_benchmark: str | None = None, data_dir: str | None = None,
                snippets: int = 100, words: int = 512, threshold: str = "accuracy",
                fdr: float = 0.05, assume_no_book_spread: bool = False, seed: int = 0,
                tokenizer=None, ref_model: str | None = None,
                freq: str | None = None, backend: str = "hf", api_base: str | None = None,
                api_key_env: str | None = "OPENAI_API_KEY", revision: str | None = None,
                adapter: str | None = None, cache: str | None = None, batch_size: int | str = 8,
                max_length: int | None = None, padding_side: str = "right",
                device: str = "auto", dtype: str = "auto", trust_remote_code: bool = False,
                local_files_only: bool = False, on_invalid: str = "error") -> AuditResult:
    """Audit `books` (a folder of .txt, a .txt or a JSONL with `book`, `text`) for
    membership in `model`'s training data with one `method` (Shi et al. 2024: Min-K%,
    100 snippets of 512 words per book, the accuracy-maximising threshold); a book is marked
    when it survives Benjamini-Hochberg at `fdr` against never-seen validation books' spread,
    measured out of fold on validation texts that name their book (`group`). Without that
    spread no book is marked, unless `assume_no_book_spread` states that never-seen books do
    not differ (each book is then tested against one pooled out-of-fold rate).
    `model` is a path or hub id, a LoadedModel, a Backend, or a loaded HF model with
    `tokenizer`; `adapter`, a PEFT adapter loaded onto a `model` given by name."""
    from pddkit.api import _model, _name
    from pddkit.data.overlap import without_overlap
    from pddkit.data.samples import Sample, make_dataset
    from pddkit.engine.config import RunConfig
    from pddkit.engine.run import run_dataset
    from pddkit.provenance import now

    started = now()
    for name, value in (("snippets", snippets), ("words", words)):
        if not isinstance(value, int) or value < 1:
            raise PddkitError(f"`{name}` must be a whole number of at least 1, not {value!r}")
    parse_rule(threshold)
    if not isinstance(fdr, (int, float)) or not 0 < fdr < 1:
        raise PddkitError(f"`fdr` must be between 0 and 1 (e.g. 0.05), not {fdr!r}")
    if (val_data is None) == (val_benchmark is None):
        raise PddkitError("give exactly one of `val_data` (a labelled table) and "
                          "`val_benchmark` (e.g. bookmia) to choose the threshold on")
    if method.strip().lower() == "all" or "," in method:
        raise PddkitError(f"`method` names one method (e.g. mink or mink:k=0.1), not {method!r}")
    cut, skipped, lengths = [], [], {}
    for book in load_books(books):
        lengths[book.name] = len(book.text.split())
        got = cut_snippets(book, snippets, words, seed)
        if not got:
            skipped.append(SkippedBook(book.name, lengths[book.name],
                                       f"shorter than one {words}-word snippet"))
            continue
        if len(got) < snippets:
            logger.info("%s: %d words hold %d non-overlapping %d-word snippets, not %d",
                        book.name, lengths[book.name], len(got), words, snippets)
        cut.append(got)
    if not cut:
        longest = max(lengths.values())
        raise PddkitError(f"none of the {len(lengths)} books holds one {words}-word snippet "
                          f"(the longest has {longest} words): lower `words`")
    snips = [s for got in cut for s in got]
    samples = [Sample(id=f"book:{s.book}:{s.index}", text=s.text, source=f"{s.book} snippet "
                      f"{s.index}") for s in snips]
    val = _validation(val_data, val_benchmark, data_dir, on_invalid)
    under_test = make_dataset("book snippets", samples, [])
    val = without_overlap(val, under_test, f"validation data {val.name}", on_invalid,
                          "the book snippets")
    require_both_classes(val.labels, f"validation data {val.name}")
    require_out_of_fold(val.labels, f"validation data {val.name}")
    val_words = int(np.median([len(s.text.split()) for s in val.samples]))
    lengths_differ = None
    if not 0.8 * words <= val_words <= 1.25 * words:  # the threshold is length-dependent
        lengths_differ = (f"the validation texts are {val_words} words long (median) and the "
                          f"snippets {words}: scores such as Min-K% Prob change with a text's "
                          "length, so a threshold chosen on the validation texts may not fit "
                          f"the snippets; give validation texts of about {words} words, or set "
                          "`words` to their length")
    samples += [Sample(id=f"val:{i}", text=s.text, source=s.source or f"validation text {i}")
                for i, s in enumerate(val.samples)]
    named_tokenizer = tokenizer if isinstance(tokenizer, str) else None  # the API backend's
    target = _model(model, None if named_tokenizer else tokenizer, "model")
    config = RunConfig(model=_name(target), methods=method, ref_model=ref_model, freq=freq,
                       backend=backend, api_base=api_base, api_key_env=api_key_env,
                       revision=revision, adapter=adapter, tokenizer=named_tokenizer, cache=cache,
                       batch_size=batch_size, max_length=max_length,
                       padding_side=padding_side, device=device, dtype=dtype,
                       trust_remote_code=trust_remote_code, local_files_only=local_files_only,
                       n_bootstrap=0, seed=seed, blind=False, on_invalid=on_invalid)
    run = run_dataset(make_dataset("audit", samples, []), config,
                      model=None if isinstance(target, str) else target)
    if len(run.methods) != 1:
        raise PddkitError(f"`method` {method!r} gives {len(run.methods)} scores "
                          f"({', '.join(m.label for m in run.methods)}); name exactly one")
    scores = np.asarray(run.methods[0].scores, dtype=float)
    n = len(snips)
    bounds = np.cumsum([0] + [len(got) for got in cut])
    judged = judge_books(scores[n:], val.labels, [scores[a:b] for a, b in pairwise(bounds)],
                         val_groups=[s.group for s in val.samples], rule=threshold, fdr=fdr,
                         seed=seed, assume_no_book_spread=assume_no_book_spread)
    th, ref = judged.threshold, judged.reference
    rates, test = _rates(cut, lengths, judged), _test_summary(judged)
    short = sum(len(g) < snippets for g in cut)
    notices = list(run.notices) + ([lengths_differ] if lengths_differ else [])
    if judged.assumption_unused:
        notices.append(f"`assume_no_book_spread` was not used: the {ref.books} never-seen "
                       "validation books measure how much never-seen books differ")
    if short:
        notices.append(f"{short} of {len(cut)} books hold fewer than {snippets} "
                       f"non-overlapping {words}-word snippets and gave as many as fit")
    if skipped:
        notices.append(f"{len(skipped)} books shorter than one {words}-word snippet were "
                       "skipped: " + ", ".join(s.book for s in skipped[:5])
                       + (", ..." if len(skipped) > 5 else ""))
    cfg = {"model": config.model, "method": method, "method_resolved": run.methods[0].label,
           "books": str(books), "val_data": None if val_data is None else str(val_data),
           "val_benchmark": val_benchmark, "data_dir": data_dir, "snippets": snippets,
           "words": words, "threshold": threshold, "fdr": fdr,
           "assume_no_book_spread": assume_no_book_spread, "seed": seed,
           "engine": {k: v for k, v in run.config.items()
                      if k in ("batch_size", "max_length", "device", "dtype", "ref_model",
                               "freq", "backend", "cache", "revision")
                      or (k == "adapter" and v is not None)}}
    counts = {"books": len(lengths), "audited": len(cut), "skipped": len(skipped),
              "snippets": n, "books_with_fewer_snippets": short, "validation_texts": len(val.samples),
              "validation_median_words": val_words,
              "validation_left_out": len(val.skipped), "truncated": run.counts.get("truncated", {})}
    return AuditResult(method=run.methods[0].label, threshold=th, reference=ref,
                       book_test=test, books=tuple(rates),
                       skipped=tuple(skipped), snippets=tuple(snips),
                       scores=tuple(map(float, scores[:n])),
                       verdict=audit_verdict(rates, th, ref, test, len(skipped)), config=cfg,
                       counts=counts,
                       models=dict(run.models), notices=tuple(notices),
                       provenance=run.provenance.spanning(started).to_dict())
