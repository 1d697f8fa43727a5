"""Writing vectors to a store: the output check, the dispatch to each backend's writer, carried columns."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np

from ...errors import InputError
from ..locators import Locator
from .arrow import _write_arrow
from .base import _need, display_name, is_store, parse_locator
from .opening import _OPEN, _OPEN_LOCK, open_store
from .postgres import _write_pg, pg_connect, pg_error

#: store kinds embedcheck writes (``-o`` of embed, project, compress)
WRITABLE = ("parquet", "lance", "lancedb", "postgres")


def output_locator(x: Any) -> Optional[Locator]:
    """The :class:`Locator` of an output store, None for a plain file; a store embedcheck does
    not write (Arrow IPC, FAISS, a parquet folder) is refused."""
    loc = parse_locator(x)
    if loc is None and isinstance(x, (str, os.PathLike)) and Path(os.fspath(x)).suffix.lower() == ".parquet":
        loc = Locator("parquet", os.fspath(x), os.fspath(x))
    if loc is None:
        return None
    if loc.kind not in WRITABLE or (loc.kind == "parquet" and Path(loc.path).is_dir()):
        raise InputError(f"output {loc.name}: embedcheck writes .npy, PATH.parquet, lancedb://DBDIR/TABLE, a .lance "
                         "folder or postgresql://...?table=T&column=C")
    return loc


def place(loc: Locator) -> tuple[str, str, str]:
    """Where a store's rows live, for comparing an output with the inputs (never shown: a
    postgres place holds the connection string)."""
    if loc.kind == "postgres":
        return ("postgres", loc.path, str(loc.table))
    if loc.kind == "lancedb":
        return ("lance", os.path.realpath(Path(loc.path) / f"{loc.table}.lance"), "")
    return (loc.kind if loc.kind == "lance" else "file", os.path.realpath(loc.path), "")


def check_output(target: Any, overwrite: bool = False, inputs: Any = ()) -> Locator:
    """Before any work: ``target`` is a store embedcheck writes, it is none of ``inputs`` (stores or
    files; ``overwrite`` does not allow that), its folder exists (or its database answers), and it
    does not exist yet unless ``overwrite``."""
    loc = output_locator(target)
    if loc is None:
        raise InputError(f"{display_name(target)} is not an output store")
    for inp in inputs or ():
        try:
            other = parse_locator(inp)
        except InputError:
            continue  # a malformed input fails where it is read
        if other is None and isinstance(inp, (str, os.PathLike)) and os.fspath(inp) not in ("", "-"):
            other = Locator("file", os.fspath(inp), os.fspath(inp))
        if other is not None and place(other) == place(loc):
            raise InputError(f"output {loc.name} would overwrite the input {display_name(inp)}; choose another output")
    if loc.kind == "postgres":
        _need("psycopg", loc.name)
        from psycopg import sql

        assert loc.table is not None
        schema, _, table = loc.table.rpartition(".")
        conn = pg_connect(loc.conninfo, loc.name, secret=loc.secrets)
        try:
            ident = (sql.Identifier(schema, table) if schema else sql.Identifier(table)).as_string(conn)
            exists = conn.execute("SELECT to_regclass(%s)", [ident]).fetchone()[0] is not None
        except Exception as exc:  # noqa: BLE001
            raise pg_error(exc, loc.name, loc.secrets) from None
        finally:
            conn.close()
    else:
        path = Path(loc.path) / f"{loc.table}.lance" if loc.kind == "lancedb" else Path(loc.path)
        folder = Path(loc.path) if loc.kind == "lancedb" else path.parent
        if loc.kind == "lancedb":  # the database folder may be new, its parent folder must exist
            if folder.exists() and not folder.is_dir():
                raise InputError(f"output {loc.name}: {folder} is a file, not a LanceDB database folder")
            parent = folder.parent if str(folder.parent) else Path(".")
            if not folder.exists() and not parent.is_dir():
                raise InputError(f"output {loc.name}: folder {parent} does not exist")
        elif not folder.is_dir():
            raise InputError(f"output {loc.name}: folder {folder} does not exist")
        exists = path.exists()
    if exists and not overwrite:
        raise InputError(f"output {loc.name} exists; pass --overwrite to replace it")
    return loc


#: what a store's vector column holds (``codes`` of :func:`write_store`): float32 vectors, float16,
#: int8 / uint8 codes, packed bits (uint8, 8 dimensions to a byte)
CODES = ("float32", "float16", "int8", "uint8", "bits")


def write_store(target: Any, batches: Iterator[np.ndarray], *, dim: int, columns: Optional[dict[str, list[Any]]] = None,
                metadata: Optional[dict[str, Any]] = None, overwrite: bool = False, codes: str = "float32") -> str:
    """Write vector rows (``batches``, in row order) and ``columns`` (one value per row: the id and
    whatever else is carried over) to the store ``target``; ``metadata`` (model, dimension,
    options, a compression record) goes into the store's own metadata. ``codes`` says what the
    rows are: float32 (``dim`` values), float16, int8 or uint8 codes (``dim`` values), packed bits
    (``bits``: ``ceil(dim / 8)`` uint8 bytes for ``dim`` dimensions). Arrow and Lance keep the
    type (a fixed-size list of it); PostgreSQL stores float32 and float16 as ``vector(dim)``, int8 /
    uint8 codes as ``smallint[]`` and bits as ``bit(dim)``. An existing table or file is refused
    unless ``overwrite``; the new data is written beside the old and replaces it in one step (a
    file rename, a Lance version commit, one PostgreSQL transaction), so a failure part-way
    leaves the old one intact. Returns the store's name (password masked)."""
    loc = output_locator(target)
    if loc is None:
        raise InputError(f"{display_name(target)} is not an output store")
    if codes not in CODES:
        raise ValueError(f"codes must be one of {CODES}")
    cols = {k: list(v) for k, v in (columns or {}).items()}
    vec = loc.column or "embedding"
    cols.pop(vec, None)
    meta = dict(metadata or {})
    if codes in ("int8", "uint8", "bits"):
        meta["column"] = vec  # a reader finds the codes by name
    record = json.dumps(meta, sort_keys=True, default=str)
    if loc.kind == "postgres":
        _write_pg(loc, batches, dim, cols, vec, record, overwrite, codes)
    else:
        _write_arrow(loc, batches, dim, cols, vec, record, overwrite, codes)
    with _OPEN_LOCK:  # a store opened before it was replaced is stale
        old = _OPEN.pop(loc.raw, None)
    if old is not None:
        old.close()
    return loc.name


def carried_columns(x: Any, n: int) -> dict[str, list[Any]]:
    """The columns of an input carried to an output store: a store's columns other than its vectors
    (its ids included), or the fields every row of a ``.npy``'s ``.jsonl`` sidecar has."""
    if is_store(x):
        st = open_store(x)
        names = [c for c in st.columns() if c != st.column_name]
        return {c: st.column(c) for c in names}
    if not isinstance(x, (str, os.PathLike)):
        return {}
    side = Path(os.fspath(x)).with_suffix(".jsonl")
    if not side.is_file():
        return {}
    rows = [json.loads(line) for line in side.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len(rows) != n or not rows or not all(isinstance(r, dict) for r in rows):
        return {}
    keys = [k for k in rows[0] if k != "index" and all(k in r for r in rows)]
    return {k: [r[k] for r in rows] for k in keys}
