"""The books of the copyrighted-book audit (studies/audit.py): loaded from a folder of .txt
files, one .txt file or a JSONL of `book` and `text` (Project Gutenberg header and licence
stripped), their names cleaned for tables and terminals, and cut into non-overlapping
`words`-word snippets at seeded random positions."""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pddkit.errors import PddkitError


@dataclass(frozen=True)
class Book:
    name: str
    text: str  # headers stripped
    source: str


@dataclass(frozen=True)
class Snippet:
    book: str
    index: int
    start_word: int
    text: str


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # a terminal escape sequence (colours)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def book_name(name: str) -> str:
    """A book's name as tables and files show it: terminal escape sequences and control
    characters (tabs and newlines included) removed, runs of spaces made one."""
    return " ".join(_CONTROL.sub(" ", _ANSI.sub("", name)).split())


def load_books(books: str | Path) -> list[Book]:
    """A folder of .txt books (searched recursively; name = path without .txt), one .txt
    file, or a JSONL file with `book` and `text` (rows of one book joined in order); names
    without control characters (book_name), made unique with " (2)", " (3)", ..."""
    found = _load_books(Path(books))
    seen: dict[str, int] = {}
    named = []
    for b in found:
        name = book_name(b.name) or "book"
        seen[name] = seen.get(name, 0) + 1
        named.append(Book(name if seen[name] == 1 else f"{name} ({seen[name]})", b.text, b.source))
    return named


def _load_books(path: Path) -> list[Book]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.txt") if p.is_file())
        if not files:
            raise PddkitError(f"`books` folder {path} holds no .txt files")
        return [Book(f.relative_to(path).with_suffix("").as_posix(), _strip(f.read_text(
            encoding="utf-8", errors="replace")), str(f)) for f in files]
    if not path.is_file():
        raise PddkitError(f"`books` {path} does not exist")
    if path.suffix.lower() == ".txt":
        return [Book(path.stem, _strip(path.read_text(encoding="utf-8", errors="replace")),
                     str(path))]
    parts: dict[str, list[str]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise PddkitError(f"{path} line {n} is not JSON ({e.msg})") from None
        if (not isinstance(row, dict) or not isinstance(row.get("text"), str)
                or not isinstance(row.get("book"), (str, int))):
            raise PddkitError(f"{path} line {n} needs a 'book' name and a 'text' string")
        parts.setdefault(str(row["book"]), []).append(row["text"])
    if not parts:
        raise PddkitError(f"`books` file {path} holds no books")
    return [Book(name, _strip("\n\n".join(texts)), str(path)) for name, texts in parts.items()]


def _strip(text: str) -> str:
    from pddkit.data.gutenberg import strip_gutenberg

    return strip_gutenberg(text)


def cut_snippets(book: Book, snippets: int, words: int, seed: int) -> list[Snippet]:
    """Up to `snippets` non-overlapping `words`-word spans of `book` at seeded random
    positions (uniform over all such placements), in book order; [] when it is shorter
    than one span. The seed is mixed with the book's name: adding a book changes no
    other book's snippets."""
    spans = [m.span() for m in re.finditer(r"\S+", book.text)]
    n = len(spans) // words
    if n == 0:
        return []
    k = min(snippets, n)
    rng = np.random.default_rng([seed, zlib.crc32(book.name.encode("utf-8"))])
    slack = len(spans) - k * words
    gaps = np.sort(rng.integers(0, slack + 1, size=k))  # sorted offsets -> no overlap
    starts = [int(g) + i * words for i, g in enumerate(gaps)]
    return [Snippet(book.name, i, s, book.text[spans[s][0]:spans[s + words - 1][1]])
            for i, s in enumerate(starts)]
