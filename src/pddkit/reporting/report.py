"""report.html (self-contained: images inline, no external scripts or fonts) and report.md
(PNG files beside it), rebuilt from a results folder alone: `pddkit report DIR`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pddkit.errors import PddkitError
from pddkit.reporting import plots
from pddkit.reporting.page import Config, Image, Notice, Page, Summary, write_page
from pddkit.reporting.run_tables import (
    blind_subset_warning,
    corpus_sentence,
    corpus_table,
    metrics_table,
    subset_table,
    validation_table,
)
from pddkit.reporting.table import Num, Table


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
        from pddkit.data.jsonl import json_error

        raise PddkitError(f"{out}: cannot read the results ({json_error(e, 'line')})") from None
    return results, rows


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


def run_summary(results: dict) -> Summary:
    """The (label, value) lines of the report header: model(s), data source, counts."""
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
        on = results["metrics_on"]
        first = next((v["metrics"] for v in (results.get("methods") or {}).values()
                      if v.get("metrics")), None)
        if first is not None:  # the texts the metrics use (the rest chose hyperparameters)
            on += (f": {first['n_members'] + first['n_nonmembers']} texts ({first['n_members']} "
                   f"members, {first['n_nonmembers']} non-members)")
        lines.append(("metrics on", on))
    return Summary(tuple(lines))


def fallbacks(counts: dict) -> list[str]:
    """One sentence per method fallback that scored some texts, with their share."""
    from pddkit.methods.base import fallback_line

    n = counts.get("samples", 0)
    return [fallback_line(label, why, k, n) for label, per in (counts.get("fallbacks") or {}).items()
            for why, k in per.items()]


def truncation(counts: dict) -> list[str]:
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


def stages_not_done(results: dict) -> list[str]:
    """One line per optional stage (engine/stages.py) that was skipped or failed, with its
    reason, from results.json's `stages`."""
    return [f"{name} {v['status']}: {v.get('reason', '')}"
            for name, v in (results.get("stages") or {}).items()
            if v.get("status") in ("skipped", "failed")]


def cache_line(counts: dict) -> str | None:
    """Statistics cache hits per pass, or None when the run used no cache."""
    cache = counts.get("cache")
    if not cache:
        return None
    parts = [f"{desc}: {v['hits']} of {v['hits'] + v['misses']} texts from the cache"
             for desc, v in cache.items()]
    return "statistics cache: " + "; ".join(parts)


def _images(results: dict, rows: list[dict]) -> list[Image]:
    """ROC curves (linear and log-log) and score histograms of the texts the metrics are
    on (the test part when validating); the SURP validation heatmap when it was validated."""
    names = [k for k, v in results["methods"].items() if v["metrics"]]
    plotted = [r for r in rows if r.get("split", "test") == "test"]
    labels = np.array([r["label"] for r in plotted], dtype=int)
    scores = {k: np.array([r[k] for r in plotted], dtype=float) for k in names}
    memo = _FigureMemo.of(results.get("config", {}).get("cache"), labels, scores)
    images = [Image("ROC curves", "roc.png",
                    memo.png("roc", lambda: plots.roc_png(labels, scores, loglog=False))),
              Image("ROC curves, log-log", "roc_loglog.png",
                    memo.png("roc_loglog", lambda: plots.roc_png(labels, scores, loglog=True))),
              Image("Score histograms", "histograms.png",
                    memo.png("histograms", lambda: plots.histograms_png(labels, scores)))]
    surp = next((v["validation"] for v in results["methods"].values()
                 if v["method"] == "surp" and v.get("validation")), None)
    if surp:
        from pddkit.methods import grids

        g = grids()["surp"].values
        grid = np.array(surp["val_auc_grid"]).reshape(len(g["entropy_threshold"]), len(g["k"]))
        caption = "SURP: validation AUC over its two parameters"
        images.append(Image(caption, "surp_heatmap.png", plots.heatmap_png(
            grid, g["entropy_threshold"], g["k"], "entropy threshold", "percentile k",
            "SURP validation AUC")))
    return images


