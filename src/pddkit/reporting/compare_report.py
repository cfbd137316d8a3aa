"""Outputs of the unlearning audit (`pddkit compare`, Shi et al. 2024 section 7): its
verdict in sentences, results.json, scores.jsonl (every chunk), flagged.csv,
continuations.jsonl (when sampled), the terminal table, and report.html + report.md
(pddkit.reporting.page)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from pddkit.reporting.page import Config, Image, Notice, Page, Summary, write_page
from pddkit.reporting.table import Num, Table, to_text

EXTRA_FILES = ("flagged.csv", "continuations.jsonl")  # besides results.json, scores.jsonl


def compare_verdict(result) -> str:
    """The verdict of `pddkit compare` (a studies.compare CompareResult) in one sentence
    (two with continuations) for a reader who is not a specialist."""
    n, k, band = len(result.chunks), len(result.flagged), result.config["band"]
    what = f"{result.config['method']} score"
    if k == 0:
        return (f"None of the {n} text chunks kept its likelihood: under the unlearned model "
                f"every chunk's {what} moved by more than a factor {band:g}, so this check "
                "finds no sign that the text survived unlearning (it cannot prove that it "
                "is gone).")
    line = (f"For {k} of {n} text chunks ({k / n:.0%}) the unlearned model still finds the "
            f"text about as likely as the original model did (their {what}s differ by less "
            f"than a factor {band:g}), so unlearning probably did not remove them; they are "
            "listed for a closer look.")
    recalls = [r for c in result.flagged for r in c.rouge_l]
    if recalls:
        line += (f" Continuations sampled from the unlearned model reproduce on average "
                 f"{np.mean(recalls):.0%} of the true text's words in order (ROUGE-L recall; "
                 f"best {max(recalls):.0%}).")
    return line


def _closest_first(result) -> list:
    """Flagged chunks, the least moved (ratio closest to 1) first."""
    return sorted(result.flagged, key=lambda c: (abs(math.log(c.ratio)), c.id))


def flagged_table(result, limit: int | None = None) -> Table:
    """The flagged ("not removed") chunks with their scores and ratio (and ROUGE-L recall
    of the sampled continuations), the least moved first; at most `limit` rows."""
    method = result.config["method"]
    sampled = any(c.rouge_l for c in result.flagged)
    header = ("chunk", "source", f"{method} original", f"{method} unlearned", "ratio",
              *(("ROUGE-L mean", "ROUGE-L max") if sampled else ()))
    chosen = _closest_first(result)
    rows = []
    for c in chosen[:limit]:
        row = [c.id, c.source or "-", Num(c.score_original), Num(c.score_unlearned), Num(c.ratio)]
        if sampled:
            row += ([Num(float(np.mean(c.rouge_l))), Num(max(c.rouge_l))] if c.rouge_l
                    else [Num(None), Num(None)])
        rows.append(tuple(row))
    notes = ((f"... and {len(chosen) - limit} more in flagged.csv",)
             if limit is not None and len(chosen) > limit else ())
    band = result.config["band"]
    return Table(header=header, rows=tuple(rows), notes=notes, id="flagged",
                 title=f"Not removed: ratio inside (1/{band:g}, {band:g}), "
                       f"{len(chosen)} of {len(result.chunks)} chunks")


def terminal_text(result, top: int = 20) -> str:
    """What `pddkit compare` prints: the verdict, the counts, the flagged chunks."""
    c = result.counts
    lines = [compare_verdict(result), "",
             f"{c['chunks']} chunks: {c['not_removed']} not removed (ratio inside the band), "
             f"{c['removed']} less likely after unlearning, {c['more_likely']} more likely"]
    lines += list(result.notices)
    if result.flagged:
        lines += ["", *to_text(flagged_table(result, limit=top))]
    return "\n".join(lines)


def write_outputs(result, out: str | Path) -> Path:
    """results.json, scores.jsonl, flagged.csv, continuations.jsonl (when sampled) and the
    report in `out`; returns the path of results.json."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in EXTRA_FILES:  # an earlier run's, in a folder given with `overwrite`
        (out / name).unlink(missing_ok=True)
    (out / "results.json").write_text(json.dumps(result.to_json(), indent=2))
    with (out / "scores.jsonl").open("w") as fh:
        for c in result.chunks:
            fh.write(json.dumps({"id": c.id, "source": c.source, "words": c.words,
                                 "score_original": c.score_original,
                                 "score_unlearned": c.score_unlearned, "ratio": c.ratio,
                                 "verdict": c.verdict}) + "\n")
    with (out / "flagged.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        sampled = any(c.rouge_l for c in result.flagged)
        writer.writerow(["id", "source", "words", "score_original", "score_unlearned", "ratio",
                         *(["rouge_l_mean", "rouge_l_max"] if sampled else [])])
        for c in _closest_first(result):
            extra = ([float(np.mean(c.rouge_l)), max(c.rouge_l)] if c.rouge_l else ["", ""]
                     ) if sampled else []
            writer.writerow([c.id, c.source, c.words, c.score_original, c.score_unlearned,
                             c.ratio, *extra])
    if any(c.continuations for c in result.chunks):
        with (out / "continuations.jsonl").open("w") as fh:
            for c in result.flagged:
                for text, recall in zip(c.continuations, c.rouge_l):
                    fh.write(json.dumps({"id": c.id, "continuation": text,
                                         "rouge_l_recall": recall}) + "\n")
    write_report(result, out)
    return out / "results.json"


def _model_line(info: dict) -> str:
    extra = [f"tokenizer {info['tokenizer']}" if info.get("tokenizer") else "",
             f"{info['vocab_size']:,} tokens" if info.get("vocab_size") else ""]
    extra = [x for x in extra if x]
    return str(info.get("name", "?")) + (f" ({', '.join(extra)})" if extra else "")


def report_page(result) -> Page:
    """The audit's page: summary, verdict, notices, flagged chunks, the ratio histogram,
    how to read it, and the configuration."""
    from pddkit.reporting.compare_plots import ratio_histogram_png

    cfg, counts = result.config, result.counts
    data = (f"{cfg['books']}: {counts.get('books', '?')} books cut into {cfg['words']}-word "
            "chunks" if cfg.get("books") else str(cfg.get("chunks")))
    tokenizers = {True: "the same", False: "different: each model scores with its own",
                  None: "not compared"}[result.same_tokenizer]
    blocks: list = [
        Summary((("original model", _model_line(result.models["original"])),
                 ("unlearned model", _model_line(result.models["unlearned"])),
                 ("tokenizers", tokenizers), ("data", data),
                 ("chunks", f"{counts['chunks']} ({counts['not_removed']} not removed, "
                            f"{counts['removed']} less likely, {counts['more_likely']} more "
                            "likely after unlearning)"),
                 ("method", f"{cfg['method']}; band (1/{cfg['band']:g}, {cfg['band']:g})"))),
        Notice((compare_verdict(result),), kind="warn" if result.flagged else "ok", id="verdict"),
    ]
    if result.notices:
        blocks.append(Notice(result.notices, lead="Notes:"))
    if result.flagged:
        blocks.append(flagged_table(result, limit=200))
    ratios = np.array([c.ratio for c in result.chunks])
    blocks.append(Image("Score ratios", "ratios.png",
                        ratio_histogram_png(ratios, cfg["band"], cfg["method"])))
    blocks.append(Notice((
        f"ratio = {cfg['method']} score under the unlearned model / under the original model. "
        "The score is a mean log-probability (negative), so a ratio above 1 means the "
        "unlearned model finds the chunk less likely, below 1 more likely, and near 1 that "
        "unlearning barely changed it (Shi et al. 2024, section 7, flag chunks inside "
        "(1/1.15, 1.15)). A flag is a reason to look closer, not proof: the paper confirms "
        "flagged chunks by letting the unlearned model continue them.",), lead="How to read it:"))
    blocks.append(Config({"configuration": cfg, "models": result.models, "counts": counts},
                         provenance=result.provenance))
    return Page("pddkit compare: unlearning audit", tuple(blocks))


def write_report(result, out: str | Path) -> Path:
    html_path, _ = write_page(report_page(result), out)
    return html_path
