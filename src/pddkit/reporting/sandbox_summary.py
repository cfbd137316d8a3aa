"""Sandbox summary: AUC per method per window length (and per sweep value), as terminal
tables, report.md and a self-contained report.html linking each window's full report; with
traps, each run's AUC of inserted vs held-out traps by length x repeats (its traps report
linked).
Everything is read from summary.json's content and the folder it sits in, so a sandbox
folder that was moved or copied still rebuilds (`pddkit report DIR`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pddkit.reporting.blind_verdict_text import RULE as BLIND_RULE
from pddkit.reporting.page import Config, Image, Links, Notice, Page, write_page
from pddkit.reporting.table import Num, Table, best_cells, fmt, to_text


def _run_keys(run: dict) -> list[str]:
    return [*run["windows"], *([CONTAMINATION] if run.get(CONTAMINATION) else [])]


def result_dirs(out: str | Path, summary: dict) -> list[Path]:
    """Every results folder of a sandbox: each run's windows, and its contamination."""
    return [result_dir(out, r, key) for r in summary["runs"] for key in _run_keys(r)]


def result_dir(out: str | Path, run: dict, key: str) -> Path:
    """A results folder (window length or CONTAMINATION) inside the sandbox folder `out`."""
    if key != CONTAMINATION:
        return window_dir(out, run, key)
    return Path(out) / run[CONTAMINATION]["dir"]


def window_dir(out: str | Path, run: dict, window: str) -> Path:
    """A window's results folder inside the sandbox folder `out`. summary.json names it
    relative to `out`; an older one holds the absolute path it had when it was written,
    of which only the last two parts (run, window) are kept."""
    d = Path(run["windows"][window]["dir"])
    return Path(out) / (d if not d.is_absolute() else Path(*d.parts[-2:]))


CONTAMINATION = "contamination"  # the key of a run's contaminants-vs-held-out evaluation


def _entry(run: dict, key: str) -> dict:
    return run[CONTAMINATION] if key == CONTAMINATION else run["windows"][key]


def _grid(summary: dict, key: str) -> tuple[list[str], list[str], dict]:
    """Columns (sweep values, or window lengths for a single run), methods, cells; `key`
    is a window length or CONTAMINATION."""
    runs = summary["runs"]
    if summary["sweep"]:
        cols = [r["name"].split("=", 1)[1] for r in runs]
        data = {c: _entry(r, key) for c, r in zip(cols, runs)}
    elif key == CONTAMINATION:
        cols = ["examples"]
        data = {"examples": runs[0][CONTAMINATION]}
    else:
        cols = list(runs[0]["windows"])
        data = runs[0]["windows"]
    methods = list(next(iter(data.values()))["auc"])
    return cols, methods, data


def _keys(summary: dict) -> list[str]:
    """What the runs were evaluated on: window lengths, then CONTAMINATION when present."""
    return ([str(w) for w in summary["config"]["windows"]]
            + ([CONTAMINATION] if summary.get(CONTAMINATION) else []))


def _table(title: str, header: tuple, methods: list[str], cols: list[str], cell) -> Table:
    rows = tuple((m, *(cell(c, m) for c in cols)) for m in methods)
    baseline = frozenset(i for i, m in enumerate(methods) if m == "blind")
    return Table(header=header, rows=rows, title=title, mark="*", baseline=baseline,
                 best=best_cells(rows, range(1, len(cols) + 1), exclude=baseline),
                 css_class="metrics")


def tables(summary: dict) -> list[Table]:
    """One table per window length in a sweep (columns: sweep values), else one (columns:
    window lengths, with CIs); with contamination, its table (and, for a single run, AUC
    by the number of copies a contaminant got); the best detection method per column
    marked *."""
    windows = [str(w) for w in summary["config"]["windows"]]
    keys = [k for k in _keys(summary) if summary["sweep"] or k in (windows[0], CONTAMINATION)]
    out = []
    for key in keys:
        cols, methods, data = _grid(summary, key)
        what = ("contaminants vs held-out examples" if key == CONTAMINATION
                else f"{key}-word windows")
        if summary["sweep"]:
            knob = summary["sweep"]["knob"]
            title = f"AUC by {knob}, {what}"
            header = ("method", *[f"{knob}={c}" for c in cols])
        elif key == CONTAMINATION:
            title = f"AUC [95% CI], {what}"
            header = ("method", f"{data['examples']['texts']} examples")
        else:
            title = "AUC [95% CI] by window length"
            header = ("method", *[f"{c} words" for c in cols])
        out.append(_table(title, header, methods, cols, lambda c, m, data=data: Num(
            data[c]["auc"][m], None if summary["sweep"] else tuple(data[c]["auc_ci"][m]))))
    if summary.get(CONTAMINATION) and not summary["sweep"]:
        c = summary["runs"][0][CONTAMINATION]
        by_k = c["auc_by_occurrences"]
        ks = list(by_k)
        out.append(_table("AUC of the contaminants inserted k times (per epoch) vs all held-out "
                          "examples (contaminants in the bin)",
                          ("method", *[f"k={k} ({c['occurrences'][k]})" for k in ks]),
                          list(c["auc"]), ks, lambda k, m: Num(by_k[k][m], None)))
    return out


