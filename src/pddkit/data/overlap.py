"""Label leaks: auxiliary texts (validation data, the probe's training data) that are also
texts under test. A probe or a hyperparameter chosen on a text's own label would be
evaluated on that text, so such overlaps are refused, or removed from the auxiliary side
and counted (`on_invalid="skip"`)."""

from __future__ import annotations

from dataclasses import replace

from pddkit.data.samples import Dataset, Skipped
from pddkit.errors import PddkitError


def normalise(text: str) -> str:
    """Whitespace folded: texts that differ only in spacing or line breaks are the same."""
    return " ".join(text.split())


def sharing_text(samples, held: list[str]) -> set[int]:
    """Indices of `samples` equal to (up to spacing), or sharing a run of 13 lower-cased words
    with, one of the `held` texts (drawn shots, held-out calibration texts)."""
    from pddkit.data.ngrams import ngram_hashes

    grams = set().union(*(ngram_hashes(t) for t in held))
    texts = {normalise(t) for t in held}
    return {i for i, s in enumerate(samples)
            if normalise(s.text) in texts or not ngram_hashes(s.text).isdisjoint(grams)}


def without_overlap(aux: Dataset, data: Dataset, what: str, on_invalid: str = "error",
                    data_name: str = "the texts under test") -> Dataset:
    """`aux` without the texts that also occur in `data` (after whitespace folding).

    With `on_invalid="error"` any overlap is one sentence with the count and two examples;
    with `"skip"` the overlapping texts leave the auxiliary side only (never the data
    under test) and are listed among `aux.skipped` with their reason."""
    under_test = {normalise(s.text) for s in data.samples}
    leaked = [s for s in aux.samples if normalise(s.text) in under_test]
    if not leaked:
        return aux
    if on_invalid != "skip":
        examples = "; ".join(f"{s.source}: {_short(s.text)!r}" for s in leaked[:2])
        raise PddkitError(
            f"{len(leaked)} of the {len(aux.samples)} texts of {what} also occur in {data_name} "
            f"(e.g. {examples}): their labels would leak into the texts under test; remove "
            f"them, or use `on_invalid='skip'` to leave them out of {what} and count them")
    keep = tuple(s for s in aux.samples if normalise(s.text) not in under_test)
    if not keep:
        raise PddkitError(f"every text of {what} also occurs in {data_name}, so none is left")
    reason = f"also in {data_name} (a label leak), left out of {what}"
    return replace(aux, samples=keep,
                   skipped=aux.skipped + tuple(Skipped(s.source, reason) for s in leaked),
                   meta={**aux.meta, "left_out_overlapping": len(leaked)})


def _short(text: str, n: int = 60) -> str:
    t = normalise(text)
    return t if len(t) <= n else t[:n - 3] + "..."