def _document_blocks(results: dict, out: Path) -> list:
    """The document level: its two tables, a document ROC figure per aggregation
    (from documents.jsonl: each row's scored documents) and the AUC by texts per document."""
    from pddkit.reporting.document_tables import curve_table, documents_table

    doc = results.get("documents")
    table = documents_table(results)
    if table is None:
        return []
    blocks: list = [table]
    path = out / "documents.jsonl"
    if not path.is_file():
        raise PddkitError(f"{out} is not a results folder: results.json has a document level "
                          "but documents.jsonl is missing")
    docs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for agg in doc["aggregations"]:
        labels_of = [k for k, r in doc["rows"].items() if r["aggregation"] == agg]
        scored = [d for d in docs if d.get(labels_of[0]) is not None]
        y = np.array([d["label"] for d in scored], dtype=int)
        scores = {doc["rows"][k]["method"]: np.array([d[k] for d in scored], dtype=float)
                  for k in labels_of}
        blocks.append(Image(f"Document ROC curves ({agg}, {len(scored)} documents)",
                            f"documents_roc_{agg}.png", plots.roc_png(y, scores, loglog=False)))
    curve = curve_table(results)
    if curve is not None:
        blocks.append(curve)
        one = len(doc["aggregations"]) == 1
        rows = [r for r in doc["rows"].values() if r["curve"]]
        ks = [p["texts_per_document"] for p in rows[0]["curve"]]
        series = {(r["method"] if one else f"{r['aggregation']}:{r['method']}"):
                  [p["auc"] for p in r["curve"]] for r in rows}
        blocks.append(Image("Document AUC by texts per document", "documents_curve.png",
                            plots.lines_png("texts per document", ks, series,
                                            "document AUC by texts per document")))
    return blocks


CONTRADICTED_SHOWN = 20  # the contradicted texts listed in the report (all in scores.jsonl)


def _corpus_blocks(results: dict, rows: list[dict]) -> list:
    """The corpus check: its sentence, the metrics with the contradicted texts left out
    beside those on all texts, and the contradicted texts (the first CONTRADICTED_SHOWN,
    highest overlap first)."""
    sentence = corpus_sentence(results)
    if sentence is None:
        return []
    check = results["corpus_check"]
    blocks: list = [Notice((sentence,), kind="warn" if check["counts"]["contradicted"] else "ok",
                           id="corpus-check-line")]
    table = corpus_table(results)
    if table is not None:
        blocks.append(table)
    hit = sorted((r for r in rows if r.get("contradicted")),
                 key=lambda r: (-(r["overlap"] or 0.0), str(r["id"])))
    if hit:
        n = check["n"]
        shown = tuple((str(r["id"]), "member" if r["label"] == 1 else "non-member",
                       Num(r["overlap"]), str(r["longest_match"]), str(r["count"]),
                       r["contradicted"]) for r in hit[:CONTRADICTED_SHOWN])
        more = (f"{len(hit) - CONTRADICTED_SHOWN} more in scores.jsonl (column 'contradicted')."
                if len(hit) > CONTRADICTED_SHOWN else "All of them; scores.jsonl has every "
                "text's overlap.")
        blocks.append(Table(header=("id", "label", f"share of {n}-grams found",
                                    "longest match (tokens)", "count of the whole text", "why"),
                            rows=shown, title="Contradicted labels", notes=(more,),
                            id="contradicted"))
    return blocks


