"""The one way to read rows: :class:`Source`, over an array, a memmap, a ``.npy`` or a shard set.

A matrix input is opened once with :func:`open_source` (headers only: shape, dtype, no pickle;
a shard set's manifest and hashes) and then read by global row index, whatever it is stored as.
Its **parts** — the unit of work of the engine (:mod:`embedcheck.engine`) — are, in global
row order:

* for a shard set: one part per shard, in manifest order;
* for a plain ``.npy``, a memmap or an in-memory array: consecutive ranges of :data:`PART_ROWS`
  rows (a fixed number, so the parts — and the bytes of every merged figure — never depend on
  how many workers there are).

A part is a small value (absolute path or the array itself, row range, global offset); a task on
another process opens the file itself as a read-only memmap (``allow_pickle=False``), so only
paths travel to the workers.

A :class:`Source` also carries its rows' identity — ``ids()``, ``texts()``, ``labels()``,
``column(name)``, ``row_fields(rows)`` — from wherever the input keeps it (a ``.npy``'s ``.jsonl``
sidecar, a shard set's sidecars, a store's id and other columns), so a report that names a row
gives the same id and text whatever the input kind.

A :class:`Source` is also array-like for the readers that index rows (``shape``, ``dtype``,
``X[i]``, ``X[a:b]``, ``X[int array]``, ``X[bool mask]``, ``X[rows, cols]``, ``np.asarray(X)``).

>>> X = np.arange(12, dtype=np.float32).reshape(6, 2) + 1
>>> src = open_source(X, part_rows=4)
>>> src.n, src.dim, len(src.parts), src[3:5].tolist(), src[[5, 0]].tolist()
(6, 2, 2, [[7.0, 8.0], [9.0, 10.0]], [[11.0, 12.0], [1.0, 2.0]])
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, cast

import numpy as np

from ..errors import InputError
from ..rows import CHUNK_ROWS, iter_chunks
from .compressed import open_decoded
from .npyfile import check_matrix_shape, check_rows, open_npy
from .shards import is_shard_set, open_shard_set

#: rows per part of a plain .npy or an array (a multiple of CHUNK_ROWS)
PART_ROWS = 16 * CHUNK_ROWS
_UNREAD = object()  # a Source's sidecar records not read yet


@dataclass(frozen=True)
class Part:
    """Rows ``[start, stop)`` of the 2-D ``.npy`` at ``path`` (or of ``array``); global row index
    of ``start`` = ``offset``."""

    path: str
    start: int
    stop: int
    offset: int
    array: Any = field(default=None, repr=False, compare=False)
    #: a store's locator (:mod:`embedcheck.io.stores`; ``path`` is then its name, password masked)
    store: str = field(default="", repr=False, compare=False)

    @property
    def rows(self) -> int:
        return self.stop - self.start

    @property
    def global_slice(self) -> slice:
        return slice(self.offset, self.offset + self.rows)

    def open(self) -> np.ndarray:
        """The part's file: a read-only memmap, or decoded float32 rows of a compressed artifact."""
        if self.array is not None:
            return cast(np.ndarray, self.array)
        if self.store:
            from .stores import StoreRows

            return cast(np.ndarray, StoreRows(self.store))
        from .compressed import open_decoded

        return open_decoded(self.path, verify=False)

    def read(self, chunk: slice | None = None) -> np.ndarray:
        """The part's rows (or rows ``chunk`` relative to the part), as a C-ordered in-memory array."""
        X = self.open()
        if chunk is None:
            return np.ascontiguousarray(X[self.start:self.stop])
        return np.ascontiguousarray(X[self.start + chunk.start:self.start + chunk.stop])


