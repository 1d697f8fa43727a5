"""One adapter per backend: only ``embedcheck/io/stores/`` opens a store or an ANN index. Every module
outside it is read (its AST: imports at any level, modules imported by name) and refused when it
imports a store's or an index's library — psycopg, pgvector, lancedb, lance, hnswlib — or reads or
writes a FAISS index file (``faiss.read_index``, ``faiss.write_index`` and their binary and
serialised twins). FAISS used as arithmetic (k-means, a binary flat index built in memory:
``geometry/``) is not opening an index and stays."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "embedcheck"
STORES = PACKAGE / "io" / "stores"

#: libraries that open a store or an index: only io/stores/ imports them
STORE_LIBRARIES = ("psycopg", "pgvector", "lancedb", "lance", "hnswlib")
#: FAISS's functions that read or write an index file (or its bytes)
FAISS_FILE_CALLS = ("read_index", "write_index", "read_index_binary", "write_index_binary", "serialize_index",
                    "deserialize_index", "serialize_index_binary", "deserialize_index_binary")
#: functions that import a module named by a string
IMPORT_BY_NAME = ("import_module", "__import__", "_need", "find_spec", "importorskip")


def _library(name: str) -> bool:
    return name.split(".")[0] in STORE_LIBRARIES


def opens(source: str) -> Iterator[tuple[int, str]]:
    """(line, what) of every place ``source`` opens a store or an index itself."""
    tree = ast.parse(source)
    faiss_names = {"faiss"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _library(a.name):
                    yield node.lineno, f"import {a.name}"
                if a.name == "faiss" and a.asname:
                    faiss_names.add(a.asname)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if _library(node.module):
                yield node.lineno, f"from {node.module} import ..."
            if node.module == "faiss":
                for a in node.names:
                    if a.name in FAISS_FILE_CALLS:
                        yield node.lineno, f"from faiss import {a.name}"
        elif isinstance(node, ast.Call):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in faiss_names
                    and f.attr in FAISS_FILE_CALLS):
                yield node.lineno, f"faiss.{f.attr}(...)"
            elif fname in IMPORT_BY_NAME and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str) and _library(node.args[0].value):
                yield node.lineno, f"{fname}({node.args[0].value!r})"


def outside_stores() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if STORES not in p.parents]


def test_no_module_outside_io_stores_opens_a_store_or_an_index():
    found = [f"{p.relative_to(ROOT)}:{line}: {what}" for p in outside_stores()
             for line, what in opens(p.read_text(encoding="utf-8"))]
    assert not found, "a store or an index opened outside embedcheck/io/stores/:\n" + "\n".join(found)


def test_every_backend_with_an_index_owns_it_in_its_store_module():
    """The ANN indexes live beside their stores: one module per backend."""
    import embedcheck.io.stores as S

    for cls, module in ((S.FaissIndex, "faiss"), (S.HnswlibIndex, "hnswlib"), (S.PgvectorIndex, "postgres"),
                        (S.LanceIndex, "lance")):
        assert cls.__module__ == f"embedcheck.io.stores.{module}", cls
    assert not (PACKAGE / "io" / "ann.py").exists()


@pytest.mark.parametrize("source", [
    "import psycopg\n",
    "def f():\n    import hnswlib\n",
    "from pgvector.psycopg import register_vector\n",
    "import lancedb as ldb\n",
    "def f(p):\n    import faiss\n    return faiss.read_index(p)\n",
    "import faiss as fx\nfx.write_index(ix, 'a.faiss')\n",
    "from faiss import read_index\n",
    "import importlib\nimportlib.import_module('psycopg')\n",
    "_need('lancedb', 'x')\n",
])
def test_the_check_finds_a_store_opened_outside(source):
    assert len(list(opens(source))) == 1, source


@pytest.mark.parametrize("source", [
    "import faiss\nkm = faiss.Kmeans(8, 4)\nix = faiss.IndexBinaryFlat(64)\n",  # faiss as arithmetic
    "from ..io.stores import open_index\nidx = open_index(path)\n",
    "import pyarrow.parquet as pq\n",  # a labels table, not a store
    "KIND = 'hnswlib'\n",  # a kind's name
])
def test_the_check_lets_arithmetic_and_the_adapters_pass(source):
    assert list(opens(source)) == []
