"""No import runs back up the layers: every import of every module of the package — top-level or
inside a function, absolute or relative, or a module named in a string (``importlib`` by name) —
goes to the module's own row of the floor table in ``docs/architecture.md`` or to a floor that row
may import. The table is read from the document, so the document and the code cannot disagree."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator, NamedTuple, Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "embedcheck"
TABLE = ROOT / "docs" / "architecture.md"


class Row(NamedTuple):
    floor: int
    modules: tuple[str, ...]  #: dotted names; a name ending in "." is a package and everything in it
    may_import: int  #: the highest floor this row may import (its own row always)
    line: str


def _may_import(cell: str) -> int:
    cell = cell.strip()
    if cell == "everything":
        return 99
    m = re.fullmatch(r"floors? (?:\d+\s*[–-]\s*)?(\d+)(?: .*)?", cell)
    if m:
        return int(m.group(1))
    if cell.startswith("the standard library"):
        return 0
    raise AssertionError(f"architecture.md: cannot read the 'may import' cell {cell!r}")


def _module_names(cell: str) -> tuple[str, ...]:
    out = []
    for name in re.findall(r"`([^`]+)`", cell):
        if name == "embedcheck/__init__.py":
            out.append("embedcheck")
        elif name.endswith("/__init__.py"):  # a package's own module, not everything in it
            out.append(f"embedcheck.{name[:-len('/__init__.py')].replace('/', '.')}")
        elif name.endswith("/"):
            out.append(f"embedcheck.{name[:-1].replace('/', '.')}.")
        elif name.endswith(".py"):
            out.append(f"embedcheck.{name[:-3].replace('/', '.')}")
        else:
            raise AssertionError(f"architecture.md: cannot read the module {name!r}")
    return tuple(out)


def floor_table(text: str) -> list[Row]:
    """The rows of the table under '## The layers'."""
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit():
            rows.append(Row(int(cells[0]), _module_names(cells[1]), _may_import(cells[3]), line[:90]))
    assert rows, "architecture.md has no floor table under '## The layers'"
    return rows


def row_of(module: str, rows: list[Row]) -> Optional[Row]:
    """The row that holds ``module`` (the most specific name wins: ``embedcheck.io.`` over ``embedcheck``)."""
    best: Optional[tuple[int, Row]] = None
    for r in rows:
        for name in r.modules:
            hit = module == name or (name.endswith(".") and (module + ".").startswith(name))
            if hit and (best is None or len(name) > best[0]):
                best = (len(name), r)
    return None if best is None else best[1]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def imported_module(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a ``from ... import`` names, its relative dots resolved against ``package``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[:len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports(source: str, module: str, *, is_package: bool, known: set[str]) -> Iterator[tuple[int, str]]:
    """(line, imported module of the package) of every import in ``source``: ``import x``, ``from x
    import y`` (``y`` when it is a module), relative ones, inside functions too, and every string
    constant that names a module of the package (``"embedcheck.api"``, ``"embedcheck.io.stores:Store"``)."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "embedcheck" or a.name.startswith("embedcheck."):
                    yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            full = imported_module(node, package)
            if full != "embedcheck" and not full.startswith("embedcheck."):
                continue
            for a in node.names:
                sub = f"{full}.{a.name}"
                yield node.lineno, sub if sub in known else full
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            name = node.value.split(":", 1)[0]
            if name in known and name != "embedcheck":
                yield node.lineno, name


def violations(source: str, module: str, rows: list[Row], known: set[str], *, is_package: bool = False) -> list[str]:
    """Every import of ``source`` (the module ``module``) that goes above what its row may import."""
    mine = row_of(module, rows)
    assert mine is not None, f"{module} is in no row of the floor table of docs/architecture.md"
    out = []
    for line, target in imports(source, module, is_package=is_package, known=known):
        theirs = row_of(target, rows)
        assert theirs is not None, f"{target} (imported by {module}) is in no row of the floor table"
        if theirs is not mine and theirs.floor > mine.may_import:
            out.append(f"{module}:{line} imports {target} (floor {theirs.floor}); floor {mine.floor} "
                       f"may import floors up to {mine.may_import}")
    return out


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return floor_table(TABLE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_of_the_package_has_a_floor(rows, modules):
    missing = [m for m in modules if row_of(m, rows) is None]
    assert not missing, f"modules in no row of the floor table of docs/architecture.md: {missing}"


def test_no_module_imports_above_its_floor(rows, modules):
    known = set(modules)
    found = [v for m, p in modules.items()
             for v in violations(p.read_text(encoding="utf-8"), m, rows, known, is_package=p.name == "__init__.py")]
    assert not found, "imports that run back up the layers:\n" + "\n".join(found)


@pytest.mark.parametrize("source, module, expected", [
    # a registry loaded by name from floor 2 (what schemas.py once did)
    ('DECLARING_PACKAGE = "embedcheck.api"\n', "embedcheck.report.schemas", "imports embedcheck.api (floor 7)"),
    # a function-level import from floor 5 into the API
    ("def f():\n    from ..api import embed\n", "embedcheck.report.comparison", "imports embedcheck.api.embed (floor 7)"),
    # the package top from io (floor 3 importing floor 8)
    ("from .. import open_source\n", "embedcheck.io.mteb", "imports embedcheck (floor 8)"),
    ("import embedcheck.cli.common\n", "embedcheck.geometry.aag", "imports embedcheck.cli.common (floor 9)"),
    ('from ..engine.runner import make_engine\n', "embedcheck.io.source", "imports embedcheck.engine.runner (floor 4)"),
])
def test_the_check_finds_an_import_that_runs_back_up(rows, modules, source, expected, module):
    found = violations(source, module, rows, set(modules))
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize("source, module", [
    ('"""Reads ``embedcheck.api`` lazily."""\nfrom ..errors import InputError\n', "embedcheck.report.schemas"),  # a docstring names it
    ("from ..io.source import read_range\nfrom ..stats import paired\n", "embedcheck.geometry.aag"),
    ("from .api import load_all\n", "embedcheck"),
    ("def f():\n    from ..api.embed import embed\n", "embedcheck.cli.embed"),
    ("from .npyfile import read_header\n", "embedcheck.io.npy"),  # its own row
])
def test_the_check_lets_downward_and_same_row_imports_pass(rows, modules, source, module):
    assert violations(source, module, rows, set(modules), is_package=module == "embedcheck") == []


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others (the strongly
    connected components of more than one module, Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    known = set(modules)
    return {m: {t for _, t in imports(p.read_text(encoding="utf-8"), m, is_package=p.name == "__init__.py", known=known)
                if t != m and t in known} for m, p in modules.items()}


def test_no_two_modules_import_each_other(modules):
    """A circle of imports (``io.rowids`` opening a source, ``io.source`` asking ``rowids`` about repeated
    ids) works only by the order functions run in; every module's imports form a tree of floors."""
    circles = import_circles(import_graph(modules))
    assert not circles, "modules that import each other: " + "; ".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_finds_a_circle_through_a_third_module():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert import_circles(graph) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []
