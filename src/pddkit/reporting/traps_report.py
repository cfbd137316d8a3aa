"""The copyright-traps detection tables and report (`pddkit traps detect`; Meeus et al.
2024, "Copyright Traps for Large Language Models", Table 2 and Figure 3), built from
results.json alone, so a copied folder still rebuilds."""

from __future__ import annotations

import json
from pathlib import Path

from pddkit.errors import PddkitError
from pddkit.reporting.page import Config, Image, Notice, Page, Summary, write_page
from pddkit.reporting.table import Num, Table, best_cells, to_text

STUDY = "traps detect"


def load_traps(out_dir: str | Path) -> dict:
    path = Path(out_dir) / "results.json"
    if not path.is_file():
        raise PddkitError(f"{out_dir} is not a traps detect folder: results.json is missing")
    results = json.loads(path.read_text())
    if results.get("study") != STUDY:
        raise PddkitError(f"{path} holds no traps detect results")
    return results


def _metric(cell: dict, method: str) -> dict | None:
    return (cell.get("metrics") or {}).get(method)


def _auc(cell: dict, method: str, ci: bool) -> Num:
    m = _metric(cell, method)
    if m is None:
        return Num(None)
    return Num(m["auc"], tuple(m["auc_ci"]) if ci and cell["ci"] else None)


def _epochs(results: dict) -> int | None:
    """The epochs the model trained on the injected documents; None when not given (and in
    a results.json written before they were recorded)."""
    return results.get("epochs")


def _repeats(r: int, epochs: int | None) -> str:
    """A repeat count with its exposures: "4 repeats = 48 exposures" (12 epochs), or
    "4 repeats, exposures unknown"."""
    head = f"{r} repeat" + ("" if r == 1 else "s")
    if epochs is None:
        return head + ", exposures unknown"
    return head + f" = {r * epochs} exposure" + ("" if r * epochs == 1 else "s")


def _cell_name(length: int, repeats: int, epochs: int | None) -> str:
    """"L25 x4 (48 exp.)": length, repeats and exposures; "L25 x4" when unknown."""
    return f"L{length} x{repeats}" + ("" if epochs is None else f" ({repeats * epochs} exp.)")


def exposures_sentence(results: dict) -> str:
    """What a repeat count means in exposures, under the Table 2 layout."""
    e = _epochs(results)
    if e is None:
        return ("R repeats: inserted R times into its document; each copy is seen once per "
                "epoch of training, and the epochs were not given, so the exposures "
                "(R x epochs) are unknown.")
    return (f"R repeats: inserted R times into its document; the model trained {e} "
            f"epoch{'' if e == 1 else 's'} on it, so it saw the trap R x {e} times (its "
            "exposures).")


def _exp_note(results: dict) -> tuple[str, ...]:
    """The note under a table whose rows or columns are named _cell_name."""
    e = _epochs(results)
    return (() if e is None else
            (f"xR: inserted R times; exp. = exposures, R x {e} epoch{'' if e == 1 else 's'}.",))


def bucket_names(results: dict) -> dict[int, str]:
    """Bucket -> its perplexity range "[lo, hi)": the generation manifest's bucket edges,
    else equal widths over its ppl_range (as the authors' generator), else "bucket b"."""
    gen = (results.get("configuration") or {}).get("generated") or {}
    edges = gen.get("bucket_edges")
    opts = gen.get("options") or {}
    rng, n = opts.get("ppl_range"), opts.get("buckets")
    if not edges and isinstance(rng, list) and len(rng) == 2 and isinstance(n, int) and n > 0:
        edges = [rng[0] + (rng[1] - rng[0]) * i / n for i in range(n + 1)]
    out = {}
    for b in results.get("buckets", []):
        ok = isinstance(edges, list) and 0 <= b < len(edges) - 1
        out[b] = f"[{edges[b]:g}, {edges[b + 1]:g})" if ok else f"bucket {b}"
    return out