def document_tables(summary: dict) -> list[Table]:
    """A single run with a document level: per window length, its documents table and the
    document AUC by the number of windows per document used (reporting/document_tables)."""
    from pddkit.reporting.document_tables import curve_table, documents_table

    if summary["sweep"]:
        return []
    out = []
    for w, entry in summary["runs"][0]["windows"].items():
        if not entry.get("documents"):
            continue
        results = {"methods": {m: {"metrics": {"auc": a}} for m, a in entry["auc"].items()},
                   "documents": entry["documents"]}
        for table in (documents_table(results, terminal=True), curve_table(results, terminal=True)):
            if table is not None:
                out.append(replace(table, title=f"{w}-word windows, {table.title.rstrip(':')}",
                                   header=tuple(h.replace("text", "window") if i >= 2 else h
                                                for i, h in enumerate(table.header))))
    return out


TRAPS = "traps"  # the key of a run's inserted-vs-held-out traps evaluation (sandbox.traps)


def traps_tables(summary: dict) -> list[Table]:
    """Per run with traps: AUC of the traps inserted R times vs the held-out traps of their
    length, rows methods, columns length x repeats (inserted traps in the cell)."""
    out = []
    for run in summary["runs"]:
        t = run.get(TRAPS)
        if not t:
            continue
        cells = {f"{c['length']}x{c['repeats']}": c for c in t["cells"]}
        held = {c["length"]: c["nonmembers"] for c in t["cells"]}
        epochs = t.get("epochs")
        title = ("Traps: AUC by length x repeats" + (f", {run['name']}" if summary["sweep"] else "")
                 + (f" (R copies in its carrier, each seen once per epoch: {epochs} "
                    f"epoch{'' if epochs == 1 else 's'}, R x {epochs} exposures)"
                    if epochs else "")
                 + " (inserted vs held-out traps of the length: "
                 + ", ".join(f"{n} held out of length {L}" for L, n in held.items()) + ")")
        header = ("method", *[f"L={c['length']}, R={c['repeats']}"
                              + (f" = {c['exposures']} exposure"
                                 + ("" if c["exposures"] == 1 else "s") if c.get("exposures")
                                 else "")
                              + f" ({c['members']})" for c in cells.values()])
        out.append(_table(title, header, t["methods"], list(cells), lambda k, m, cells=cells: Num(
            cells[k]["auc"][m], None if summary["sweep"] or not cells[k]["auc_ci"][m]
            else tuple(cells[k]["auc_ci"][m]))))
    return out


def traps_note(summary: dict) -> str | None:
    """What became of the generated traps (None without traps)."""
    c = summary.get(TRAPS)
    if not c:
        return None
    per = ", ".join(f"{n} x R={r}" for r, n in c["traps_per_repeats"].items())
    return (f"Traps: {c['generated']} generated with the reference model, {c['dropped']} dropped "
            f"for sharing text with the corpus or another trap; {c['inserted']} inserted ({per}), "
            f"each into its own carrier document (joined from {c['carrier_documents']} unused "
            f"corpus documents, trained on once per epoch, so a trap inserted R times is seen "
            f"R x epochs times), {c['held_out']} held out.")


def ground_truth_line(summary: dict) -> str | None:
    """The verified-ground-truth sentence (None in a summary written before it existed)."""
    return (summary.get("ground_truth") or {}).get("line")


