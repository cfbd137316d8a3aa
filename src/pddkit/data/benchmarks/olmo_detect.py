"""OLMo-Detect (ted-tennis/OLMo-Detect, 2026): members and non-members of the OLMo 2
models' training data across the three training stages, nine domains; a non-member is
kept only when under 20% of its 13-grams occur in the full OLMo 2 corpus (counted with an
infini-gram index), and each non-member carries that overlap per model size.

The release is the repository's `benchmark/` tree (README.md, and the authors'
`run_all.py` and `evaluate.py`, read at 8ed11cd), not a hub dataset, so `data_dir` is
required: the repository (holding `benchmark/`) or that folder itself.

    <stage>/<domain>/member/{matched,shifted}/<split>/member_<stage>_<domain>[_<sub>]_{matched,shifted}_<split>.jsonl
    <stage>/<domain>/non-member/<split>/non-member_<stage>_<domain>[_<sub>]_<split>.jsonl

Non-members are shared by the matched and shifted members; GSM8K (and its question-only
ablation) and RLVR have no shifted members and no `matched/` level; SFT has one folder per
model pair (`1b-32b`, `7b-13b`) and DPO one file per model size, with `chosen` and
`rejected` files scored separately and pooled as one domain (`evaluate.py`; the `pair`
files hold no `text` and are not read). `<split>` is `dev` (tuning) or `test`.

Labels come from the folder: `member/` 1, `non-member/` 0 (a row's own `label`, where one
has it, must agree). Every row keeps `text` as the scored input; the overlap columns
(`<size>_13-gram_overlap_score`, and `<size>_{prompt,chosen,rejected}_13-gram_overlap_score`
in DPO) are kept per text in `Dataset.meta["record_fields"]` (id -> columns; `pddkit run`
writes them into scores.jsonl), and the
overlap of the text scored for the chosen `model` in `meta["overlap"]` (id -> share); a
non-member at or above the benchmark's 0.2 is counted in `meta["nonmembers_at_or_over_0.2"]`
and named in the log. `subset` = `stage/domain[/subset]`; DPO's chosen and rejected texts
of one prompt (the first user turn of their messages) share a `group`. Ids are
`<file stem>/<line>`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from pddkit.data.benchmarks.files import choose, jsonl_values
from pddkit.data.benchmarks.registry import register_benchmark
from pddkit.data.benchmarks.release_files import merge_parts
from pddkit.data.records import BadRow, parse_label, rows_to_dataset, without_contradictions
from pddkit.data.samples import Dataset, make_dataset
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)

REPO = "ted-tennis/OLMo-Detect"
THRESHOLD = 0.2  # the benchmark's rule: a non-member's 13-gram overlap stays below it
SIZES = ("1b", "7b", "13b", "32b")
PAIR = {"1b": "1b-32b", "32b": "1b-32b", "7b": "7b-13b", "13b": "7b-13b"}  # SFT's files
STAGES = ("pretraining", "midtraining", "posttraining")
OVERLAP = re.compile(r"^(\d+b)(?:_(prompt|chosen|rejected))?_13-gram_overlap_score$")


@dataclass(frozen=True)
class Leaf:
    """One (stage, domain, subset) cell: its folder, file stem and whether it has shifted
    members (and so the matched/shifted level)."""

    stage: str
    domain: str
    subset: str | None
    shifted: bool = True
    main: bool = True  # in the paper's tables (False: an ablation, read when named)

    def folder(self, model: str) -> str:
        if self.domain == "sft":
            return f"{self.stage}/sft/{PAIR[model]}"
        return f"{self.stage}/{self.domain}"

    def stem(self, model: str) -> str:
        if self.domain == "sft":
            return f"{self.stage}_sft_{PAIR[model]}_{self.subset}"
        if self.domain == "dpo":
            return f"{self.stage}_dpo_{model}_{self.subset}"
        return f"{self.stage}_{self.domain}" + (f"_{self.subset}" if self.subset else "")

    def name(self) -> str:
        return f"{self.stage}/{self.domain}" + (f"/{self.subset}" if self.subset else "")


LEAVES = (
    Leaf("pretraining", "dclm", None), Leaf("pretraining", "pes2o", None),
    Leaf("pretraining", "openwebmath", None),
    Leaf("pretraining", "starcoder", "java"), Leaf("pretraining", "starcoder", "python"),
    Leaf("midtraining", "gsm8k", None, shifted=False),
    Leaf("midtraining", "gsm8k_qonly", None, shifted=False, main=False),
    Leaf("midtraining", "stackexchange", "math"),
    Leaf("midtraining", "stackexchange", "stackoverflow"),
    Leaf("posttraining", "sft", "aya"), Leaf("posttraining", "sft", "wildchat"),
    Leaf("posttraining", "dpo", "chosen"), Leaf("posttraining", "dpo", "rejected"),
    Leaf("posttraining", "rlvr", "cot-gsm8k", shifted=False),
    Leaf("posttraining", "rlvr", "cot-math", shifted=False),
    Leaf("posttraining", "rlvr", "gsm8k_no_cot", shifted=False, main=False),
    Leaf("posttraining", "rlvr", "math_no_cot", shifted=False, main=False),
)
DOMAINS = tuple(dict.fromkeys(lf.domain for lf in LEAVES))
SUBSETS = tuple(dict.fromkeys(lf.subset for lf in LEAVES if lf.subset))


@register_benchmark("olmo-detect", "OLMo-Detect (2026): OLMo 2's training data vs non-members "
                    "with under 20% of their 13-grams in the OLMo 2 corpus; a local copy of the "
                    "repository's benchmark/ tree only; stage (pretraining midtraining "
                    "posttraining), domain (dclm pes2o openwebmath starcoder gsm8k stackexchange "
                    "sft dpo rlvr; ablation gsm8k_qonly), subset (java python math stackoverflow "
                    "aya wildchat chosen rejected cot-gsm8k cot-math; ablations gsm8k_no_cot "
                    "math_no_cot), members=matched|shifted, split=test|dev, model=1b|7b|13b|32b "
                    "(SFT's and DPO's files, the overlap column); subset = stage/domain/subset")
def olmo_detect(data_dir: str | Path | None, on_invalid: str, *, stage: str = "all",
                domain: str = "all", subset: str = "all", members: str = "matched",
                split: str = "test", model: str = "1b") -> Dataset:
    root = _root(data_dir)
    members = str(choose("olmo-detect members", members, ("matched", "shifted")))
    split = str(choose("olmo-detect split", split, ("test", "dev")))
    model = str(choose("olmo-detect model", str(model).lower(), SIZES))
    leaves = select(stage, domain, subset, members)
    name = (f"olmo-detect:stage={stage},domain={domain},subset={subset},members={members},"
            f"split={split},model={model}")
    if on_invalid not in ("error", "skip"):
        raise PddkitError(f"`on_invalid` must be 'error' or 'skip', not {on_invalid!r}")
    parts = []
    fields: dict[str, dict] = {}
    overlap: dict[str, float] = {}
    for leaf in leaves:
        for label in (1, 0):
            rel = _relative(leaf, label, members, split, model)
            path = root / rel
            if not path.is_file():
                raise PddkitError(f"`data_dir` {data_dir} has no {rel} (OLMo-Detect's "
                                  f"benchmark/ layout, {REPO})")
            rows = [(no, _row(r, path.stem, no, label, leaf, model, fields, overlap))
                    for no, r in jsonl_values(path)]
            parts.append(rows_to_dataset(rows, str(path), str(path), on_invalid=on_invalid,
                                         unit="line"))
    samples, skipped, counted = merge_parts(parts, {})
    samples, contradicting = without_contradictions(samples, name, on_invalid)
    skipped.extend(contradicting)
    kept = {s.id for s in samples}
    fields = {k: v for k, v in fields.items() if k in kept}
    overlap = {k: v for k, v in overlap.items() if k in kept}
    over = [s.id for s in samples if s.label == 0 and overlap.get(s.id, 0.0) >= THRESHOLD]
    if over:
        logger.warning("olmo-detect: %d non-members have a released %s 13-gram overlap at or "
                       "over %.1f, against the benchmark's rule (first: %s)", len(over), model,
                       THRESHOLD, ", ".join(over[:3]))
    meta: dict = {**counted, "record_fields": fields, "overlap": overlap, "overlap_model": model,
                  f"nonmembers_at_or_over_{THRESHOLD}": len(over)}
    if contradicting:
        meta["contradicting_labels_left_out"] = (meta.get("contradicting_labels_left_out", 0)
                                                 + len(contradicting))
    return make_dataset(name, samples, skipped, meta)


def _root(data_dir: str | Path | None) -> Path:
    if data_dir is None:
        raise PddkitError(f"OLMo-Detect is released as the benchmark/ folder of the GitHub "
                          f"repository {REPO}, not on the Hugging Face hub: clone it and pass "
                          "`data_dir` (the repository or its benchmark/ folder)")
    base = Path(data_dir)
    if not base.is_dir():
        raise PddkitError(f"`data_dir` {data_dir} is not a folder (OLMo-Detect's repository or "
                          "its benchmark/ folder)")
    return base / "benchmark" if (base / "benchmark").is_dir() else base


def select(stage: str, domain: str, subset: str, members: str) -> list[Leaf]:
    """The leaves the parameters name: `all` takes the paper's (not the ablations), a
    named domain or subset its own; with `members=shifted` the leaves without shifted
    members are left out when not named, refused when named."""
    stage = str(choose("olmo-detect stage", str(stage).lower(), (*STAGES, "all")))
    domain = str(choose("olmo-detect domain", str(domain).lower(), (*DOMAINS, "all")))
    subset = str(choose("olmo-detect subset", str(subset).lower(), (*SUBSETS, "all")))
    leaves = [lf for lf in LEAVES
              if stage in ("all", lf.stage) and domain in ("all", lf.domain)
              and subset in ("all", lf.subset)]
    if domain == "all" and subset == "all":
        leaves = [lf for lf in leaves if lf.main]
    if not leaves:
        where = [f"stage {stage}" if stage != "all" else "", f"domain {domain}" if domain != "all"
                 else "", f"subset {subset}" if subset != "all" else ""]
        raise PddkitError("olmo-detect has no " + " and ".join(w for w in where if w) +
                          " together (domains of each stage: " + "; ".join(
                              f"{s}: {', '.join(dict.fromkeys(lf.domain for lf in LEAVES if lf.stage == s))}"
                              for s in STAGES) + ")")
    if members == "shifted":
        without = [lf for lf in leaves if not lf.shifted]
        if without and (domain != "all" or subset != "all") and len(without) == len(leaves):
            raise PddkitError(f"olmo-detect {without[0].name()} has no shifted members (GSM8K "
                              "and RLVR are released matched only): use members=matched")
        if without:
            logger.info("olmo-detect: members=shifted leaves out %s (no shifted members)",
                        ", ".join(lf.name() for lf in without))
        leaves = [lf for lf in leaves if lf.shifted]
    return leaves


def _relative(leaf: Leaf, label: int, members: str, split: str, model: str) -> str:
    stem = leaf.stem(model)
    if label == 0:
        return f"{leaf.folder(model)}/non-member/{split}/non-member_{stem}_{split}.jsonl"
    if leaf.shifted:
        return (f"{leaf.folder(model)}/member/{members}/{split}/"
                f"member_{stem}_{members}_{split}.jsonl")
    return f"{leaf.folder(model)}/member/{split}/member_{stem}_{split}.jsonl"


def _row(row: object, file_stem: str, number: int, label: int, leaf: Leaf, model: str,
         fields: dict, overlap: dict) -> object:
    """A release row as a pddkit row (text, label from the folder, id, subset, DPO's
    group) with its overlap columns recorded; a row whose own label disagrees with its
    folder is a BadRow."""
    if not isinstance(row, dict):
        return row
    own = row.get("label")
    if own is not None:
        try:
            if parse_label(own) != label:
                return BadRow(f"has label {own!r} but is in the "
                              f"{'member' if label else 'non-member'} folder")
        except BadRow as bad:
            return bad
    sid = f"{file_stem}/{number}"
    cols = {k: v for k, v in row.items() if OVERLAP.match(k)}
    if cols:
        fields[sid] = cols
    key = (f"{model}_{leaf.subset}_13-gram_overlap_score" if leaf.domain == "dpo"
           else f"{model}_13-gram_overlap_score")
    if isinstance(cols.get(key), (int, float)):
        overlap[sid] = float(cols[key])
    out = {"text": row.get("text"), "label": label, "id": sid, "subset": leaf.name()}
    prompt = _prompt(row) if leaf.domain == "dpo" else None
    if prompt is not None:
        digest = hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:16]
        out["group"] = f"dpo-{model}/{'member' if label else 'nonmember'}/{digest}"
    return out


def _prompt(row: dict) -> str | None:
    """A DPO row's prompt: the first user turn of its `chosen` or `rejected` messages (the
    member files hold no `prompt` field), else its `prompt`."""
    for key in ("chosen", "rejected"):
        turns = row.get(key)
        if isinstance(turns, list):
            for turn in turns:
                if isinstance(turn, dict) and turn.get("role") == "user" and isinstance(
                        turn.get("content"), str):
                    return turn["content"]
    return row["prompt"] if isinstance(row.get("prompt"), str) else None
