"""What texts the blind baseline needs before it is fitted: at least two of each class for
its folds, and a word to count. Light on purpose (no scipy or scikit-learn): the run asks
before it starts the baseline, in the process that loads the model."""

from __future__ import annotations

import re
from collections.abc import Sequence

TOO_FEW = ("the blind baseline needs at least 2 members and 2 non-members (2 documents of "
           "each with groups)")  # its folds' least (a run goes on without it)
TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")  # CountVectorizer's default token_pattern


def word_shortage(texts: Sequence[str]) -> str | None:
    """Why the texts cannot carry the baseline's features, or None. Its word n-gram models
    (TF-IDF, bag of words, neighbour vote) count words of two or more letters or digits
    (scikit-learn's token pattern); when no text has one (`1 + 2 = 3`), they have nothing
    to count and the baseline is not fitted. Texts with a word in only some folds are
    fitted: a base model with no feature in a training part abstains there."""
    texts = list(texts)
    if any(TOKEN_RE.search(t) for t in texts):
        return None
    example = min(texts, key=len, default="")
    return (f"none of the {len(texts)} texts has a word of two or more letters or digits "
            f"(e.g. {example[:40]!r}), and the blind baseline's word n-gram models (TF-IDF, "
            "bag of words, neighbour vote) need words")
