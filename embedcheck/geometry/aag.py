"""Pure-numpy geometry of a labelled embedding space (SISE paper): AAG and variance share.

All functions take an ``(n, d)`` float array (a memmap is streamed in row chunks and accumulated in
float64; no ``n x n`` matrix is ever held) and labels of length ``n`` (ints or strings).

The Attribute Alignment Gap is mean cosine over same-label pairs minus mean cosine over
different-label pairs (unordered pairs ``i != j``, unit rows). It is exact in O(n·d): with
``S_c`` the sum of the unit rows of class ``c`` and ``S`` the sum of all of them,
``sum_same = Σ_c (|S_c|² − Σ_{i∈c} |u_i|²)`` and ``sum_all = |S|² − Σ_i |u_i|²`` (ordered pairs).

>>> import numpy as np
>>> X = np.array([[1.0, 0], [1, 0.1], [0, 1], [0.1, 1]])
>>> r = aag(X, np.array([0, 0, 1, 1]))
>>> round(r.aag, 4), r.n_same_pairs, r.n_diff_pairs
(0.8958, 2, 4)
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import numpy as np

from ..engine.chunks import over_chunks
from ..engine.threads import one_blas_thread
from ..errors import InputError
from ..report.result import Result, hidden, optional
from ..rows import CHUNK_ROWS, encode_labels, iter_chunks, label_key, unit_rows
from ..stats import paired as P
from . import rowsums
from .intervals import bca_ci, percentile_ci
from .paired import check_margins, margin_of

#: row groups of the default AAG bootstrap (each group's per-class sums are resampled whole)
BOOT_GROUPS = 256
#: memory cap of the per-group class sums (G x k x d float64)
_GROUP_SUMS_BYTES = 256 << 20


def _check_labels(n: int, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) != n:
        raise ValueError(f"labels have {labels.shape} entries but the embeddings have {n} rows")
    classes, codes = encode_labels(labels)
    counts = np.bincount(codes, minlength=len(classes))
    if len(classes) < 2:
        raise ValueError(f"need at least two classes, got one ({label_key(classes[0])!r} for all {n} rows)")
    if not (counts >= 2).any():
        raise ValueError("every class has a single row: there are no same-label pairs")
    return classes, codes, counts


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


@dataclass(kw_only=True)
class AAGResult(Result):
    """AAG and its parts; ``aag_ci95`` when an interval was asked for (``ci_method`` names it)."""

    n: int = 0
    dim: int = 0
    classes: int = 0
    class_counts: dict[str, int] = field(default_factory=dict)
    aag: float
    aag_ci95: Optional[list[float]] = optional()
    mean_same: float
    mean_diff: float
    n_same_pairs: int
    n_diff_pairs: int
    within: dict[str, Optional[float]] = field(default_factory=dict)
    ci_method: Optional[str] = hidden()
    #: the bootstrap's group sums, reused by :func:`variance_share` for the same resamples
    boot: Optional["GroupBoot"] = hidden()


@dataclass
class GroupBoot:
    """Per-group, per-class sums of unit rows and the resampled group weights of one bootstrap.

    Rows are split into ``G`` seeded random groups of (near) equal size; a resample draws ``G``
    groups with replacement (multinomial weights ``W``, one row of ``W`` per resample), so every
    resampled class sum is ``Σ_g W_g S_gc`` — exact, and ``O(G²)`` per resample for AAG. With
    ``G = n`` (every row its own group) this is the ordinary row bootstrap.
    """

    groups: int
    group_of: np.ndarray  # (n,) group of each row
    sums: np.ndarray  # (G, k, d) float64
    sq: np.ndarray  # (G, k) sums of |u|²
    counts: np.ndarray  # (G, k)
    W: np.ndarray  # (resamples, G) multinomial weights
    seed: int

    @property
    def resamples(self) -> int:
        return int(self.W.shape[0])

    def method(self) -> str:
        unit = "rows" if self.groups == len(self.group_of) else f"{self.groups} seeded random groups of rows"
        return (f"BCa bootstrap over {unit} (multinomial weights on per-group class sums, a row never "
                f"paired with its own copy; acceleration from the delete-one-group jackknife), "
                f"{self.resamples} resamples, seed {self.seed}")


def _aag_from_sums(sums: np.ndarray, sq: np.ndarray,
                   same_pairs: float, all_pairs: float) -> tuple[float, float, float, np.ndarray]:
    """(aag, mean_same, mean_diff, per-class ordered same sums) from class sums."""
    total = sums.sum(axis=0)
    per_class = np.einsum("ij,ij->i", sums, sums) - sq  # ordered same-class pair sums
    same_sum = per_class.sum()
    all_sum = float(total @ total) - sq.sum()
    diff_pairs = all_pairs - same_pairs
    mean_same = same_sum / same_pairs
    mean_diff = (all_sum - same_sum) / diff_pairs
    return mean_same - mean_diff, mean_same, mean_diff, per_class


def _group_count(n: int, k: int, d: int, groups: int) -> int:
    cap = max(32, _GROUP_SUMS_BYTES // max(1, k * d * 8))
    return int(max(1, min(n, groups, cap)))


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


# ---- the one driver: per-range kernels (tasks) merged in row order, on any engine -------------
#
# A task covers global rows ``[start, stop)`` (a multiple of the chunk size, read from whichever
# parts hold them) and returns, **per chunk**, small partial statistics (k × d class sums of unit
# rows and k sums of ‖u‖²; with the interval also the per-(group, class) sums). The driver adds
# the chunk partials in global row order, starting from zeros, so the bytes never depend on the
# engine (this process or Ray), the sharding or the scheduling. Random draws (row groups, group
# weights, label permutations, bootstrap weights) are made on the driver over the global row index.

#: rows per task, in chunks (131,072 rows: a part of a file, so a task's rows are one view)
TASK_CHUNKS = 4
#: at most this many bytes of per-chunk partials per task (the per-group class sums are G × k × d)
TASK_PARTIAL_BYTES = 64 << 20
#: resamples per pass of the variance-share interval
VS_BATCH = 64


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


def _listed(fn: Callable[..., Iterator[Any]], *args: Any) -> list[Any]:
    """A task on an engine: the results of one of the ``*_steps`` kernels, as a list."""
    return list(fn(*args))


def _stream(eng: Any, src: Any, fn: Callable[..., Iterator[Any]], step: int,
            args_of: Callable[[int, int], tuple[Any, ...]], *, whole: bool = True) -> Iterator[Any]:
    """The results of kernel ``fn`` over every row, in row order: ``fn(parts, a, b, *args_of(a, b),
    step)`` per task of ``step`` rows on the engine; in this process over files and arrays
    (``whole``), one call over all rows, whose chunks stream through the workers without a pause at
    a task's end — the same results, since a kernel's partials are fixed by ``step`` and the chunk
    size, never by the range it is given."""
    from ..io.source import ranges

    n = src.n
    if whole and eng.name == "local" and not any(p.store for p in src.parts):
        yield from fn(src.parts, 0, n, *args_of(0, n), step)
        return
    tasks = [(fn, src.parts, a, b, *args_of(a, b), step) for a, b in ranges(n, step)]
    for results in eng.imap(_listed, tasks):  # global row order, one task at a time
        yield from results


def _task_rows(per_chunk_bytes: int, chunk: int) -> int:
    return chunk * int(min(TASK_CHUNKS, max(1, TASK_PARTIAL_BYTES // max(1, per_chunk_bytes))))


def _sums(eng: Any, src: Any, codes: np.ndarray, k: int, *, weights: np.ndarray | None = None,
          check: bool = False, unit32: bool = False, chunk: int = AAG_CHUNK_ROWS) -> tuple[np.ndarray, np.ndarray]:
    sums = np.zeros((k, src.dim), dtype=np.float64)
    sq = np.zeros(k, dtype=np.float64)
    for s, q in _stream(eng, src, class_sums_steps, TASK_CHUNKS * chunk,
                        lambda a, b: (codes[a:b], k, None if weights is None else weights[a:b], check, unit32, chunk),
                        whole=not unit32):  # global row order
        sums += s
        sq += q
    return sums, sq


def _opened(X: Any, engine: Any) -> tuple[Any, Any]:
    """(Source, engine): the input opened once, the engine (this process when None)."""
    from ..engine import or_local
    from ..io.source import open_source

    return open_source(X), or_local(engine)


def aag_and_variance_share(X: Any, labels: np.ndarray, *, resamples: int = 0, seed: int = 0,
                           groups: int = BOOT_GROUPS, ci: bool = False, level: float = 0.95,
                           share: bool = True, engine: Any = None,
                           chunk: int = AAG_CHUNK_ROWS) -> tuple[AAGResult, Optional[VarianceShare]]:
    """AAG (with ``aag_ci95`` when ``resamples`` > 0) and, with ``share``, the variance share (with
    ``variance_share_ci95`` when ``ci``) from one first pass over the rows of ``X`` (an array, a
    memmap, a ``.npy``, a shard set or a Source) on ``engine`` (this process when None)."""

    src, eng = _opened(X, engine)
    n, d = src.n, src.dim
    classes, codes, counts = _check_labels(n, labels)
    k = len(classes)
    boot = None
    if resamples > 0:
        G = _group_count(n, k, d, groups)
        rng = np.random.default_rng(seed)
        perm = rng.permutation(n)
        group_of = perm & (G - 1) if G & (G - 1) == 0 else perm % G  # the same groups; a mask is cheaper
        cells = group_of * k + codes  # each row's (group, class) cell
        step = _task_rows(8 * (G * k * d + G * k + k * d + k), chunk)
        sums = np.zeros((k, d), dtype=np.float64)
        sq = np.zeros(k, dtype=np.float64)
        gsums = np.zeros((G, k, d), dtype=np.float64)
        gsq = np.zeros((G, k), dtype=np.float64)
        invs = []
        for class_parts, gs, gq, inv_c in _stream(eng, src, group_sums_steps, step,
                                                  lambda a, b: (codes[a:b], k, cells[a:b], G, chunk)):  # row order
            for s_, q_ in class_parts:
                sums += s_
                sq += q_
            gsums += gs
            gsq += gq
            invs.extend(inv_c)  # per chunk, in row order
        gcounts = np.bincount(cells, minlength=G * k).reshape(G, k).astype(np.float64)
        draws = rng.integers(0, G, size=(resamples, G)) + (np.arange(resamples) * G)[:, None]
        W = np.bincount(draws.ravel(), minlength=resamples * G).reshape(resamples, G).astype(np.float64)
        boot = GroupBoot(groups=G, group_of=group_of, sums=gsums, sq=gsq, counts=gcounts, W=W, seed=int(seed))
        inv_all: Optional[np.ndarray] = np.concatenate(invs)
    else:
        inv_all = None
        sums, sq = _sums(eng, src, codes, k, check=True, chunk=chunk)
    same_pairs = float((counts * (counts - 1)).sum())
    all_pairs = float(n) * (n - 1)
    a, ms, md, per_class = _aag_from_sums(sums, sq, same_pairs, all_pairs)
    within = {label_key(c): (float(per_class[i] / (counts[i] * (counts[i] - 1))) if counts[i] > 1 else None)
              for i, c in enumerate(classes)}
    res = AAGResult(n=int(n), dim=int(d), classes=int(k),
                    class_counts={label_key(c): int(counts[i]) for i, c in enumerate(classes)},
                    aag=float(a), mean_same=float(ms), mean_diff=float(md),
                    n_same_pairs=int(same_pairs // 2), n_diff_pairs=int((all_pairs - same_pairs) // 2),
                    within=within, boot=boot)
    if boot is not None:
        res.aag_ci95 = aag_interval(res.aag, boot, level)
        res.ci_method = boot.method()
    if not share:
        return res, None
    return res, _variance_share_from(eng, src, sums, sq, counts, boot if ci else None, level, chunk, inv_all)


def _variance_share_from(eng: Any, src: Any, sums: np.ndarray, sq: np.ndarray, counts: np.ndarray,
                         boot: Optional[GroupBoot], level: float, chunk: int,
                         inv: Optional[np.ndarray] = None) -> VarianceShare:
    """The variance share from the class sums of a first pass: one more pass for the variance along
    the class-mean span (per-chunk sums added in row order), and with ``boot`` its interval."""

    n = src.n
    mu, total, Q, rank = _share(sums, counts.astype(np.float64), float(sq.sum()))
    along = 0.0
    for x in _stream(eng, src, along_steps, TASK_CHUNKS * chunk,
                     lambda a, b: (mu, Q, chunk, None if inv is None else inv[a:b])):  # row order
        along += x
    along /= n
    out = VarianceShare(variance_share=along / total if total > 0 else None, variance_share_dims=rank,
                        total_variance=total, along_variance=along)
    if boot is not None:
        out.variance_share_ci95 = percentile_ci(boot_variance_share_values(src, boot, engine=eng, chunk=chunk), level)
    return out


def aag(X: Any, labels: np.ndarray, *, resamples: int = 0, seed: int = 0, groups: int = BOOT_GROUPS,
        level: float = 0.95, engine: Any = None, chunk: int = AAG_CHUNK_ROWS) -> AAGResult:
    """Exact Attribute Alignment Gap with mean_same, mean_diff, pair counts and per-class means.

    Pair counts are unordered pairs. ``within[c]`` is the mean cosine between different rows
    of class ``c`` (None for a class with one row). With ``resamples`` > 0, ``aag_ci95`` is the
    percentile interval of a bootstrap over ``groups`` seeded random row groups (see
    :class:`GroupBoot`; the ordinary row bootstrap when ``n <= groups``), from the same pass.
    ``X``: an array, a memmap, a ``.npy``, a shard set or a Source; ``engine``: where the
    per-chunk work runs (this process when None).
    """
    return aag_and_variance_share(X, labels, resamples=resamples, seed=seed, groups=groups, level=level,
                                  share=False, engine=engine, chunk=chunk)[0]


def variance_share(X: Any, labels: np.ndarray, *, boot: Optional[GroupBoot] = None,
                   level: float = 0.95, engine: Any = None, chunk: int = AAG_CHUNK_ROWS) -> VarianceShare:
    """Share of total variance of the unit rows lying in the span of the centred class means.

    For two classes this is the direction between the class means (the SISE paper's
    "polarity direction holds 2.4-6.7 % of the variance"). Total variance is the trace of
    the covariance; both are population (1/n) moments, so the ratio is exact.

    ``boot`` (from ``aag(..., resamples=R)``) adds ``variance_share_ci95`` over the same
    resamples: each recomputes the class means and their span from the resampled group sums
    (exact) and the variance along it in one streamed product per batch of resamples.
    """
    src, eng = _opened(X, engine)
    classes, codes, counts = _check_labels(src.n, labels)
    sums, sq = _sums(eng, src, codes, len(classes), chunk=chunk)
    return _variance_share_from(eng, src, sums, sq, counts, boot, level, chunk)


def boot_variance_share_values(X: Any, boot: GroupBoot, *, engine: Any = None, chunk: int = AAG_CHUNK_ROWS,
                               batch: int = VS_BATCH) -> np.ndarray:
    """The resampled variance shares of ``boot``, one pass over the rows per batch of resamples."""
    from ..io.source import ranges

    src, eng = _opened(X, engine)
    n, G = src.n, boot.groups
    unit32 = _unit32_fits(n, src.dim)

    def z2(Qs: np.ndarray) -> np.ndarray:
        Z2 = np.zeros((G, Qs.shape[0]))
        step = _task_rows(8 * G * Qs.shape[0], chunk)
        tasks = [(src.parts, a, b, boot.group_of[a:b], G, Qs, unit32, chunk) for a, b in ranges(n, step)]
        for chunks in eng.imap(boot_z2_range, tasks):
            for z in chunks:
                Z2 += z
        return Z2

    return boot_variance_shares(boot, batch, z2)


def aag_permutation_null(X: Any, labels: np.ndarray, permutations: int, seed: int = 0, *,
                         observed: Optional[float] = None, engine: Any = None,
                         chunk: int = AAG_CHUNK_ROWS) -> dict[str, Any]:
    """Label-shuffle null for AAG: one-sided p-value ``(1 + #{null >= observed}) / (1 + P)``; one
    pass over the rows per draw (``codes[rng.permutation(n)]`` over the global row index)."""
    src, eng = _opened(X, engine)
    n = src.n
    classes, codes, counts = _check_labels(n, labels)
    if observed is None:
        observed = aag(src, labels, engine=eng, chunk=chunk).aag
    rng = np.random.default_rng(seed)
    k = len(classes)
    same_pairs = float((counts * (counts - 1)).sum())
    all_pairs = float(n) * (n - 1)
    null = np.empty(permutations)
    for p in range(permutations):
        perm_codes = codes[rng.permutation(n)]
        sums, sq = _sums(eng, src, perm_codes, k, unit32=True, chunk=chunk)
        null[p] = _aag_from_sums(sums, sq, same_pairs, all_pairs)[0]
    return {
        "permutations": int(permutations),
        "p_value": float((1 + np.sum(null >= observed - 1e-15)) / (1 + permutations)),
        "null_mean": float(null.mean()),
        "null_sd": float(null.std(ddof=1)) if permutations > 1 else None,
        "seed": int(seed),
    }


def aag_bootstrap(X: Any, labels: np.ndarray, resamples: int, seed: int = 0, *,
                  level: float = 0.95, engine: Any = None, chunk: int = AAG_CHUNK_ROWS) -> dict[str, Any]:
    """Percentile bootstrap CI for AAG, resampling rows with replacement (weights
    ``bincount(rng.integers(0, n, n))`` over the global row index; one pass per resample).

    A row drawn twice is not paired with its own copy (pairs are between distinct original
    rows, weighted by how often each was drawn), so duplicates do not inflate ``mean_same``.
    """
    src, eng = _opened(X, engine)
    n = src.n
    classes, codes, _ = _check_labels(n, labels)
    k = len(classes)
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(resamples):
        w = np.bincount(rng.integers(0, n, size=n), minlength=n).astype(np.float64)
        sums, sq = _sums(eng, src, codes, k, weights=w, unit32=True, chunk=chunk)
        wc = np.bincount(codes, weights=w, minlength=k)
        w2c = np.bincount(codes, weights=w * w, minlength=k)
        same_pairs = float((wc * wc - w2c).sum())
        all_pairs = float(w.sum() ** 2 - (w * w).sum())
        if same_pairs <= 0 or all_pairs - same_pairs <= 0:
            continue
        vals.append(_aag_from_sums(sums, sq, same_pairs, all_pairs)[0])
    v = np.asarray(vals)
    lo, hi = np.quantile(v, [(1 - level) / 2, 1 - (1 - level) / 2]) if len(v) else (np.nan, np.nan)
    return {"resamples": int(len(v)), "level": float(level), "ci_low": float(lo), "ci_high": float(hi),
            "sd": float(v.std(ddof=1)) if len(v) > 1 else None, "seed": int(seed)}


def aag_interval(theta: float, boot: GroupBoot, level: float = 0.95) -> Optional[list[float]]:
    """``aag_ci95``: the BCa interval of the group bootstrap (bias correction from the resamples,
    acceleration from the delete-one-group jackknife — the same exact quadratic forms with one
    group's weight set to 0)."""
    import dataclasses

    G = boot.groups
    with one_blas_thread():  # small products: a second BLAS thread only spins (and may split the sums)
        forms = _aag_forms(boot)  # once for both: the jackknife and the resamples
        jack = group_boot_aag(dataclasses.replace(boot, W=np.ones((G, G)) - np.eye(G)), forms=forms)
        values = group_boot_aag(boot, forms=forms)
    return bca_ci(theta, values, jack, level)


def _aag_forms(boot: GroupBoot) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """``(M_same, M_all)`` of :func:`group_boot_aag` (G × G), or None where the resampled sums are
    formed directly (``k·d <= G``)."""
    G, k, d = boot.sums.shape
    if k * d <= G:
        return None
    flat = boot.sums.reshape(G, k * d)
    T = boot.sums.sum(axis=1)
    return flat @ flat.T, T @ T.T


def group_boot_aag(boot: GroupBoot, batch: int = 256,
                   forms: Optional[tuple[np.ndarray, np.ndarray]] = None) -> np.ndarray:
    """AAG of every resample of ``boot`` (NaN where a resample has no same or no different pair).

    With ``T_g = Σ_c S_gc``, ``M_same = Σ_c S_·c S_·cᵀ`` and ``M_all = T Tᵀ`` (G x G, once), a
    resample with group weights ``w`` has ordered same-pair sum ``wᵀ M_same w − Σ_g w_g² q_g`` and
    all-pair sum ``wᵀ M_all w − Σ_g w_g² q_g`` (``q_g`` = Σ |u|² in group g: self-pairs removed);
    pair counts follow from the per-group class counts the same way.
    """
    G, k, d = boot.sums.shape
    flat = boot.sums.reshape(G, k * d)
    direct = k * d <= G  # then resampled sums W @ S (O(G·k·d) each) beat the quadratic forms (O(G²))
    if not direct:
        M_same, M_all = forms if forms is not None else _aag_forms(boot)  # type: ignore[misc]
    q = boot.sq.sum(axis=1)
    ng = boot.counts.sum(axis=1)
    out = np.empty(boot.resamples)
    for s in range(0, boot.resamples, batch):
        W = boot.W[s:s + batch]
        W2 = W * W
        self_sum = W2 @ q
        if direct:
            WS = (W @ flat).reshape(len(W), k, d)
            same_sum = np.einsum("bkd,bkd->b", WS, WS) - self_sum
            WT = WS.sum(axis=1)
            all_sum = np.einsum("bd,bd->b", WT, WT) - self_sum
        else:
            same_sum = np.einsum("bg,bg->b", W @ M_same, W) - self_sum
            all_sum = np.einsum("bg,bg->b", W @ M_all, W) - self_sum
        self_n = W2 @ ng
        same_n = ((W @ boot.counts) ** 2).sum(axis=1) - self_n
        all_n = (W @ ng) ** 2 - self_n
        diff_n = all_n - same_n
        with np.errstate(divide="ignore", invalid="ignore"):
            v = same_sum / same_n - (all_sum - same_sum) / diff_n
        v[(same_n <= 0) | (diff_n <= 0)] = np.nan
        out[s:s + batch] = v
    return out


@dataclass
class VarianceShare(Result):
    """Share of the unit rows' variance in the span of the centred class means."""

    variance_share: Optional[float]
    variance_share_dims: int
    variance_share_ci95: Optional[list[float]] = optional()
    total_variance: float = hidden(0.0)
    along_variance: float = hidden(0.0)


def _share(sums: np.ndarray, counts: np.ndarray, sq_total: float) -> tuple[np.ndarray, float, np.ndarray, int]:
    """(mu, total variance, orthonormal basis Q of the centred class means, its rank) from class sums."""
    N = counts.sum()
    mu = sums.sum(axis=0) / N
    present = counts > 0
    M = sums[present] / counts[present][:, None] - mu
    _, s, vt = np.linalg.svd(M, full_matrices=False)
    rank = int((s > s.max() * 1e-10).sum()) if s.size and s.max() > 0 else 0
    return mu, float(sq_total / N - mu @ mu), vt[:rank], rank


def boot_variance_shares(boot: GroupBoot, batch: int,
                         z2: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The resampled variance shares, ``batch`` resamples at a time: each resample's class means and
    their span ``Q`` come from the weighted group sums; ``z2(Qs)`` returns, per group, the sums of
    the squared projections of its unit rows on the stacked spans ``Qs`` (G × Σr) — one pass over
    the rows per batch, in process (:func:`_boot_variance_share`) or on the engine."""
    q_g = boot.sq.sum(axis=1)
    out = np.full(boot.resamples, np.nan)
    for s in range(0, boot.resamples, batch):
        Ws = boot.W[s:s + batch]
        parts = []
        for W in Ws:
            S = np.einsum("g,gkd->kd", W, boot.sums)
            C = W @ boot.counts
            mu, total, Q, _ = _share(S, C, float(W @ q_g))
            parts.append((W, C.sum(), mu, total, Q))
        Qs = np.concatenate([p[4] for p in parts], axis=0)
        if Qs.shape[0] == 0:
            continue
        Z2 = z2(Qs)
        col = 0
        for j, (W, N, mu, total, Q) in enumerate(parts):
            r = Q.shape[0]
            along = (float(W @ Z2[:, col:col + r].sum(axis=1)) - N * float((Q @ mu) @ (Q @ mu))) / N
            col += r
            if total > 0:
                out[s + j] = along / total
    return out


def sample_pair_cosines(X: np.ndarray, labels: np.ndarray, pairs: int = 2000,
                        seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """Cosines of seeded random pairs, per class: ``{class: {"within": ..., "between": ...}}``.

    ``within``: ``pairs`` pairs (i, j), i ≠ j, both of the class (empty for a one-row class);
    ``between``: ``pairs`` pairs with i in the class and j outside it. Pairs are drawn with
    replacement by ``numpy.random.default_rng(seed)``, in class order, so the same seed gives the
    same cosines. Only the sampled rows are read (a memmap is never loaded whole). For the
    ``aag --plot`` figure: the exact means are :func:`aag`'s.

    >>> X = np.array([[1.0, 0], [1, 0.1], [0, 1], [0.1, 1]])
    >>> s = sample_pair_cosines(X, np.array([0, 0, 1, 1]), pairs=5)
    >>> sorted(s), s["0"]["within"].shape, bool((s["0"]["within"] > 0.99).all())
    (['0', '1'], (5,), True)
    """
    if pairs < 1:
        raise ValueError(f"pairs must be >= 1, got {pairs}")
    classes, codes, _ = _check_labels(X.shape[0], labels)
    rng = np.random.default_rng(seed)

    def cos(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", unit_rows(X[i]), unit_rows(X[j]))

    out: dict[str, dict[str, np.ndarray]] = {}
    for k, c in enumerate(classes):
        members = np.flatnonzero(codes == k)
        others = np.flatnonzero(codes != k)
        m = len(members)
        if m >= 2:
            a = rng.integers(0, m, pairs)
            b = (a + rng.integers(1, m, pairs)) % m  # another member: never the row itself
            within = cos(members[a], members[b])
        else:
            within = np.empty(0)
        between = cos(members[rng.integers(0, m, pairs)], others[rng.integers(0, len(others), pairs)])
        out[label_key(c)] = {"within": within, "between": between}
    return out


# ---- --against ------------------------------------------------------------------------------


def aag_paired(XA: Any, XB: Any, labels: np.ndarray, *, resamples: int = P.RESAMPLES,
               permutations: int = P.RESAMPLES, seed: int = 0, margins: Optional[dict[str, float]] = None,
               ap_a: Optional[np.ndarray] = None, ap_b: Optional[np.ndarray] = None,
               groups: int = BOOT_GROUPS, against: Optional[str] = None, engine: Any = None) -> P.Paired:
    """AAG of A and of B on the same row groups and group weights (``aag_ci95``'s bootstrap; both
    passes on ``engine``, this process when None: the same bytes on any engine), and, given the per-query average precisions of both (same queries), ``label_map.map`` ×100."""
    check_margins(margins, ["aag", "label_map.map"])
    if XA.shape[0] != XB.shape[0]:
        raise InputError(f"A has {XA.shape[0]} rows but B has {XB.shape[0]}; a paired comparison needs the same rows")
    if resamples < 2:
        raise InputError(f"resamples must be >= 2 for a paired comparison, got {resamples}")
    n = XA.shape[0]
    k = len(np.unique(np.asarray(labels)))
    G = min(_group_count(n, k, XA.shape[1], groups), _group_count(n, k, XB.shape[1], groups))
    ra = aag(XA, labels, resamples=resamples, seed=seed, groups=G, engine=engine)
    rb = aag(XB, labels, resamples=resamples, seed=seed, groups=G, engine=engine)
    ba, bb = ra.boot, rb.boot
    assert ba is not None and bb is not None
    assert np.array_equal(ba.group_of, bb.group_of) and np.array_equal(ba.W, bb.W)
    J = np.ones((G, G)) - np.eye(G)
    figs = {"aag": P.paired_figure(
        ra.aag, rb.aag, group_boot_aag(ba), group_boot_aag(bb),
        jack_a=group_boot_aag(dataclasses.replace(ba, W=J)),
        jack_b=group_boot_aag(dataclasses.replace(bb, W=J)),
        margin=margin_of(margins, "aag"))}
    unit = f"{G} seeded random groups of rows" if G < n else "rows"
    method = P.method_text(unit, resamples, permutations, seed).replace(
        "paired permutation p-value (A and B swapped per unit)",
        "aag: bootstrap p-value (A and B in different spaces); label_map.map: paired permutation p-value "
        "(per-query AP swapped per query)")
    if ap_a is not None and ap_b is not None:
        if len(ap_a) != len(ap_b):
            raise InputError("label MAP of A and B were computed over different queries")
        figs["label_map.map"] = P.paired_items(100 * np.asarray(ap_a), 100 * np.asarray(ap_b), resamples=resamples,
                                               permutations=permutations, seed=seed,
                                               margin=margin_of(margins, "label_map.map"))
    return P.Paired(against=against, ci_method=method, items=figs)

