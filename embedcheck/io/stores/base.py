"""The store interface (:class:`Store`), its range buffers, locator helpers and the metadata record; each backend subclasses it."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np

from ...errors import InputError
from .. import locators as _locators
from ..locators import Locator, mask_secrets

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



#: the kinds of locator that are stores (an hnswlib file is an index only: :mod:`embedcheck.io.stores`)
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
        from ..compressed import STORED_DTYPE, parse_format

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
        from ..compressed import dequantize, unpack_bits

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

        from ...errors import InputWarning

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


def _remember(batches: Iterator[np.ndarray], failed: list[BaseException]) -> Iterator[np.ndarray]:
    try:
        yield from batches
    except BaseException as exc:
        failed.append(exc)
        raise