def paper_table(results: dict, method: str) -> Table:
    """Meeus et al.'s Table 2 layout for one method: a row per trap length, a column per
    repeat count, AUC [95% CI] (intervals where each class has enough traps)."""
    lengths, repeats = results["lengths"], results["repeats"]
    cells = {(c["length"], c["repeats"]): c for c in results["table"]}
    rows = tuple((f"{L} tokens", *(_auc(cells[L, r], method, ci=True) if (L, r) in cells
                                   else "" for r in repeats)) for L in lengths)
    epochs = _epochs(results)
    counts = "; ".join(f"{c['length']}x{c['repeats']}: {c['n_members']} vs {c['n_nonmembers']}"
                       for c in results["table"])
    notes = (f"inserted traps of a length and repeat count against every held-out trap of "
             f"that length (all perplexity buckets); traps inserted vs held out per cell: "
             f"{counts}. Intervals where each class has at least "
             f"{results['ci_min_per_class']} traps.", exposures_sentence(results))
    return Table(header=("trap length", *(_repeats(r, epochs) for r in repeats)), rows=rows,
                 title=f"AUC [95% CI] of {method}, inserted vs held-out traps (Table 2 layout)",
                 notes=notes, id=f"table2-{method}", css_class="metrics")


def methods_table(results: dict) -> Table:
    """Every method's AUC per length x repeats cell (no intervals: they are in the
    per-method tables and results.json); the best method of each cell marked."""
    cells = results["table"]
    rows = tuple((m, *(_auc(c, m, ci=False) for c in cells)) for m in results["methods"])
    epochs = _epochs(results)
    return Table(header=("method", *(_cell_name(c["length"], c["repeats"], epochs)
                                     for c in cells)),
                 rows=rows, best=best_cells(rows, range(1, len(cells) + 1)),
                 title="AUC by trap length (L, tokens) x repeats, every method",
                 notes=("* = best method in the column.", *_exp_note(results)),
                 id="methods", css_class="metrics")


def bucket_table(results: dict, method: str) -> Table:
    """One method's AUC per length x repeats (rows) and perplexity bucket (columns), as
    the authors' Figure 3; a cell shows inserted / held-out counts beside the AUC."""
    names = bucket_names(results)
    buckets = results["buckets"]
    by = {(c["length"], c["repeats"], c["bucket"]): c for c in results["by_bucket"]}
    rows = []
    for c in results["table"]:
        row = [_cell_name(c["length"], c["repeats"], _epochs(results))]
        for b in buckets:
            cell = by.get((c["length"], c["repeats"], b))
            if cell is None:
                row.append("")
                continue
            n = f" ({cell['n_members']}/{cell['n_nonmembers']})"
            m = _metric(cell, method)
            row.append(Num(None if m is None else m["auc"], suffix=n))
        rows.append(tuple(row))
    return Table(header=("length x repeats", *(names[b] for b in buckets)),
                 rows=tuple(rows), id=f"buckets-{method}", css_class="metrics",
                 title=f"AUC of {method} by perplexity bucket (Figure 3 layout)",
                 notes=("(inserted/held-out traps in the cell): inserted traps of the row's "
                        "length, repeat count and bucket against held-out traps of the same "
                        "length and bucket.", *_exp_note(results)))


def summary_lines(results: dict) -> tuple[tuple[str, str], ...]:
    c, n = results["configuration"], results["counts"]
    return (("model", str(c["model"])),
            ("reference model", str(c.get("ref_model") or "none (no `ref`, the paper's method)")),
            ("traps", f"{c['traps']}: {n['inserted']} inserted, {n['held_out']} held out"
                      + (f", {n['not_inserted']} never inserted (not scored)"
                         if n.get("not_inserted") else "")),
            ("lengths", ", ".join(f"{L} tokens" for L in results["lengths"])
                        + _other_tokenizer(results.get("tokenizer") or {}, n)),
            ("repeats", ", ".join(str(r) for r in results["repeats"])
                        + " (copies of a trap in its document)"),
            ("exposures", _exposures_line(results)),
            ("methods", ", ".join(results["methods"])))


