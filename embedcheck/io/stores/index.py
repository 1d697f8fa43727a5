"""The ANN index interface (:class:`AnnIndex`) and what has no backend: the index's ids and
vectors (:func:`index_vectors`), ids to rows (:func:`rows_of`); each backend's index lives beside
its store (``faiss.py``, ``hnswlib.py``, ``postgres.py``, ``lance.py``), opened by
:func:`embedcheck.io.stores.opening.open_index`.

Approximate-nearest-neighbour indexes behind one interface, each queried through its own library.

:func:`~embedcheck.io.stores.opening.open_index` opens a locator and returns an :class:`AnnIndex` (the locator parsed by the parser
stores use, :func:`embedcheck.io.locators.parse`: every libpq spelling docs/stores.md gives, the
URI passed on as written less ``table``, ``column`` and ``id``):

* ``PATH.faiss`` / ``PATH.index`` — a FAISS index file (``faiss.read_index``): HNSW (setting
  ``efSearch``), IVF (``nprobe``), Flat (none); PQ / SQ encodings are quantised (their vectors are
  approximations: the exact side needs the original vectors, ``vectors=``).
* ``PATH.bin`` / ``PATH.hnsw`` (or any other file with ``space=``/``dim=`` or a sidecar
  ``PATH.json`` ``{"space": "cosine|ip|l2", "dim": D}``) — an hnswlib index (``ef``).
* ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB?table=T&column=C[&id=I]`` — a pgvector column with
  an HNSW (``hnsw.ef_search``) or IVFFlat (``ivfflat.probes``) index; the metric comes from the
  index's operator class (``vector_cosine_ops``, ``vector_ip_ops``, ``vector_l2_ops`` and their
  ``halfvec`` twins). Settings are applied with ``set_config(..., true)`` (``SET LOCAL``) inside a
  read-only transaction; table, column and id are quoted identifiers (``psycopg.sql.Identifier``),
  never formatted into SQL; the password never appears in a message.
* ``lancedb://DBDIR/TABLE[?column=C&id=I]`` — a LanceDB table with an IVF_PQ or IVF_HNSW_SQ
  index (``nprobes``, ``refine_factor``; ``ef`` for HNSW), metric from the index's config.

Every index gives: ``kind``, ``metric``, ``dim``, ``n``, the names and current values of its search
settings, ``search(queries, k, **settings) -> (ids, seconds per query)`` (one query per call, as a
service queries it), and :func:`index_vectors` — the index's own ids and vectors, the ground truth
(read minimally here; the generic store readers can replace it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...errors import InputError


def norm_key(name: str) -> str:
    """Setting names compared loosely: ``hnsw.ef_search`` ~ ``ef_search`` ~ ``efSearch``."""
    key = name.strip().lower()
    for pre in ("hnsw.", "ivfflat."):
        key = key.removeprefix(pre)
    return key.replace("_", "").replace("-", "")


@dataclass
class AnnIndex:
    """An opened index. Subclasses implement :meth:`_search_one` and :meth:`_vectors`."""

    locator: str  #: how the index is named in reports (password masked)
    kind: str  #: e.g. ``faiss-hnsw``, ``pgvector-ivfflat``
    library: str  #: the library and its version
    metric: str  #: ``cosine``, ``ip`` or ``l2``
    dim: int
    n: int
    settings: dict[str, Optional[int]] = field(default_factory=dict)  #: name → current value (None: library default)
    quantised: bool = False  #: the index stores approximations of the vectors (PQ / SQ)
    notes: list[str] = field(default_factory=list)
    #: rows the index does not cover yet (LanceDB searches them by a flat scan, exactly)
    unindexed: int = 0

    # ---- settings ----
    def setting_name(self, name: str) -> str:
        """The index's own spelling of a setting; an InputError naming the kind's settings."""
        for own in self.settings:
            if norm_key(own) == norm_key(name):
                return own
        have = ", ".join(self.settings) or "none"
        raise InputError(f"{self.kind} index {self.locator} has no search setting {name!r} (its settings: {have})")

    def resolve(self, settings: Optional[dict[str, Any]]) -> dict[str, Optional[int]]:
        """The current settings with ``settings`` (any spelling) applied; values are integers ≥ 1."""
        out = dict(self.settings)
        for name, v in (settings or {}).items():
            own = self.setting_name(name)
            if v is None:  # the library's default
                continue
            try:
                iv = int(v)
                if isinstance(v, float) and not v.is_integer():
                    raise ValueError
            except (TypeError, ValueError):
                raise InputError(f"setting {own}={v!r}: expected an integer") from None
            if iv < 1:
                raise InputError(f"setting {own}={v!r}: expected an integer >= 1")
            out[own] = iv
        return out

    # ---- search ----
    def search(self, queries: np.ndarray, k: int, **settings: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(ids (m, k) as the index returns them — missing answers are None / −1, seconds per
        query (m,))``, one query per call through the index's own library."""
        use = self.resolve(settings)
        Q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        if Q.ndim != 2 or Q.shape[1] != self.dim:
            raise InputError(f"queries have dimension {Q.shape[-1]} but index {self.locator} has {self.dim}")
        self._prepare(use)
        ids: list[list[Any]] = []
        secs = np.empty(Q.shape[0], dtype=np.float64)
        for i in range(Q.shape[0]):
            t0 = time.perf_counter()
            got = self._search_one(Q[i], k, use)
            secs[i] = time.perf_counter() - t0
            ids.append(list(got)[:k])
        return _id_matrix(ids, k), secs

    def _prepare(self, settings: dict[str, Optional[int]]) -> None:
        pass

    def _search_one(self, q: np.ndarray, k: int, settings: dict[str, Optional[int]]) -> list[Any]:
        raise NotImplementedError

    # ---- the vectors ----
    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def reconstructed(self) -> Optional[np.ndarray]:
        """What a quantised index holds instead of the vectors (its decoded codes), when the library
        exposes it; None otherwise."""
        return None

    def close(self) -> None:
        pass


