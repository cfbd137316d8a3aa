"""The sandbox's ground truth on disk, and its check.

Files, each one JSON object a line:
- OUTPUT/evaluated-documents.jsonl: `id`, `role` (member / nonmember), `text` of every
  document windows are cut from;
- OUTPUT/reference-pool.jsonl: `id`, `text` (reference model, frequency table, probe data);
- OUTPUT/tokenizer-texts.jsonl: `id`, `text` the sandbox BPE was trained on (only when the
  sandbox trains it: not with --tokenizer or --base-model);
- RUN/train-documents.jsonl: `id`, `role` (member / background / contaminant /
  trap-carrier), `repeats`, `text`: exactly what that run's target model was trained on
  (each text `repeats` times per epoch);
- RUN/window-W/windows.jsonl: `id`, `text`, `label`, `group` of the windows scored;
- with `contaminate`, the files of sandbox.contamination (checked by its `verify`, called
  from `verify_run`): benchmark examples inserted into the training documents;
- with `traps`, OUTPUT/traps and RUN/traps (checked by sandbox.traps.verify, called from
  `verify_run`): copyright traps inserted into carrier documents, and held-out traps.

`verify_run` re-reads these files, independently of how the split was made, and raises
PddkitError unless every member window is verbatim training text of its document, no
non-member window or document shares a run of 13 lower-cased words with training text, and
no evaluated window or document shares one with the reference pool or tokenizer texts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from pddkit.data.ngrams import N, ngram_hashes
from pddkit.data.samples import Dataset
from pddkit.errors import PddkitError
from pddkit.sandbox import contamination, traps
from pddkit.sandbox.contamination import read_jsonl

logger = logging.getLogger(__name__)

EVALUATED = "evaluated-documents.jsonl"
REFERENCE = "reference-pool.jsonl"
TOKENIZER = "tokenizer-texts.jsonl"
TRAIN = "train-documents.jsonl"
WINDOWS = "windows.jsonl"


def write_jsonl(path: Path, rows: Iterable[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return path


def write_split_texts(out: Path, split, tokenizer_texts: list[dict] | None) -> None:
    """evaluated-documents.jsonl, reference-pool.jsonl and (when given) tokenizer-texts.jsonl."""
    write_jsonl(out / EVALUATED, ({"id": d.id, "role": role, "text": d.text}
                                  for role, docs in (("member", split.members),
                                                     ("nonmember", split.nonmembers))
                                  for d in docs))
    write_jsonl(out / REFERENCE, ({"id": d.id, "text": d.text} for d in split.reference))
    if tokenizer_texts is not None:
        write_jsonl(out / TOKENIZER, tokenizer_texts)


def write_train_documents(run_dir: Path, split, repeats: int, background: int,
                          contaminants: list[dict] | None = None,
                          carriers: Iterable[dict] = ()) -> list[str]:
    """RUN/train-documents.jsonl; returns the training texts (members x repeats, then
    background, then each contaminant's and trap carrier's row text `repeats` times), built
    from the rows written. The trainer shuffles them every epoch: each copy of a
    contaminant lands whole at a random position among the documents."""
    rows = [{"id": d.id, "role": "member", "repeats": repeats, "text": d.text}
            for d in split.members]
    rows += [{"id": d.id, "role": "background", "repeats": 1, "text": d.text}
             for d in split.background[:background]]
    rows += [*(contaminants or []), *carriers]
    write_jsonl(run_dir / TRAIN, rows)
    members = [r["text"] for r in rows if r["role"] == "member"]
    return (members * repeats + [r["text"] for r in rows if r["role"] == "background"]
            + [r["text"] for r in rows if r["role"] in ("contaminant", traps.CARRIER)
               for _ in range(r["repeats"])])


def write_windows(wdir: Path, dataset: Dataset, name: str = WINDOWS) -> Path:
    """RUN/window-W/windows.jsonl (or, `name`, the shots' pool of sandbox.shots)."""
    return write_jsonl(wdir / name, ({"id": s.id, "text": s.text, "label": s.label,
                                      "group": s.group} for s in dataset.samples))


@dataclass(frozen=True)
class RunCheck:
    run: str
    member_windows: int
    member_verbatim: int  # verbatim substrings of their document's training text
    nonmember_windows: int
    nonmember_shared: int  # share a 13-word run with training text (or were trained on)
    evaluated_windows: int
    reference_shared: int  # share a 13-word run with the reference pool / tokenizer texts
    outside_source: int  # not a verbatim substring of their own document (or wrong role)
    nonmember_documents: int
    nonmember_documents_shared: int
    evaluated_documents: int
    evaluated_documents_shared: int  # share a run with the reference pool / tokenizer texts
    contamination: contamination.ContaminationCheck | None = None  # with `contaminate`
    traps: traps.TrapCheck | None = None  # with `traps`
    shots: int = 0  # recall / conrecall shots (sandbox.shots), every window length
    shots_wrong: int = 0  # a member shot not verbatim training text of a held-out document,
    # a non-member shot sharing a run with training text, or a shot sharing one with an
    # evaluated window

    @property
    def failures(self) -> list[str]:
        out = []
        if self.member_verbatim < self.member_windows:
            out.append(f"{self.member_windows - self.member_verbatim} of {self.member_windows} "
                       "member windows are not verbatim training text")
        for count, total, what in (
                (self.nonmember_shared, self.nonmember_windows,
                 "non-member windows share a {N}-word run with training text"),
                (self.nonmember_documents_shared, self.nonmember_documents,
                 "non-member documents share a {N}-word run with training text"),
                (self.reference_shared, self.evaluated_windows,
                 "evaluated windows share a {N}-word run with the reference pool or tokenizer texts"),
                (self.evaluated_documents_shared, self.evaluated_documents,
                 "evaluated documents share a {N}-word run with the reference pool or tokenizer "
                 "texts"),
                (self.outside_source, self.evaluated_windows,
                 "evaluated windows are not verbatim text of their own document"),
                (self.shots_wrong, self.shots,
                 "shots are not what their label says (member: verbatim training text of a "
                 "document never evaluated; non-member: no {N}-word run with training text) "
                 "or share a {N}-word run with an evaluated window")):
            if count:
                out.append(f"{count} of {total} {what.format(N=N)}")
        return out


def verify_run(out: Path, run_dir: Path, tokenizer_texts: bool = True) -> RunCheck:
    """Check one run's ground truth from its files (module docstring), with the tokenizer's
    texts when the sandbox trained it (`tokenizer_texts`); raises PddkitError with every
    failed rule in one sentence."""
    train = {r["id"]: r for r in read_jsonl(run_dir / TRAIN)}
    train_grams: set[int] = set()
    for r in train.values():
        train_grams |= ngram_hashes(r["text"])
    evaluated = {r["id"]: r for r in read_jsonl(out / EVALUATED)}
    ref_texts = [r["text"] for r in read_jsonl(out / REFERENCE)
                 + (read_jsonl(out / TOKENIZER) if tokenizer_texts else [])]
    ref_grams: set[int] = set()
    for t in ref_texts:
        ref_grams |= ngram_hashes(t)
    cc = (contamination.verify(out, run_dir, list(train.values()), ref_texts, ref_grams)
          if contamination.present(out, run_dir) else None)  # raises on a failure
    tc = (traps.verify(out, run_dir, list(train.values()), ref_texts, ref_grams)
          if traps.present(out, run_dir) else None)  # raises on a failure
    files = sorted(run_dir.glob(f"window-*/{WINDOWS}"))
    if not files:
        raise PddkitError(f"ground truth check: {run_dir} holds no window-*/{WINDOWS}")
    n = {"mw": 0, "mv": 0, "nw": 0, "ns": 0, "ew": 0, "rs": 0, "out": 0}
    for path in files:
        for w in read_jsonl(path):
            grams = ngram_hashes(w["text"])
            src = evaluated.get(w["group"])
            role = "member" if w["label"] == 1 else "nonmember"
            n["ew"] += 1
            n["out"] += src is None or src["role"] != role or w["text"] not in src["text"]
            n["rs"] += not grams.isdisjoint(ref_grams)
            if w["label"] == 1:
                n["mw"] += 1
                t = train.get(w["group"])
                n["mv"] += t is not None and t["role"] == "member" and w["text"] in t["text"]
            else:
                n["nw"] += 1
                n["ns"] += w["group"] in train or not grams.isdisjoint(train_grams)
    shots, wrong = _check_shots(run_dir, files, train, train_grams)
    doc_grams = {i: ngram_hashes(r["text"]) for i, r in evaluated.items()}
    nonmembers = [i for i, r in evaluated.items() if r["role"] == "nonmember"]
    check = RunCheck(
        run=run_dir.name, member_windows=n["mw"], member_verbatim=n["mv"],
        nonmember_windows=n["nw"], nonmember_shared=n["ns"], evaluated_windows=n["ew"],
        reference_shared=n["rs"], outside_source=n["out"], nonmember_documents=len(nonmembers),
        nonmember_documents_shared=sum(i in train or not doc_grams[i].isdisjoint(train_grams)
                                       for i in nonmembers),
        evaluated_documents=len(evaluated),
        evaluated_documents_shared=sum(not g.isdisjoint(ref_grams) for g in doc_grams.values()),
        contamination=cc, traps=tc, shots=shots, shots_wrong=wrong)
    if check.failures:
        raise PddkitError(f"ground truth check failed for {run_dir}: "
                          + "; ".join(check.failures))
    return check


def _check_shots(run_dir: Path, files: list[Path], train: dict, train_grams: set[int]):
    """(shots, wrong ones) of every RUN/window-W/shots-pool.jsonl (sandbox.shots)."""
    from pddkit.sandbox.shots import POOL

    evaluated_groups = {w["group"] for path in files for w in read_jsonl(path)}
    n = wrong = 0
    for path in sorted(run_dir.glob(f"window-*/{POOL}")):
        window_grams: set[int] = set()
        for w in read_jsonl(path.parent / WINDOWS):
            window_grams |= ngram_hashes(w["text"])
        for s in read_jsonl(path):
            grams = ngram_hashes(s["text"])
            t = train.get(s["group"])
            if s["label"] == 1:
                ok = (t is not None and t["role"] == "member" and s["text"] in t["text"]
                      and s["group"] not in evaluated_groups)
            else:
                ok = s["group"] not in train and grams.isdisjoint(train_grams)
            n += 1
            wrong += not (ok and grams.isdisjoint(window_grams))
    return n, wrong


def verify_sandbox(out: Path, run_dirs: list[Path], base_model: str | None,
                   tokenizer: str | None) -> dict:
    """Every run checked from its files; the summary's `ground_truth` entry, whose `line`
    says what was verified (and what the sandbox cannot know)."""
    checks = [verify_run(out, d, tokenizer_texts=not (tokenizer or base_model)) for d in run_dirs]
    c = checks[0]
    same = all((k.member_windows, k.nonmember_windows) == (c.member_windows, c.nonmember_windows)
               for k in checks)
    lengths = sorted(int(p.parent.name.split("-", 1)[1]) for p in run_dirs[0].glob(f"window-*/{WINDOWS}"))
    sizes = ", ".join(map(str, lengths[:-1])) + (" and " if len(lengths) > 1 else "") + str(lengths[-1])
    line = (f"ground truth verified ({sizes}-word windows): {c.nonmember_shared} of "
            f"{c.nonmember_windows} non-member "
            f"windows share a {N}-word run with training text; {c.member_verbatim} of "
            f"{c.member_windows} member windows are verbatim training text; "
            f"{c.reference_shared} of {c.evaluated_windows} evaluated windows share a {N}-word "
            "run with the reference pool" + ("" if tokenizer or base_model else
                                             " or tokenizer texts"))
    if c.shots:
        line += (f"; {c.shots} recall shots: members from trained documents never evaluated, "
                 "non-members from the reference pool")
    if len(checks) > 1:
        line += f" (in each of the {len(checks)} runs)" if same else f" (run {c.run}; all pass)"
    if c.contamination is not None:
        def sides(k):
            x = k.contamination
            return (x.contaminants, x.contaminants_counted, x.heldout, x.heldout_in_training,
                    x.drawn_zero)

        if len(checks) == 1:
            line += "; contamination: " + c.contamination.sentence()
        elif all(sides(k) == sides(c) for k in checks):
            line += ("; contamination: " + c.contamination.sentence(copies=False)
                     + " (copies per epoch: " + ", ".join(
                         f"{k.contamination.insertions} in {k.run}" for k in checks) + ")")
        else:  # Poisson draws differ between runs: each run's own counts
            line += "; contamination: " + "; ".join(
                f"{k.run}: {k.contamination.sentence()}" for k in checks)
    if c.traps is not None:
        said = [k.traps.sentence(not (tokenizer or base_model)) for k in checks]
        line += ("; traps: " + said[0] if len(set(said)) == 1 else "; traps: " + "; ".join(
            f"{k.run}: {s}" for k, s in zip(checks, said)))
    if base_model:
        line += ("; the base model's own pre-training data is unknown: only what the sandbox "
                 "added is checked")
    elif tokenizer:
        line += "; the given tokenizer's training text is unknown and not checked"
    logger.debug("%s", line)  # the summary's first line (reporting.sandbox_summary) says it
    return {"line": line, "ngram_words": N, "runs": [asdict(k) for k in checks],
            "pretraining_data_unknown": bool(base_model),
            "tokenizer_texts_checked": not (tokenizer or base_model)}
