"""FAISS index files whose vectors can be reconstructed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ...errors import InputError
from ..locators import Locator
from .base import Store, _need

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
