"""hnswlib index files: an index only (no store reads them), opened and queried through hnswlib."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ...errors import InputError
from .base import _need
from .index import AnnIndex

HNSWLIB_SPACES = {"cosine": "cosine", "ip": "ip", "l2": "l2"}


class HnswlibIndex(AnnIndex):
    def __init__(self, path: Path, space: Optional[str], dim: Optional[int]) -> None:
        hnswlib = _need("hnswlib", str(path))
        side = path.with_name(path.name + ".json")
        if (space is None or dim is None) and side.is_file():
            try:
                meta = json.loads(side.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise InputError(f"{side}: not a JSON object with space and dim ({exc})") from None
            if not isinstance(meta, dict):
                raise InputError(f"{side}: not a JSON object with space and dim")
            space = space or meta.get("space")
            dim = dim or meta.get("dim")
        if space is None or dim is None:
            raise InputError(f"hnswlib index {path} needs its space and dimension: --space and --dim, or a sidecar "
                             f"{side.name} {{\"space\": \"cosine\", \"dim\": 384}}")
        if space not in HNSWLIB_SPACES:
            raise InputError(f"hnswlib space must be cosine, ip or l2, got {space!r}")
        try:
            dim = int(dim)
        except (TypeError, ValueError):
            raise InputError(f"hnswlib dim must be an integer, got {dim!r}") from None
        from ..integrity import hnswlib_problem

        problem = hnswlib_problem(path, dim, walk=False)  # before hnswlib: a corrupt header can make it allocate without bound
        if problem:
            raise InputError(problem)
        idx = hnswlib.Index(space=space, dim=dim)
        try:
            idx.load_index(str(path))
        except (RuntimeError, MemoryError):
            raise InputError(hnswlib_problem(path, dim) or f"{path}: is cut short or corrupt (hnswlib could not "
                             f"read it as an index of dimension {dim})") from None
        self._index = idx
        super().__init__(locator=str(path), kind="hnswlib", library=f"hnswlib {getattr(hnswlib, '__version__', '')}".strip(),
                         metric=HNSWLIB_SPACES[space], dim=dim, n=int(idx.get_current_count()),
                         settings={"ef": int(idx.ef)},
                         notes=["hnswlib 'cosine' stores unit vectors"] if space == "cosine" else [])
        if self.n == 0:
            raise InputError(f"hnswlib index {path} is empty")

    def _prepare(self, settings: dict[str, Optional[int]]) -> None:
        if settings.get("ef") is not None:
            self._index.set_ef(int(settings["ef"]))  # type: ignore[arg-type]

    def _search_one(self, q: np.ndarray, k: int, settings: dict[str, Optional[int]]) -> list[Any]:
        try:
            labels, _ = self._index.knn_query(q[None, :], k=k)
        except RuntimeError:  # fewer than k found (ef too small): hnswlib refuses a ragged answer
            for kk in range(k - 1, 0, -1):
                try:
                    labels, _ = self._index.knn_query(q[None, :], k=kk)
                    break
                except RuntimeError:
                    continue
            else:
                return []
        return [int(x) for x in labels[0]]

    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(self._index.get_ids_list(), dtype=np.int64)
        ids.sort()
        X = np.asarray(self._index.get_items(ids, return_type="numpy"), dtype=np.float32)
        return ids, X

    def rewritten(self, ids: np.ndarray, V: np.ndarray, folder: str) -> tuple[str, dict[str, Any], str]:
        """A copy of the index file with each point updated in place under its label (rows of ``V``
        in the order :func:`~embedcheck.io.stores.index.index_vectors` gave them): (its path,
        open_index's keywords, how it was rewritten)."""
        import hnswlib

        h = hnswlib.Index(space=self.metric, dim=self.dim)
        h.load_index(self.locator, max_elements=self.n)
        h.add_items(V, np.asarray(ids, dtype=np.int64), num_threads=1)  # an existing label: updated in place (one thread: reproducible)
        path = str(Path(folder) / "migrated.hnsw")
        h.save_index(path)
        return path, {"space": self.metric, "dim": self.dim}, ("each point updated in place under its label by "
                                                                 "hnswlib (add_items: the point's links repaired around it)")
