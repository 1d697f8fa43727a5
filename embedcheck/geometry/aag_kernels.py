"""AAG's kernels: the per-chunk and per-range work over the rows, one read of them per pass.

A kernel (task) covers global rows ``[start, stop)`` of a source's parts and returns, per chunk of
:data:`AAG_CHUNK_ROWS` rows, small partial statistics — k × d class sums of unit rows and k sums
of ‖u‖²; with an interval also the per-(group, class) sums; for the variance share, the variance
along the class-mean span — that the driver (:mod:`embedcheck.geometry.aag`) adds in row order.
Their per-row arithmetic is :mod:`embedcheck.geometry.rowsums`; the chunks run on the process's
chunk workers (:func:`embedcheck.engine.chunks.over_chunks`). A refused row is reported with the
message the full row checks give (:func:`_refused`).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator, Optional

import numpy as np

from ..engine.chunks import over_chunks
from ..engine.threads import one_blas_thread
from ..rows import CHUNK_ROWS, iter_chunks, unit_rows
from . import rowsums

#: rows per chunk of AAG's passes: the unit of work of a chunk worker and of the partial sums the
#: driver adds in row order (fewer, larger chunks: fewer hand-offs and merges of the per-group sums)
AAG_CHUNK_ROWS = 4 * CHUNK_ROWS

#: rows handled at a time inside a chunk: their float64 copy (512 x 384 x 8 B = 1.5 MB) stays in the
#: core's L2 cache while it is measured, checked and multiplied
_SUB_ROWS = 512


class _BadRows(Exception):
    """A chunk holds a row the checks refuse (the caller re-reads the range with the full checks,
    whose message names the file and the row)."""


def _sub_blocks(Xc: Any, buf: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    """``(s, e, x)`` per block of :data:`_SUB_ROWS` rows of ``Xc``: ``x`` rows ``s:e`` as float64 in
    ``buf`` (kept in the core's cache while every use of them is made). Unit rows are never
    materialised: every sum of them is a product with the reciprocal norms folded into its weights."""
    b = Xc.shape[0]
    for s in range(0, b, _SUB_ROWS):
        e = min(b, s + _SUB_ROWS)
        x = buf[:e - s]
        np.copyto(x, Xc[s:e])  # exact: float32 (or narrower) to float64
        yield s, e, x


def _chunk_stats(Xc: Any, codes: np.ndarray, k: int, weights: Optional[np.ndarray],
                 group_codes: Optional[np.ndarray], gk: int, check: bool,
                 inv_out: Optional[np.ndarray] = None, acc_out: Optional[np.ndarray] = None) -> tuple[Any, ...]:
    """One chunk's partials in one read of its rows: (k × d class sums of unit rows, k sums of
    ‖u‖²) and, with ``group_codes`` (group × k + class per row), the (gk × d) per-(group, class)
    sums and gk sums of ‖u‖². Each row ``x`` is added, as ``w/‖x‖ · x``, into its class cell and,
    with groups, then into its (group, class) cell, in row order, both while the row is in cache
    (:func:`rowsums.scatter_unit_rows`) — so the class sums are the same bits with or without groups
    (the point AAG does not depend on the resamples or the seed). ``check``: refused rows raise
    :class:`_BadRows`. ``inv_out``: receives the rows' reciprocal norms (for a later pass);
    ``acc_out``: a zeroed ((k + gk) × d) array the class sums (its first k rows) and the
    per-(group, class) sums (the rest) are added into (a reused one: fresh pages cost a page fault
    each); the per-(group, class) sums returned are then a view of it."""
    b, d = Xc.shape
    m = k if group_codes is None else k + gk
    acc = np.zeros((m, d)) if acc_out is None else acc_out
    qcell = np.zeros(m)
    cells = [(codes, 0)] if group_codes is None else [(codes, 0), (group_codes, k)]
    inv = inv_out if inv_out is not None else np.empty(b)
    tiny = float(np.finfo(np.float64 if Xc.dtype.itemsize == 8 else np.float32).tiny)
    # checked: a zero row is refused (no guard: its reciprocal norm is not made 0 first)
    refused = rowsums.scatter_unit_rows(Xc, cells, acc, qcell, np.empty(b), inv, weights=weights,
                                        guard=not check, tiny=tiny)
    if check and refused:  # non-finite, all zeros, or a squared norm over- or underflowing (check_rows's conditions)
        raise _BadRows
    if group_codes is None:
        return acc, qcell
    return acc[:k].copy(), qcell[:k], acc[k:], qcell[k:]


def class_sums_chunks(X: Any, codes: np.ndarray, k: int, *, weights: Optional[np.ndarray] = None,
                      chunk: int = AAG_CHUNK_ROWS, check: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per chunk of ``chunk`` rows, in row order: (k × d class sums of unit rows, k sums of squared
    unit norms) — partials whose sum in row order is the class sums; chunks computed by the free cores. With
    ``check``, a refused row raises :class:`_BadRows`."""
    w = None if weights is None else np.asarray(weights, dtype=np.float64)

    def part(sl: slice, Xc: Any, buf: np.ndarray) -> Any:
        return _chunk_stats(Xc, codes[sl], k, None if w is None else w[sl], None, 0, check)

    return list(over_chunks(X, chunk, part, _SUB_ROWS))


