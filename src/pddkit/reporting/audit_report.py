"""The copyrighted-book audit's tables and report (Shi et al. 2024, case study on
copyrighted books), built from results.json alone, so a copied folder still rebuilds."""

from __future__ import annotations

import json
from pathlib import Path

from pddkit.errors import PddkitError
from pddkit.reporting.page import Config, Image, Notice, Page, Summary, write_page
from pddkit.reporting.table import Num, Table, to_text


def load_audit(out_dir: str | Path) -> dict:
    path = Path(out_dir) / "results.json"
    if not path.is_file():
        raise PddkitError(f"{out_dir} is not an audit folder: results.json is missing")
    results = json.loads(path.read_text())
    if results.get("study") != "audit":
        raise PddkitError(f"{path} holds no audit results")
    return results


def _marked(book: dict) -> bool:
    return bool(book.get("marked", book.get("flagged")))  # "flagged": folders before issue 19


def verdict_given(results: dict) -> bool:
    """False when the audit marked no book for want of a measured spread between books
    (folders written before issue 28 always gave one)."""
    return bool((results.get("book_test") or {}).get("verdict_given", True))


def never_seen_rate(results: dict) -> float:
    """The rate expected for a never-seen book: the reference's mean (the validation
    false-positive rate in folders written before the reference existed)."""
    ref = results.get("never_seen_reference")
    return ref["mean"] if ref else results["validation"]["expected_fpr"]


def reference_sentence(results: dict) -> str:
    """How a book is marked, in words, for the table's note and the report."""
    ref, test = results.get("never_seen_reference"), results.get("book_test")
    if not ref or not test:
        return ("'above never-seen': the book's interval lies entirely above the interval of "
                "the validation false-positive rate.")
    if not verdict_given(results):
        return (f"'no verdict': no book is marked, because {test['why_not']}. A \"group\" "
                "column in the validation data (each text's book; 5 or more never-seen books) "
                "gives a verdict; so does stating that never-seen books do not differ, an "
                "assumption the audit cannot check.")
    if ref["spread_accounted"]:
        how = (f"never-seen validation books' rates (out of fold: {ref['books']} books, mean "
               f"{100 * ref['mean']:.1f}%, book-to-book sd {100 * ref['between_book_sd']:.1f} "
               "points, a beta-binomial)")
    elif ref.get("assumption"):
        return (f"'marked': more snippets above than one pooled never-seen rate "
                f"({100 * ref['mean']:.1f}% out of fold, a binomial) makes likely, assuming that "
                f"{ref['assumption']}; {ref['reason']}: one-sided p-value, Benjamini-Hochberg "
                f"q-value at most {test['fdr']:g} over the {len(results['books'])} books.")
    else:  # folders written before issue 28
        how = (f"one pooled never-seen rate ({100 * ref['mean']:.1f}%, a binomial; between-book "
               f"variation is not accounted for: {ref['reason']})")
    return (f"'marked': more snippets above than {how} make likely: one-sided p-value, "
            f"Benjamini-Hochberg q-value at most {test['fdr']:g} over the "
            f"{len(results['books'])} books.")


def _verdict_cell(book: dict, given: bool) -> str:
    if not given:
        return "no verdict"
    return "marked" if _marked(book) else "-"


def books_table(results: dict, top: int | None = None) -> Table:
    """Ranked books: rate [95% interval], snippets above / scored, p and q, the verdict."""
    books = results["books"][:top] if top else results["books"]
    given = verdict_given(results)
    tested = given and "q_value" in (books[0] if books else {})  # no p, q without a verdict
    rows = tuple((str(i), b["book"], Num(100 * b["rate"], (100 * b["ci_low"], 100 * b["ci_high"]),
                                        digits=1), f"{b['above']}/{b['snippets']}")
                 + ((f"{b['p_value']:.2g}", f"{b['q_value']:.2g}") if tested else ())
                 + (_verdict_cell(b, given),)
                 for i, b in enumerate(books, 1))
    notes = (f"rate = % of a book's snippets scoring above the threshold; a never-seen book is "
             f"expected at {100 * never_seen_rate(results):.1f}%. " + reference_sentence(results),)
    if top and len(results["books"]) > top:
        notes += (f"{len(results['books']) - top} more books in books.csv",)
    header = (("rank", "book", "rate % [95% CI]", "snippets above")
              + (("p", "q") if tested else ()) + ("verdict",))
    return Table(header=header, rows=rows, title="Books ranked by contamination rate",
                 notes=notes, id="books", css_class="metrics")