class _FigureMemo:
    """The run's figures kept in the statistics cache's memo (when the run used one and
    that cache folder exists here: a results folder from elsewhere creates nothing), keyed
    by the labels, the methods in order with their scores, the drawing code, the pddkit
    version (legends carry its AUCs) and the matplotlib version: a cached rerun draws
    nothing, the same figures come back byte for byte."""

    def __init__(self, memo, parts: dict | None) -> None:
        self.memo, self.parts = memo, parts

    @classmethod
    def of(cls, cache: str | None, labels: np.ndarray, scores: dict[str, np.ndarray]) -> _FigureMemo:
        if not cache or not (Path(cache).expanduser() / "memo").is_dir():
            return cls(None, None)
        import hashlib
        from importlib.metadata import PackageNotFoundError, version

        from pddkit.cache.memo import Memo
        from pddkit.version import __version__

        try:
            mpl = version("matplotlib")
        except PackageNotFoundError:
            mpl = None
        digest = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731
        parts = {"labels": digest(np.ascontiguousarray(labels, dtype=np.int64).tobytes()),
                 "scores": [[k, digest(np.ascontiguousarray(v, dtype=np.float64).tobytes())]
                            for k, v in scores.items()],  # in order: it sets colours and legends
                 "code": digest(Path(plots.__file__).read_bytes()), "matplotlib": mpl,
                 "pddkit": __version__}
        return cls(Memo(Path(cache).expanduser()), parts)

    def png(self, name: str, draw) -> bytes:
        if self.memo is None:
            return draw()
        from pddkit.cache.memo import result_key

        key = result_key("figure", 1, {"name": name, **self.parts})
        found = self.memo.get_result("figure", key)
        if found is not None:
            return found[0]["png"].tobytes()
        png = draw()
        self.memo.put_result("figure", key, {"png": np.frombuffer(png, dtype=np.uint8)}, {"name": name})
        return png


def write_report(out_dir: str | Path, title: str | None = None) -> tuple[Path, Path]:
    """Write report.html and report.md (+ PNGs) into the results folder `out_dir`."""
    out = Path(out_dir)
    results, rows = load_results(out)
    labels = np.array([r["label"] for r in rows], dtype=float)
    if np.isnan(labels).any() or len(set(labels.tolist())) < 2:
        raise PddkitError(f"{out} holds unlabelled scores: a report needs members and non-members")
    counts = results.get("counts") or {}
    blocks: list = [run_summary(results)]
    cut = truncation(counts)
    if cut:
        blocks.append(Notice(tuple(cut), kind="warn", id="truncation", lead="Truncated texts."))
    fell = fallbacks(counts)
    if fell:
        blocks.append(Notice(tuple(fell), kind="warn", id="fallbacks", lead="Method fallbacks."))
    undone = stages_not_done(results)
    if undone:
        blocks.append(Notice(tuple(undone), kind="warn", id="stages",
                             lead="Optional stages not done."))
    blind = results.get("blind_baseline")
    if blind:
        blocks.append(Notice((blind["message"],), kind="warn" if blind["warn"] else "ok",
                             id="blind-verdict"))
    blocks.append(metrics_table(results))
    per_subset = subset_table(results)
    if per_subset is not None:
        warning = blind_subset_warning(results)
        if warning:
            blocks.append(Notice((warning,), kind="warn", id="blind-subsets"))
        blocks.append(per_subset)
    validated = validation_table(results)
    if validated.rows:
        blocks.append(validated)
    blocks += _corpus_blocks(results, rows)
    blocks += _images(results, rows)
    blocks += _document_blocks(results, out)
    cache = cache_line(counts)
    config = {k: results[k] for k in ("config", "models", "counts", "timings_s", "notices",
                                      "pddkit_version") if k in results}
    blocks.append(Config(config, notices=(Notice((cache,), id="cache"),) if cache else (),
                         provenance=results.get("provenance")))
    title = title or f"pddkit report: {results['config'].get('dataset', out.name)}"
    return write_page(Page(title, tuple(blocks)), out)


def report_stage(out_dir: str | Path, title: str | None = None):
    """The report as a run's optional stage (engine/stages.py): `stage(result) -> result`
    writes report.html and report.md (with their plots) from the results folder `out_dir`
    and records the seconds it took in the result's timings."""
    def stage(result):
        import time
        from dataclasses import replace

        t0 = time.perf_counter()
        write_report(out_dir, title)
        return replace(result, timings={**result.timings, "report": time.perf_counter() - t0})

    return stage
