"""Corpora that need no download: docstrings of the Python standard library.

Read with `ast` from the source files (nothing is imported, so nothing runs).
"""

from __future__ import annotations

import ast
import re
import sysconfig
from pathlib import Path


def stdlib_docstrings(min_words: int = 40, limit: int | None = None) -> list[str]:
    """Module, class and function docstrings of the standard library, whitespace-folded,
    deduplicated, in a stable order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    seen: set[str] = set()
    docs: list[str] = []
    for path in sorted(root.rglob("*.py")):
        if any(p in ("test", "tests", "idle_test", "site-packages") for p in path.parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                     ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node, clean=True)
            if not doc:
                continue
            text = re.sub(r"\s+", " ", doc).strip()
            if len(text.split()) >= min_words and text not in seen:
                seen.add(text)
                docs.append(text)
                if limit is not None and len(docs) >= limit:
                    return docs
    return docs


_START = re.compile(r"^\*{3}\s*START OF (THIS|THE) PROJECT GUTENBERG.*$", re.I | re.M)
_END = re.compile(r"^\*{3}\s*END OF (THIS|THE) PROJECT GUTENBERG.*$|^End of (the )?Project "
                  r"Gutenberg'?s? .*$", re.I | re.M)


def strip_gutenberg(text: str) -> str:
    """The book without the Project Gutenberg header and licence footer (when marked)."""
    start = _START.search(text)
    if start:
        text = text[start.end():]
    end = _END.search(text)
    if end:
        text = text[:end.start()]
    return text.strip()


def paragraphs(text: str, min_words: int = 40) -> list[str]:
    """Blank-line separated paragraphs with folded whitespace, at least `min_words` long."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        para = re.sub(r"\s+", " ", block).strip()
        if len(para.split()) >= min_words:
            out.append(para)
    return out