class _Zeroed:
    """A few reused arrays of one shape, zeroed when taken: a chunk's per-(group, class) sums are
    added into one on a worker, added to the range's total in row order by the caller, and the array
    is handed back (a fresh G × k × d array a chunk cost a page fault per 4 kB, more than the
    scatter itself; zeroing it on the worker keeps the caller's share of the work small)."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.free: list[np.ndarray] = []
        self.lock = threading.Lock()

    def take(self) -> np.ndarray:
        with self.lock:
            a = self.free.pop() if self.free else None
        if a is None:
            return np.zeros(self.shape)
        a.fill(0.0)
        return a

    def give(self, a: np.ndarray) -> None:
        with self.lock:
            self.free.append(a)


def _group_sums_steps(X: Any, codes: np.ndarray, k: int, cells: np.ndarray, G: int, chunk: int,
                      step: int, check: bool = False, refuse: Optional[Callable[[slice], Exception]] = None
                      ) -> Iterator[tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray, list[np.ndarray]]]:
    """One read of the rows of ``X``, per ``step`` rows (a multiple of ``chunk``): per chunk, in row
    order, the class sums exactly as :func:`class_sums_chunks` computes them (same bits); over the
    step's rows, the per-(group, class) sums (G × k × d) and sums of |u|² (G × k) — its chunks'
    partials added in row order, starting from zeros — and the rows' reciprocal norms (per chunk). Chunks
    computed by the free cores, in one stream over every step. ``cells``: each row's (group, class)
    cell, ``group × k + class``. ``refuse``: the error for a chunk (a slice of ``X``'s rows) holding
    a refused row."""
    d = X.shape[1]
    gc = np.asarray(cells)
    pool = _Zeroed(((G + 1) * k, d))

    def part(sl: slice, Xc: Any, buf: np.ndarray) -> tuple[Any, ...]:
        inv = np.empty(len(Xc))
        acc = pool.take()
        try:
            s, q, _, gq = _chunk_stats(Xc, codes[sl], k, None, gc[sl], G * k, check, inv_out=inv, acc_out=acc)
        except _BadRows:
            if refuse is None:
                raise
            raise refuse(sl) from None
        return s, q, acc, gq, inv

    per = max(1, step // chunk)
    done = 0
    for s, q, acc, gq, inv in over_chunks(X, chunk, part, _SUB_ROWS):  # row order
        if done % per == 0:
            class_parts: list[tuple[np.ndarray, np.ndarray]] = []
            gsums, gsq = np.zeros((G * k, d)), np.zeros(G * k)
            invs = []
        class_parts.append((s, q))
        gsums += acc[k:]
        pool.give(acc)
        gsq += gq
        invs.append(inv)
        done += 1
        if done % per == 0 or done * chunk >= X.shape[0]:
            yield class_parts, gsums.reshape(G, k, d), gsq.reshape(G, k), invs


def _sums_with_groups(X: np.ndarray, codes: np.ndarray, k: int, group_of: np.ndarray, G: int,
                      chunk: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One streamed pass: the class sums exactly as :func:`class_sums_chunks` gives them, added in row order (same bits),
    plus per-(group, class) sums (G × k × d) and sums of |u|² (G × k)."""
    d = X.shape[1]
    sums, sq = np.zeros((k, d)), np.zeros(k)
    cells = np.asarray(group_of) * k + np.asarray(codes)
    class_parts, gsums, gsq, _ = next(_group_sums_steps(X, codes, k, cells, G, chunk, max(chunk, len(X))))
    for s_, b in class_parts:  # row order
        sums += s_
        sq += b
    return sums, sq, gsums, gsq


def _unit32(X: np.ndarray) -> np.ndarray:
    U = np.empty(X.shape, dtype=np.float32)
    U[:] = unit_rows(X)
    return U


def _refused(parts: Any, start: int, stop: int) -> Exception:
    """The error of rows ``[start, stop)`` after :class:`_BadRows`: the full row checks name the
    file and the first refused row (the same message as checking before the pass)."""
    from ..errors import InputError
    from ..io.source import read_range

    try:
        read_range(parts, start, stop, check=True)
    except InputError as e:
        return e
    return InputError(f"embeddings: rows {start}-{stop - 1} hold a row without a direction")  # pragma: no cover


class _RangeRows:
    """Global rows ``[start, stop)`` of a source's parts as a row-sliceable array: each part opened
    once, a chunk read from the part holding it (a view of a file or array; a chunk across two
    parts is joined) — a task's range is never copied whole. A store's part is read once for the
    whole range (one query per task, as the stores are fastest read)."""

    def __init__(self, parts: Any, start: int, stop: int) -> None:
        self.start = start
        #: (first global row, last global row + 1, rows, the global row of rows[0])
        self.pieces: list[tuple[int, int, Any, int]] = []
        for p in parts:
            lo, hi = max(start, p.offset), min(stop, p.offset + p.rows)
            if hi <= lo:
                continue
            X = p.open()
            if p.store:
                self.pieces.append((lo, hi, np.ascontiguousarray(X[p.start + lo - p.offset:p.start + hi - p.offset]), lo))
            else:
                self.pieces.append((lo, hi, X, p.offset - p.start))
        if not self.pieces:
            raise IndexError(f"rows {start}-{stop} are outside the matrix")
        self.shape = (stop - start, int(self.pieces[0][2].shape[1]))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, sl: slice) -> np.ndarray:
        a, b = self.start + sl.start, self.start + min(sl.stop, self.shape[0])
        out = []
        for lo, hi, X, base in self.pieces:
            lo, hi = max(a, lo), min(b, hi)
            if hi > lo:
                out.append(np.ascontiguousarray(X[lo - base:hi - base]))
        return out[0] if len(out) == 1 else np.concatenate(out)


