"""The files of a run, written from its RunResult (evaluation/results.py): results.json
(the result's data, to_dict, with the sentences written here beside the numbers: the blind
baseline's verdict as `blind_baseline.message`), scores.jsonl, documents.jsonl and what the
methods need to be checked by hand (the probe, the neighbours, the audit trails, fsd's
adapter folder). The reports are written by report.py from these files."""

from __future__ import annotations

import json
from pathlib import Path

from pddkit.evaluation.results import RunResult, _finite
from pddkit.reporting.blind_verdict_text import blind_sentence


def results_json(result: RunResult) -> dict:
    """The contents of results.json: `result.to_dict()` with the blind baseline's verdict
    sentence (`message`) after its numbers, before its per-subset verdicts."""
    data = result.to_dict()
    blind = data.get("blind_baseline")
    if blind is not None:
        data["blind_baseline"] = {**{k: v for k, v in blind.items() if k != "subsets"},
                                  "message": blind_sentence(result.blind),
                                  **({"subsets": blind["subsets"]} if "subsets" in blind else {})}
    return data


def write_results(result: RunResult, out_dir: str | Path) -> Path:
    """Write results.json alone into `out_dir` (after a stage that changed only it): the
    result's data with the sentences written here (results_json)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # default=str: a folder given as a Path (api `cache=Path(...)`) is written as its text
    (out / "results.json").write_text(
        json.dumps(_finite(results_json(result)), indent=2, default=str) + "\n")
    return out


def write_run(result: RunResult, out_dir: str | Path) -> Path:
    """Write a run's files into `out_dir` (made when missing) and return its path:
    results.json, scores.jsonl and the files beside them (documents.jsonl, the probe, the
    neighbours, the audit trails, fsd's adapter folder)."""
    out = write_results(result, out_dir)
    if result.probe is not None:  # arrays + JSON, reloadable with --probe-load
        result.probe.save(out / "probe")
    if result.probe_validated is not None:
        result.probe_validated.save(out / "probe-validated")
    if result.neighbors is not None:  # saved for inspection and reuse (--neighbors FILE)
        result.neighbors.save(out / "neighbors.jsonl", result.ids)  # one line per (text, params)
    for name, saved in result.folders.items():  # fsd's adapter: a PEFT adapter folder
        saved.save(out / name)
    for name, rows in result.trail.items():
        with (out / name).open("w", encoding="utf-8") as fh:
            for row in rows:
                # ASCII escapes: U+2028 or U+0085 in a sampled text never splits a line
                fh.write(json.dumps(row) + "\n")
    if result.documents is not None:
        with (out / "documents.jsonl").open("w", encoding="utf-8") as fh:
            for row in result.documents.jsonl_rows():
                fh.write(json.dumps(_finite(row)) + "\n")
    named = bool(result.subsets) and any(x is not None for x in result.subsets)
    with (out / "scores.jsonl").open("w") as fh:
        for i, sid in enumerate(result.ids):
            row = {"id": sid, "label": None if result.labels is None else result.labels[i]}
            if result.splits:
                row["split"] = result.splits[i]
            if named:
                row["subset"] = result.subsets[i]
            row.update({m.label: float(m.scores[i]) for m in result.methods})
            if result.corpus is not None:  # the text against the training corpus
                row.update(result.corpus.columns(i))
            if result.record_fields:
                row.update(result.record_fields.get(sid, {}))
            fh.write(json.dumps(row) + "\n")
    return out