def terminal_books(results: dict, top: int | None = 30, width: int = 100) -> list[str]:
    """books_table as `pddkit audit` prints it, within `width` columns: book names too long
    for the room the other columns leave shortened in the middle ("…"), the notes wrapped."""
    import textwrap
    from dataclasses import replace

    table = books_table(results, top=top)
    bare = replace(table, rows=tuple((r[0], "", *r[2:]) for r in table.rows), notes=(), title="")
    room = max(12, width - (max(map(len, to_text(bare))) - len(table.header[1])))

    def short(name: str) -> str:
        if len(name) <= room:
            return name
        head = (room - 1) // 2
        return name[:head] + "…" + name[len(name) - (room - 1 - head):]

    fitted = replace(table, rows=tuple((r[0], short(r[1]), *r[2:]) for r in table.rows), notes=())
    return to_text(fitted) + [line for note in table.notes for line in textwrap.wrap(note, width)]


def validation_lines(results: dict) -> tuple[tuple[str, str], ...]:
    v, c = results["validation"], results["configuration"]
    source = c.get("val_data") or c.get("val_benchmark")
    return (
        ("model", str(c["model"])),
        ("method", str(results["method"])),
        ("books", f"{results['counts']['audited']} audited of {results['counts']['books']} "
                  f"({results['counts']['skipped']} too short), {results['counts']['snippets']} "
                  f"snippets of {c['words']} words (at most {c['snippets']} per book, seed "
                  f"{c['seed']})"),
        ("validation", f"{source}: {v['n_val']} texts ({v['n_val_members']} members, "
                       f"{v['n_val_nonmembers']} non-members); AUC {v['val_auc']:.3f}"),
        ("threshold", f"{v['threshold']:.6g} (rule {v['rule']}): validation TPR "
                      f"{100 * v['val_tpr']:.1f}%, accuracy {100 * v['val_accuracy']:.1f}%"),
        ("never-seen rate", f"{100 * v['expected_fpr']:.1f}% of never-seen validation "
         f"texts above the threshold (95% interval {100 * v['expected_fpr_ci'][0]:.1f}-"
         f"{100 * v['expected_fpr_ci'][1]:.1f}%; {_out_of_fold(results)}); on the texts that "
         f"chose the threshold {100 * v['val_fpr']:.1f}%, optimistic and not used"),
        ("a book is marked", reference_sentence(results).removeprefix("'marked': ")
         .removeprefix("'no verdict': ")),
    ) + ((("assumption", results["never_seen_reference"]["assumption"]),)
         if (results.get("never_seen_reference") or {}).get("assumption") else ())


def _out_of_fold(results: dict) -> str:
    ref = results.get("never_seen_reference") or {}
    return ref.get("out_of_fold") or results["validation"].get("expected_fpr_source", "in-sample")


def write_audit_report(out_dir: str | Path) -> tuple[Path, Path]:
    """report.html (self-contained) and report.md (+ PNGs) in `out_dir`."""
    from pddkit.reporting import study_plots

    out = Path(out_dir)
    results = load_audit(out)
    books, exp = results["books"], never_seen_rate(results)
    blocks: list = [Summary(validation_lines(results)),
                    Notice((results["verdict"],), kind="ok" if results["validation"]["val_auc"]
                           >= 0.6 and verdict_given(results) else "warn", id="verdict",
                           lead="Verdict.")]
    if results["validation"]["val_auc"] < 0.6:
        blocks.append(Notice(("The method barely separates known training texts from "
                              "never-seen ones on the validation data, so these rates say "
                              "little about any book.",), kind="warn"))
    blocks += [Notice((n,)) for n in results.get("notices", [])]
    blocks.append(books_table(results))
    if books:
        blocks.append(Image("Contamination rate per book", "audit_books.png",
                            study_plots.book_rates_png(
                                [b["book"] for b in books], [b["rate"] for b in books],
                                [b["ci_low"] for b in books], [b["ci_high"] for b in books],
                                exp, [_marked(b) for b in books])))
        blocks.append(Image("Distribution of contamination rates", "audit_rates.png",
                            study_plots.rate_histogram_png([b["rate"] for b in books], exp)))
    if results.get("skipped"):
        blocks.append(Notice(tuple(f"{s['book']}: {s['words']} words, {s['reason']}"
                                   for s in results["skipped"]), lead="Skipped books:"))
    blocks.append(Notice(("Method after Shi et al. 2024 (Min-K% Prob), case study on "
                          "copyrighted books: a threshold chosen on validation texts of known "
                          "status, applied to random snippets of each book; books marked "
                          "against never-seen validation books' spread, with a "
                          "false-discovery-rate correction (pddkit's addition).",)))
    blocks.append(Config({"configuration": results["configuration"], "counts": results["counts"],
                          "models": results.get("models", {})},
                         provenance=results.get("provenance")))
    return write_page(Page("pddkit audit: which books was this model trained on?",
                           tuple(blocks)), out)