class Source:
    """A matrix as parts: ``n`` rows of dimension ``dim``; ``shard_set`` when it came from one."""

    ndim = 2

    def __init__(self, name: str, n: int, dim: int, dtype: str, parts: tuple[Part, ...], shard_set: Any = None):
        self.name, self.n, self.dim, self.parts = name, int(n), int(dim), tuple(parts)
        self.shard_set: Any = shard_set
        self.store: Any = None  # the opened store (io.stores.Store) a store's Source came from
        self.dtype = np.dtype(dtype)
        self.shape: tuple[int, int] = (self.n, self.dim)
        self._starts = np.array([p.offset for p in self.parts] + [self.n], dtype=np.int64)
        self._maps: dict[int, np.ndarray] = {}
        #: the ``.jsonl`` records beside a ``.npy`` (its sidecar), when opened from a path
        self.sidecar: Optional[str] = None
        self._records: Any = _UNREAD
        self._columns: dict[str, Optional[list[Any]]] = {}

    def __getstate__(self) -> dict[str, Any]:  # no open memmaps travel with the object
        return {**self.__dict__, "_maps": {}, "store": None, "_records": _UNREAD, "_columns": {}}

    # ---- the rows' identity: ids, labels, texts -------------------------------------------------

    def _store(self) -> Any:
        if self.store is None and self.parts and self.parts[0].store:
            from .stores import open_store

            self.store = open_store(self.parts[0].store)
        return self.store

    def _sidecar_records(self) -> Optional[list[dict]]:
        """Every row's record (one dict per row) of a ``.npy``'s sidecar or a shard set's sidecars;
        None when there are none (an array, a store, no sidecar). A sidecar that is there but holds
        another record count than the rows, or a line that is not a JSON object, is refused naming it
        (:mod:`embedcheck.io.sidecar`, the one reader)."""
        if self._records is not _UNREAD:
            return cast(Optional[list[dict]], self._records)
        recs: Optional[list[dict]] = None
        if self.shard_set is not None:
            ss = self.shard_set
            if all(ss.sidecar_path(i).is_file() for i in range(len(ss.shards))):
                recs = [r for i in range(len(ss.shards)) for r in ss.read_sidecar(i)]  # hash-checked
        elif self.sidecar is not None and Path(self.sidecar).is_file():
            from .sidecar import read_sidecar

            recs = read_sidecar(self.sidecar, self.n, of=f"{self.name}")
        self._records = recs
        return recs

    def column(self, name: str) -> Optional[list[Any]]:
        """The per-row field ``name`` (``id``, ``text``, ``label`` ...) of every row, in row order,
        from wherever the input keeps it: a ``.npy``'s ``.jsonl`` sidecar, a shard set's sidecars, a
        store's columns (``id``: its id column, whatever it is called — ``?id=NAME``); None when the
        input has no such field (an array; a record without it holds None)."""
        if name in self._columns:
            return self._columns[name]
        vals: Optional[list[Any]] = None
        st = self._store()
        if st is not None:
            if name == "id":
                vals = st.ids()
            elif name != st.column_name and name in st.columns():
                vals = list(st.column(name))
        else:
            recs = self._sidecar_records()
            if recs is not None and any(name in r for r in recs):
                vals = [r.get(name) for r in recs]
        if vals is not None and len(vals) != self.n:
            vals = None
        self._columns[name] = vals
        return vals

    def fields(self) -> list[str]:
        """The names of the per-row fields the input keeps (its sidecar records' keys in the order
        first seen, a store's columns but its vector column): what :meth:`column` can read."""
        st = self._store()
        if st is not None:
            return [c for c in st.columns() if c != st.column_name]
        recs = self._sidecar_records()
        return [] if recs is None else list(dict.fromkeys(k for r in recs for k in r))

    def ids(self) -> Optional[list[Any]]:
        """Every row's id (:meth:`column` ``"id"``), or None."""
        return self.column("id")

    def unique_ids(self, what: str = "") -> Optional[list[Any]]:
        """:meth:`ids`, refused in one line naming this input (``what``, then its name) and the first
        repeated id when an id repeats: for a command that names rows by id in its report or output
        (:func:`embedcheck.io.rowids.refuse_repeated_ids`)."""
        from .rowids import refuse_repeated_ids

        ids = self.ids()
        refuse_repeated_ids(ids, f"{what} {self.name}".strip() if what and what != self.name else self.name)
        return ids

    def reordered(self, order: Any, what: str = "embeddings") -> "Source":
        """This source's rows in ``order`` (read into memory), with their per-row fields (ids, labels,
        texts) in the same order: another embedding of the same rows put in a first one's order."""
        out = open_source(np.asarray(self)[np.asarray(order)], what=what)
        names = self.fields()
        if names:
            cols = {f: self.column(f) for f in names}
            out._records = [{f: c[int(i)] for f, c in cols.items() if c is not None} for i in np.asarray(order)]
        return out

    def texts(self) -> Optional[list[Any]]:
        """Every row's text (:meth:`column` ``"text"``), or None."""
        return self.column("text")

    def labels(self) -> Optional[list[Any]]:
        """Every row's label (:meth:`column` ``"label"``), or None."""
        return self.column("label")

    def row_fields(self, rows: Iterable[int], names: Sequence[str] = ("id", "text")) -> dict[int, dict[str, Any]]:
        """``{row: {name: value}}`` for the ``rows`` wanted: what a report says of a row it names
        (a field the input lacks, or a row's None, is left out)."""
        cols = {k: self.column(k) for k in names}
        out: dict[int, dict[str, Any]] = {}
        for r in rows:
            e = {}
            for k, c in cols.items():
                v = None if c is None else c[int(r)]
                if v is not None:
                    e[k] = v.item() if isinstance(v, np.generic) else v
            out[int(r)] = e
        return out

    def __repr__(self) -> str:
        kind = f"shards={len(self.parts)}" if self.sharded else f"parts={len(self.parts)}"
        return f"Source({self.name!r}, shape={self.shape}, dtype={self.dtype.name}, {kind})"

    @property
    def sharded(self) -> bool:
        return self.shard_set is not None

    @property
    def size(self) -> int:
        return self.n * self.dim

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.n

    def _map(self, k: int) -> np.ndarray:
        if k not in self._maps:
            self._maps[k] = self.parts[k].open()
        return self._maps[k]

    def rows(self, start: int, stop: int, *, check: bool = False, what: str = "embeddings") -> np.ndarray:
        """Global rows ``[start, stop)`` read from whichever parts hold them (with ``check``: the
        row checks of ``load_matrix`` per piece, so an error names the file and its row)."""
        return read_range(self.parts, start, stop, check=check, what=what)

    def take(self, idx: Any) -> np.ndarray:
        """Rows at global indices ``idx`` (any integer array), in that order."""
        idx = np.asarray(idx, dtype=np.int64)
        flat = idx.ravel()
        out = np.empty((flat.size, self.dim), dtype=self.dtype)
        which = np.searchsorted(self._starts, flat, side="right") - 1
        for k in np.unique(which):
            sel = np.flatnonzero(which == k)
            p = self.parts[int(k)]
            out[sel] = self._map(int(k))[p.start + (flat[sel] - p.offset)]
        return out.reshape(idx.shape + (self.dim,))

    def _index(self, key: Any) -> np.ndarray:
        idx = np.asarray(key)
        n = self.n
        if idx.dtype == bool:
            if idx.shape != (n,):
                raise IndexError(f"boolean index of shape {idx.shape} does not match {n} rows")
            idx = np.flatnonzero(idx)
        elif idx.size == 0:
            idx = idx.astype(np.int64)
        elif idx.dtype.kind not in "iu":
            raise IndexError(f"rows must be indexed by integers, a slice or a boolean mask, not {idx.dtype}")
        flat = idx.astype(np.int64)
        flat = np.where(flat < 0, flat + n, flat)
        if flat.size and (flat.min() < 0 or flat.max() >= n):
            bad = idx.ravel()[int(np.flatnonzero(((flat < 0) | (flat >= n)).ravel())[0])]
            raise IndexError(f"row {bad} is out of bounds for {n} rows")
        return flat

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, tuple):
            if not key:
                return np.asarray(self)
            rows = self[key[0]]
            rest = key[1:]
            return cast(np.ndarray, rows[rest] if rows.ndim == 1 else rows[(slice(None),) + rest])
        if key is Ellipsis:
            return np.asarray(self)
        n = self.n
        if isinstance(key, (int, np.integer)):
            k = int(key)
            if not -n <= k < n:
                raise IndexError(f"row {k} is out of bounds for {n} rows")
            k %= n
            return self.rows(k, k + 1)[0]
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step == 1:
                if stop <= start:
                    return np.empty((0, self.dim), dtype=self.dtype)
                return self.rows(start, stop)
            return self.take(np.arange(start, stop, step))
        return self.take(self._index(key))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.rows(0, self.n) if self.n else np.empty((0, self.dim), dtype=self.dtype)
        return out.astype(dtype, copy=False) if dtype is not None else out

    def __iter__(self) -> Iterator[np.ndarray]:
        for sl in iter_chunks(self.n):
            yield from self.rows(sl.start, sl.stop)


