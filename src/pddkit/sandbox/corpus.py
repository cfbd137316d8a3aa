"""Corpora for the sandbox: a folder of .txt files, a JSONL file, or (default) text that is
on every machine with Python: the standard library's documentation topics and docstrings.

Documents are what the split assigns to members, non-members or the reference pool; a
corpus of few long files is cut into sections first (consecutive paragraphs).
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from pddkit.data.gutenberg import strip_gutenberg
from pddkit.data.jsonl import text_of_line
from pddkit.errors import PddkitError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    source: str  # file (and line) it came from


@dataclass(frozen=True)
class Corpus:
    name: str
    documents: tuple[Document, ...]
    files: int
    undecodable_files: int  # non-UTF-8 files, decoded with replacement


def paragraphs(text: str, min_words: int = 40) -> list[str]:
    """Blank-line separated paragraphs with folded whitespace, at least `min_words` long."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        para = re.sub(r"\s+", " ", block).strip()
        if len(para.split()) >= min_words:
            out.append(para)
    return out


def sections(text: str, words: int) -> list[str]:
    """Consecutive paragraphs joined until each section holds about `words` words; a
    paragraph of two sections or more is cut between words."""
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for para in paragraphs(text, 1):
        toks = para.split()
        while len(toks) >= 2 * words:  # an overlong paragraph: cut it
            out.append(" ".join(toks[:words]))
            toks = toks[words:]
        cur.append(" ".join(toks))
        size += len(toks)
        if size >= words:
            out.append("\n\n".join(cur))
            cur, size = [], 0
    if cur and (size >= words // 2 or not out):
        out.append("\n\n".join(cur))
    elif cur:
        out[-1] += "\n\n" + "\n\n".join(cur)
    return out


def _stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _stdlib_module_docstrings() -> list[tuple[str, list[str]]]:
    """(file relative to the standard library, its docstrings in ast.walk order) of every
    module outside the test folders. Parsing is most of the sandbox's start-up (about 8 s
    on one core): with two cores or more, a child process parses every other file."""
    root = _stdlib_root()
    rels = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if not any(p in ("test", "tests", "idle_test", "site-packages") for p in rel.parts):
            rels.append(str(rel))
    found: list[list[str]] = [[] for _ in rels]
    child = _start_child(root, rels[1::2]) if (os.cpu_count() or 1) >= 2 else None
    for i in range(0, len(rels), 2 if child is not None else 1):
        found[i] = _docstrings(root / rels[i])
    if child is not None:
        answer = _answer(child)
        if answer is None:  # the child failed: its files are parsed here
            answer = [_docstrings(root / rel) for rel in rels[1::2]]
        found[1::2] = answer
    return [(rel, docs) for rel, docs in zip(rels, found) if docs]


def _docstrings(path: Path) -> list[str]:
    """The non-empty docstrings of a module, its classes and functions (ast.walk order,
    cleaned, whitespace runs as one space); none for a file Python cannot parse."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return []
    docs = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                docs.append(re.sub(r"\s+", " ", doc).strip())
    return docs


def _start_child(root: Path, rels: list[str]):
    """`python -m pddkit.sandbox.corpus`, parsing `rels` while this process parses the rest;
    None when no child can be started (then everything is parsed here)."""
    try:  # the files as arguments (a few hundred short relative paths)
        child = subprocess.Popen([sys.executable, "-m", "pddkit.sandbox.corpus", str(root), *rels],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
    except OSError:
        return None
    return child, len(rels)


def _answer(started) -> list[list[str]] | None:
    """The child's docstrings, one list per file it was given; None when it failed."""
    child, n = started
    out = child.stdout.read()
    child.wait()
    try:
        docs = json.loads(out) if child.returncode == 0 else None
    except ValueError:
        docs = None
    if not isinstance(docs, list) or len(docs) != n:
        logger.info("the docstrings' second process failed (code %s); parsing here",
                    child.returncode)
        return None
    return docs


def _child_main() -> None:
    """ROOT FILE...: each file's docstrings, as JSON, on stdout."""
    root = Path(sys.argv[1])
    sys.stdout.write(json.dumps([_docstrings(root / rel) for rel in sys.argv[2:]]))
    sys.stdout.flush()


def stdlib_corpus(section_words: int = 200) -> Corpus:
    """Python's documentation topics (pydoc_data) and each module's docstrings, in sections."""
    docs: list[Document] = []
    topics_file = _stdlib_root() / "pydoc_data" / "topics.py"
    if topics_file.is_file():
        tree = ast.parse(topics_file.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                for name, text in ast.literal_eval(node.value).items():
                    for k, sec in enumerate(sections(text, section_words)):
                        docs.append(Document(f"topic:{name}#{k}", sec, str(topics_file)))
    for rel, module_docs in _stdlib_module_docstrings():
        text = "\n\n".join(d for d in module_docs if len(d.split()) >= 8)
        for k, sec in enumerate(sections(text, section_words) if text else []):
            docs.append(Document(f"module:{rel}#{k}", sec, rel))
    return Corpus("python-stdlib-docs", tuple(docs), files=len(docs), undecodable_files=0)


def load_corpus(path: str | Path | None, section_words: int = 200) -> Corpus:
    """Documents from a folder of .txt files (Gutenberg headers stripped), a JSONL file
    (`text` or `input` per line), or the standard-library default when `path` is None.
    Every document is cut into sections of about `section_words` words."""
    if path is None:
        return stdlib_corpus(section_words)
    p = Path(path)
    docs: list[Document] = []
    undecodable = 0
    if p.is_dir():
        files = sorted(f for f in p.rglob("*.txt") if f.is_file())
        if not files:
            raise PddkitError(f"corpus folder {p} holds no .txt files")
        for f in files:
            raw = f.read_bytes()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                undecodable += 1
                text = raw.decode("utf-8", errors="replace")
            rel = str(f.relative_to(p))
            for k, sec in enumerate(sections(strip_gutenberg(text), section_words)):
                docs.append(Document(f"{rel}#{k}", sec, rel))
        if undecodable:
            logger.warning("%d corpus files were not valid UTF-8 and were decoded with "
                           "replacement", undecodable)
        n_files = len(files)
    elif p.is_file():
        n_files = 1
        with p.open("rb") as fh:
            for no, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    undecodable += 1
                    line = raw.decode("utf-8", errors="replace")
                text = text_of_line(line)
                if text is None:
                    raise PddkitError(f"{p} line {no} is not a JSON object with a 'text' "
                                      "string")
                for k, sec in enumerate(sections(text, section_words)):
                    docs.append(Document(f"line{no}#{k}", sec, f"{p} line {no}"))
    else:
        raise PddkitError(f"corpus {p} does not exist")
    if not docs:
        raise PddkitError(f"corpus {p} holds no text")
    return Corpus(str(p), tuple(docs), files=n_files, undecodable_files=undecodable)


if __name__ == "__main__":  # the second process of _stdlib_module_docstrings
    _child_main()
