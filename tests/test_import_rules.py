"""The import rules of src/pddkit, read from the source with `ast` (nothing is imported):
no import cycles, counting every import statement wherever it stands (module level, inside
a function, under `if TYPE_CHECKING`), and no package importing one above it in the data
flow (LAYERS; docs/development.md gives the same order and each package's docstring the
packages it may import).

An import names a module: `import pddkit.a.b` is pddkit.a.b; `from pddkit.a import b` is
pddkit.a.b when that is a module, else pddkit.a (b is a name in it); relative imports are
resolved against the importing module's package; a package is its __init__."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Low to high: a module may import modules of its own unit and of every unit in its layer
# or below. A unit is a package directly under pddkit (or a sub-package named here, which
# is then a unit of its own) or a module directly under it; "pddkit" is the package's own
# __init__. The order follows the data flow: data -> cache -> backends -> methods and the
# blind baseline -> evaluation -> engine -> reporting -> studies -> sandbox -> cli.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "version", "params", "registry", "progress", "stats", "provenance",
     "output_dir"),
    ("data",),
    ("cache",),
    ("backends",),
    ("corpus",),
    ("data.builders",),
    ("resources",),
    ("methods",),
    ("blind",),
    ("evaluation",),
    ("engine",),
    ("reporting",),
    ("api",),
    ("studies",),
    ("sandbox",),
    ("pddkit",),
    ("cli",),
    ("__main__",),
]


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under `root` (a package's name is its
    __init__'s)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: line of the first such import}, over every import
    statement of every module below `root` (a package folder), inside the package only."""
    files = module_files(root)
    top = root.name
    graph: dict[str, dict[str, int]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1]
                                    + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base
                           for a in node.names]
            for target in targets:
                if target.split(".")[0] != top:
                    continue
                while target not in files:  # `import pddkit.a.b.name`-style spellings
                    target = target.rpartition(".")[0]
                if target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative),
    each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def unit(module: str) -> str:
    """pddkit.engine.run -> engine; pddkit.data.builders.cutoff -> data.builders (a unit
    of its own in LAYERS); pddkit.errors -> errors; pddkit -> pddkit."""
    parts = module.split(".")
    if len(parts) == 1:
        return parts[0]
    named = {u for layer in LAYERS for u in layer}
    return next((".".join(parts[1:n]) for n in range(len(parts), 1, -1)
                 if ".".join(parts[1:n]) in named), parts[1])


def layer_of() -> dict[str, int]:
    return {u: i for i, layer in enumerate(LAYERS) for u in layer}


def upward_imports(graph: dict[str, dict[str, int]]) -> list[str]:
    """`module:line imports module (unit, above)` for every import of a unit in a higher
    layer than the importer's."""
    rank = layer_of()
    return [f"{a}:{line} imports {b} ({unit(b)} is above {unit(a)})"
            for a, edges in sorted(graph.items()) for b, line in sorted(edges.items())
            if rank[unit(b)] > rank[unit(a)]]


# --- the checker itself, on a package written here -------------------------------------

def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root / "pkg"


def test_the_graph_sees_every_kind_of_import(tmp_path):
    pkg = write_tree(tmp_path, {
        "pkg/__init__.py": "from pkg import a\n",
        "pkg/a.py": "import os\nfrom pkg.sub import mod\nfrom pkg.sub import NAME\n",
        "pkg/sub/__init__.py": "NAME = 1\n",
        "pkg/sub/mod.py": "def f():\n    from ..a import g\n    import pkg.sub.other.thing\n",
        "pkg/sub/other.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                            "    from . import mod\n",
    })
    graph = import_graph(pkg)
    assert graph == {
        "pkg": {"pkg.a": 1},
        "pkg.a": {"pkg.sub.mod": 2, "pkg.sub": 3},  # a module, then a name in a package
        "pkg.sub": {},
        "pkg.sub.mod": {"pkg.a": 2, "pkg.sub.other": 3},  # function level, relative, dotted
        "pkg.sub.other": {"pkg.sub.mod": 3},  # under TYPE_CHECKING
    }
    assert cycles(graph) == [["pkg.a", "pkg.sub.mod", "pkg.sub.other"]]