def _id_matrix(ids: list[list[Any]], k: int) -> np.ndarray:
    if all(isinstance(x, (int, np.integer)) for r in ids for x in r):
        out = np.full((len(ids), k), -1, dtype=np.int64)
        for i, r in enumerate(ids):
            out[i, :len(r)] = r
        return out
    obj = np.full((len(ids), k), None, dtype=object)
    for i, r in enumerate(ids):
        obj[i, :len(r)] = r
    return obj


def index_vectors(index: AnnIndex) -> tuple[np.ndarray, np.ndarray]:
    """``(ids (n,), vectors (n, dim) float32)`` of the index's rows: the ground truth's corpus.
    An index that stores approximations only (PQ / SQ) cannot give them: an InputError."""
    if index.quantised:
        raise InputError(f"{index.kind} index {index.locator} stores quantised codes, not the vectors; give the "
                         "original vectors (vectors=, CLI: --vectors SOURCE) for the exact side")
    return index._vectors()


def rows_of(ids: np.ndarray, returned: np.ndarray) -> np.ndarray:
    """Row positions (in ``ids`` order) of the returned ids; −1 for a missing answer or an unknown id."""
    ids = np.asarray(ids)
    R = np.asarray(returned)
    if R.dtype.kind in "iu" and ids.dtype.kind in "iu":
        order = np.argsort(ids, kind="stable")
        s = ids[order]
        pos = np.clip(np.searchsorted(s, R), 0, max(len(s) - 1, 0))
        found = (s[pos] == R) & (R >= 0) if len(s) else np.zeros(R.shape, bool)
        return np.where(found, order[pos], -1).astype(np.int64)
    lookup = {(x.item() if hasattr(x, "item") else x): i for i, x in enumerate(ids)}
    out = np.full(R.shape, -1, dtype=np.int64)
    for idx, x in np.ndenumerate(R):
        if x is not None:
            out[idx] = lookup.get(x.item() if hasattr(x, "item") else x, -1)
    return out