def open_source(x: Any, *, what: str = "embeddings", part_rows: int = PART_ROWS, min_rows: int = 1) -> Source:
    """A :class:`Source` over ``x``: an array or memmap, a ``.npy`` path, a shard-set folder or its
    ``manifest.json``, or a Source (returned as it is). Only headers are read here (shape, dtype,
    no pickle, not truncated; a shard set's manifest and hashes); the rows themselves are checked
    by whoever reads them with ``check=True``."""
    if isinstance(x, Source):
        return x
    from .stores import Locator, is_store

    if isinstance(x, Locator):
        return open_store_source(x, what=what, part_rows=part_rows, min_rows=min_rows)
    if not isinstance(x, (str, os.PathLike, np.ndarray)):
        if not hasattr(x, "__array__"):  # None, a number, a list of paths ...: said in one line, naming the input
            raise InputError(f"{what} must be an array, a .npy path, a shard set or a store, got {type(x).__name__}")
        x = np.asarray(x)
    elif isinstance(x, (str, os.PathLike)) and not str(os.fspath(x)).strip():
        raise InputError(f"{what} must be an array, a .npy path, a shard set or a store, got an empty path")
    if isinstance(x, (str, os.PathLike)) and is_store(x):
        return open_store_source(x, what=what, part_rows=part_rows, min_rows=min_rows)
    if isinstance(x, np.ndarray):
        check_matrix_shape(x, Path(f"<{what} array>"), what=what, min_rows=min_rows)
        n, d = (int(s) for s in x.shape)
        name = str(getattr(x, "filename", None) or f"<{what} array>")
        parts = tuple(Part(name, s, min(s + part_rows, n), s, array=x) for s in range(0, n, part_rows))
        return Source(name, n, d, str(x.dtype), parts, None)
    if is_shard_set(x) or Path(x).is_dir():  # a folder without a manifest: open_shard_set names it
        ss = open_shard_set(x)
        shard_parts: list[Part] = []
        for i, e in enumerate(ss.shards):
            sp = ss.shard_path(i)
            X = open_npy(sp, f"{what} shard")
            if X.ndim != 2 or X.shape[1] != ss.dim or X.shape[0] != e.rows:
                raise InputError(f"{what} shard {sp} has shape {X.shape}; the manifest says ({e.rows}, {ss.dim})")
            shard_parts.append(Part(os.path.abspath(sp), 0, e.rows, e.start))
        if ss.rows < min_rows:
            raise InputError(f"{what} {x} has {ss.rows} rows; at least {min_rows} needed")
        for i in range(len(ss.shards)):  # each sidecar checked once, before any work (io.sidecar's policy)
            ss.read_sidecar(i)
        return Source(str(x), int(ss.rows), int(ss.dim), str(ss.dtype), tuple(shard_parts), ss)
    X = open_decoded(x, what)  # a compressed artifact is decoded as its rows are read
    check_matrix_shape(X, Path(x), what=what, min_rows=min_rows)
    n, d = (int(s) for s in X.shape)
    parts = tuple(Part(os.path.abspath(x), s, min(s + part_rows, n), s) for s in range(0, n, part_rows))
    src = Source(str(x), n, d, str(X.dtype), parts, None)
    side = Path(os.path.abspath(x)).with_suffix(".jsonl")
    if side != Path(os.path.abspath(x)):
        src.sidecar = str(side)  # X.npy's rows: X.jsonl (what embed writes beside it)
        if side.is_file():  # checked once, here, before any work: every command refuses a bad one alike
            from .sidecar import check_sidecar

            check_sidecar(side, n, of=f"{what} {x}")
    return src


