"""Sandbox summary: AUC per method per window length (and per sweep value), as terminal
tables, report.md and a self-contained report.html linking each window's full report."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from pddkit.evaluation.blind import WARN_AUC
from pddkit.evaluation.report import CHECK, CSS


def _grid(summary: dict, window: str) -> tuple[list[str], list[str], dict]:
    """Columns (sweep values, or window lengths for a single run), methods, cells."""
    runs = summary["runs"]
    if summary["sweep"]:
        cols = [r["name"].split("=", 1)[1] for r in runs]
        data = {c: r["windows"][window] for c, r in zip(cols, runs)}
    else:
        cols = list(runs[0]["windows"])
        data = runs[0]["windows"]
    methods = list(next(iter(data.values()))["auc"])
    return cols, methods, data


def _tables(summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) per table; best detection method per column marked *."""
    windows = [str(w) for w in summary["config"]["windows"]]
    out = []
    for window in windows if summary["sweep"] else [windows[0]]:
        cols, methods, data = _grid(summary, window)
        best = {c: max((m for m in methods if m != "blind"), key=lambda m: data[c]["auc"][m])
                for c in cols}
        if summary["sweep"]:
            knob = summary["sweep"]["knob"]
            title = f"AUC by {knob}, {window}-word windows"
            header = ["method", *[f"{knob}={c}" for c in cols]]
        else:
            title = "AUC [95% CI] by window length"
            header = ["method", *[f"{c} words" for c in cols]]
        rows = []
        for m in methods:
            cells = [m]
            for c in cols:
                lo, hi = data[c]["auc_ci"][m]
                star = "*" if best[c] == m else " "
                cells.append(f"{data[c]['auc'][m]:.3f}{star}" if summary["sweep"] else
                             f"{data[c]['auc'][m]:.3f}{star} [{lo:.3f}, {hi:.3f}]")
            rows.append(cells)
        out.append((title, header, rows))
    return out


def ground_truth_line(summary: dict) -> str | None:
    """The verified-ground-truth sentence (None in a summary written before it existed)."""
    return (summary.get("ground_truth") or {}).get("line")


def summary_text(summary: dict) -> str:
    line = ground_truth_line(summary)
    lines = [line] if line else []
    for title, header, rows in _tables(summary):
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines += ["", title, "  ".join(h.ljust(w) for h, w in zip(header, widths)),
                  "  ".join("-" * w for w in widths)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.append("* = best detection method in the column; blind = model-free baseline "
                 f"(a warning is raised at AUC >= {WARN_AUC:.2f})")
    for r in summary["runs"]:
        for w, d in r["windows"].items():
            if d["blind_warn"]:
                lines.append(f"Warning: {r['name']}, {w}-word windows: the blind baseline reaches "
                             f"AUC {d['auc']['blind']:.3f}; members differ from non-members "
                             "without any model.")
    return "\n".join(lines)


def write_summary(out: Path, summary: dict) -> Path:
    """report.html + report.md at the top of the sandbox folder; returns the HTML path."""
    from pddkit.evaluation import plots

    images = {}
    if summary["sweep"]:
        knob = summary["sweep"]["knob"]
        for w in summary["config"]["windows"]:
            cols, methods, data = _grid(summary, str(w))
            series = {m: [data[c]["auc"][m] for c in cols] for m in methods}
            png = plots.lines_png(knob, cols, series, f"AUC vs {knob}, {w}-word windows")
            images[f"sweep_{w}.png"] = (f"AUC vs {knob}, {w}-word windows", png)
    for fname, (_, png) in images.items():
        (out / fname).write_bytes(png)
    links = [(f"{r['name']}, {w}-word windows",
              str(Path(d["dir"]).relative_to(out) / "report.html"))
             for r in summary["runs"] for w, d in r["windows"].items()]
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>pddkit sandbox</title>"
             f"<style>{CSS}</style></head><body><h1>pddkit sandbox</h1>",
             f"<p>Corpus {e(summary['corpus']['name'])}: {summary['corpus']['documents']} "
             "documents. Members are documents the target model was trained on; non-members "
             "come from the same corpus and were never trained on, so membership is known.</p>"]
    md = ["# pddkit sandbox", "", f"Corpus {summary['corpus']['name']}: "
          f"{summary['corpus']['documents']} documents.", ""]
    line = ground_truth_line(summary)
    if line:
        nd = summary["corpus"].get("near_duplicates") or {}
        dedup = (f" Before training, {nd['dropped']} documents were dropped and {nd['moved']} "
                 f"placed with the role they share a run of {nd['ngram']} words with, so no two "
                 "roles share one." if nd else "")
        parts.append(f"<p class='verified'><b>{e(line[:1].upper() + line[1:])}.</b>{e(dedup)}</p>")
        md += [f"**{line[:1].upper() + line[1:]}.**{dedup}", ""]
    for title, header, rows in _tables(summary):
        parts.append(f"<h2>{e(title)}</h2><table class='metrics'><tr>"
                     + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>")
        for r in rows:
            cls = " class=baseline" if r[0] == "blind" else ""
            parts.append(f"<tr{cls}>" + "".join(
                f"<td class='best'>{e(c)}</td>" if "*" in c else f"<td>{e(c)}</td>" for c in r)
                + "</tr>")
        parts.append("</table>")
        md += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        md += ["| " + " | ".join(r) + " |" for r in rows] + [""]
    note = ("* best detection method in the column; blind = model-free baseline, which should "
            "stay near 0.5 here because members and non-members are drawn from one corpus.")
    parts.append(f"<p>{e(note)}</p>")
    md += [note, ""]
    for fname, (caption, png) in images.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<h2>{e(caption)}</h2><img alt='{e(caption)}' "
                     f"src='data:image/png;base64,{data}'>")
        md += [f"![{caption}]({fname})", ""]
    parts.append("<h2>Full reports</h2><ul>" + "".join(
        f"<li><a href='{e(href)}'>{e(name)}</a></li>" for name, href in links) + "</ul>")
    md += ["## Full reports", ""] + [f"- [{name}]({href})" for name, href in links] + [""]
    cfg = json.dumps({"config": summary["config"], "corpus": summary["corpus"]}, indent=2)
    parts.append(f"<h2>Configuration</h2><pre>{e(cfg)}</pre>{CHECK}</body></html>")
    md += ["## Configuration", "", "```json", cfg, "```", ""]
    (out / "report.md").write_text("\n".join(md))
    path = out / "report.html"
    path.write_text("\n".join(parts))
    return path
