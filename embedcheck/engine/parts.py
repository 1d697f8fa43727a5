"""Row ranges of ``.npy`` files — the unit of work of the engine — and a reader of global rows.

A matrix argument is either a plain ``.npy`` or a shard set (a folder with ``manifest.json``, or the
manifest itself). Its **parts** are, in global row order:

* for a shard set: one part per shard, in manifest order;
* for a plain ``.npy``: consecutive ranges of :data:`PART_ROWS` rows (a fixed number, so the
  parts — and the bytes of every merged figure — never depend on how many workers there are).

A part is a small picklable value (absolute path, row range, global offset); a task opens the file
itself as a read-only memmap (``allow_pickle=False``), so only paths travel to the workers (whose
working folder is not the driver's).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..rows import CHUNK_ROWS

#: rows per part of a plain .npy (a multiple of CHUNK_ROWS)
PART_ROWS = 16 * CHUNK_ROWS


@dataclass(frozen=True)
class Part:
    """Rows ``[start, stop)`` of the 2-D ``.npy`` at ``path``; global row index of ``start`` = ``offset``."""

    path: str
    start: int
    stop: int
    offset: int

    @property
    def rows(self) -> int:
        return self.stop - self.start

    @property
    def global_slice(self) -> slice:
        return slice(self.offset, self.offset + self.rows)

    def open(self) -> np.ndarray:
        return np.load(self.path, mmap_mode="r", allow_pickle=False)

    def read(self, chunk: slice | None = None) -> np.ndarray:
        """The part's rows (or rows ``chunk`` relative to the part), as an in-memory array."""
        X = self.open()
        if chunk is None:  # C order whatever the file's: a Fortran .npy gives the same sums
            return np.ascontiguousarray(X[self.start:self.stop])
        return np.ascontiguousarray(X[self.start + chunk.start:self.start + chunk.stop])


@dataclass(frozen=True)
class Source:
    """A matrix as parts: ``n`` rows of dimension ``dim``; ``shard_set`` when it came from one."""

    name: str
    n: int
    dim: int
    dtype: str
    parts: tuple[Part, ...]
    shard_set: Any = None

    @property
    def sharded(self) -> bool:
        return self.shard_set is not None


def is_sharded(path: Any) -> bool:
    """True for a shard-set folder or its manifest (never imports anything heavy)."""
    if path is None:
        return False
    p = Path(path)
    return (p.is_dir() and (p / "manifest.json").is_file()) or (p.name == "manifest.json" and p.is_file())


def open_source(path: Any, *, what: str = "embeddings", part_rows: int = PART_ROWS, min_rows: int = 1) -> Source:
    """Parts of a plain ``.npy`` or of a shard set. Only headers are read here (shape, dtype, no
    pickle, not truncated; a shard set's manifest and hashes); the rows themselves are checked
    by the tasks that read them (:func:`checked_rows`)."""
    from ..io.npy import check_matrix_shape, open_npy

    if is_sharded(path):
        from ..io.shards import open_shard_set

        ss = open_shard_set(path)
        shard_parts: list[Part] = []
        for i, e in enumerate(ss.shards):
            sp = ss.shard_path(i)
            X = open_npy(sp, f"{what} shard")
            if X.ndim != 2 or X.shape[1] != ss.dim or X.shape[0] != e.rows:
                raise InputError(f"{what} shard {sp} has shape {X.shape}; the manifest says ({e.rows}, {ss.dim})")
            shard_parts.append(Part(os.path.abspath(sp), 0, e.rows, e.start))
        if ss.rows < min_rows:
            raise InputError(f"{what} {path} has {ss.rows} rows; at least {min_rows} needed")
        return Source(str(path), int(ss.rows), int(ss.dim), str(ss.dtype), tuple(shard_parts), ss)
    X = open_npy(path, what)
    check_matrix_shape(X, Path(path), what=what, min_rows=min_rows)
    n, d = (int(s) for s in X.shape)
    parts = tuple(Part(os.path.abspath(path), s, min(s + part_rows, n), s) for s in range(0, n, part_rows))
    return Source(str(path), n, d, str(X.dtype), parts, None)


def checked_rows(part: Part, sl: slice, what: str = "embeddings") -> np.ndarray:
    """Rows ``sl`` (relative to the part) after the row checks of ``load_matrix`` (finite, not zero);
    errors name the file and the row index within it."""
    from ..io.npy import check_rows

    X = part.read(sl)
    work = "float64" if X.dtype.itemsize == 8 else "float32"
    check_rows(X, part.start + sl.start, Path(part.path), what=what, work=work)
    return X


def read_range(parts: Sequence[Part], start: int, stop: int, *, check: bool = False,
               what: str = "embeddings") -> np.ndarray:
    """Global rows ``[start, stop)`` read from whichever parts hold them (row checks per piece, so
    an error names the shard file and its row)."""
    from ..io.npy import check_rows

    pieces = []
    for p in parts:
        lo, hi = max(start, p.offset), min(stop, p.offset + p.rows)
        if hi <= lo:
            continue
        X = np.ascontiguousarray(p.open()[p.start + lo - p.offset:p.start + hi - p.offset])
        if check:
            work = "float64" if X.dtype.itemsize == 8 else "float32"
            check_rows(X, p.start + lo - p.offset, Path(p.path), what=what, work=work)
        pieces.append(X)
    if not pieces:
        raise IndexError(f"rows {start}-{stop} are outside the matrix")
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


def ranges(n: int, step: int) -> list[tuple[int, int]]:
    """``[start, stop)`` task ranges of ``step`` rows (``step`` a multiple of the chunk size the
    task uses inside, so the chunks are the global chunks of the in-memory functions)."""
    return [(s, min(s + step, n)) for s in range(0, n, step)]


class GlobalRows:
    """Random access to rows by global index across parts (memmaps opened once per process)."""

    def __init__(self, parts: Sequence[Part]) -> None:
        self.parts = list(parts)
        self.starts = np.array([p.offset for p in self.parts], dtype=np.int64)
        self._maps: dict[int, np.ndarray] = {}

    def _map(self, k: int) -> np.ndarray:
        if k not in self._maps:
            self._maps[k] = self.parts[k].open()
        return self._maps[k]

    def get(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        which = np.searchsorted(self.starts, idx, side="right") - 1
        out: np.ndarray | None = None
        for k in np.unique(which):
            sel = np.flatnonzero(which == k)
            p = self.parts[int(k)]
            rows = np.asarray(self._map(int(k))[p.start + (idx[sel] - p.offset)])
            if out is None:
                out = np.empty((len(idx), rows.shape[1]), dtype=rows.dtype)
            out[sel] = rows
        assert out is not None
        return out