def open_store_source(x: Any, *, what: str = "embeddings", part_rows: int = PART_ROWS, min_rows: int = 1) -> Source:
    """A :class:`Source` over a store (:mod:`embedcheck.io.stores`): its parts are row ranges
    that name the store by its locator, so a task anywhere opens it itself."""
    from .stores import open_store

    st = open_store(x)
    if getattr(st, "approximate", False) and not getattr(st, "warned", False):
        import warnings

        from ..errors import InputWarning

        st.warned = True  # type: ignore[attr-defined]
        warnings.warn(f"{what} {st.name} is a {getattr(st, 'type_name', 'compressed index')}: its vectors are read as "
                      "their reconstruction, an approximation of the vectors that were added", InputWarning, stacklevel=2)
    if st.n < min_rows:
        raise InputError(f"{what} {st.name} has {st.n} rows; at least {min_rows} needed")
    st.check_ids()  # repeated ids: one warning, whether or not the command pairs rows by them
    loc = os.fspath(x)
    parts = tuple(Part(st.name, s, min(s + part_rows, st.n), s, store=loc) for s in range(0, st.n, part_rows))
    src = Source(st.name, st.n, st.dim, str(st.dtype), parts, None)
    src.store = st
    return src


def read_range(parts: Sequence[Part], start: int, stop: int, *, check: bool = False,
               what: str = "embeddings") -> np.ndarray:
    """Global rows ``[start, stop)`` read from whichever parts hold them, C-ordered (row checks per
    piece, so an error names the shard file and its row)."""
    pieces = []
    for p in parts:
        lo, hi = max(start, p.offset), min(stop, p.offset + p.rows)
        if hi <= lo:
            continue
        X = np.ascontiguousarray(p.open()[p.start + lo - p.offset:p.start + hi - p.offset])
        if check:
            _check_piece(X, p.start + lo - p.offset, Path(p.path), what)
        pieces.append(X)
    if not pieces:
        raise IndexError(f"rows {start}-{stop} are outside the matrix")
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