def _refuser(parts: Any, start: int) -> Callable[[slice], Exception]:
    """The error for a chunk (rows ``sl`` after ``start``) holding a refused row: the checks of the
    whole parts holding it, whose message is the one checking the input before the pass gives."""

    def refuse(sl: slice) -> Exception:
        a, b = start + sl.start, start + sl.stop
        held = [p for p in parts if p.offset < b and p.offset + p.rows > a]
        return _refused(parts, min(p.offset for p in held), max(p.offset + p.rows for p in held))

    return refuse


def class_sums_steps(parts: Any, start: int, stop: int, codes: np.ndarray, k: int,
                     weights: np.ndarray | None = None, check: bool = False,
                     unit32: bool = False, chunk: int = AAG_CHUNK_ROWS, step: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Task: per chunk of rows ``[start, stop)``, (k × d class sums of unit rows, k sums of ‖u‖²).
    ``codes``/``weights`` are the range's slices; ``unit32``: rows first rounded to float32 unit
    rows (the label-shuffle null and the row bootstrap). ``check``: rows checked in the same read."""
    from ..io.source import read_range

    if unit32:
        yield from class_sums_chunks(_unit32(read_range(parts, start, stop, check=check)), codes, k, weights=weights, chunk=chunk)
        return
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    refuse = _refuser(parts, start)

    def part(sl: slice, Xc: Any, buf: np.ndarray) -> Any:
        try:
            return _chunk_stats(Xc, codes[sl], k, None if w is None else w[sl], None, 0, check)
        except _BadRows:
            raise refuse(sl) from None

    yield from over_chunks(_RangeRows(parts, start, stop), chunk, part, _SUB_ROWS)


def group_sums_steps(parts: Any, start: int, stop: int, codes: np.ndarray, k: int, cells: np.ndarray, G: int,
                     chunk: int = AAG_CHUNK_ROWS, step: int = 0) -> Iterator[tuple[Any, ...]]:
    """Task: (rows checked in the same read) per ``step`` rows of ``[start, stop)``: per chunk the
    class sums and Σ‖u‖² per class; over the step the per-(group, class) sums (G × k × d) and
    Σ‖u‖² (G × k), its chunks' partials added in row order from zeros (the steps are fixed by ``n``
    and the sizes, never by the engine or the sharding), and the rows' reciprocal norms (per chunk). ``cells``:
    the range's (group, class) cells, ``group × k + class``."""
    yield from _group_sums_steps(_RangeRows(parts, start, stop), codes, k, cells, G, chunk, step or stop - start,
                                 check=True, refuse=_refuser(parts, start))


