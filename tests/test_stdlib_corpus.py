"""The default sandbox corpus: the standard library's docstrings, parsed in two processes,
are the ones a plain single-process walk finds, in the same order."""

import ast
import re
import shutil
import sysconfig
from pathlib import Path

import pytest

from pddkit.sandbox import corpus

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ["abc.py", "bisect.py", "colorsys.py", "json/__init__.py", "json/decoder.py",
         "email/utils.py", "textwrap.py", "this.py"]


def _plain(root: Path) -> list[tuple[str, list[str]]]:
    """What the sandbox's corpus has always held: every module's docstrings, one process."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(p in ("test", "tests", "idle_test", "site-packages") for p in rel.parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        docs = [re.sub(r"\s+", " ", d).strip() for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and (d := ast.get_docstring(n, clean=True))]
        if docs:
            out.append((str(rel), docs))
    return out


@pytest.fixture
def small_stdlib(tmp_path, monkeypatch):
    for rel in FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(STDLIB / rel, tmp_path / rel)
    (tmp_path / "broken.py").write_text('"""Never read: not Python."""\ndef (:\n')
    (tmp_path / "test").mkdir()
    shutil.copy(STDLIB / "abc.py", tmp_path / "test" / "abc.py")  # test folders: left out
    monkeypatch.setattr(corpus, "_stdlib_root", lambda: tmp_path)
    monkeypatch.setattr(corpus.os, "cpu_count", lambda: 2)
    return tmp_path


def test_two_processes_find_what_one_does(small_stdlib):
    found = corpus._stdlib_module_docstrings()
    assert found == _plain(small_stdlib)
    # this.py has no docstring, broken.py does not parse, test/ is left out
    assert [rel for rel, _ in found] == sorted(set(FILES) - {"this.py"})


def test_a_child_that_fails_leaves_its_files_to_the_parent(small_stdlib, monkeypatch, tmp_path):
    failing = tmp_path / "python-that-fails"
    failing.write_text("#!/bin/sh\nexit 3\n")
    failing.chmod(0o755)
    monkeypatch.setattr(corpus.sys, "executable", str(failing))
    assert corpus._stdlib_module_docstrings() == _plain(small_stdlib)
    monkeypatch.setattr(corpus.sys, "executable", str(tmp_path / "no-such-python"))
    assert corpus._stdlib_module_docstrings() == _plain(small_stdlib)


def test_one_core_parses_in_one_process(small_stdlib, monkeypatch):
    monkeypatch.setattr(corpus.os, "cpu_count", lambda: 1)
    monkeypatch.setattr(corpus.subprocess, "Popen", None)  # never called
    assert corpus._stdlib_module_docstrings() == _plain(small_stdlib)