def _exposures_line(results: dict) -> str:
    """"12, 48, 192 (repeats x 12 epochs)", or why they are unknown."""
    e = _epochs(results)
    if e is None:
        return ("unknown: the epochs were not given (a trap inserted R times is seen "
                "R x epochs times)")
    return (", ".join(str(r * e) for r in results["repeats"])
            + f" (repeats x {e} epoch{'' if e == 1 else 's'}: how often each trap was seen)")


def _other_tokenizer(tok: dict, counts: dict) -> str:
    """After the lengths, when the target's tokenizer is not the generating one."""
    if tok.get("same") is not False:
        return ""
    return (f" of the generating tokenizer ({tok.get('generating') or 'unnamed'}'s), not the "
            f"target's: {counts.get('reencoded_other_length', 0)} traps have another length "
            "under the target's (scores.jsonl, 'tokens')")


def terminal_lines(results: dict) -> list[str]:
    """What `pddkit traps detect` prints: the paper's method in Table 2's layout, every
    method per cell, and the paper's method by perplexity bucket."""
    m = results["primary_method"]
    lines = [f"{k}: {v}" for k, v in summary_lines(results)]
    lines += ["", *to_text(paper_table(results, m)), "", *to_text(methods_table(results)),
              "", *to_text(bucket_table(results, m))]
    lines += [f"note: {n}" for n in results.get("notices", [])]
    return lines


def _series(results: dict, method: str):
    from pddkit.reporting.traps_plots import auc_by_bucket_png, auc_by_repeats_png

    cells = {(c["length"], c["repeats"]): c for c in results["table"]}
    lines = {}
    for L in results["lengths"]:
        points = []
        for r in results["repeats"]:
            m = _metric(cells[(L, r)], method) if (L, r) in cells else None
            ci = m is not None and cells[(L, r)]["ci"]
            points.append(None if m is None else (m["auc"], *(m["auc_ci"] if ci else (None, None))))
        lines[f"{L} tokens"] = points
    by = {(c["length"], c["repeats"], c["bucket"]): c for c in results["by_bucket"]}
    names = bucket_names(results)
    bucket_lines = {}
    for c in results["table"]:
        ys = []
        for b in results["buckets"]:
            cell = by.get((c["length"], c["repeats"], b))
            m = None if cell is None else _metric(cell, method)
            ys.append(None if m is None else m["auc"])
        bucket_lines[_cell_name(c["length"], c["repeats"], _epochs(results))] = ys
    return (auc_by_repeats_png(results["repeats"], lines, method, _epochs(results)),
            auc_by_bucket_png([names[b] for b in results["buckets"]], bucket_lines, method))


def report_page(results: dict) -> Page:
    m = results["primary_method"]
    blocks: list = [Summary(summary_lines(results))]
    if results.get("notices"):
        blocks.append(Notice(tuple(results["notices"]), lead="Notes:"))
    blocks += [paper_table(results, m), methods_table(results)]
    repeats_png, bucket_png = _series(results, m)
    blocks.append(Image(f"AUC of {m} against repeats", "traps_repeats.png", repeats_png))
    blocks.append(bucket_table(results, m))
    blocks.append(Image(f"AUC of {m} by perplexity bucket", "traps_buckets.png", bucket_png))
    blocks += [paper_table(results, x) for x in results["methods"] if x != m]
    blocks.append(Notice((
        "Meeus et al. 2024 (Copyright Traps for Large Language Models, ICML 2024): unique "
        "trap sequences are inserted many times into documents before publication; a model "
        "trained on them is tested by comparing the inserted traps with held-out ones "
        "generated the same way. Their method is the perplexity ratio of the target and a "
        "reference model (pddkit's `ref`, same ranking). " + results["protocol"],),
        lead="How it is measured:"))
    blocks.append(Config({"configuration": results["configuration"],
                          "counts": results["counts"], "models": results.get("models", {})},
                         provenance=results.get("provenance")))
    return Page("pddkit traps detect: were the copyright traps memorised?", tuple(blocks))


def write_traps_report(out_dir: str | Path) -> tuple[Path, Path]:
    """report.html (self-contained) and report.md (+ PNGs) in `out_dir`, from its
    results.json."""
    return write_page(report_page(load_traps(out_dir)), out_dir)
