"""Project Gutenberg books without the project's header, the producer's credits and the
licence footer: the sandbox's corpus, the book builders and the studies read books through
`strip_gutenberg`."""

from __future__ import annotations

import re

_START = re.compile(r"^\*{3}\s*START OF (THIS|THE) PROJECT GUTENBERG.*$", re.I | re.M)
_END = re.compile(r"^\*{3}\s*END OF (THIS|THE) PROJECT GUTENBERG.*$|^End of (the )?Project "
                  r"Gutenberg'?s? .*$", re.I | re.M)
# the end of the licence in the old (1990s) header that has no START marker
_OLD_HEADER_END = re.compile(r"^\*END\*\s*THE SMALL PRINT.*$", re.I | re.M)
# the first line of a producer's credit block right after the header
_CREDIT = re.compile(r"^\s*(Produced by|E-?text (prepared|produced) by|Etext (prepared|produced) "
                     r"by|Transcribed (by|from)|Special thanks are due)\b", re.I)
_MENTIONS_PG = re.compile(r"project\s+gutenberg|gutenberg\.(org|net)|pgdp|pglaf|fadedpage"
                          r"|distributed\s+proofread", re.I)
_MAX_FRONT_BLOCKS = 5  # at most this many leading credit / note blocks are dropped


def _after_start(text: str, start: re.Match) -> str:
    """The text after a START marker, and after its second line when the marker wraps onto
    two lines (the closing *** on the next line)."""
    rest = text[start.end():]
    if not start.group(0).rstrip().endswith("***"):
        nl = rest.find("\n", 1)
        nxt = rest[1:nl] if nl != -1 else rest[1:]
        if rest.startswith("\n") and nxt.strip() and nxt.rstrip().endswith("***"):
            rest = rest[1 + len(nxt):]
    return rest


def _drop_front_matter(text: str) -> str:
    """Drop the blocks (up to a blank line) at the very start that are a producer's credit
    ("Produced by ...", "E-text prepared by ...", "Transcribed from ...") or that mention
    Project Gutenberg / pgdp.net; stop at the first block that is neither."""
    for _ in range(_MAX_FRONT_BLOCKS):
        text = text.lstrip()
        gap = re.search(r"\n[ \t]*\n", text)
        block = text[:gap.start()] if gap else text
        if not block or not (_CREDIT.match(block) or _MENTIONS_PG.search(block)):
            break
        text = text[gap.end():] if gap else ""
    return text


def strip_gutenberg(text: str) -> str:
    """The book without the Project Gutenberg header, the producer's credits right after it
    and the licence footer (when marked).

    The header ends at the "*** START OF THE PROJECT GUTENBERG EBOOK ...***" marker (which
    may wrap onto two lines) or, in old files without one, at the "*END*THE SMALL PRINT!"
    line. Then, only at the start of the text, blank-line separated blocks that are a credit
    ("Produced by ...", "E-text prepared by ...", "Transcribed by/from ...") or mention
    Project Gutenberg / pgdp.net are dropped (at most a few). The footer starts at "*** END
    OF THE PROJECT GUTENBERG EBOOK" or "End of the Project Gutenberg ...". A text without
    any marker is returned as it is (stripped)."""
    start = _START.search(text)
    old = None if start else _OLD_HEADER_END.search(text)
    if start:
        text = _after_start(text, start)
    elif old:
        text = text[old.end():]
    end = _END.search(text)
    if end:
        text = text[:end.start()]
    if start or old:
        text = _drop_front_matter(text)
    return text.strip()
