"""Opening a store from its locator, one per locator and process (:func:`open_store`), a store read as rows
(:class:`StoreRows`), and opening an ANN index from its locator (:func:`open_index`)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ...errors import InputError
from .. import locators as _locators
from ..locators import SCHEMES
from .arrow import ArrowStore
from .base import BATCH_ROWS, Store, display_name, parse_locator
from .faiss import FaissIndex, FaissStore
from .hnswlib import HnswlibIndex
from .index import AnnIndex
from .lance import LanceIndex, LanceStore
from .postgres import PgStore, PgvectorIndex

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


def is_index_locator(x: Any) -> bool:
    """Whether ``x`` names an index (a postgres or lancedb locator, a FAISS or hnswlib file)."""
    s = str(x)
    return s.lower().startswith(SCHEMES) or Path(s.partition("?")[0]).suffix.lower() in (
        ".faiss", ".index", ".bin", ".hnsw", ".hnswlib")


def open_index(locator: Any, *, space: Optional[str] = None, dim: Optional[int] = None) -> AnnIndex:
    """Open an index from its locator (:mod:`embedcheck.io.stores.index`). ``space`` / ``dim``: an hnswlib index's
    space and dimension (else its ``.json`` sidecar)."""
    if isinstance(locator, AnnIndex):
        return locator
    s = str(locator)
    loc = _locators.parse(s) if s.lower().startswith(SCHEMES) else None  # the one parser of stores and indexes
    if loc is not None and loc.kind == "postgres":
        return PgvectorIndex(loc)
    if loc is not None and loc.kind == "lancedb":
        return LanceIndex(loc)
    path = Path(s)
    if not path.exists():
        raise InputError(f"no index file {path}")
    if path.is_dir():
        raise InputError(f"{path} is a folder; an index is a .faiss/.index file, an hnswlib file, "
                         "postgresql://...?table=T&column=C or lancedb://DBDIR/TABLE")
    if path.suffix in (".faiss", ".index") and space is None:
        return FaissIndex(path)
    return HnswlibIndex(path, space, dim)
