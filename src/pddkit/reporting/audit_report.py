"""The copyrighted-book audit's tables and report (Shi et al. 2024, case study on
copyrighted books), built from results.json alone, so a copied folder still rebuilds."""

from __future__ import annotations

import json
from pathlib import Path

from pddkit.errors import PddkitError
from pddkit.reporting.page import Config, Image, Notice, Page, Summary, write_page
from pddkit.reporting.table import Num, Table


def load_audit(out_dir: str | Path) -> dict:
    path = Path(out_dir) / "results.json"
    if not path.is_file():
        raise PddkitError(f"{out_dir} is not an audit folder: results.json is missing")
    results = json.loads(path.read_text())
    if results.get("study") != "audit":
        raise PddkitError(f"{path} holds no audit results")
    return results


def books_table(results: dict, top: int | None = None) -> Table:
    """Ranked books: rate [95% interval], snippets above / scored, the verdict per book."""
    exp = results["validation"]["expected_fpr"]
    books = results["books"][:top] if top else results["books"]
    rows = tuple((str(i), b["book"], Num(100 * b["rate"], (100 * b["ci_low"], 100 * b["ci_high"]),
                                        digits=1), f"{b['above']}/{b['snippets']}",
                  "above never-seen" if b["flagged"] else "-")
                 for i, b in enumerate(books, 1))
    notes = (f"rate = % of a book's snippets scoring above the threshold; a never-seen book is "
             f"expected at {100 * exp:.1f}% (the validation false-positive rate). "
             "'above never-seen': the book's interval lies entirely above that rate's interval.",)
    if top and len(results["books"]) > top:
        notes += (f"{len(results['books']) - top} more books in books.csv",)
    return Table(header=("rank", "book", "rate % [95% CI]", "snippets above", "verdict"),
                 rows=rows, title="Books ranked by contamination rate", notes=notes,
                 id="books", css_class="metrics")


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
        ("expected for a never-seen book", f"{100 * v['expected_fpr']:.1f}% of its snippets "
         f"(95% interval {100 * v['expected_fpr_ci'][0]:.1f}-{100 * v['expected_fpr_ci'][1]:.1f}%; "
         f"{v.get('expected_fpr_source', 'in-sample')} validation false-positive rate)"),
    )


def write_audit_report(out_dir: str | Path) -> tuple[Path, Path]:
    """report.html (self-contained) and report.md (+ PNGs) in `out_dir`."""
    from pddkit.reporting import study_plots

    out = Path(out_dir)
    results = load_audit(out)
    books, exp = results["books"], results["validation"]["expected_fpr"]
    blocks: list = [Summary(validation_lines(results)),
                    Notice((results["verdict"],), kind="ok" if results["validation"]["val_auc"]
                           >= 0.6 else "warn", id="verdict", lead="Verdict.")]
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
                                exp, [b["flagged"] for b in books])))
        blocks.append(Image("Distribution of contamination rates", "audit_rates.png",
                            study_plots.rate_histogram_png([b["rate"] for b in books], exp)))
    if results.get("skipped"):
        blocks.append(Notice(tuple(f"{s['book']}: {s['words']} words, {s['reason']}"
                                   for s in results["skipped"]), lead="Skipped books:"))
    blocks.append(Notice(("Method after Shi et al. 2024 (Min-K% Prob), case study on "
                          "copyrighted books: a threshold chosen on validation texts of known "
                          "status, applied to random snippets of each book.",)))
    blocks.append(Config({"configuration": results["configuration"], "counts": results["counts"],
                          "models": results.get("models", {})}))
    return write_page(Page("pddkit audit: which books was this model trained on?",
                           tuple(blocks)), out)
