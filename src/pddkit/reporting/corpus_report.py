"""What `pddkit corpus check` shows: overlap by label, the contradicted texts (terminal,
report.html and report.md), from a corpus.check.CorpusCheck."""

from __future__ import annotations

from pathlib import Path

from pddkit.reporting.page import Config, Notice, Page, Summary, write_page
from pddkit.reporting.table import Num, Table, to_text

_LABEL = {1: "members", 0: "non-members", None: "unlabelled"}


def labels_table(check) -> Table:
    rows = tuple((_LABEL[s.label], str(s.texts), str(s.checked), Num(s.mean_overlap),
                  Num(s.median_overlap), str(s.at_or_above), str(s.with_any_ngram),
                  str(s.contradicted)) for s in check.by_label())
    return Table(header=("texts", "n", "checked", "mean overlap", "median overlap",
                         f"overlap >= {check.max_overlap:g}", "any n-gram found", "contradicted"),
                 rows=rows, id="by-label",
                 title=f"Share of {check.n}-grams (tokens) found in the corpus, by label",
                 notes=(f"{check.too_short} texts shorter than {check.n} tokens are not "
                        "checked (no overlap; counted under n - checked)",)
                 if check.too_short else ())


def contradictions_table(check, limit: int | None = 50) -> Table:
    chosen = sorted(check.contradicted, key=lambda t: -(t.overlap.overlap or 0))
    one = {1: "member", 0: "non-member"}
    rows = tuple((t.id, one.get(t.label, "-"), t.contradicted or "", Num(t.overlap.overlap),
                  str(t.overlap.longest_match), str(t.overlap.count)) for t in chosen[:limit])
    notes = ((f"... and {len(chosen) - limit} more in contradictions.jsonl",)
             if limit is not None and len(chosen) > limit else ())
    return Table(header=("id", "label", "why", "overlap", "longest match (tokens)",
                         "whole text found"), rows=rows, notes=notes, id="contradicted",
                 title=f"Labels the corpus contradicts: {len(chosen)} of {len(check.texts)}")


def verdict(check) -> str:
    k = len(check.contradicted)
    rule = (f"a non-member with at least {check.max_overlap * 100:g}% of its {check.n}-grams in the "
            "corpus" + ("; a member with none" if check.whole_training_set else ""))
    if not k:
        return f"labels checked against the corpus: none contradicted ({rule})"
    return f"labels checked against the corpus: {k} contradicted ({rule})"


def normalization_line(check) -> str:
    if check.normalized is None:
        return ("the index has no pddkit manifest: texts were queried as given, without "
                "normalising spacing (as a public index is built); re-spaced texts match less")
    return ("texts normalised as the index was built (NFC, whitespace runs to one space)"
            if check.normalized else "texts queried as given (the index was built without "
            "normalising)")


def terminal_text(check, top: int = 20) -> str:
    lines = [verdict(check), normalization_line(check), "", *to_text(labels_table(check))]
    if check.contradicted:
        lines += ["", *to_text(contradictions_table(check, limit=top))]
    return "\n".join(lines)


def write_report(check, out: str | Path, provenance: dict | None = None) -> Path:
    blocks: list = [
        Summary((("data", check.data), ("index", check.index),
                 ("tokenizer", check.index_tokenizer),
                 ("texts", f"{len(check.texts)} ({check.too_short} too short to check)"))),
        Notice((verdict(check), normalization_line(check)),
               kind="warn" if check.contradicted else "ok", id="verdict"),
        labels_table(check),
    ]
    if check.contradicted:
        blocks.append(contradictions_table(check, limit=200))
    blocks.append(Notice((
        f"overlap = the share of a text's {check.n}-token n-grams that occur anywhere in the "
        "indexed corpus (counted with infini-gram). OLMo-Detect keeps a non-member only when "
        "under 20% of its 13-grams occur in the training corpus. A non-member above the "
        "threshold was probably seen in training (or its text is common boilerplate); a "
        "member with no n-gram found is not in this corpus at all.",), lead="How to read it:"))
    blocks.append(Config({"configuration": check.summary() | {"by_label": None}},
                         provenance=provenance))
    html_path, _ = write_page(Page("pddkit corpus check", tuple(blocks)), out)
    return html_path
