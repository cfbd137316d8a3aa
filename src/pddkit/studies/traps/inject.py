"""`traps inject`: each member trap inserted R times into one document at seeded random
sentence boundaries (Meeus et al., "Copyright Traps for Large Language Models", ICML
2024, arXiv 2402.09363; the authors' src/scripts/inject_traps.py).

As the authors do:
- one trap per document, the documents drawn at random (seeded) among those of at least
  `min_tokens` tokens of the traps' tokenizer (their default 5000);
- the member traps, taken length by length and bucket by bucket, get the repeat counts in
  turn (their itertools.cycle over `n_reps`), so every repeat count goes to the same
  number of traps and each (length, bucket) cell is split as evenly as its size allows;
- a trap's R copies go to R distinct positions drawn without replacement (their
  random.sample), so a document needs at least R of them.

Where pddkit differs, and why:
- positions are sentence boundaries, not the spaces between words: a boundary is the
  offset right after a sentence end, [.!?] plus any closing quotes or brackets
  ("'”’)]), that is followed by whitespace or ends the text (SENTENCE_END; an
  abbreviation such as "Mr." counts). Each copy is its own sentence: a space, then the
  trap's text, then the whitespace that followed the boundary ("end. TRAP Next"); a trap
  whose text begins with whitespace (a GPT-2-style leading space) gets no extra space.
  The authors glue each copy to the next word ("... TRAPword"), which changes the
  tokens at both seams;
- documents are matched to repeat counts from the largest count down, each trap taking
  a random unused document with enough boundaries (one sentence when none is left);
- a member count not divisible by the number of repeat counts is not refused (their
  ValueError): the remainder, drawn at random (seeded), is left out and counted
  (`not_inserted`); detection then ignores those traps (neither inserted nor held out);
- their length filter `len(ids > min)` keeps every non-empty document as written; pddkit
  counts each document's tokens (no special tokens) and skips, and counts, shorter ones;
- a trap's copies are counted in the written document (str.count must give R);
- a document without text (None: a row of the documents file with no text) is skipped and
  counted (`without_text`), and comes back as it was.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import re
from collections.abc import Sequence

from pddkit.errors import PddkitError
from pddkit.studies.traps.folder import MEMBER, Insertion, Trap, TrapFolder
from pddkit.studies.traps.generate import _digest

logger = logging.getLogger(__name__)

PAPER = "Meeus et al. 2024"
SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s|$)")
TOKEN_BATCH = 32  # documents per tokenizer call when counting tokens


def sentence_boundaries(text: str) -> list[int]:
    """Offsets right after each sentence end (SENTENCE_END) of `text`."""
    return [m.end() for m in SENTENCE_END.finditer(text)]


def insert_copies(text: str, trap_text: str, boundaries: Sequence[int]) -> tuple[str, tuple[int, ...]]:
    """`text` with one copy of `trap_text` as its own sentence at each boundary, and the
    offsets in the new text where the copies start."""
    sep = "" if trap_text[:1].isspace() else " "
    pieces: list[str] = []
    positions = []
    size = last = 0
    for b in sorted(boundaries):
        pieces += [text[last:b], sep]
        size += b - last + len(sep)
        positions.append(size)
        pieces.append(trap_text)
        size += len(trap_text)
        last = b
    pieces.append(text[last:])
    return "".join(pieces), tuple(positions)


def check_repeats(repeats: Sequence[int]) -> list[int]:
    """One sentence for an empty list, a value below 1, or a value given twice."""
    values = list(repeats)
    if not values or any(not isinstance(r, int) or isinstance(r, bool) or r < 1 for r in values):
        raise PddkitError(f"`repeats` must be whole numbers of at least 1, not {values}")
    if len(set(values)) != len(values):
        raise PddkitError(f"`repeats` names a count twice: {values}")
    return values


def inject_traps(folder: TrapFolder, documents: Sequence[tuple[str, str | None]], *,
                 repeats: Sequence[int], tokenizer=None, min_tokens: int = 5000,
                 seed: int = 0) -> tuple[list[tuple[str, str | None]], TrapFolder]:
    """The documents ((id, text), same order; a text None is no document: skipped, counted,
    returned as None) with the member traps of `folder` inserted, and the folder with one
    Insertion per inserted trap and the `injection` record. `tokenizer` (the traps' own:
    its fingerprint must match) counts the documents' tokens for `min_tokens`; it may be
    None only when `min_tokens` is 0."""
    from pddkit.progress import bar
    from pddkit.provenance import Provenance, now

    started = now()
    repeats = check_repeats(repeats)
    if folder.insertions:
        raise PddkitError("this trap folder already holds injected traps (trap-info.jsonl): "
                          "inject from the folder `traps generate` wrote")
    if min_tokens < 0:
        raise PddkitError(f"`min_tokens` must be 0 or more, not {min_tokens}")
    if tokenizer is None and min_tokens > 0:
        raise PddkitError("counting `min_tokens` needs the traps' tokenizer")
    if tokenizer is not None:
        _check_tokenizer(folder, tokenizer)
    ids = [d for d, _ in documents]
    seen: set[str] = set()
    for d in ids:
        if d in seen:
            raise PddkitError(f"document id {d!r} appears twice: document ids must be unique")
        seen.add(d)
    members = [t for t in folder.traps if t.role == MEMBER]
    if not members:
        raise PddkitError("the trap folder holds no member traps to insert")
    rng = random.Random(_digest(seed, "inject"))
    plan, left_out = _assign_repeats(members, repeats, rng)
    if not plan:
        raise PddkitError(f"{len(members)} member traps cannot go to {len(repeats)} repeat "
                          "counts in equal numbers: give fewer `repeats` or generate more traps")

    texts = [t for _, t in documents]
    present = [i for i, t in enumerate(texts) if t is not None]
    without_text = len(texts) - len(present)
    tokens = [0] * len(texts)
    if min_tokens > 0:
        with bar(len(present), "counting document tokens", unit="doc") as progress:
            for k in range(0, len(present), TOKEN_BATCH):
                batch = present[k:k + TOKEN_BATCH]
                enc = tokenizer([texts[i] for i in batch], add_special_tokens=False)["input_ids"]
                for i, e in zip(batch, enc):
                    tokens[i] = len(e)
                progress.update(len(batch))
    eligible = [i for i in present if tokens[i] >= min_tokens]
    if len(eligible) < len(plan):
        none = f" ({without_text} more have no text)" if without_text else ""
        raise PddkitError(f"{len(eligible)} of the {len(present)} documents{none} have at least "
                          f"`min_tokens` {min_tokens} tokens, fewer than the {len(plan)} member "
                          "traps to insert (one trap per document): give more or longer "
                          "documents, lower `min_tokens`, or generate fewer traps")
    rng.shuffle(eligible)
    chosen = _choose_documents(plan, eligible, texts, min_tokens)

    new_texts = list(texts)
    insertions = []
    for (trap, r), doc in zip(plan, chosen):
        spots = rng.sample(sentence_boundaries(texts[doc]), r)
        new_texts[doc], positions = insert_copies(texts[doc], trap.text, spots)
        found = new_texts[doc].count(trap.text)
        if found != r:
            raise PddkitError(f"trap {trap.id} occurs {found} times in document {ids[doc]!r} "
                              f"after {r} copies were inserted (its text already occurs there)")
        insertions.append(Insertion(trap.id, ids[doc], r, positions))
    insertions.sort(key=lambda i: i.trap_id)
    per_repeat = {str(r): sum(1 for _, x in plan if x == r) for r in repeats}
    injection = {
        "study": "traps inject", "paper": PAPER,
        "options": {"repeats": repeats, "min_tokens": min_tokens, "seed": seed},
        "sentence_end": SENTENCE_END.pattern,
        "counts": {"documents": len(texts), "without_text": without_text,
                   "too_short": len(present) - len(eligible),
                   "eligible": len(eligible), "with_trap": len(plan),
                   "unchanged": len(texts) - len(plan), "member_traps": len(members),
                   "inserted": len(plan), "not_inserted": len(left_out),
                   "traps_per_repeats": per_repeat, "copies": sum(r for _, r in plan)},
        "not_inserted": sorted(t.id for t in left_out),
        "provenance": Provenance.collect(started, devices=["cpu"]).to_dict(),
    }
    logger.info("inserted %d member traps (%s copies) into %d of %d documents; %d documents "
                "under %d tokens, %d without text; %d member traps left out", len(plan),
                injection["counts"]["copies"], len(plan), len(texts),
                len(present) - len(eligible), min_tokens, without_text, len(left_out))
    out = list(zip(ids, new_texts))
    return out, dataclasses.replace(folder, insertions=tuple(insertions), injection=injection)


def _check_tokenizer(folder: TrapFolder, tokenizer) -> None:
    from pddkit.cache.fingerprint import tokenizer_digest

    want = folder.tokenizer_fingerprint
    have = tokenizer_digest(tokenizer)
    if want is not None and want != have:
        made = (folder.manifest.get("tokenizer") or {}).get("name") or "another tokenizer"
        raise PddkitError(f"the traps were generated for {made} (tokenizer fingerprint "
                          f"{want[:12]}), not for the tokenizer given (fingerprint {have[:12]}): "
                          "their token lengths hold only for their own tokenizer")


def _assign_repeats(members: list[Trap], repeats: list[int], rng: random.Random):
    """[(trap, R)] in (length, bucket) order, R cycling through `repeats`; and the traps
    left out (len(members) mod len(repeats), drawn at random) so every R gets as many."""
    cells: dict[tuple[int, int], list[Trap]] = {}
    for t in sorted(members, key=lambda t: (t.length, t.bucket, t.id)):
        cells.setdefault((t.length, t.bucket), []).append(t)
    order: list[Trap] = []
    for key in sorted(cells):
        shuffled = cells[key][:]
        rng.shuffle(shuffled)
        order += shuffled
    drop = set(rng.sample(range(len(order)), len(order) % len(repeats)))
    kept = [t for i, t in enumerate(order) if i not in drop]
    left_out = [t for i, t in enumerate(order) if i in drop]
    return [(t, repeats[i % len(repeats)]) for i, t in enumerate(kept)], left_out


def _choose_documents(plan, eligible: list[int], texts: list[str], min_tokens: int) -> list[int]:
    """One document per planned trap: from the largest repeat count down, each trap takes
    the next unused document (in `eligible`'s shuffled order) with enough boundaries."""
    counts = {i: len(sentence_boundaries(texts[i])) for i in eligible}
    used: set[int] = set()
    chosen: list[int | None] = [None] * len(plan)
    for r in sorted({r for _, r in plan}, reverse=True):
        slots = [k for k, (_, x) in enumerate(plan) if x == r]
        room = [i for i in eligible if i not in used and counts[i] >= r]
        if len(room) < len(slots):
            raise PddkitError(
                f"{len(slots)} traps are to be repeated {r} times at distinct sentence "
                f"boundaries, but only {len(room)} of the unused documents of at least "
                f"`min_tokens` {min_tokens} tokens have {r} or more (a boundary: . ! or ? "
                "followed by whitespace): give longer documents or lower `repeats`")
        for k, doc in zip(slots, room):
            chosen[k] = doc
            used.add(doc)
    return [c for c in chosen if c is not None]
