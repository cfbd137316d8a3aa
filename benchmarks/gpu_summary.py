"""Gathers what benchmarks/gpu.sh's steps wrote in STEPS (their JSON files, steps.tsv, logs/)
into OUT/gpu.json and OUT/gpu.md (the card by torch.cuda.get_device_name, the torch and
transformers versions, the date, each step's command, exit status and wall time; a failed or
timed-out step is named with its log's last lines, never left out).

    python benchmarks/gpu_summary.py --steps STEPS --out OUT [--smoke]
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

KINDS = {"stats": "stats_pass", "prefix": "prefix_kv", "infill": "infill_kv"}


def gather(work: Path, smoke: bool) -> dict:
    steps = []
    steps_file = work / "steps.tsv"
    if steps_file.exists():
        for line in steps_file.read_text().splitlines():
            name, rc, seconds, command = line.split("\t", 3)
            steps.append({"name": name, "rc": int(rc), "seconds": float(seconds), "command": command})
    result: dict = {key: {} for key in KINDS.values()}
    runs = []
    for step in steps:
        kind, shape = step["name"].split("-", 1)
        file = work / f"{step['name']}.json"
        step["ok"] = step["rc"] == 0 and file.exists()
        log = work / "logs" / f"{step['name']}.log"
        if not step["ok"] and log.exists():
            step["log_tail"] = log.read_text(errors="replace")[-3000:]
        if step["ok"]:
            data = json.loads(file.read_text())
            result[KINDS[kind]][shape] = data
            runs += list(data["runs"].values())
    first = runs[0] if runs else {}
    result["meta"] = {
        "card": first.get("gpu", "cpu (smoke: no GPU)" if smoke else "cpu"),
        "torch": first.get("torch"), "transformers": first.get("transformers"),
        "python": first.get("python"),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "smoke": smoke, "steps": steps,
        "failed_steps": [s["name"] for s in steps if not s["ok"]],
    }
    return result


def _mem(run: dict) -> float:
    return run.get("peak_gpu_mb", run.get("peak_rss_mb", run.get("peak_mb")))


def markdown(r: dict) -> str:
    m = r["meta"]
    lines = [f"# benchmarks/gpu.sh on {m['card']}", "",
             f"torch {m['torch']}, transformers {m['transformers']}, python {m['python']}, "
             f"{m['date_utc']} UTC{' (smoke: tiny shapes on the CPU)' if m['smoke'] else ''}. "
             "Random-init models, random token ids, each variant its own process.", ""]
    if r["stats_pass"]:
        peak = ("peak GPU memory (max_memory_allocated)"
                if all("peak_gpu_mb" in s["runs"]["bare"] for s in r["stats_pass"].values())
                else "peak memory (ru_maxrss on the CPU)")
        lines += ["## Statistics pass against a bare forward", "",
                  "| shape | dtype | texts | tokens | bare forward | statistics pass | "
                  f"statistics / bare | {peak}, bare / statistics |", "|---|---|---|---|---|---|---|---|"]
        for shape, s in r["stats_pass"].items():
            b, t = s["runs"]["bare"], s["runs"]["stats"]
            lines.append(f"| {shape} (vocabulary {b['vocab']:,}) | {b['dtype']} | {b['texts']:,} | "
                         f"{b['tokens']:,} | {b['seconds']:.2f} s, {b['tokens'] / b['seconds']:,.0f} tok/s | "
                         f"{t['seconds']:.2f} s, {t['tokens'] / t['seconds']:,.0f} tok/s | "
                         f"{s['stats_over_bare']:.3f} | {_mem(b):,.0f} / {_mem(t):,.0f} MB |")
        lines.append("")
    for key, title in (("prefix_kv", "Shared prefix (recall / conrecall's conditioned pass)"),
                       ("infill_kv", "Infilling variants (infill)")):
        if not r[key]:
            continue
        lines += [f"## {title}: shared key/value cache against the plain pass", "",
                  "| shape | dtype | texts | plain: time, text tok/s, tokens run | shared: time, "
                  "text tok/s, tokens run | speed-up | peak, plain / shared | max abs score "
                  "difference, shared vs plain (sd of the scores) | max abs L / H difference "
                  "(pddkit's atol) | pddkit's check | max abs score difference from float32: "
                  "shared / plain |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for shape, s in r[key].items():
            p, h = s["runs"]["plain"], s["runs"]["shared"]
            ref = (f"{s['shared_vs_float32_max_abs_diff_score']:.2g} / "
                   f"{s['plain_vs_float32_max_abs_diff_score']:.2g} ({s['reference_texts']} "
                   f"text{'s' if s['reference_texts'] > 1 else ''})"
                   if "reference_texts" in s else "-")
            lines.append(
                f"| {shape} | {s['dtype']} | {p['texts']:,} | {p['seconds']:.2f} s, "
                f"{p['text_tokens_per_s']:,.0f}, {p['tokens_run']:,} | {h['seconds']:.2f} s, "
                f"{h['text_tokens_per_s']:,.0f}, {h['tokens_run']:,} | {s['speedup']:.2f}x | "
                f"{p['peak_mb']:,.0f} / {h['peak_mb']:,.0f} MB | {s['max_abs_diff_score']:.2g} "
                f"({s['score_sd_across_texts']:.2g}) | {s['max_abs_diff_L']:.2g} / "
                f"{s['max_abs_diff_H']:.2g} ({s['check_atol']:g}) | "
                f"{'keeps the shared path' if s['pddkit_check_keeps_shared'] else 'FALLS BACK to plain'} "
                f"| {ref} |")
        lines.append("")
    lines += ["## Steps", "", "| step | exit | wall s | command |", "|---|---|---|---|"]
    lines += [f"| {s['name']} | {s['rc']}{'' if s['ok'] else ' (failed)'} | {s['seconds']:.0f} | "
              f"`{s['command']}` |" for s in m["steps"]]
    if m["failed_steps"]:
        lines += ["", f"Failed or timed out (exit 124: the step's time limit): "
                      f"{', '.join(m['failed_steps'])}; their output is in gpu-logs.txt."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", required=True, help="the folder the steps wrote")
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    r = gather(Path(a.steps), a.smoke)
    (out / "gpu.json").write_text(json.dumps(r, indent=2))
    (out / "gpu.md").write_text(markdown(r))
    print((out / "gpu.md").read_text(), end="")


if __name__ == "__main__":
    main()