def _blind_warnings(summary: dict) -> list[str]:
    return [f"Warning: {r['name']}, {w}-word windows: the blind baseline reaches AUC "
            f"{fmt(d['auc']['blind'])}; members differ from non-members "
            "without any model."
            for r in summary["runs"] for w, d in r["windows"].items() if d["blind_warn"]] + [
        f"Warning: {r['name']}, contamination: the blind baseline reaches AUC "
        f"{fmt(r[CONTAMINATION]['auc']['blind'])}; contaminants differ from held-out examples "
        "without any model." for r in summary["runs"]
        if r.get(CONTAMINATION) and r[CONTAMINATION]["blind_warn"]]


def _inverted_notes(summary: dict) -> list[str]:
    """A note per run, window length and detection method whose AUC interval lies wholly
    below 0.5 (its signal is inverted on that data)."""
    from pddkit.reporting.run_tables import inverted_notes

    out = []
    for r in summary["runs"]:
        for w, d in r["windows"].items():
            ms = {m: {"auc": a, "auc_ci": d["auc_ci"][m]} for m, a in d["auc"].items()
                  if (d.get("auc_ci") or {}).get(m) is not None}
            where = f"{r['name']}, {w}-word windows: " if summary["sweep"] else f"{w}-word windows: "
            out += [where + n for n in inverted_notes(ms)]
    return out


def summary_text(summary: dict) -> str:
    line = ground_truth_line(summary)
    lines = [line] if line else []
    for table in [*tables(summary), *document_tables(summary), *traps_tables(summary)]:
        lines += ["", *to_text(table)]
    if traps_note(summary):
        lines += ["", traps_note(summary)]
    lines.append("* = best detection method in the column; blind = model-free baseline "
                 f"({BLIND_RULE})")
    return "\n".join(lines + _inverted_notes(summary) + _blind_warnings(summary))


def write_summary(out: str | Path, summary: dict) -> Path:
    """report.html + report.md (+ sweep PNGs) at the top of the sandbox folder `out`;
    returns the HTML path. Links to each window's report are relative to `out`."""
    from pddkit.reporting import plots

    out = Path(out)
    corpus = summary["corpus"]
    blocks: list = [Notice((f"Corpus {corpus['name']}: {corpus['documents']} documents. "
                            "Members are documents the target model was trained on; "
                            "non-members come from the same corpus and were never trained "
                            "on, so membership is known.",))]
    line = ground_truth_line(summary)
    if line:
        nd = corpus.get("near_duplicates") or {}
        dedup = (f"Before training, {nd['dropped']} documents were dropped and {nd['moved']} "
                 f"placed with the role they share a run of {nd['ngram']} words with, so no two "
                 "roles share one." if nd else "")
        blocks.append(Notice((dedup,) if dedup else (), kind="verified",
                             lead=f"{line[:1].upper() + line[1:]}."))
    blocks += tables(summary)
    blocks += document_tables(summary)
    blocks += traps_tables(summary)
    if traps_note(summary):
        blocks.append(Notice((traps_note(summary),)))
    blocks.append(Notice(("* best detection method in the column; blind = model-free baseline, "
                          "which should stay near 0.5 here because members and non-members "
                          "are drawn from one corpus.",)))
    if _inverted_notes(summary):
        blocks.append(Notice(tuple(_inverted_notes(summary))))
    if summary["sweep"]:
        knob = summary["sweep"]["knob"]
        for key in _keys(summary):
            cols, methods, data = _grid(summary, key)
            series = {m: [data[c]["auc"][m] for c in cols] for m in methods}
            caption = f"AUC vs {knob}, " + ("contaminants vs held-out examples"
                                            if key == CONTAMINATION else f"{key}-word windows")
            blocks.append(Image(caption, f"sweep_{key}.png",
                                plots.lines_png(knob, cols, series, caption)))
    links = tuple((f"{r['name']}, " + ("contamination" if key == CONTAMINATION
                                        else f"{key}-word windows"),
                   (result_dir(".", r, key) / "report.html").as_posix())
                  for r in summary["runs"] for key in _run_keys(r))
    links += tuple((f"{r['name']}, traps", f"{r[TRAPS]['dir']}/report.html")
                   for r in summary["runs"] if r.get(TRAPS))
    blocks.append(Links("Full reports", links))
    blocks.append(Config({"config": summary["config"], "corpus": corpus},
                         provenance=summary.get("provenance")))
    html_path, _ = write_page(Page("pddkit sandbox", tuple(blocks)), out)
    return html_path
