"""No module imports a private name of another package of embedcheck: a name with a leading underscore
(``_qrels``, ``_Truth``) or a private module (``api/_common.py``) is its package's own. A name another
package needs is public in its right home. Every import of every module is read — top-level or inside a
function, absolute or relative — and every ``module._name`` of a module imported from another package.

A package is the innermost folder with an ``__init__.py`` (``io`` and ``io/stores`` are two); the
modules directly under ``embedcheck/`` (``spec.py``, ``rows.py`` ...) are the package ``embedcheck``.
Dunder names (``__version__``) are not private."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

import pytest
from test_layers import imported_module

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "embedcheck"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
PACKAGES = {module_name(p) for p in PACKAGE.rglob("__init__.py")}


def package_of(module: str) -> str:
    """The innermost package holding ``module`` (a package's ``__init__`` is the package itself)."""
    return module if module in PACKAGES else module.rpartition(".")[0]


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_part(dotted: str, owner: str) -> str | None:
    """The first private part of ``dotted`` below the package ``owner`` (a private module or name)."""
    rest = dotted[len(owner):].lstrip(".")
    return next((p for p in rest.split(".") if p and private(p)), None)


def found(source: str, module: str, *, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, what) of every private name of another package that ``source`` (the module ``module``) imports."""
    tree = ast.parse(source)
    here = package_of(module)
    package = module if is_package else module.rpartition(".")[0]
    aliases: dict[str, str] = {}  # a local name bound to a module of the package
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            full = imported_module(node, package)
            if full != "embedcheck" and not full.startswith("embedcheck."):
                continue
            for a in node.names:
                target = f"{full}.{a.name}"
                if target in MODULES:
                    aliases[a.asname or a.name] = target
                owner = package_of(target if target in MODULES else full)
                if owner == here:
                    continue
                bad = private_part(target, owner)
                if bad:
                    yield node.lineno, f"from {full} import {a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name != "embedcheck" and not a.name.startswith("embedcheck."):
                    continue
                if a.asname:
                    aliases[a.asname] = a.name
                owner = package_of(a.name) if a.name in MODULES else a.name
                if owner != here and private_part(a.name, owner):
                    yield node.lineno, f"import {a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            target = aliases[node.value.id]
            if private(node.attr) and package_of(target) != here:
                yield node.lineno, f"{node.value.id}.{node.attr} ({target}.{node.attr})"


def test_no_module_imports_a_private_name_of_another_package():
    bad = [f"{m}:{line}: {what}" for m, p in MODULES.items()
           for line, what in found(p.read_text(encoding="utf-8"), m, is_package=p.name == "__init__.py")]
    assert not bad, "private names of another package imported (make them public in their home):\n" + "\n".join(bad)


@pytest.mark.parametrize("source, module", [
    ("from ..api.retrieve import _qrels\n", "embedcheck.measures.hubness"),  # the case issue 49 names
    ("def f():\n    from ..api.recall import _Truth\n", "embedcheck.measures.upgrade_index"),  # in a function
    ("from ..api._common import labels_for\n", "embedcheck.measures.hubness"),  # a private module
    ("from ..api import _common\n", "embedcheck.measures.hubness"),
    ("from ..io import rowids\nk = rowids._key(5)\n", "embedcheck.measures.upgrade"),  # through the module
    ("import embedcheck.io.rowids as R\nR._key(5)\n", "embedcheck.cli.common"),
    ("from .stores import _place\n", "embedcheck.io.outputs"),  # io and io/stores are two packages
    ("from embedcheck.geometry.retrieval import _figures\n", "embedcheck.cli.retrieve"),
    ("from .cli import _app\n", "embedcheck.spec"),  # embedcheck.cli is another package than embedcheck
])
def test_the_check_refuses_a_private_name_of_another_package(source, module):
    assert len(list(found(source, module))) == 1, source


@pytest.mark.parametrize("source, module", [
    ("from ._common import labels_for\n", "embedcheck.api.aag"),  # its own package
    ("from .npyfile import npy_header\n", "embedcheck.io.npy"),
    ("from ..io.retrieval import qrels_of\n", "embedcheck.measures.hubness"),  # a public name
    ("from .. import __version__\n", "embedcheck.cli.common"),  # a dunder
    ("from .base import _need\n", "embedcheck.io.stores.faiss"),
    ("from .rows import _x\n", "embedcheck.spec"),  # the modules under embedcheck/ are one package
])
def test_the_check_lets_own_package_and_public_names_pass(source, module):
    assert list(found(source, module)) == []
