"""The copyrighted-book audit's verdict (studies/audit.py) as the paragraph results.json
(`verdict`), the terminal and the report show: how many books are marked against the
never-seen reference, the highest rate, what the false-discovery rate allows, the
assumptions it rests on and how reliable the method was on validation texts. The studies
keep the numbers (their BookRate, ThresholdSummary and NeverSeenReference, the book test's
summary); only this module writes them into sentences."""

from __future__ import annotations


def _quality(th) -> str:
    quality = ("reliable" if th.val_auc >= 0.8 else "weak" if th.val_auc >= 0.6
               else "no better than chance")
    return (f"On validation texts of known status the method was {quality} (AUC "
            f"{th.val_auc:.2f}; it caught {100 * th.val_tpr:.0f}% of known training texts).")


def _no_verdict(books: list, th, ref, test: dict) -> list[str]:
    lines = [f"No verdict on the {len(books)} books audited: {test['why_not']}, and a book's "
             "rate alone cannot tell a book the model saw from a never-seen book whose "
             "passages simply differ from the validation books'."]
    if books:
        top = books[0]
        lines.append(f"Their rates are measured (the highest, {top.book}: {100 * top.rate:.0f}% "
                     f"of its {top.snippets} passages, 95% interval {100 * top.ci_low:.0f}-"
                     f"{100 * top.ci_high:.0f}%), beside about {100 * ref.mean:.0f}% for the "
                     "never-seen validation texts (out of fold).")
    lines.append("For a verdict, name each validation text's book in a \"group\" column (with "
                 "5 or more never-seen books of 2 or more texts, and 2 or more books of each "
                 "kind), or state that never-seen books do not differ "
                 "(`assume_no_book_spread=True`), which marks more of them where they do.")
    return lines


def audit_verdict(books: list, th, ref, test: dict, skipped: int) -> str:
    """The verdict on `books` (BookRate, highest rate first), from the threshold's validation
    (`th`: ThresholdSummary), the never-seen reference (`ref`), the book test's summary
    (`test`) and the number of books too short to audit (`skipped`)."""
    if not test.get("verdict_given", True):
        lines = _no_verdict(books, th, ref, test)
    else:
        marked = [b for b in books if b.marked]
        verb = "shows" if len(marked) == 1 else "show"
        spread = (f", give or take {100 * ref.between_book_sd:.0f} points from book to book"
                  if ref.spread_accounted else "")
        lines = [f"Of {len(books)} books audited, {len(marked)} {verb} clearly more passages "
                 f"that look like training text than a book the model never saw would (about "
                 f"{100 * ref.mean:.0f}% of its passages{spread})."]
        if marked:
            top = books[0]
            lines.append(f"The highest is {top.book}: {100 * top.rate:.0f}% of its "
                         f"{top.snippets} passages (95% interval {100 * top.ci_low:.0f}-"
                         f"{100 * top.ci_high:.0f}%).")
        fdr, chance = test["fdr"], test["expected_if_none_seen"]
        if marked:  # chance: never-seen books expected to pass the cutoff in effect
            lines.append(f"Of the {len(marked)} marked, about {chance:.2g} are expected to be "
                         f"books the model never saw, marked by chance (the {100 * fdr:g}% "
                         f"false-discovery rate allows at most {test['false_marks_bound']:.2g}).")
        else:
            lines.append(f"Had the model seen none of these books, the chance of marking any "
                         f"would be at most {100 * fdr:g}% (the false-discovery rate).")
        if ref.assumption:
            lines.append(f"This rests on the assumption that {ref.assumption}, which nothing "
                         f"here checks ({ref.reason}); where they do differ, more never-seen "
                         "books are marked than stated.")
    lines.append(_quality(th))
    if skipped:
        lines.append(f"{skipped} books were too short for one passage and were not audited.")
    lines.append("A high rate is statistical evidence that a book was in the training data, "
                 "not proof.")
    return " ".join(lines)
