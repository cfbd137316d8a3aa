"""The benchmark scripts import only what pddkit has: they import inside main() (so that
`--help` is fast), which no test runs, and a module moved by a refactor must not leave a
script that fails on its first line."""

import ast
import importlib
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).parent.parent / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_pddkit_import_resolves(script: Path):
    missing = []
    for node in ast.walk(ast.parse(script.read_text(), str(script))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pddkit"):
            try:
                module = importlib.import_module(node.module)
            except ImportError as e:
                missing.append(f"line {node.lineno}: {node.module} ({e})")
                continue
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        missing.append(f"line {node.lineno}: {node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pddkit"):
                    try:
                        importlib.import_module(alias.name)
                    except ImportError as e:
                        missing.append(f"line {node.lineno}: {alias.name} ({e})")
    assert not missing, f"{script.name}: " + "; ".join(missing)


def test_there_are_scripts_to_check():
    assert len(SCRIPTS) >= 5