def test_cycles_finds_every_component_and_nothing_else():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {},
             "e": {"f": 1}, "f": {"e": 1, "d": 1}, "g": {"a": 1}}
    assert cycles(graph) == [["a", "b", "c"], ["e", "f"]]
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {}}) == []


def test_units_and_upward_imports():
    assert [unit(m) for m in ("pddkit", "pddkit.errors", "pddkit.engine.run",
                              "pddkit.data.samples", "pddkit.data.builders.cutoff")] == [
        "pddkit", "errors", "engine", "data", "data.builders"]
    graph = {"pddkit.data.samples": {"pddkit.engine.run": 7, "pddkit.errors": 3},
             "pddkit.engine.run": {"pddkit.data.samples": 2, "pddkit.blind.verdict": 5},
             "pddkit.data.calibration": {"pddkit.data.builders.words": 4}}
    assert upward_imports(graph) == [
        "pddkit.data.calibration:4 imports pddkit.data.builders.words (data.builders is above "
        "data)",
        "pddkit.data.samples:7 imports pddkit.engine.run (engine is above data)"]


# --- the rules, on src/pddkit ---------------------------------------------------------

def test_no_import_cycles():
    graph = import_graph(SRC / "pddkit")
    found = cycles(graph)
    lines = []
    for component in found:
        members = set(component)
        lines.append(" <-> ".join(component) + ": " + "; ".join(
            f"{a}:{line} -> {b}" for a in component for b, line in sorted(graph[a].items())
            if b in members))
    assert not found, "import cycles:\n" + "\n".join(lines)


def test_every_unit_has_a_layer():
    units = {unit(m) for m in module_files(SRC / "pddkit")}
    named = [u for layer in LAYERS for u in layer]
    assert len(named) == len(set(named)), "a unit is in two layers"
    assert units == set(named), (f"not in LAYERS: {sorted(units - set(named))}; "
                                 f"gone: {sorted(set(named) - units)}")


def test_no_package_imports_one_above_it():
    found = upward_imports(import_graph(SRC / "pddkit"))
    assert not found, "imports against the layer order:\n" + "\n".join(found)


MAY_IMPORT = re.compile(r"May import:\s*(.*?)\.\s*(?:\n\s*\n|$)", re.S)


@pytest.mark.parametrize("package", sorted(
    u for layer in LAYERS for u in layer
    if (SRC / "pddkit" / u.replace(".", "/") / "__init__.py").exists()))
def test_each_package_docstring_says_what_it_may_import(package):
    """The docstring of pddkit/PACKAGE/__init__.py says "May import: a, b, ... and z."
    naming exactly the units below or beside it in LAYERS."""
    path = SRC / "pddkit" / package.replace(".", "/") / "__init__.py"
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    match = MAY_IMPORT.search(doc)
    assert match, f"{path}: the docstring has no 'May import: ...' sentence"
    said = {w for w in re.split(r"[\s,]+", match.group(1)) if w and w != "and"}
    rank = layer_of()
    allowed = {u for u, r in rank.items() if r <= rank[package] and u != package}
    assert said == allowed, (f"{path} says it may import {sorted(said)}; LAYERS allow "
                             f"{sorted(allowed)}")


def test_development_page_gives_the_same_order():
    page = (SRC.parent / "docs" / "development.md").read_text(encoding="utf-8")
    block = page.split("<!-- layers -->")[1].split("<!-- /layers -->")[0]
    rows = [line.strip().lstrip("0123456789. ").strip() for line in block.splitlines()
            if re.match(r"\s*\d+\.", line)]
    order = [tuple(u.strip("` ") for u in row.split(",")) for row in rows]
    assert order == LAYERS
