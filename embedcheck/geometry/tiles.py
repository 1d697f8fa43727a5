"""Tile passes of the exact neighbourhood searches (``dedup``'s range pass, the top-k search's
candidate pass): compiled (``embedcheck.geometry._tiles``, built at install where a C compiler is
present) or, where it is not, numpy — the same results either way, as they only compare scores.

* :func:`scan_range`: the pairs of a score tile at or above a threshold (row-major order), and each
  row's best column and — in one corpus — each column's best row, ties to the lowest index.
* :func:`reach`: the entries of each row at or above that row's bound, compacted in column order
  with their tie ranks; None when a row has more than ``limit`` of them.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

try:
    from . import _tiles as _compiled  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built without a C compiler: the numpy formulation
    _compiled = None

#: tests set this to run the numpy formulation beside the compiled one
_FORCE_NUMPY = False


def compiled() -> bool:
    """Whether the compiled tile kernels are in use (else the numpy formulation: the same results)."""
    return _compiled is not None and not _FORCE_NUMPY


def _better(v: np.ndarray, r: np.ndarray, bv: np.ndarray, br: np.ndarray) -> np.ndarray:
    return (v > bv) | ((v == bv) & (r < br))


def scan_range(M: np.ndarray, row0: int, col0: int, diag: bool, thr: float, rv: np.ndarray, rr: np.ndarray,
               cv: Optional[np.ndarray], cr: Optional[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One ``(b, t)`` float32 tile of scores of rows ``row0..`` against columns ``col0..``; ``diag``:
    only columns after the row count (one corpus). Updates ``rv``/``rr`` (each row's best score and
    column; a later column only when strictly better) and, when given, ``cv``/``cr`` (each column's
    best row) in place; returns the pairs ``>= thr`` as (global rows, columns, scores), row-major."""
    b, t = M.shape
    t32 = np.float32(thr)
    if compiled():
        M = np.ascontiguousarray(M, dtype=np.float32)
        cols = cv is not None
        dummy_f, dummy_i = np.zeros(0, np.float32), np.zeros(0, np.int64)
        cap = 4096
        while True:
            oi, oj, oc = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.float32)
            n = _compiled.scan_range(M, b, t, row0, col0, diag, float(t32), rv, rr, cv if cols else dummy_f,
                                     cr if cols else dummy_i, cols, oi, oj, oc, cap)
            if n <= cap:
                return oi[:n], oj[:n], oc[:n]
            cap = n
    if diag and col0 <= row0 + b - 1:  # the diagonal crosses the tile: only j > i counts
        M = M.copy()
        M[np.arange(col0, col0 + t)[None, :] <= np.arange(row0, row0 + b)[:, None]] = -np.inf
    a = np.argmax(M, axis=1)
    v = M[np.arange(b), a]
    up = _better(v, a + col0, rv, rr)
    rv[up], rr[up] = v[up], a[up] + col0
    if cv is not None and cr is not None:
        a0 = np.argmax(M, axis=0)
        v0 = M[a0, np.arange(t)]
        up0 = _better(v0, a0 + row0, cv, cr)
        cv[up0], cr[up0] = v0[up0], a0[up0] + row0
    r, c = np.nonzero(M >= t32)
    return r + row0, c + col0, M[r, c]


def reach(S: np.ndarray, thr: np.ndarray, ranks: np.ndarray, col0: int,
          limit: int) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The entries of each row of ``S`` (``(b, t)``; compiled for float32) at or above ``thr[row]`` (``>=``: a tie
    may still win on its tie rank), as ``(col0 + columns, scores, ranks[columns])``, each ``(b, w)``
    with ``w`` the largest count (at least 1), in column order and padded with ``(col0, -inf,
    int64 max)``; None when a row has more than ``limit``."""
    b, t = S.shape
    thr = np.ascontiguousarray(thr, dtype=S.dtype)
    if compiled() and S.dtype == np.float32:
        S = np.ascontiguousarray(S)
        counts = np.empty(b, dtype=np.int64)
        width = _compiled.reach_counts(S, b, t, thr, counts, limit)
        if width > limit:
            return None
        w = max(width, 1)
        rows = np.empty((b, w), dtype=np.int64)
        vals = np.empty((b, w), dtype=np.float32)
        rks = np.empty((b, w), dtype=np.int64)
        _compiled.reach_gather(S, b, t, thr, np.ascontiguousarray(ranks, dtype=np.int64), col0, w, rows, vals, rks)
        return rows, vals, rks
    mask = S >= thr[:, None]
    counts = mask.sum(axis=1)
    width = int(counts.max(initial=0))
    if width > limit:
        return None
    w = max(width, 1)
    r, c = np.nonzero(mask)  # row-major: grouped by row
    pos = np.arange(r.size) - np.repeat(np.cumsum(counts) - counts, counts)
    rows = np.full((b, w), col0, dtype=np.int64)
    vals = np.full((b, w), -np.inf, dtype=S.dtype)
    rks = np.full((b, w), np.iinfo(np.int64).max, dtype=np.int64)
    rows[r, pos], vals[r, pos], rks[r, pos] = c + col0, S[r, c], ranks[c]
    return rows, vals, rks


__all__ = ["compiled", "reach", "scan_range"]
