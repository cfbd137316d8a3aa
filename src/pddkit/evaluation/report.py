"""report.html (self-contained: images inline, no external scripts or fonts) and report.md
(PNG files beside it), rebuilt from a results folder alone: `pddkit report DIR`."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

import numpy as np

from pddkit.errors import PddkitError
from pddkit.evaluation import plots
from pddkit.evaluation.metrics import FPR_TARGETS

CSS = """body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;
max-width:1100px;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}td:first-child,th:first-child
{text-align:left}tr.baseline td{color:#666;font-style:italic}.best{font-weight:bold;
background:#e6f4ea}.warn{background:#fdecea;border-left:4px solid #d93025;padding:.6em 1em}
.ok{background:#e6f4ea;border-left:4px solid #188038;padding:.6em 1em}img{max-width:100%}
#run-summary{list-style:none;padding:0}#run-summary li{margin:.2em 0}
pre{background:#f6f8fa;padding:1em;overflow:auto;font-size:12px}"""

# lets a headless browser report how many images actually decoded (used by the tests)
CHECK = ("<script>window.addEventListener('load',function(){var i=[].slice.call(document.images);"
         "document.body.setAttribute('data-images-decoded',i.filter(function(x){return x.complete"
         "&&x.naturalWidth>0}).length+'/'+i.length)})</script>")


def load_results(out_dir: str | Path) -> tuple[dict, list[dict]]:
    out = Path(out_dir)
    res_path, scores_path = out / "results.json", out / "scores.jsonl"
    for p in (res_path, scores_path):
        if not p.is_file():
            raise PddkitError(f"{out} is not a results folder: {p.name} is missing")
    try:
        results = json.loads(res_path.read_text())
        rows = [json.loads(line) for line in scores_path.read_text().splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise PddkitError(f"{out}: cannot read the results ({e.msg} at line {e.lineno})") from None
    return results, rows


def _fmt(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def _table(results: dict) -> tuple[list[str], list[list[str]], list[str], list[bool]]:
    """Header, cell rows, row names and baseline flags; best detection method marked ▲."""
    methods = {k: v for k, v in results["methods"].items() if v["metrics"]}
    cols = ["auc", *[f"tpr@{t:g}" for t in FPR_TARGETS]]
    best = {}
    for c in cols:
        cands = {k: v["metrics"][c] for k, v in methods.items() if k != "blind"}
        best[c] = max(cands, key=lambda k: cands[k]) if cands else None
    header = ["method", "AUC [95% CI]", *[f"TPR@{t:.0%} FPR [95% CI]" for t in FPR_TARGETS]]
    rows, names, baseline = [], [], []
    for name, v in methods.items():
        m = v["metrics"]
        cells = [name]
        for c in cols:
            lo, hi = m[c + "_ci"]
            mark = " ▲" if best[c] == name else ""
            cells.append(f"{_fmt(m[c])}{mark} [{_fmt(lo)}, {_fmt(hi)}]")
        rows.append(cells)
        names.append(name)
        baseline.append(name == "blind")
    return header, rows, names, baseline


_PASSES_OVER_TEXTS = {"target": "target pass", "lowercase": "lowercase pass",
                      "reference": "reference pass", "probe": "probe pass"}


def _model_line(role: str, info: dict) -> str:
    if role == "frequency_table":
        extra = [f"tokenizer {info['tokenizer']}"] if info.get("tokenizer") else []
        if info.get("total_tokens") is not None:
            extra.append(f"{info['total_tokens']:,} tokens")
        return f"frequency table {info.get('path', '?')}" + (f" ({', '.join(extra)})"
                                                            if extra else "")
    extra = [f"{k} {info[k]}" for k in ("backend", "dtype", "device") if info.get(k)]
    return f"{role} {info.get('name', '?')}" + (f" ({', '.join(extra)})" if extra else "")


def _summary(results: dict) -> list[tuple[str, str]]:
    """(label, value) lines of the report header: model(s), data source, counts."""
    models = results.get("models") or {}
    order = sorted(models, key=lambda r: (r != "target", r != "reference", r))
    lines = [("model" if len(models) < 2 else "models",
              "; ".join(_model_line(r, models[r]) for r in order) or "none (model-free run)")]
    lines.append(("data", str((results.get("config") or {}).get("dataset", "?"))))
    c = results.get("counts") or {}
    if "samples" in c:
        text = f"{c['samples']} texts"
        if c.get("members") or c.get("nonmembers"):
            text += f" ({c.get('members', 0)} members, {c.get('nonmembers', 0)} non-members)"
        text += f", {c.get('skipped', 0)} skipped"
        if c.get("limited_from") is not None:
            text += f"; a sample of {c['samples']} of {c['limited_from']} texts (limit)"
        lines.append(("texts", text))
    if results.get("metrics_on", "all texts") != "all texts":
        lines.append(("metrics on", results["metrics_on"]))
    return lines


def _truncation(counts: dict) -> list[str]:
    """One sentence per pass that cut texts to the context; empty when none was cut."""
    n = counts.get("samples", "?")
    out = []
    for key, cut in (counts.get("truncated") or {}).items():
        if not cut:
            continue
        if key in _PASSES_OVER_TEXTS:
            out.append(f"{cut} of {n} texts were longer than the context and were scored on "
                       f"their first tokens ({_PASSES_OVER_TEXTS[key]})")
        elif key == "neighbors":
            out.append(f"{cut} of {counts.get('neighbor_texts', '?')} neighbour texts were "
                       "longer than the context and were scored on their first tokens "
                       "(neighbour pass)")
        elif key == "neighbor_mask_model":
            out.append(f"{cut} of {n} texts were longer than the mask model's context; their "
                       "neighbours were made from their first tokens")
        elif key == "probe_data":
            out.append(f"{cut} probe training texts were longer than the context and were cut "
                       "to their first tokens")
        else:
            out.append(f"{cut} texts were cut to the context ({key})")
    return out


def _cache(counts: dict) -> str | None:
    """Statistics cache hits per pass, or None when the run used no cache."""
    cache = counts.get("cache")
    if not cache:
        return None
    parts = [f"{desc}: {v['hits']} of {v['hits'] + v['misses']} texts from the cache"
             for desc, v in cache.items()]
    return "statistics cache: " + "; ".join(parts)


def write_report(out_dir: str | Path, title: str | None = None) -> tuple[Path, Path]:
    """Write report.html and report.md (+ PNGs) into the results folder `out_dir`."""
    out = Path(out_dir)
    results, rows = load_results(out)
    labels = np.array([r["label"] for r in rows], dtype=float)
    if np.isnan(labels).any() or len(set(labels.tolist())) < 2:
        raise PddkitError(f"{out} holds unlabelled scores: a report needs members and non-members")
    labels = labels.astype(int)
    names = [k for k, v in results["methods"].items() if v["metrics"]]
    plotted = [r for r in rows if r.get("split", "test") == "test"]  # the metrics' texts
    plot_labels = np.array([r["label"] for r in plotted], dtype=int)
    scores = {k: np.array([r[k] for r in plotted], dtype=float) for k in names}
    images = {
        "roc.png": ("ROC curves", plots.roc_png(plot_labels, scores, loglog=False)),
        "roc_loglog.png": ("ROC curves, log-log",
                           plots.roc_png(plot_labels, scores, loglog=True)),
        "histograms.png": ("Score histograms", plots.histograms_png(plot_labels, scores)),
    }
    vheader, vrows = _validation_rows(results)
    surp = next((v["validation"] for v in results["methods"].values()
                 if v["method"] == "surp" and v.get("validation")), None)
    if surp:
        from pddkit.methods.grid import grids

        g = grids()["surp"].values
        grid = np.array(surp["val_auc_grid"]).reshape(len(g["entropy_threshold"]), len(g["k"]))
        images["surp_heatmap.png"] = ("SURP: validation AUC over its two parameters",
                                      plots.heatmap_png(grid, g["entropy_threshold"], g["k"],
                                                        "entropy threshold", "percentile k",
                                                        "SURP validation AUC"))
    for fname, (_, png) in images.items():
        (out / fname).write_bytes(png)
    header, cells, _, baseline = _table(results)
    blind = results.get("blind_baseline")
    title = title or f"pddkit report: {results['config'].get('dataset', out.name)}"
    config = {k: results[k] for k in ("config", "models", "counts", "timings_s", "notices",
                                      "pddkit_version") if k in results}
    counts = results.get("counts") or {}
    head = (_summary(results), _truncation(counts), _cache(counts))
    html_path = out / "report.html"
    html_path.write_text(_html(title, head, header, cells, baseline, blind, images, config,
                               (vheader, vrows)))
    md_path = out / "report.md"
    md_path.write_text(_markdown(title, head, header, cells, blind, images, config,
                                 (vheader, vrows)))
    return html_path, md_path


def _validation_rows(results: dict) -> tuple[list[str], list[list[str]]]:
    """Default value, value chosen on validation (test metrics), and the oracle."""
    header = ["method", "default value: test AUC", "chosen on validation", "test AUC [95% CI]",
              "oracle (best on test)"]
    rows = []
    for name, v in results["methods"].items():
        val = v.get("validation")
        if not val:
            continue
        fmt = lambda p: ",".join(f"{k}={x:g}" for k, x in p.items())  # noqa: E731
        lo, hi = val["test"]["auc_ci"]
        default = val.get("default") or v["params"]
        rows.append([name, f"{fmt(default)}: {_fmt(v['metrics']['auc'])}", fmt(val["chosen"]),
                     f"{_fmt(val['test']['auc'])} [{_fmt(lo)}, {_fmt(hi)}]",
                     f"{fmt(val['oracle']['params'])}: {_fmt(val['oracle']['auc'])} (oracle)"])
    return header, rows


def _html(title, head, header, cells, baseline, blind, images, config, validation) -> str:
    e = html.escape
    summary, truncation, cache = head
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>",
             f"<style>{CSS}</style></head><body><h1>{e(title)}</h1>", "<ul id='run-summary'>"]
    parts += [f"<li><b>{e(k)}</b>: {e(v)}</li>" for k, v in summary]
    parts.append("</ul>")
    if truncation:
        parts.append("<p class='warn' id='truncation'><b>Truncated texts.</b> "
                     + "<br>".join(e(t) for t in truncation) + "</p>")
    if blind:
        cls = "warn" if blind["warn"] else "ok"
        parts.append(f"<p class='{cls}' id='blind-verdict'>{e(blind['message'])}</p>")
    parts.append("<h2>Metrics</h2><table id='metrics'><tr>"
                 + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>")
    for row, base in zip(cells, baseline):
        tds = "".join(f"<td class='best'>{e(c)}</td>" if "▲" in c else f"<td>{e(c)}</td>"
                      for c in row)
        parts.append(f"<tr{' class=baseline' if base else ''}>{tds}</tr>")
    parts.append("</table><p>▲ best detection method in the column (the blind baseline, in "
                 "italics, is not a detection method). Intervals: 95% percentile bootstrap.</p>")
    vheader, vrows = validation
    if vrows:
        parts.append("<h2>Hyperparameters chosen on validation data</h2><table id='validation'>"
                     "<tr>" + "".join(f"<th>{e(h)}</th>" for h in vheader) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in vrows]
        parts.append("</table><p>Metrics on the test part. The oracle is the value that did "
                     "best on the test set itself: shown for comparison, not a real result.</p>")
    for _fname, (caption, png) in images.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<h2>{e(caption)}</h2><img alt='{e(caption)}' "
                     f"src='data:image/png;base64,{data}'>")
    parts.append("<h2>Configuration</h2>")
    if cache:
        parts.append(f"<p id='cache'>{e(cache)}</p>")
    parts.append(f"<pre>{e(json.dumps(config, indent=2))}</pre>")
    parts.append(CHECK + "</body></html>")
    return "\n".join(parts)


def _markdown(title, head, header, cells, blind, images, config, validation) -> str:
    summary, truncation, cache = head
    lines = [f"# {title}", "", *[f"- **{k}**: {v}" for k, v in summary], ""]
    if truncation:
        lines += ["> **Truncated texts.** " + "; ".join(truncation) + ".", ""]
    if blind:
        lines += [("> **" if blind["warn"] else "> ") + blind["message"]
                  + ("**" if blind["warn"] else ""), ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in cells]
    lines += ["", "▲ best detection method in the column; `blind` is the model-free baseline. "
              "Intervals: 95% percentile bootstrap.", ""]
    vheader, vrows = validation
    if vrows:
        lines += ["## Hyperparameters chosen on validation data", "",
                  "| " + " | ".join(vheader) + " |", "|" + "---|" * len(vheader)]
        lines += ["| " + " | ".join(r) + " |" for r in vrows]
        lines += ["", "Oracle = best on the test set itself; not a real result.", ""]
    for fname, (caption, _) in images.items():
        lines += [f"## {caption}", "", f"![{caption}]({fname})", ""]
    lines += ["## Configuration", ""] + ([cache, ""] if cache else [])
    lines += ["```json", json.dumps(config, indent=2), "```", ""]
    return "\n".join(lines)
