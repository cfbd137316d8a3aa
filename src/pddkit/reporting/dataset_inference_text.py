"""Dataset inference (studies/dataset_inference.py) in sentences for a non-specialist: the
verdict, from the test's p-value, the false-positive check's and the mirrored test's, and
how the false-positive check cut the reference set (its CheckSplit). The studies keep the
numbers; results.json, the terminal and the report show these sentences."""

from __future__ import annotations


def verdict_sentence(p: float, check_p: float | None, alpha: float,
                     less_p: float | None = None, classifier: str = "nonnegative") -> str:
    """The verdict for a non-specialist; `less_p` is the mirrored test's p-value (suspect
    texts less familiar), given when the test itself is not significant."""
    ps = f"p = {p:.2g}"
    if p >= alpha and less_p is not None and less_p < alpha:
        return (f"No evidence of training on the suspect texts: the model does treat them "
                f"differently from the reference texts, but it finds them LESS familiar "
                f"(p = {less_p:.2g} for less familiar; {ps} for more familiar, not below the "
                f"{alpha:g} threshold), which is not evidence of training. The reference texts "
                "probably differ from the suspect texts in some other way (source, time, "
                "topic); use a reference set drawn from the same source as the suspect texts.")
    if p < alpha and check_p is not None and check_p < alpha:
        return (f"Inconclusive: the model treats the suspect texts differently from the reference "
                f"texts ({ps}), but it also separates two halves of the reference set, which it "
                f"never saw (p = {check_p:.2g}), so the difference may come from the texts "
                "themselves rather than from training; use a larger reference set drawn from the "
                "same source as the suspect texts.")
    if p < alpha:
        check = ("" if check_p is None else
                 f", and two halves of the reference set show no such difference (p = {check_p:.2g})")
        if classifier == "paper":
            return (f"Used in training (Maini et al.'s test): the model treats the suspect texts "
                    f"differently from comparable texts it never saw ({ps}, below the {alpha:g} "
                    f"threshold){check}. The paper's classifier counts a difference in either "
                    "direction, also suspect texts that look LESS familiar (see the feature "
                    "gaps); the non-negative classifier counts only texts that look more "
                    "familiar. This assumes the reference texts come from the same source as "
                    "the suspect texts.")
        return (f"Used in training: the model treats the suspect texts as familiar, unlike "
                f"comparable texts it never saw ({ps}, below the {alpha:g} threshold){check}. "
                "This assumes the reference texts come from the same source as the suspect texts.")
    return (f"No evidence of training on the suspect texts: the model does not treat them "
            f"differently from comparable texts it never saw ({ps}, not below the {alpha:g} "
            "threshold). This does not prove they were not used; more texts make the test "
            "more sensitive.")


def check_split_sentence(split) -> str:
    """How the false-positive check cut the reference set (a studies.dataset_inference_halves
    CheckSplit): by whole documents, or text by text and what that risks."""
    a, b = split.texts
    if split.by == "text":
        return (f"The false-positive check split the reference set text by text ({a} + {b} "
                "texts; they have no 'group' column), so windows of one document may sit "
                "on both halves and make them look alike; give each text its document "
                "under 'group' to split by whole documents.")
    ga, gb = split.groups
    alone = (f"; {split.ungrouped} texts without a 'group' count as one document each"
             if split.ungrouped else "")
    return (f"The false-positive check split the reference set by document ('group'): "
            f"{ga} documents ({a} texts) against {gb} documents ({b} texts), no document "
            f"on both sides{alone}.")