def _maybe_in_memory(X: np.ndarray, limit_bytes: int = 2 << 30) -> np.ndarray:
    """Unit rows as float32 in memory when they fit (repeated passes are then cheap); else ``X``
    itself (callers that need unit rows then normalise each streamed chunk)."""
    n, d = X.shape
    if n * d * 4 <= limit_bytes:
        out = np.empty((n, d), dtype=np.float32)
        for sl in iter_chunks(n):
            out[sl] = unit_rows(X[sl])
        return out
    return X


def _unit32_fits(n: int, d: int) -> bool:
    """Whether float32 unit rows of the whole matrix fit the 2 GiB working budget (then repeated
    passes work on float32 unit rows; else each chunk is normalised in float64)."""
    return n * d * 4 <= 2 << 30


def boot_z2_range(parts: Any, start: int, stop: int, group_of: np.ndarray, G: int, Qs: np.ndarray,
                  unit32: bool, chunk: int = AAG_CHUNK_ROWS) -> list[np.ndarray]:
    """Task: per chunk, Σ over each group's rows of (u · q)² for every basis row q of ``Qs`` (G × r)."""
    from scipy.sparse import csr_matrix

    from ..io.source import read_range

    out = []
    with one_blas_thread():  # the bits of a product follow BLAS's thread count
        for sl in iter_chunks(stop - start, chunk):
            X = read_range(parts, start + sl.start, start + sl.stop)
            U = _unit32(X) if unit32 else unit_rows(X)
            Z = np.asarray(U, dtype=np.float64) @ Qs.T
            b = sl.stop - sl.start
            onehot = csr_matrix((np.ones(b), (group_of[sl], np.arange(b))), shape=(G, b))
            out.append(onehot @ (Z * Z))
    return out


#: up to this many class-mean directions, the variance share's second pass takes each row's products
#: straight off the stored rows (:func:`rowsums.project_rows`); beyond, a float64 copy of each block
#: and one matrix product
_FEW_DIRECTIONS = 4


def along_steps(parts: Any, start: int, stop: int, mu: np.ndarray, Q: np.ndarray,
                chunk: int = AAG_CHUNK_ROWS, inv: Optional[np.ndarray] = None, step: int = 0) -> Iterator[float]:
    """Task: per chunk, Σ over its unit rows of ‖Q(u − μ)‖², as ``‖(x @ Qᵀ) / ‖x‖ − Qμ‖²`` per
    block of rows (the unit rows are never materialised). ``inv``: the range's reciprocal norms
    from the first pass (the same values this pass would compute)."""
    Qmu = Q @ mu
    Qt = np.ascontiguousarray(Q.T)

    def part(sl: slice, Xc: Any, buf: np.ndarray) -> float:
        if inv is None:
            r = np.sqrt(rowsums.row_norms(Xc))
            np.divide(1.0, r, out=r, where=r > 0)  # a zero row: 0 (it is refused by the first pass)
        else:
            r = inv[sl]
        if Qt.shape[1] <= _FEW_DIRECTIONS:
            # a few directions: each row's products straight off the stored rows (no float64 copy)
            Z = rowsums.project_rows(Xc, Q)
        else:
            Z = np.empty((len(Xc), Qt.shape[1]))
            with rowsums.quiet():
                for s, e, x in _sub_blocks(Xc, buf):
                    np.matmul(x, Qt, out=Z[s:e])
        Z *= r[:, None]
        Z -= Qmu
        return float(np.einsum("ij,ij->", Z, Z))

    yield from over_chunks(_RangeRows(parts, start, stop), chunk, part, _SUB_ROWS)
