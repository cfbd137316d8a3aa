"""The text normaliser of pddkit's corpus indexes: Unicode NFC, then every whitespace run
to one space, ends stripped. Benchmarks re-space texts and books wrap lines; token n-grams
break on every such difference, so an index built with `normalize=True` (recorded in its
manifest) is queried with texts normalised the same way."""

from __future__ import annotations

import re
import unicodedata

_SPACES = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """NFC, whitespace runs (any Unicode space, tab, line break) to one space, stripped."""
    return _SPACES.sub(" ", unicodedata.normalize("NFC", text)).strip()
