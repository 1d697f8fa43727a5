"""FAISS index files whose vectors can be reconstructed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ...errors import InputError
from ..locators import Locator
from .base import Store, _need
from .index import AnnIndex

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
            from ..integrity import faiss_problem

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
            from ..jsonio import loads

            try:
                raw = side.read_bytes()
            except OSError:
                return {}
            rec = loads(raw, f"sidecar {side}")  # a sidecar cut short or not UTF-8 is refused, as beside a .npy
            return rec if isinstance(rec, dict) else {}
        return {}

# ---- the ANN index ------------------------------------------------------------------------------

class FaissIndex(AnnIndex):
    def __init__(self, path: Path) -> None:
        faiss = _need("faiss", str(path))
        try:
            idx = faiss.read_index(str(path))
        except (RuntimeError, MemoryError):  # FAISS's own message names its C++ internals: ours says what is wrong
            from ..integrity import faiss_problem

            raise InputError(faiss_problem(path)) from None
        self._faiss, self._index = faiss, idx
        self._idmap = isinstance(idx, (faiss.IndexIDMap, faiss.IndexIDMap2))
        base = faiss.downcast_index(idx.index) if self._idmap else idx
        self._base = base
        if idx.metric_type == faiss.METRIC_INNER_PRODUCT:
            metric = "ip"
        elif idx.metric_type == faiss.METRIC_L2:
            metric = "l2"
        else:
            raise InputError(f"{path}: FAISS metric type {idx.metric_type} is not supported (inner product or L2)")
        name = type(base).__name__
        settings: dict[str, Optional[int]] = {}
        quant = False
        if hasattr(base, "hnsw"):
            kind = "faiss-hnsw"
            settings["efSearch"] = int(base.hnsw.efSearch)
            storage = faiss.downcast_index(base.storage)
            quant = not isinstance(storage, faiss.IndexFlat)
        elif hasattr(base, "nprobe"):
            kind = "faiss-ivf"
            settings["nprobe"] = int(base.nprobe)
            quant = not isinstance(base, faiss.IndexIVFFlat)
        elif isinstance(base, faiss.IndexFlat):
            kind = "faiss-flat"
        else:
            kind = "faiss-" + name.lower().removeprefix("index")
            quant = True
        super().__init__(locator=str(path), kind=kind, library=f"faiss {faiss.__version__}", metric=metric,
                         dim=int(idx.d), n=int(idx.ntotal), settings=settings, quantised=quant,
                         notes=[f"FAISS {name}" + (" (ids from its IndexIDMap)" if self._idmap else "")])
        if self.n == 0:
            raise InputError(f"FAISS index {path} is empty")

    def _prepare(self, settings: dict[str, Optional[int]]) -> None:
        ps = self._faiss.ParameterSpace()
        for k, v in settings.items():
            if v is not None:
                ps.set_index_parameter(self._index, k, int(v))

    def _search_one(self, q: np.ndarray, k: int, settings: dict[str, Optional[int]]) -> list[Any]:
        _, ids = self._index.search(q[None, :], k)
        return [int(x) for x in ids[0]]

    def search(self, queries: np.ndarray, k: int, **settings: Any) -> tuple[np.ndarray, np.ndarray]:
        ids, secs = super().search(queries, k, **settings)
        return ids, secs

    def _ids(self) -> np.ndarray:
        if self._idmap:
            return self._faiss.vector_to_array(self._index.id_map).astype(np.int64)
        return np.arange(self.n, dtype=np.int64)

    def _decode(self) -> np.ndarray:
        base = self._base
        if hasattr(base, "make_direct_map") and not hasattr(base, "hnsw"):
            base.make_direct_map()
        return np.asarray(base.reconstruct_n(0, self.n), dtype=np.float32)

    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        return self._ids(), self._decode()

    def reconstructed(self) -> Optional[np.ndarray]:
        try:
            return self._decode()
        except RuntimeError:
            return None

    def row_ids(self) -> np.ndarray:
        return self._ids()

    def rewritten(self, ids: np.ndarray, V: np.ndarray, folder: str) -> tuple[str, dict[str, Any], str]:
        """A copy of the index file with its stored vectors replaced by ``V`` (rows in the order
        :func:`~embedcheck.io.stores.index.index_vectors` gave them), not rebuilt: (its path,
        open_index's keywords, how it was rewritten)."""
        import faiss

        ix: Any = faiss.read_index(self.locator)
        wrapped = isinstance(ix, (faiss.IndexIDMap, faiss.IndexIDMap2))
        base: Any = faiss.downcast_index(ix.index) if wrapped else ix
        if hasattr(base, "hnsw"):
            storage = faiss.downcast_index(base.storage)
            storage.reset()
            storage.add(V)
            how = "its HNSW graph (built on the old vectors) kept, its stored vectors replaced by the migrated ones"
        elif hasattr(base, "nprobe"):
            base.reset()  # the lists emptied; the trained coarse quantizer (the centroids) kept
            base.add(V)
            how = ("its trained centroids (from the old vectors) kept, its lists refilled: each migrated document "
                   "in its nearest old centroid's list, as an insert puts it")
        else:
            base.reset()
            base.add(V)
            how = "a flat index: its vectors replaced (exact search, nothing to rebuild)"
        path = str(Path(folder) / "migrated.faiss")
        faiss.write_index(ix, path)
        return path, {}, how
