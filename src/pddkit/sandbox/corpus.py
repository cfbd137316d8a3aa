"""Corpora for the sandbox: a folder of .txt files, a JSONL file, or (default) text that is
on every machine with Python: the standard library's documentation topics and docstrings.

Documents are what the split assigns to members, non-members or the reference pool; a
corpus of few long files is cut into sections first (consecutive paragraphs).
"""

from __future__ import annotations

import ast
import logging
import re
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
    root = _stdlib_root()
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(p in ("test", "tests", "idle_test", "site-packages") for p in rel.parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        docs = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=True)
                if doc:
                    docs.append(re.sub(r"\s+", " ", doc).strip())
        if docs:
            out.append((str(rel), docs))
    return out


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