def _check_piece(X: np.ndarray, start: int, path: Path, what: str) -> None:
    """``check_rows`` over a read piece, a chunk at a time (its float64 work copy stays one chunk,
    not the piece); a piece with a non-finite value gets the one whole-piece check, whose message
    counts the bad rows of the piece."""
    work = "float64" if X.dtype.itemsize == 8 else "float32"
    if len(X) <= CHUNK_ROWS or not np.isfinite(X).all():
        check_rows(X, start, path, what=what, work=work)
        return
    for sl in iter_chunks(len(X)):
        check_rows(X[sl], start + sl.start, path, what=what, work=work)


def ranges(n: int, step: int) -> list[tuple[int, int]]:
    """``[start, stop)`` task ranges of ``step`` rows (``step`` a multiple of the chunk size the
    task uses inside, so the chunks are the global chunks whatever the sharding)."""
    return [(s, min(s + step, n)) for s in range(0, n, step)]


def load_shard_matrix(path: str | os.PathLike, *, what: str = "embeddings", need_direction: bool = True,
                      min_rows: int = 1) -> Source:
    """Open a shard set with hash verification and apply :func:`~embedcheck.io.npy.load_matrix`'s
    checks (2-D float, at least ``min_rows`` rows, finite, non-zero rows), streamed shard by shard;
    a bad row is named by its shard and its row in that shard."""
    src = open_source(path, what=what, min_rows=min_rows)
    ss = src.shard_set
    check_matrix_shape(cast(np.ndarray, src), ss.folder, what=what, min_rows=min_rows)
    work = "float64" if src.dtype.itemsize == 8 else "float32"
    for i, e in enumerate(ss.shards):
        M = ss.open_shard(i)
        for sl in iter_chunks(e.rows):
            check_rows(M[sl], sl.start, ss.shard_path(i), what=what, need_direction=need_direction, work=work)
    return src


def source_of_parts(parts: Sequence[Part]) -> Source:
    """A :class:`Source` over parts a task was given (to read rows by global index)."""
    n = max(p.offset + p.rows for p in parts)
    X = parts[0].open()
    return Source(parts[0].path, n, int(X.shape[1]), str(X.dtype), tuple(parts), None)
