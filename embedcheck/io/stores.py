"""Vectors where they live: Parquet / Arrow IPC files, Lance datasets and LanceDB tables, PostgreSQL
tables with pgvector, and FAISS index files, read as a matrix of rows.

A store is named by one string, its **locator**:

* ``PATH.parquet`` or a folder of ``*.parquet`` files (in name order), ``PATH.arrow`` / ``PATH.feather``
  (Arrow IPC); the vector column is the one column holding lists of floats, or ``?column=NAME`` after
  the path; ``?id=NAME`` names the id column (default: ``id`` when there is one);
* ``lancedb://DBDIR/TABLE`` (everything after ``lancedb://`` is a local path whose last part is the
  table) and a ``.lance`` dataset folder, with the same selectors;
* ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB?table=T&column=C[&id=I]``: a pgvector ``vector`` or
  ``halfvec`` column, or ``real[]`` / ``double precision[]``; ``table``, ``column`` and ``id`` are
  taken out and the rest is the libpq URI as written (``host=/socket/folder`` included);
* ``PATH.faiss`` / ``PATH.index``: a FAISS index whose vectors can be reconstructed.

The one parser of these forms is :func:`embedcheck.io.locators.parse` (:mod:`embedcheck.io.ann`
opens its indexes from the same :class:`Locator`).

Every store has one interface (:class:`Store`): ``n`` rows of dimension ``dim``, ``ids()``,
``read(start, stop)`` (rows as float32 / float64, checked: no NULL, one dimension, finite),
``column(name)`` (labels, texts ...), ``metadata()`` (what embedcheck or the writer recorded:
the model) and ``name`` — the locator with its password masked (``postgresql://user:***@host/db``),
the only form that ever reaches a message, a report or a log.

The unit of work is a row range; a task on another process opens the store itself from the
locator (:func:`open_store` keeps one open store per locator and process), so only strings and
integers travel — never a connection.

>>> display_name("postgresql://ann:s3cret@db.example/prod?table=items&column=emb")
'postgresql://ann:***@db.example/prod?table=items&column=emb'
>>> is_store("x.npy"), is_store("x.parquet?column=emb"), is_store("lancedb:///data/db/items")
(False, True, True)
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np

from ..errors import InputError
from . import locators as _locators
from .locators import Locator, mask_secrets

#: the pip extra that brings every store's library
EXTRA = "embedcheck[stores]"
#: suffix -> store kind of a file or dataset folder (the locator forms: :mod:`embedcheck.io.locators`)
SUFFIXES = {k: v for k, v in _locators.SUFFIXES.items() if v != "hnswlib"}
SCHEMES = _locators.SCHEMES
#: key of embedcheck's record in a store's metadata (parquet/arrow/lance schema metadata)
META_KEY = "embedcheck"
#: rows per read of a whole-store pass
BATCH_ROWS = 8192
#: connect and statement timeout of a database, in seconds (EMBEDCHECK_STORE_TIMEOUT overrides)
TIMEOUT_S = 10.0


def timeout_s() -> float:
    v = os.environ.get("EMBEDCHECK_STORE_TIMEOUT", "")
    try:
        t = float(v) if v.strip() else TIMEOUT_S
    except ValueError:
        t = TIMEOUT_S
    return min(max(t, 0.1), 3600.0)


def _need(module: str, what: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"reading {what} needs {module.split('.')[0]}: pip install '{EXTRA}'") from None


# ---- range buffers -----------------------------------------------------------------------------

#: range buffers kept for reuse once their arrays are gone (the last two of a pass: the next pass
#: starts with them) and the largest one kept, in bytes
SPARE_BUFFERS = 2
SPARE_MAX_BYTES = 512 << 20
#: a read's result smaller than this is a plain new array
REUSE_MIN_BYTES = 16 << 20
_SPARE: list[np.ndarray] = []
_SPARE_LOCK = threading.Lock()


class _Lease:
    """The owner of a reused buffer while any array made from it lives (every view of such an
    array keeps this object alive through its ``base``); the buffer goes back to the spares when
    the last of them is gone, never before."""

    __slots__ = ("buf", "__array_interface__")

    def __init__(self, buf: np.ndarray, shape: tuple[int, ...], dtype: np.dtype):
        self.buf = buf
        self.__array_interface__ = {"shape": shape, "typestr": dtype.str, "version": 3,
                                    "data": (buf.__array_interface__["data"][0], False)}

    def __del__(self) -> None:
        try:
            if len(_SPARE) < SPARE_BUFFERS:  # list.append/pop are atomic: no lock in a finaliser
                _SPARE.append(self.buf)
        except Exception:  # noqa: BLE001 - at interpreter exit  # pragma: no cover
            pass


def range_buffer(shape: tuple[int, int], dtype: np.dtype) -> np.ndarray:
    """A new, writable C-ordered array for a read's rows. A large one reuses the memory of an
    earlier read whose arrays are all gone: a store's batches are joined into one block per task
    range, and on a virtual machine new memory (zeroed pages, faulted in one by one) costs more
    than the copy itself."""
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if nbytes < REUSE_MIN_BYTES or nbytes > SPARE_MAX_BYTES:
        return np.empty(shape, dtype=dtype)
    buf = None
    with _SPARE_LOCK:  # a finaliser only appends: the index found stays valid
        for i, b in enumerate(list(_SPARE)):
            if b.nbytes == nbytes:
                buf = _SPARE.pop(i)
                break
    if buf is None:
        buf = np.empty(nbytes, dtype=np.uint8)
    return np.asarray(_Lease(buf, shape, dtype))


# ---- locators ------------------------------------------------------------------------------

#: the kinds of locator that are stores (an hnswlib file is an index only: :mod:`embedcheck.io.ann`)
STORE_KINDS = ("parquet", "arrow", "lance", "lancedb", "faiss", "postgres")


def parse_locator(x: Any) -> Optional[Locator]:
    """The :class:`Locator` of ``x`` (the one parser, :func:`embedcheck.io.locators.parse`), or None
    when ``x`` is not a store (a ``.npy``, a shard set, an array ...)."""
    loc = _locators.parse(x)
    return loc if loc is not None and loc.kind in STORE_KINDS else None


def is_store(x: Any) -> bool:
    """Whether ``x`` names a store (a locator string or path); never raises."""
    try:
        return parse_locator(x) is not None
    except InputError:  # a malformed locator: opening it gives the error
        return isinstance(x, str) and (x.lower().startswith(SCHEMES) or Path(x.partition("?")[0]).suffix.lower() in SUFFIXES)


def display_name(x: Any) -> str:
    """How a store (or any input) is named in messages and reports: the password masked."""
    return mask_secrets(os.fspath(x) if isinstance(x, (str, os.PathLike)) else str(x))


def describe(x: Any) -> str:
    """The locator string of a store or path input (for a part or a hash), password included —
    never printed; :func:`display_name` is what is shown."""
    return os.fspath(x)


# ---- the interface -------------------------------------------------------------------------


class Store:
    """One store's rows: ``n``, ``dim``, ``dtype``; ``read(start, stop)`` → checked rows."""

    kind = "store"

    def __init__(self, loc: Locator):
        self.loc = loc
        self.name = loc.name
        self.n = 0
        self.dim = 0
        self.dtype = np.dtype(np.float32)
        self.column_name = loc.column or ""
        self.id_column: Optional[str] = None
        self.lock = threading.RLock()
        #: a compressed store (``compress -o``): the compression record; rows are stored as codes
        #: of ``cols`` columns of ``raw_dtype`` and decoded as a compressed ``.npy`` is
        self.codes: Optional[dict[str, Any]] = None
        self.cols = 0
        self.raw_dtype = self.dtype
        self._ids_checked = False

    # -- to implement
    def _read(self, start: int, stop: int) -> np.ndarray:
        raise NotImplementedError

    def columns(self) -> list[str]:
        return []

    def column(self, name: str) -> list[Any]:
        raise InputError(f"{self.name} has no column {name!r}")

    def metadata(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass

    # -- shared
    def _need_column(self, name: str) -> None:
        """Refuse a column the store does not have, naming those it has."""
        if name not in self.columns():
            raise InputError(f"{self.name} has no column {name!r}; its columns are: {', '.join(self.columns())}")

    def ids(self) -> Optional[list[Any]]:
        """The id of every row (the id column), or None when the store has none. Ids that repeat
        are said once per store (an :class:`~embedcheck.errors.InputWarning` with their count),
        whether or not the command pairs rows by them."""
        vals = self._all_ids()
        if vals is not None and not self._ids_checked:
            self._ids_checked = True
            warn_duplicate_ids(self.name, vals)
        return vals

    def _all_ids(self) -> Optional[list[Any]]:
        return self.column(self.id_column) if self.id_column else None

    def check_ids(self) -> None:
        """Read the ids once (when the store has them) so that repeats are said as the store is
        opened as an input, whether or not the command reads them later."""
        if self.id_column and not self._ids_checked:
            self.ids()

    def model(self) -> Optional[str]:
        """The model the store says its vectors come from (embedcheck's metadata, or a ``model`` key)."""
        meta = self.metadata()
        m = meta.get("model")
        if isinstance(m, dict):
            m = m.get("id") or m.get("name")
        return str(m) if m else None

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``[start, stop)`` as a C-ordered float array, after the checks every store read makes."""
        if not 0 <= start <= stop <= self.n:
            raise IndexError(f"rows {start}-{stop} are outside {self.name} ({self.n} rows)")
        if stop == start:
            return np.empty((0, self.dim), dtype=self.dtype)
        with self.lock:
            X = self._read(start, stop)
        if self.codes is not None:
            X = self._decode(X, start)
        if X.shape != (stop - start, self.dim):
            raise InputError(f"{self.name}: read {X.shape[0]} rows of dimension {X.shape[1] if X.ndim == 2 else '?'} "
                             f"at row {start}; expected {stop - start} of dimension {self.dim}")
        with np.errstate(over="ignore", invalid="ignore"):
            bad = ~np.isfinite(np.add.reduce(X, axis=1))  # one pass: a NaN or inf makes its row's sum one
        if bad.any():
            bad[bad] = ~np.isfinite(X[bad]).all(axis=1)  # not a sum that merely overflowed
        if bad.any():
            raise InputError(f"{self.name}: row {start + int(np.flatnonzero(bad)[0])} of column "
                             f"{self.column_name!r} holds NaN or inf")
        return np.ascontiguousarray(X, dtype=self.dtype)

    def _set_codes(self, meta: dict[str, Any]) -> None:
        """After ``dim`` (the stored columns) and ``dtype`` are known: a compression record in the
        store's metadata makes the stored integers codes, decoded to float32 rows of its ``dim``."""
        self.cols, self.raw_dtype = self.dim, self.dtype
        rec = codes_record(meta)
        if rec is None:
            return
        from .compressed import STORED_DTYPE, parse_format

        try:
            spec = parse_format(str(rec["format"]), int(rec["original_dim"]))
            dim = int(rec["dim"])
            ranges = np.asarray(rec.get("ranges"), dtype=np.float32) if spec.precision in ("int8", "uint8") else None
        except (KeyError, TypeError, ValueError, InputError) as exc:
            raise InputError(f"{self.name}: bad compression record in its metadata ({exc})") from None
        if ranges is not None and ranges.shape != (2, dim):
            raise InputError(f"{self.name} is {spec.precision} but its metadata has no calibration ranges (2 x {dim})")
        if self.cols != spec.columns(int(rec["original_dim"])):
            raise InputError(f"{self.name}: column {self.column_name!r} has {self.cols} values per row but its "
                             f"compression record says format {rec['format']} ({spec.columns(int(rec['original_dim']))})")
        self.codes = dict(rec, _ranges=ranges, _stored=STORED_DTYPE[spec.precision])
        self.dim, self.dtype = dim, np.dtype(np.float32)

    def _decode(self, X: np.ndarray, start: int) -> np.ndarray:
        from .compressed import dequantize, unpack_bits

        rec = self.codes
        assert rec is not None
        prec = rec["precision"]
        if prec in ("int8", "uint8"):
            lo, hi = (-128, 127) if prec == "int8" else (0, 255)
            bad = (X < lo) | (X > hi)
            if bad.any():
                i = int(np.flatnonzero(bad.any(axis=1))[0])
                raise InputError(f"{self.name}: row {start + i} of column {self.column_name!r} holds a code outside "
                                 f"{lo}..{hi}, not {prec}")
            return dequantize(X, prec, rec["_ranges"])
        return unpack_bits(np.asarray(X, dtype=np.uint8), "ubinary", self.dim)  # packed bits, 8 per byte

    def batches(self, rows: int = BATCH_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        for s in range(0, self.n, rows):
            yield s, self.read(s, min(s + rows, self.n))

    def _check_opened(self) -> None:
        if self.n < 1:
            raise InputError(f"{self.name} is empty: no rows in column {self.column_name!r}")
        if self.dim < 1:
            raise InputError(f"{self.name}: column {self.column_name!r} has vectors of dimension 0")


def _default_id(names: list[str], loc: Locator, shown: str) -> Optional[str]:
    if loc.id:
        if loc.id not in names:
            raise InputError(f"{shown} has no id column {loc.id!r}; its columns are: {', '.join(names)}")
        return loc.id
    return "id" if "id" in names else None


def warn_duplicate_ids(shown: str, ids: list[Any]) -> None:
    """One :class:`~embedcheck.errors.InputWarning` when ``ids`` repeat: how many rows repeat an
    earlier id, and the first repeated id."""
    seen: set[Any] = set()
    repeats, first = 0, None
    for v in ids:
        key = v if isinstance(v, (str, int)) else repr(v)
        if key in seen:
            repeats += 1
            if first is None:
                first = v
        else:
            seen.add(key)
    if repeats:
        import warnings

        from ..errors import InputWarning

        warnings.warn(f"store {shown} has {repeats} duplicate id{'s' if repeats != 1 else ''} (first: {first!r:.40}); "
                      "its rows cannot be matched by id", InputWarning, stacklevel=3)


def contained_files(folder: Path, files: Any, shown: str) -> None:
    """Every file of a folder store (a parquet folder, a Lance dataset) must resolve inside the
    folder's real path, as a shard set's files must (:func:`embedcheck.io.shards.contained`): a
    symbolic link that leaves it is refused, naming it; links that stay inside are fine, and so is
    reaching the whole folder through a link."""
    base = os.path.realpath(folder)
    for f in files:
        if not os.path.islink(f):
            continue
        real = os.path.realpath(f)
        if os.path.commonpath([base, real]) != base:
            raise InputError(f"{shown}: {os.path.relpath(f, folder)} resolves outside the store's folder, to {real} "
                             "(a folder store may not link to files elsewhere)")


def _lance_files(path: Path) -> Iterator[str]:
    """Every file and folder under a Lance dataset folder (links not followed)."""
    for root, dirs, names in os.walk(path):
        for n in dirs + names:
            yield os.path.join(root, n)


def codes_record(meta: Any) -> Optional[dict[str, Any]]:
    """The compression record of a store's metadata when its rows are stored as integer codes
    (int8, uint8, packed bits), else None."""
    rec = meta.get("compression") if isinstance(meta, dict) else None
    if isinstance(rec, dict) and rec.get("precision") in ("int8", "uint8", "binary", "ubinary"):
        return rec
    return None


def _meta_of(schema_meta: Optional[dict]) -> dict[str, Any]:
    """embedcheck's record in an arrow schema's metadata (bytes keys), else the plain keys."""
    if not schema_meta:
        return {}
    meta = {(k.decode() if isinstance(k, bytes) else k): (v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
            for k, v in schema_meta.items()}
    if META_KEY in meta:
        try:
            rec = json.loads(meta[META_KEY])
            if isinstance(rec, dict):
                return rec
        except ValueError:
            pass
    return {k: v for k, v in meta.items() if k in ("model", "model_name", "dim", "options")}


# ---- arrow: parquet files and Arrow IPC --------------------------------------------------------


def _is_vector_type(pa: Any, t: Any, codes: bool = False) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)) \
        and (pa.types.is_floating(t.value_type) or (codes and pa.types.is_integer(t.value_type)))


def _vector_column(pa: Any, schema: Any, loc: Locator, shown: str) -> str:
    names = list(schema.names)
    meta = _meta_of(schema.metadata)
    codes = codes_record(meta) is not None  # a compressed store: lists of integer codes
    if not loc.column and codes and meta.get("column") in names:
        return str(meta["column"])
    if loc.column:
        if loc.column not in names:
            raise InputError(f"{shown} has no column {loc.column!r}; its columns are: {', '.join(names)}")
        if not _is_vector_type(pa, schema.field(loc.column).type, codes):
            raise InputError(f"{shown}: column {loc.column!r} is {schema.field(loc.column).type}, not a vector column "
                             "(a list of floats)")
        return loc.column
    vec = [f.name for f in schema if _is_vector_type(pa, f.type, codes)]
    if len(vec) == 1:
        return vec[0]
    if not vec:
        raise InputError(f"{shown} has no vector column (a list of floats); its columns are: {', '.join(names)}")
    raise InputError(f"{shown} has several vector columns ({', '.join(vec)}); name one with ?column=NAME")


def _np_dtype(pa: Any, t: Any) -> np.dtype:
    vt = t.value_type
    if pa.types.is_integer(vt):  # the codes of a compressed store
        return np.dtype(vt.to_pandas_dtype())
    return np.dtype(np.float64) if pa.types.is_float64(vt) else np.dtype(np.float32)


def arrow_vectors(arr: Any, dim: int, dtype: np.dtype, shown: str, col: str, start: int) -> np.ndarray:
    """A (fixed-size) list array of float vectors as an ``(n, dim)`` array; a NULL vector, a NULL
    element or another dimension is one error naming the row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count:
        i = int(np.flatnonzero(np.asarray(arr.is_null()))[0])
        raise InputError(f"{shown}: row {start + i} of column {col!r} is NULL")
    if not pa.types.is_fixed_size_list(arr.type):
        lens = np.asarray(pc.list_value_length(arr))
        bad = np.flatnonzero(lens != dim)
        if bad.size:
            i = int(bad[0])
            raise InputError(f"{shown}: row {start + i} of column {col!r} has dimension {int(lens[i])}, "
                             f"row 0 has {dim}; every vector must have the same dimension")
    elif arr.type.list_size != dim:
        raise InputError(f"{shown}: column {col!r} has dimension {arr.type.list_size}, expected {dim}")
    values = arr.flatten()
    if values.null_count:
        i = int(np.flatnonzero(np.asarray(values.is_null()))[0]) // max(dim, 1)
        raise InputError(f"{shown}: row {start + i} of column {col!r} holds a NULL element")
    X = values.to_numpy(zero_copy_only=False)
    return X.astype(dtype, copy=False).reshape(len(arr), dim)


class ArrowStore(Store):
    """A parquet file, a folder of them, or an Arrow IPC file: read by row groups / record
    batches, only the columns asked for; sequential reads continue where the last one stopped."""

    def __init__(self, loc: Locator):
        super().__init__(loc)
        import pyarrow as pa

        self.kind = loc.kind
        p = Path(loc.path)
        if not p.exists():
            from .paths import missing as why_missing

            raise InputError(f"{self.name} {why_missing(p)}")
        self._pa = pa
        self._files: list[Any] = []
        self._ipc: Any = None
        try:
            if loc.kind == "parquet":
                import pyarrow.parquet as pq

                paths = sorted(p.glob("*.parquet")) if p.is_dir() else [p]
                if not paths:
                    raise InputError(f"{self.name} is a folder without .parquet files")
                if p.is_dir():
                    contained_files(p, paths, self.name)
                from .integrity import parquet_problem

                for f in paths:  # a file cut short or not parquet, in words (pyarrow's words are its own)
                    problem = parquet_problem(f, self.name if f == p else f"{self.name}: {f.name}")
                    if problem:
                        raise InputError(problem)
                # buffered page reads: a row group is streamed, never held whole (one row group of
                # a million rows is 1.5 GB of vectors)
                self._files = [pq.ParquetFile(str(f), buffer_size=1 << 22, pre_buffer=False) for f in paths]
                schema = self._files[0].schema_arrow
                for f, fp in zip(self._files[1:], paths[1:]):
                    if not f.schema_arrow.remove_metadata().equals(schema.remove_metadata()):
                        raise InputError(f"{self.name}: {fp.name} has another schema than {paths[0].name}")
                counts = [(k, rg, f.metadata.row_group(rg).num_rows)
                          for k, f in enumerate(self._files) for rg in range(f.num_row_groups)]
            else:
                import pyarrow.ipc as ipc

                from .integrity import arrow_problem

                problem = arrow_problem(p, self.name)
                if problem:
                    raise InputError(problem)
                try:
                    self._ipc = ipc.open_file(pa.memory_map(str(p), "r"))
                    counts = [(0, b, self._ipc.get_batch(b).num_rows) for b in range(self._ipc.num_record_batches)]
                except pa.ArrowInvalid:  # the IPC stream format: read once into memory
                    with pa.memory_map(str(p), "r") as src:
                        table = ipc.open_stream(src).read_all()
                    self._ipc = table
                    counts = [(0, b, len(rb)) for b, rb in enumerate(table.to_batches())]
                schema = self._ipc.schema
        except InputError:
            raise
        except Exception:  # noqa: BLE001 - any arrow error is an unreadable file (pyarrow's words are its internals)
            raise InputError(f"{self.name}: is corrupt (not a readable {loc.kind} file)") from None
        self.schema = schema
        self.column_name = _vector_column(pa, schema, loc, self.name)
        self.id_column = _default_id(list(schema.names), loc, self.name)
        self.dtype = _np_dtype(pa, schema.field(self.column_name).type)
        self._units = [(k, u, r) for k, u, r in counts if r > 0]
        self._starts = np.cumsum([0] + [r for _, _, r in self._units])
        self.n = int(self._starts[-1])
        self._cursor: Optional[tuple[int, Iterator[Any], Any, int]] = None  # (next row, batches, pending, pending row)
        t = schema.field(self.column_name).type
        if pa.types.is_fixed_size_list(t):
            self.dim = int(t.list_size)
        elif self.n:
            first = self._unit_table(0, [self.column_name], rows=1).column(0)
            if first.null_count:
                raise InputError(f"{self.name}: row 0 of column {self.column_name!r} is NULL")
            self.dim = len(first[0].as_py() if hasattr(first[0], "as_py") else first[0])
        self._set_codes(self.metadata())
        self._check_opened()

    def _unit_table(self, u: int, columns: list[str], rows: Optional[int] = None) -> Any:
        k, g, _ = self._units[u]
        if self._files:
            if rows is not None:
                return self._pa.Table.from_batches([next(self._files[k].iter_batches(batch_size=rows, row_groups=[g],
                                                                                   columns=columns))])
            return self._files[k].read_row_group(g, columns=columns)
        rb = self._ipc.get_batch(g) if hasattr(self._ipc, "get_batch") else self._ipc.to_batches()[g]
        t = self._pa.Table.from_batches([rb]).select(columns)
        return t.slice(0, rows) if rows is not None else t

    def _iter_from(self, row: int, columns: list[str]) -> Iterator[tuple[int, Any]]:
        """(first row, record batch) from the unit holding ``row`` on, streamed."""
        u = int(np.searchsorted(self._starts, row, side="right")) - 1
        for j in range(u, len(self._units)):
            k, g, _ = self._units[j]
            s = int(self._starts[j])
            if self._files:
                for rb in self._files[k].iter_batches(batch_size=BATCH_ROWS, row_groups=[g], columns=columns,
                                                      use_threads=True):
                    yield s, rb
                    s += rb.num_rows
            else:
                for rb in self._unit_table(j, columns).to_batches():
                    yield s, rb
                    s += rb.num_rows

    def _range_table(self, start: int, stop: int, columns: list[str]) -> Any:
        pieces = []
        cur = self._cursor if columns == [self.column_name] else None
        if cur is not None and cur[0] == start:
            it, pending, prow = cur[1], cur[2], cur[3]
        else:
            it, pending, prow = self._iter_from(start, columns), None, 0
        row = start
        while row < stop:
            if pending is None:
                try:
                    prow, pending = next(it)
                except StopIteration:
                    break
            end = prow + pending.num_rows
            if end <= row:
                pending = None
                continue
            lo, hi = row - prow, min(stop, end) - prow
            pieces.append(pending.slice(lo, hi - lo))
            row = prow + hi
            if hi == pending.num_rows:
                pending = None
        if columns == [self.column_name]:
            self._cursor = (row, it, pending, prow)
        return self._pa.Table.from_batches(pieces) if pieces else None

    def _read(self, start: int, stop: int) -> np.ndarray:
        try:
            t = self._range_table(start, stop, [self.column_name])
        except InputError:
            raise
        except Exception:  # noqa: BLE001 - a page that does not decode; pyarrow's words are its internals
            raise InputError(f"{self.name}: is corrupt (rows {start}-{stop - 1} could not be read)") from None
        if t is None:
            return np.empty((0, self.cols), dtype=self.raw_dtype)
        return arrow_vectors(t.column(0), self.cols, self.raw_dtype, self.name, self.column_name, start)

    def columns(self) -> list[str]:
        return list(self.schema.names)

    def column(self, name: str) -> list[Any]:
        self._need_column(name)
        with self.lock:
            if self._files:
                vals: list[Any] = []
                for f in self._files:
                    vals += f.read(columns=[name]).column(0).to_pylist()
                return vals
            t = self._ipc.read_all() if hasattr(self._ipc, "read_all") else self._ipc
            return list(t.column(name).to_pylist())

    def metadata(self) -> dict[str, Any]:
        return _meta_of(self.schema.metadata)


# ---- lance -------------------------------------------------------------------------------------


class LanceStore(Store):
    """A Lance dataset folder, or the table ``TABLE`` of the LanceDB database folder ``DBDIR``
    (whose data is the dataset ``DBDIR/TABLE.lance``)."""

    def __init__(self, loc: Locator):
        super().__init__(loc)
        lance = _need("lance", f"{self.name}")
        import pyarrow as pa

        self.kind = loc.kind
        if loc.kind == "lancedb":
            db = Path(loc.path)
            if not db.is_dir():
                raise InputError(f"{self.name}: database folder {loc.path} does not exist")
            path = db / f"{loc.table}.lance"
            if not path.is_dir():
                tables = sorted(p.name[:-6] for p in db.glob("*.lance"))
                raise InputError(f"{self.name}: no table {loc.table!r} in {loc.path} (tables: "
                                 f"{', '.join(tables) or 'none'})")
        else:
            path = Path(loc.path)
            if not path.is_dir():
                raise InputError(f"{self.name} does not exist")
        contained_files(path, _lance_files(path), self.name)
        try:
            self.ds = lance.dataset(str(path))
            schema = self.ds.schema
        except Exception:  # noqa: BLE001 - any lance error is an unreadable dataset (its words name Rust internals)
            raise InputError(f"{self.name}: is corrupt (not a readable Lance dataset)") from None
        from .integrity import lance_problem

        problem = lance_problem(self.ds, self.name)  # a data file removed or cut: Lance would fail mid-read
        if problem:
            raise InputError(problem)
        self.schema = schema
        self.column_name = _vector_column(pa, schema, loc, self.name)
        self.id_column = _default_id(list(schema.names), loc, self.name)
        self.dtype = _np_dtype(pa, schema.field(self.column_name).type)
        self.n = int(self.ds.count_rows())
        t = schema.field(self.column_name).type
        if pa.types.is_fixed_size_list(t):
            self.dim = int(t.list_size)
        elif self.n:
            first = self.ds.to_table(columns=[self.column_name], limit=1).column(0)
            if first.null_count:
                raise InputError(f"{self.name}: row 0 of column {self.column_name!r} is NULL")
            self.dim = len(first[0].as_py())
        self._set_codes(self.metadata())
        self._check_opened()

    def _read(self, start: int, stop: int) -> np.ndarray:
        # Lance's own range scan (its batch size: larger batches scan slower), each batch decoded
        # straight into its rows of the result
        out = range_buffer((stop - start, self.cols), self.raw_dtype)
        pos = 0
        try:
            for b in self.ds.to_batches(columns=[self.column_name], offset=start, limit=stop - start,
                                        batch_size=BATCH_ROWS):
                m = min(b.num_rows, stop - start - pos)
                if m <= 0:
                    break
                out[pos:pos + m] = arrow_vectors(b.column(0).slice(0, m), self.cols, self.raw_dtype, self.name,
                                                 self.column_name, start + pos)
                pos += m
        except InputError:
            raise
        except Exception:  # noqa: BLE001 - Lance's words name its Rust internals
            raise InputError(f"{self.name}: is corrupt (Lance could not read rows {start}-{stop - 1})") from None
        return out if pos == stop - start else out[:pos]

    def columns(self) -> list[str]:
        return list(self.schema.names)

    def column(self, name: str) -> list[Any]:
        self._need_column(name)
        with self.lock:
            return list(self.ds.to_table(columns=[name]).column(0).to_pylist())

    def metadata(self) -> dict[str, Any]:
        return _meta_of(self.schema.metadata)


# ---- FAISS -------------------------------------------------------------------------------------


#: FAISS indexes whose vectors come back exactly (``reconstruct``): Flat, HNSW over Flat, IVF-Flat
FAISS_EXACT = "IndexFlat, IndexFlatIP, IndexFlatL2, IndexHNSWFlat, IndexIVFFlat"
#: FAISS encodings read as their reconstruction: float vectors decoded from lossy codes (product,
#: scalar, residual / additive quantisers), with a warning; the codes of any other index (LSH
#: bits, RaBitQ, spectral hashing, binary indexes) are not the vectors and are refused
_FAISS_LOSSY = re.compile(r"PQ|ScalarQuantizer|SQ|ResidualQuantizer|LocalSearchQuantizer|AdditiveQuantizer")
_FAISS_NOT_VECTORS = re.compile(r"LSH|RaBitQ|SpectralHash|Binary")


def faiss_reconstruction(faiss: Any, inner: Any) -> Optional[bool]:
    """Whether a (downcast) FAISS index gives its vectors back: False exactly (Flat, HNSW-Flat,
    IVF-Flat), True as a float approximation (PQ, SQ, residual / additive quantisers, HNSW or IVF
    over them), None when its reconstruction is not the vectors at all (LSH, RaBitQ, any other)."""
    name = type(inner).__name__
    if _FAISS_NOT_VECTORS.search(name):
        return None
    if isinstance(inner, faiss.IndexFlat) or isinstance(inner, faiss.IndexIVFFlat):
        return False
    if isinstance(inner, faiss.IndexHNSW):
        return faiss_reconstruction(faiss, faiss.downcast_index(inner.storage))
    if _FAISS_LOSSY.search(name):
        return True
    return None


class FaissStore(Store):
    """A FAISS index file whose vectors can be reconstructed: Flat, HNSW over Flat, IVF-Flat (exact),
    PQ / SQ and their IVF / HNSW forms (their reconstruction: approximate, ``approximate`` is True).
    An index whose reconstruction is not the vectors (LSH, RaBitQ, a binary index ...) is refused.
    ``IndexIDMap`` ids are the row ids."""

    kind = "faiss"

    def __init__(self, loc: Locator):
        super().__init__(loc)
        faiss = _need("faiss", f"{self.name}")
        p = Path(loc.path)
        if not p.is_file():
            raise InputError(f"{self.name} does not exist")
        try:
            index = faiss.read_index(str(p))
        except Exception:  # noqa: BLE001 - any faiss error is an unreadable index; its message names C++ internals
            try:
                binary = type(faiss.read_index_binary(str(p))).__name__
            except Exception:  # noqa: BLE001
                binary = None
            if binary is not None:
                raise InputError(f"{self.name} is a binary FAISS index ({binary}): it holds bit codes, not the "
                                 f"vectors; use an index that keeps them ({FAISS_EXACT})") from None
            from .integrity import faiss_problem

            raise InputError(faiss_problem(p, self.name)) from None
        self._ids: Optional[list[Any]] = None
        self._owner = index  # the downcast proxies below do not own the index: keep it alive
        inner = faiss.downcast_index(index)
        if hasattr(inner, "id_map") and hasattr(inner, "index"):
            self._ids = faiss.vector_to_array(inner.id_map).tolist()
            self._owner2 = inner
            inner = faiss.downcast_index(inner.index)
        self.index = inner
        self.type_name = type(inner).__name__
        how = faiss_reconstruction(faiss, inner)
        if how is None:
            raise InputError(f"{self.name} is a FAISS {self.type_name}: what it reconstructs is not the vectors that "
                             f"were added; use an index that keeps them ({FAISS_EXACT}; PQ and SQ indexes are read as "
                             "their reconstruction)")
        if isinstance(inner, faiss.IndexIVF):
            inner.make_direct_map()
        self.approximate = how
        self.column_name = "vectors"
        self.n, self.dim = int(index.ntotal), int(index.d)
        self.id_column = "id" if self._ids is not None else None
        try:
            if self.n:
                inner.reconstruct_n(0, 1)
        except Exception as exc:  # noqa: BLE001
            raise InputError(f"{self.name}: a {self.type_name} cannot give back its vectors "
                             f"({' '.join(str(exc).split())[:160]}); use a Flat, HNSW-Flat, IVF-Flat, PQ or SQ index") from None
        self._set_codes({})
        self._check_opened()
        self.metadata()  # its provenance sidecar, when there is one, is readable: refused at opening, not after the work

    def _read(self, start: int, stop: int) -> np.ndarray:
        return np.asarray(self.index.reconstruct_n(start, stop - start), dtype=np.float32)

    def _all_ids(self) -> Optional[list[Any]]:
        return self._ids

    def columns(self) -> list[str]:
        return ["vectors"] + (["id"] if self._ids is not None else [])

    def column(self, name: str) -> list[Any]:
        if name == "id" and self._ids is not None:
            return list(self._ids)
        raise InputError(f"{self.name} is a FAISS index: it holds vectors{' and ids' if self._ids else ''}, "
                         f"no column {name!r}")

    def metadata(self) -> dict[str, Any]:
        side = Path(self.loc.path).with_suffix(".meta.json")
        if side.is_file():
            from .jsonio import loads

            try:
                raw = side.read_bytes()
            except OSError:
                return {}
            rec = loads(raw, f"sidecar {side}")  # a sidecar cut short or not UTF-8 is refused, as beside a .npy
            return rec if isinstance(rec, dict) else {}
        return {}


# ---- PostgreSQL with pgvector ------------------------------------------------------------------

_PG_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_PG_TYPES: dict[str, tuple[str, np.dtype]] = {"vector": ("vector", np.dtype(np.float32)), "halfvec": ("halfvec", np.dtype(np.float32)),
             "real[]": ("float4[]", np.dtype(np.float32)), "double precision[]": ("float8[]", np.dtype(np.float64)),
             # the codes of a compressed store (compress -o): int8 / uint8 codes, packed bits
             "smallint[]": ("int2[]", np.dtype(np.int16)), "bit": ("bit", np.dtype(np.uint8))}
#: big-endian element code and size of each array type
_PG_ARRAY = {"float4[]": (">f4", 4), "float8[]": (">f8", 8), "int2[]": (">i2", 2)}


def pg_error(exc: Exception, shown: str, secret: Any = "") -> InputError:
    """One line for a database error: the first line of its message, password masked."""
    first = " ".join(str(exc).strip().splitlines()[0].split()) if str(exc).strip() else type(exc).__name__
    for s in sorted([secret] if isinstance(secret, str) else list(secret), key=len, reverse=True):
        if s:  # the password as written and decoded (the locator's secrets)
            first = first.replace(s, "***")
    first = mask_secrets(first)
    name = type(exc).__name__
    if name == "QueryCanceled" or "statement timeout" in first:
        return InputError(f"{shown}: the statement timeout ({timeout_s():g} s) fired: {first} "
                          "(EMBEDCHECK_STORE_TIMEOUT=SECONDS sets it)")
    if "timeout expired" in first:
        return InputError(f"{shown}: the connect timeout ({timeout_s():g} s) fired: {first} "
                          "(EMBEDCHECK_STORE_TIMEOUT=SECONDS sets it)")
    return InputError(f"{shown}: {first}")


def pg_connect(conninfo: str, shown: str, *, read_only: bool = True, secret: Any = ()) -> Any:
    """A psycopg connection with the connect timeout, the statement timeout and (for reads) a
    read-only transaction; every failure is one InputError naming ``shown``."""
    psycopg = _need("psycopg", shown)
    t = timeout_s()
    try:
        conn = psycopg.connect(conninfo, connect_timeout=max(1, int(round(t))), autocommit=False)
    except Exception as exc:  # noqa: BLE001 - OperationalError and friends
        raise pg_error(exc, shown, secret) from None
    try:
        conn.read_only = read_only
        # reads: every statement is bounded; a write streams for as long as its rows come, and
        # waits at most the timeout for a lock
        conn.execute("SELECT set_config(%s, %s, false)",
                     ["statement_timeout" if read_only else "lock_timeout", f"{int(t * 1000)}"])
        if read_only:  # every statement its own read-only transaction: no lock is held between reads
            conn.execute("SELECT set_config('default_transaction_read_only', 'on', false)")
            # rows in id order come from the id column's index when there is one: a range read
            # (keyset, LIMIT) then streams its rows instead of sorting the whole table each time
            conn.execute("SELECT set_config('enable_sort', 'off', false)")
        conn.commit()
        conn.autocommit = read_only
    except Exception as exc:  # noqa: BLE001
        conn.close()
        raise pg_error(exc, shown, secret) from None
    return conn


class PgStore(Store):
    """A pgvector column (``vector``, ``halfvec``, ``real[]``, ``double precision[]``) of a table,
    rows in the order of the id column (or the table's physical order without one); read with
    ``COPY (SELECT ...) TO STDOUT (FORMAT BINARY)`` in a read-only transaction, one snapshot."""

    kind = "postgres"

    def __init__(self, loc: Locator):
        super().__init__(loc)
        _need("psycopg", self.name)
        from psycopg import sql

        self._sql = sql
        self._secret = loc.secrets
        self.conn = pg_connect(loc.conninfo, self.name, secret=loc.secrets)
        try:
            self._open(loc)
        except InputError:
            self.close()
            raise
        except Exception as exc:  # noqa: BLE001
            self.close()
            raise pg_error(exc, self.name, self._secret) from None

    def _q(self, query: Any, params: Any = None) -> list[tuple]:
        return self.conn.execute(query, params).fetchall()

    def _open(self, loc: Locator) -> None:
        sql = self._sql
        assert loc.table is not None
        schema, _, table = loc.table.rpartition(".")
        self.table = sql.Identifier(schema, table) if schema else sql.Identifier(table)
        quoted = self.table.as_string(self.conn)
        oid = self._q("SELECT to_regclass(%s)::oid", [quoted])[0][0]
        if oid is None:
            raise InputError(f"{self.name}: no table {loc.table!r}")
        cols = self._q("SELECT attname, format_type(atttypid, atttypmod), attnum FROM pg_attribute "
                       "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum", [oid])
        types = {c: t for c, t, _ in cols}
        attnums = {c: int(a) for c, _, a in cols}
        names = [c for c, _, _ in cols]
        col = loc.column or ""
        if col not in types:
            raise InputError(f"{self.name}: table {loc.table!r} has no column {col!r}; its columns are: {', '.join(names)}")
        base = re.sub(r"\(\d+\)$", "", types[col])
        if base not in _PG_TYPES:
            raise InputError(f"{self.name}: column {col!r} is {types[col]}, not a vector column "
                             "(pgvector vector or halfvec, real[] or double precision[])")
        self.pg_type, self.dtype = _PG_TYPES[base]
        self.column_name = col
        self.col = sql.Identifier(col)
        self.id_column = _default_id(names, loc, self.name)
        self.order = sql.Identifier(self.id_column) if self.id_column else sql.SQL("ctid")
        self._ids: Optional[list[Any]] = None
        self._id_type = types.get(self.id_column or "", "")
        self._bounds: dict[int, Any] = {}  # row -> its id: where a keyset read starts
        if self.id_column:  # a range is read by keyset on the ids (an index scan when the column has one)
            ident = sql.Identifier(self.id_column)
            n, valid = self._q(sql.SQL("SELECT count(*), count({}) FROM {}").format(ident, self.table))[0]
            if n != valid:
                raise InputError(f"{self.name}: the id column {self.id_column!r} holds NULL")
            self.n = int(n)
            unique = self._q("SELECT 1 FROM pg_index WHERE indrelid = %s AND indisunique AND indnkeyatts = 1 "
                             "AND indkey[0] = %s AND indpred IS NULL AND indexprs IS NULL LIMIT 1",
                             [oid, attnums[self.id_column]])
            if not unique:  # no unique index vouches for the ids: read them all and check (kept for reads)
                self._load_ids()
        else:
            self.n = int(self._q(sql.SQL("SELECT count(*) FROM {}").format(self.table))[0][0])
        m = re.search(r"\((\d+)\)$", types[col])
        if m:
            self.dim = int(m.group(1))
        elif self.n:
            dims = "vector_dims({})" if self.pg_type in ("vector", "halfvec") else "cardinality({})"
            first = self._q(sql.SQL("SELECT " + dims + " FROM {} ORDER BY {} LIMIT 1").format(
                self.col, self.table, self.order))[0][0]
            if first is None:
                raise InputError(f"{self.name}: row 0 of column {col!r} is NULL")
            self.dim = int(first)
        self._names = names
        self._bits = 0
        if self.pg_type == "bit":  # bit(n): n bits stored, 8 to a byte
            self._bits, self.dim = self.dim, (self.dim + 7) // 8
        meta = self.metadata()
        if self.pg_type in ("int2[]", "bit") and codes_record(meta) is None:
            raise InputError(f"{self.name}: column {col!r} is {types[col]}, not a vector column "
                             "(pgvector vector or halfvec, real[] or double precision[]; smallint[] and bit(n) "
                             "only with the compression record embedcheck compress writes)")
        self._set_codes(meta)
        if self._bits and self.codes is not None and self._bits != self.dim:
            raise InputError(f"{self.name}: column {col!r} is {types[col]} but its compression record says "
                             f"{self.dim} dimensions")
        self._check_opened()

    def _int_ids(self, typ: str) -> Optional[list[int]]:
        """An integer id column in id order as one bytea of big-endian int8 (``int8send``), decoded
        by numpy: a million ids in one message, not a million rows; None for another type or a
        NULL id (the row-by-row read then names it)."""
        if typ not in ("smallint", "integer", "bigint"):
            return None
        sql = self._sql
        ident = sql.Identifier(self.id_column)
        with self.conn.cursor(binary=True) as cur:
            n, valid, blob = cur.execute(sql.SQL("SELECT count(*), count({}), string_agg(int8send({}::bigint), ''::bytea "
                                                 "ORDER BY {}) FROM {}").format(ident, ident, ident, self.table)).fetchone()
        if n != valid:
            return None
        return np.frombuffer(blob or b"", dtype=">i8").astype(np.int64).tolist()

    def _load_ids(self) -> list[Any]:
        """Every id in row order (read once, when asked for or when no unique index vouches for
        them); NULL or duplicate ids are refused (keyset reads need unique ids)."""
        if self._ids is None:
            sql = self._sql
            with self.lock:
                ids = self._int_ids(self._id_type)
                if ids is None:
                    with self.conn.cursor(binary=True) as cur:
                        ids = [r[0] for r in cur.execute(sql.SQL("SELECT {} FROM {} ORDER BY {}").format(
                            sql.Identifier(self.id_column), self.table, self.order)).fetchall()]
            if any(v is None for v in ids):
                raise InputError(f"{self.name}: the id column {self.id_column!r} holds NULL")
            if len(set(ids)) != len(ids):
                raise InputError(f"{self.name}: the id column {self.id_column!r} holds duplicates; "
                                 "name a unique column with &id=NAME")
            if len(ids) != self.n:
                raise InputError(f"{self.name}: read {len(ids)} ids, expected {self.n} (did the table change?)")
            self._ids = ids
        return self._ids

    def _id_at(self, row: int) -> Any:
        """The id of row ``row``: from the ids when read, else one index-only scan to it."""
        if self._ids is not None:
            return self._ids[row]
        if row not in self._bounds:
            sql = self._sql
            with self.conn.cursor(binary=True) as cur:
                got = cur.execute(sql.SQL("SELECT {} FROM {} ORDER BY {} OFFSET {} LIMIT 1").format(
                    sql.Identifier(self.id_column), self.table, self.order, sql.Literal(row))).fetchone()
            if got is None:
                raise InputError(f"{self.name}: no row {row} (did the table change?)")
            if len(self._bounds) > 1024:
                self._bounds.clear()
            self._bounds[row] = got[0]
        return self._bounds[row]

    def _all_ids(self) -> Optional[list[Any]]:
        return list(self._load_ids()) if self.id_column else None

    def check_ids(self) -> None:
        """Nothing to read: a unique index vouches for the ids, or they were read (and repeats
        refused: keyset reads need unique ids) when the store was opened."""

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001  # pragma: no cover
            pass

    def _copy(self, query: Any) -> bytes:
        blocks: list[Any] = []
        try:
            with self.conn.cursor() as cur:
                with cur.copy(self._sql.SQL("COPY ({}) TO STDOUT (FORMAT BINARY)").format(query)) as copy:
                    blocks.extend(copy)
        except Exception as exc:  # noqa: BLE001
            self.conn.rollback()
            raise pg_error(exc, self.name, self._secret) from None
        return b"".join(blocks)

    def _read(self, start: int, stop: int) -> np.ndarray:
        sql = self._sql
        m = stop - start
        if self.id_column and start > 0:  # keyset: the rows after the id of row start-1 (an index scan)
            q = sql.SQL("SELECT {} FROM {} WHERE {} > {} ORDER BY {} LIMIT {}").format(
                self.col, self.table, self.order, sql.Literal(self._id_at(start - 1)), self.order, sql.Literal(m))
        elif start == 0:
            q = sql.SQL("SELECT {} FROM {} ORDER BY {} LIMIT {}").format(self.col, self.table, self.order, sql.Literal(m))
        else:
            q = sql.SQL("SELECT {} FROM {} ORDER BY {} OFFSET {} LIMIT {}").format(
                self.col, self.table, self.order, sql.Literal(start), sql.Literal(m))
        X = self._stream(q, m)
        # a row without row 0's layout (NULL, another dimension) or a row count that differs: the
        # whole answer parsed again row by row, so that the error names the row
        return X if X is not None else self._parse(self._copy(q), m, start)

    def _stream(self, query: Any, m: int) -> Optional[np.ndarray]:
        """The ``m`` rows of ``COPY (query) TO STDOUT (FORMAT BINARY)`` decoded while they arrive:
        each row message goes into a small scratch buffer (reused: no new memory per row) and every
        few thousand rows are decoded at once into the result, while the server sends the next;
        None when a row does not have the layout of a checked row (a NULL, another dimension) or
        the count differs. libpq's own ``PQgetCopyData`` (psycopg's ``pgconn``) hands out the rows."""
        import select

        from psycopg import pq

        d = self.cols
        vec, _ = self._layout(d)
        dt = np.dtype([("nf", ">i2"), ("len", ">i4")] + vec)
        rs = dt.itemsize
        k = max(1, min(m, (4 << 20) // rs))  # rows per decode step: a scratch of about 4 MB
        scratch = bytearray(k * rs)
        mv = memoryview(scratch)
        out = range_buffer((m, d), self.raw_dtype)
        done, fill, ok, first = 0, 0, True, True
        wait = timeout_s() + 5.0

        def decode(rows: int) -> bool:
            a = np.frombuffer(scratch, dtype=dt, count=rows)
            if not self._fast_ok(a, dt, d):
                return False
            out[done:done + rows] = self._values(a)
            return True

        try:
            with self.conn.cursor() as cur:
                with cur.copy(self._sql.SQL("COPY ({}) TO STDOUT (FORMAT BINARY)").format(query)) as cp:
                    pg = self.conn.pgconn
                    get = pg.get_copy_data
                    while True:
                        nb, data = get(1)
                        if nb == 0:  # nothing yet: wait for the socket, then take in what came
                            if not select.select([pg.socket], [], [], wait)[0]:
                                raise InputError(f"{self.name}: no answer from the server in {wait:g} s")
                            pg.consume_input()
                            continue
                        if nb < 0:  # the end without the trailer: the server's error is the result
                            while (res := pg.get_result()) is not None:
                                if res.status != pq.ExecStatus.COMMAND_OK:
                                    msg = (res.error_message or b"").decode("utf-8", "replace")
                                    raise InputError(pg_error(RuntimeError(msg), self.name, self._secret).args[0])
                            return None
                        if first:
                            first = False
                            if bytes(data[:11]) != _PG_SIGNATURE:
                                ok = False
                            else:
                                skip = 19 + int.from_bytes(data[15:19], "big")
                                data, nb = data[skip:], nb - skip
                                if nb == 0:
                                    continue
                        if nb == 2 and bytes(data) == b"\xff\xff":  # the trailer; psycopg reads the end
                            cp.read()
                            break
                        if not ok:
                            continue
                        if nb != rs or done + fill // rs >= m:
                            ok = False
                            continue
                        mv[fill:fill + rs] = data
                        fill += rs
                        if fill == len(scratch):
                            ok = decode(k)
                            done += k
                            fill = 0
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001
            self.conn.rollback()
            raise pg_error(exc, self.name, self._secret) from None
        if ok and fill:
            ok = decode(fill // rs)
            done += fill // rs
        return out if ok and done == m else None

    def _parse(self, data: bytes, m: int, start: int) -> np.ndarray:
        """Rows of COPY BINARY output: one vectorised view when every row has the layout of
        row 0 (no NULL, one dimension), else row by row to name the bad row."""
        if not data.startswith(_PG_SIGNATURE):
            raise InputError(f"{self.name}: unexpected COPY output")
        ext = int.from_bytes(data[15:19], "big")
        body = memoryview(data)[19 + ext:len(data) - 2]
        d = self.cols
        vec, el = self._layout(d)
        dt = np.dtype([("nf", ">i2"), ("len", ">i4")] + vec)
        if len(body) == m * dt.itemsize:
            a = np.frombuffer(body, dtype=dt, count=m)
            if self._fast_ok(a, dt, d):
                return self._values(a).astype(self.raw_dtype).reshape(m, d)
        return self._slow(body, m, start, el)

    def _values(self, a: np.ndarray) -> np.ndarray:
        return a["v"] if self.pg_type in ("vector", "halfvec", "bit") else a["v"]["x"]

    def _layout(self, d: int) -> tuple[list[tuple], tuple[str, int]]:
        if self.pg_type == "vector":
            return [("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (d,))], (">f4", 4)
        if self.pg_type == "halfvec":
            return [("dim", ">i2"), ("unused", ">i2"), ("v", ">f2", (d,))], (">f2", 2)
        if self.pg_type == "bit":
            return [("bits", ">i4"), ("v", "u1", (d,))], ("u1", 1)
        code, size = _PG_ARRAY[self.pg_type]
        return ([("ndim", ">i4"), ("hasnull", ">i4"), ("oid", ">i4"), ("size", ">i4"), ("lb", ">i4"),
                 ("v", [("l", ">i4"), ("x", code)], (d,))], (code, size))

    def _fast_ok(self, a: np.ndarray, dt: np.dtype, d: int) -> bool:
        if not (a["nf"] == 1).all() or not (a["len"] == dt.itemsize - 6).all():
            return False
        if self.pg_type in ("vector", "halfvec"):
            return bool((a["dim"] == d).all())
        if self.pg_type == "bit":
            return bool((a["bits"] == self._bits).all())
        return bool((a["ndim"] == 1).all() and (a["hasnull"] == 0).all() and (a["size"] == d).all()
                    and (a["v"]["l"] == np.dtype(self._layout(d)[1][0]).itemsize).all())

    def _slow(self, body: memoryview, m: int, start: int, el: tuple[str, int]) -> np.ndarray:
        import struct

        X = np.empty((m, self.cols), dtype=self.raw_dtype)
        pos, i = 0, 0
        code, _ = el
        while pos < len(body) and i < m:
            pos += 2  # the field count: one column is selected
            (ln,) = struct.unpack_from(">i", body, pos)
            pos += 4
            row = start + i
            if ln < 0:
                raise InputError(f"{self.name}: row {row} of column {self.column_name!r} is NULL")
            v = body[pos:pos + ln]
            pos += ln
            vals = None
            if self.pg_type in ("vector", "halfvec"):
                (dim,) = struct.unpack_from(">h", v, 0)
                if dim == self.cols:
                    vals = np.frombuffer(v, dtype=code, count=dim, offset=4)
            elif self.pg_type == "bit":
                (dim,) = struct.unpack_from(">i", v, 0)
                if dim == self._bits:
                    vals = np.frombuffer(v, dtype=code, count=self.cols, offset=4)
            else:
                ndim, hasnull = struct.unpack_from(">ii", v, 0)
                if hasnull:
                    raise InputError(f"{self.name}: row {row} of column {self.column_name!r} holds a NULL element")
                dim = struct.unpack_from(">i", v, 12)[0] if ndim == 1 else 0
                if ndim > 1:
                    raise InputError(f"{self.name}: row {row} of column {self.column_name!r} is a {ndim}-D array")
                if dim == self.cols:
                    vals = np.frombuffer(v, dtype=[("l", ">i4"), ("x", code)], count=dim, offset=20)["x"]
            if vals is None:
                want = self._bits or self.cols
                raise InputError(f"{self.name}: row {row} of column {self.column_name!r} has dimension {dim}, "
                                 f"row 0 has {want}; every vector must have the same dimension")
            X[i] = vals
            i += 1
        if i != m:
            raise InputError(f"{self.name}: read {i} rows at row {start}; expected {m} (did the table change?)")
        return X

    def columns(self) -> list[str]:
        return list(self._names)

    def column(self, name: str) -> list[Any]:
        sql = self._sql
        if name not in self._names:
            raise InputError(f"{self.name}: table {self.loc.table!r} has no column {name!r}; its columns are: "
                             f"{', '.join(self._names)}")
        with self.lock:
            try:
                rows = self._q(sql.SQL("SELECT {} FROM {} ORDER BY {}").format(sql.Identifier(name), self.table, self.order))
            except Exception as exc:  # noqa: BLE001
                self.conn.rollback()
                raise pg_error(exc, self.name, self._secret) from None
        return [r[0] for r in rows]

    def metadata(self) -> dict[str, Any]:
        try:
            rows = self._q("SELECT col_description(to_regclass(%s), attnum) FROM pg_attribute "
                           "WHERE attrelid = to_regclass(%s) AND attname = %s",
                           [self.table.as_string(self.conn)] * 2 + [self.column_name])
        except Exception:  # noqa: BLE001
            self.conn.rollback()
            return {}
        text = rows[0][0] if rows else None
        if not text:
            return {}
        try:
            rec = json.loads(text)
        except ValueError:
            return {}
        if isinstance(rec, dict) and isinstance(rec.get(META_KEY), dict):
            return dict(rec[META_KEY])
        return rec if isinstance(rec, dict) else {}


# ---- opening, per process ----------------------------------------------------------------------

_OPEN: dict[str, Store] = {}
_OPEN_LOCK = threading.Lock()
_KINDS = {"parquet": ArrowStore, "arrow": ArrowStore, "lance": LanceStore, "lancedb": LanceStore,
          "faiss": FaissStore, "postgres": PgStore}


def open_store(x: Any, *, fresh: bool = False) -> Store:
    """The :class:`Store` named by ``x`` (a locator), opened once per process and locator."""
    loc = parse_locator(x)
    if loc is None:
        raise InputError(f"{display_name(x)} is not a store")
    key = loc.raw
    with _OPEN_LOCK:
        st = None if fresh else _OPEN.get(key)
        if st is None:
            st = _KINDS[loc.kind](loc)
            old = _OPEN.pop(key, None)
            if old is not None:
                old.close()
            if len(_OPEN) >= 16:
                _OPEN.pop(next(iter(_OPEN))).close()
            _OPEN[key] = st
        return st


def close_all() -> None:
    with _OPEN_LOCK:
        for st in _OPEN.values():
            st.close()
        _OPEN.clear()


class StoreRows:
    """A store as the read-only array a :class:`~embedcheck.io.source.Part` opens: ``shape``,
    ``dtype``, ``X[a:b]``, ``X[i]``, ``X[int array]`` — rows read from the store on demand."""

    ndim = 2

    def __init__(self, locator: str):
        self.locator = locator
        st = open_store(locator)
        self.shape = (st.n, st.dim)
        self.dtype = st.dtype

    @property
    def store(self) -> Store:
        return open_store(self.locator)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        n = self.shape[0]
        if isinstance(key, tuple):
            rows = self[key[0]]
            return rows[(slice(None),) + key[1:]] if rows.ndim == 2 else rows[key[1:]]
        if isinstance(key, (int, np.integer)):
            k = int(key) % n if -n <= int(key) < n else int(key)
            return self.store.read(k, k + 1)[0]
        if isinstance(key, slice):
            a, b, step = key.indices(n)
            if step == 1:
                return self.store.read(a, max(a, b))
            return self[np.arange(a, b, step)]
        idx = np.asarray(key)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64).ravel()
        out = np.empty((idx.size, self.shape[1]), dtype=self.dtype)
        if not idx.size:
            return out
        order = np.argsort(idx, kind="stable")
        s = idx[order]
        i = 0
        while i < s.size:  # runs of rows close together are read as one range
            j = i
            while j + 1 < s.size and s[j + 1] - s[i] < BATCH_ROWS:
                j += 1
            block = self.store.read(int(s[i]), int(s[j]) + 1)
            out[order[i:j + 1]] = block[s[i:j + 1] - s[i]]
            i = j + 1
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        X = self.store.read(0, self.shape[0])
        return X.astype(dtype, copy=False) if dtype is not None else X


def store_model(x: Any) -> Optional[str]:
    """The model a store says it holds, or None."""
    return open_store(x).model()


# ---- writing ---------------------------------------------------------------------------------

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


def _place(loc: Locator) -> tuple[str, str, str]:
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
        if other is not None and _place(other) == _place(loc):
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


def _arrow_column(pa: Any, name: str, values: list[Any]) -> Any:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed kinds: kept as JSON text
        return pa.array([v if isinstance(v, str) or v is None else json.dumps(v) for v in values], pa.string())


def _pg_type(values: list[Any]) -> tuple[str, Any]:
    vals = [v for v in values if v is not None]
    if vals and all(isinstance(v, bool) for v in vals):
        return "boolean", bool
    if vals and all(isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63) for v in vals):
        return "bigint", int
    if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return "double precision", float
    return "text", lambda v: v if isinstance(v, str) else json.dumps(v)


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


def _write_arrow(loc: Locator, batches: Iterator[np.ndarray], dim: int, cols: dict[str, list[Any]], vec: str,
                 record: str, overwrite: bool, codes: str = "float32") -> None:
    import pyarrow as pa

    arrays = {k: _arrow_column(pa, k, v) for k, v in cols.items()}
    np_type = np.dtype(np.uint8 if codes == "bits" else codes)
    width = (dim + 7) // 8 if codes == "bits" else dim
    fields = [pa.field(k, a.type) for k, a in arrays.items()] + [pa.field(vec, pa.list_(pa.from_numpy_dtype(np_type), width))]
    schema = pa.schema(fields, metadata={META_KEY: record})

    failed: list[BaseException] = []

    def record_batches() -> Iterator[Any]:
        row = 0
        for X in _remember(batches, failed):
            X = np.ascontiguousarray(X, dtype=np_type)
            m = X.shape[0]
            data = [a.slice(row, m) for a in arrays.values()]
            data.append(pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), width))
            yield pa.RecordBatch.from_arrays(data, schema=schema)
            row += m

    if loc.kind == "parquet":
        import pyarrow.parquet as pq

        out = Path(loc.path)
        if not out.parent.is_dir():
            raise InputError(f"output {loc.name}: folder {out.parent} does not exist")
        if out.exists() and not overwrite:
            raise InputError(f"output {loc.name} exists; pass --overwrite to replace it")
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        try:
            with pq.ParquetWriter(str(tmp), schema) as w:
                for rb in record_batches():
                    w.write_batch(rb)
            os.replace(tmp, out)
        finally:
            if tmp.exists():
                tmp.unlink()
        return
    lance = _need("lance", loc.name)
    if loc.kind == "lancedb":
        if not Path(loc.path).is_dir():
            Path(loc.path).mkdir(parents=True)
        path = Path(loc.path) / f"{loc.table}.lance"
    else:
        path = Path(loc.path)
        if not path.parent.is_dir():
            raise InputError(f"output {loc.name}: folder {path.parent} does not exist")
    exists = path.exists()
    if exists and not overwrite:
        raise InputError(f"output {loc.name} exists; pass --overwrite to replace it")
    reader = pa.RecordBatchReader.from_batches(schema, record_batches())
    try:
        lance.write_dataset(reader, str(path), schema=schema, mode="overwrite" if exists else "create")
    except Exception as exc:  # noqa: BLE001 - nothing was committed: the old version stays current
        if failed:  # the rows failed (a bad row, an unreadable input): that error, not lance's wrapping of it
            raise failed[0] from None
        raise InputError(f"output {loc.name}: {' '.join(str(exc).split())[:200]}") from None


def _remember(batches: Iterator[np.ndarray], failed: list[BaseException]) -> Iterator[np.ndarray]:
    try:
        yield from batches
    except BaseException as exc:
        failed.append(exc)
        raise


def _pg_field(value: Any, kind: str) -> bytes:
    """One field of a binary COPY row: its length, then its bytes (-1: NULL)."""
    import struct

    if value is None:
        return b"\xff\xff\xff\xff"
    if kind == "boolean":
        data = b"\x01" if value else b"\x00"
    elif kind == "bigint":
        data = struct.pack(">q", int(value))
    elif kind == "double precision":
        data = struct.pack(">d", float(value))
    else:
        data = (value if isinstance(value, str) else json.dumps(value)).encode("utf-8")
    return len(data).to_bytes(4, "big") + data


def _pg_vectors(X: np.ndarray, dim: int, codes: str, halfvec: bool = False) -> tuple[str, np.ndarray]:
    """The SQL type of the vector column and each row's binary COPY field (length included) as
    one structured array: ``vector`` (pgvector's binary form), ``halfvec`` (float16 rows, when the
    database's pgvector has it: 0.7 or later), ``smallint[]`` (PostgreSQL's array form, element
    type int2), ``bit(dim)``."""
    m = X.shape[0]
    if codes == "float16" and halfvec:
        dt = np.dtype([("len", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("v", ">f2", (dim,))])
        a = np.zeros(m, dtype=dt)
        a["len"], a["dim"], a["v"] = dt.itemsize - 4, dim, X
        return f"halfvec({int(dim)})", a
    if codes in ("float32", "float16"):
        dt = np.dtype([("len", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (dim,))])
        a = np.zeros(m, dtype=dt)
        a["len"], a["dim"], a["v"] = dt.itemsize - 4, dim, X
        return f"vector({int(dim)})", a
    if codes in ("int8", "uint8"):
        dt = np.dtype([("len", ">i4"), ("ndim", ">i4"), ("hasnull", ">i4"), ("oid", ">i4"), ("size", ">i4"),
                       ("lb", ">i4"), ("v", [("l", ">i4"), ("x", ">i2")], (dim,))])
        a = np.zeros(m, dtype=dt)
        a["len"], a["ndim"], a["oid"], a["size"], a["lb"] = dt.itemsize - 4, 1, 21, dim, 1  # 21: int2
        a["v"]["l"], a["v"]["x"] = 2, X
        return "smallint[]", a
    width = (dim + 7) // 8
    dt = np.dtype([("len", ">i4"), ("bits", ">i4"), ("v", "u1", (width,))])
    a = np.zeros(m, dtype=dt)
    a["len"], a["bits"], a["v"] = dt.itemsize - 4, dim, X
    return f"bit({int(dim)})", a


def _write_pg(loc: Locator, batches: Iterator[np.ndarray], dim: int, cols: dict[str, list[Any]], vec: str,
              record: str, overwrite: bool, codes: str = "float32") -> None:
    _need("psycopg", loc.name)
    from psycopg import sql

    shown = loc.name
    secret = loc.secrets
    assert loc.table is not None
    schema, _, table = loc.table.rpartition(".")
    ident = (lambda name: sql.Identifier(schema, name)) if schema else (lambda name: sql.Identifier(name))
    new = f"{table}__embedcheck_new"
    types = {k: _pg_type(v)[0] for k, v in cols.items()}
    conn = pg_connect(loc.conninfo, shown, read_only=False, secret=secret)
    try:
        with conn.transaction():
            if codes in ("float32", "float16") and conn.execute("SELECT to_regtype('vector')").fetchone()[0] is None:
                raise InputError(f"output {shown}: the database has no pgvector extension (CREATE EXTENSION vector)")
            # float16 rows as halfvec where pgvector has it (0.7+), else as vector (the same values, exact)
            half = codes == "float16" and conn.execute("SELECT to_regtype('halfvec')").fetchone()[0] is not None
            vec_type = _pg_vectors(np.zeros((0, (dim + 7) // 8 if codes == "bits" else dim)), dim, codes, half)[0]
            exists = conn.execute("SELECT to_regclass(%s)", [ident(table).as_string(conn)]).fetchone()[0] is not None
            if exists and not overwrite:
                raise InputError(f"output {shown}: table {loc.table!r} exists; pass --overwrite to replace it")
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident(new)))
            defs = [sql.SQL("{} " + t).format(sql.Identifier(k)) for k, t in types.items()]
            defs.append(sql.SQL("{} " + vec_type).format(sql.Identifier(vec)))
            conn.execute(sql.SQL("CREATE TABLE {} ({})").format(ident(new), sql.SQL(", ").join(defs)))
            names = sql.SQL(", ").join([sql.Identifier(k) for k in cols] + [sql.Identifier(vec)])
            values = list(cols.values())
            kinds = list(types.values())
            nf = (len(cols) + 1).to_bytes(2, "big")
            row = 0
            # binary COPY: the vector fields of a batch encoded at once, the other columns per row
            with conn.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(ident(new), names)) as cp:
                cp.write(_PG_SIGNATURE + b"\x00\x00\x00\x00\x00\x00\x00\x00")
                for X in batches:
                    X = np.asarray(X)
                    m = X.shape[0]
                    raw = _pg_vectors(X, dim, codes, half)[1]
                    if not values:
                        body = np.zeros(m, dtype=[("nf", ">i2"), ("f", raw.dtype)])
                        body["nf"], body["f"] = len(cols) + 1, raw
                        cp.write(body.tobytes())
                    else:
                        flat, size = raw.tobytes(), raw.dtype.itemsize
                        cp.write(b"".join(
                            nf + b"".join(_pg_field(v[row + i], t) for v, t in zip(values, kinds))
                            + flat[i * size:(i + 1) * size] for i in range(m)))
                    row += m
                cp.write(b"\xff\xff")
            if exists:
                conn.execute(sql.SQL("DROP TABLE {}").format(ident(table)))
            conn.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(ident(new), sql.Identifier(table)))
            conn.execute(sql.SQL("COMMENT ON COLUMN {}.{} IS {}").format(
                ident(table), sql.Identifier(vec), sql.Literal(json.dumps({META_KEY: json.loads(record)}))))
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the transaction is rolled back: the old table stays
        if isinstance(exc, (ValueError, ArithmeticError)) and not type(exc).__module__.startswith("psycopg"):
            raise
        raise pg_error(exc, shown, secret) from None
    finally:
        conn.close()


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


__all__ = ["EXTRA", "Locator", "Store", "StoreRows", "close_all", "display_name", "is_store", "mask_secrets",
           "check_output", "open_store", "output_locator", "parse_locator", "store_model", "write_store"]
