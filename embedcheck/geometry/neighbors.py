"""What a change of embedding does to nearest neighbours: overlap@k between the k nearest
neighbours of each row in ``A`` and in ``B`` (two embeddings of the same rows), exact and blocked.

**Neighbours and the tie rule.** The neighbours of row ``q`` are the ``k`` rows ``j != q`` with
the largest cosine, the cosine taken in float64 between float64 unit rows; equal cosines are
ordered by the smaller row index first. The result is therefore unique and equals a float64
brute force that sorts each row by ``(-cosine, index)``. Exact copies of a row tie exactly; rows
that are only positive multiples of one another tie in exact arithmetic but their float64 unit rows
may differ in the last bit, and then the float64 values decide.

**How it stays exact and bounded.** Rows are normalised once into a float32 copy (n·d·4 bytes;
one matrix at a time). Query rows go in blocks of ``block`` rows against column tiles of
:data:`COLUMN_TILE` rows: one float32 GEMM per tile (``block × tile``, never ``n × n``),
``argpartition`` in the tile and a merge into a running best set keep the ``k + extra`` best
candidates, then sorted by their float32 cosine. When the first k + 1 of them are
more than ``2·eps`` apart from one another, the float32 order is the float64 order and nothing
else can enter (the common case: no float64 work). Otherwise that row's candidates are re-scored
in float64 and ordered by the tie rule. A non-candidate's float32 cosine is at most the smallest candidate float32 cosine ``s``,
and float32 errs by at most ``eps = (d + 16)·2⁻²⁴`` for unit rows (rounding of the rows and of
the d-term sum; plus 1e-12 of float64 slack), so when the k-th float64 cosine
exceeds ``s + eps`` nothing outside the candidates can enter the top k. Rows where it does not
(ties or near ties at the k-th place) are recomputed in float64 against all rows (``rechecked``).

**Figures.** ``overlap`` = mean over query rows of |N_A(q) ∩ N_B(q)| / k with a percentile
bootstrap 95 % interval over query rows (a resample's mean depends only on how many rows have
each overlap value, so it is drawn as a multinomial over the k + 1 values: the same
distribution as resampling rows, at O(B·k) cost); ``top1_changed`` = share of rows whose nearest
neighbour differs (interval likewise); with labels, the share of neighbours sharing the query's
label in A and in B, and among the neighbours that enter (in B, not A) and leave (in A, not B).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from ..errors import InputError
from ..rows import iter_chunks, unit_rows
from ..stats import paired as P
from ..stats.items import ItemFigure, items_paired

TIE_RULE = ("neighbours of row q: the k rows j != q with the largest cosine (float64, between float64 unit rows); "
            "equal cosines: the smaller row index first")
#: default work memory of one query block (float32 cosines + argpartition indices)
BLOCK_BYTES = 128 * 2**20
#: columns (rows of the matrix) per GEMM tile: a tile of one query row's cosines fits in cache
COLUMN_TILE = 4096
_U32 = float(np.finfo(np.float32).eps) / 2

Progress = Optional[Callable[[int, int], None]]


def _unit32(X: Any) -> np.ndarray:
    out = np.empty(X.shape, dtype=np.float32)
    for sl in iter_chunks(X.shape[0]):
        out[sl] = unit_rows(X[sl], dtype=np.float32, zero="raise", offset=sl.start)
    return out


def _unit64(X: Any, idx: np.ndarray) -> np.ndarray:
    """Float64 unit rows of ``X[idx]`` for any integer index array (kept in its shape + (d,))."""
    flat = np.asarray(idx).ravel()
    order = np.argsort(flat, kind="stable")  # sorted fancy indexing reads a memmap in order
    rows = np.empty((flat.size, X.shape[1]), dtype=np.float64)
    rows[order] = np.asarray(X[flat[order]], dtype=np.float64)
    return unit_rows(rows, dtype=np.float64).reshape(*np.shape(idx), X.shape[1])


def _select(scores: np.ndarray, k: int) -> np.ndarray:
    """The k best indices of one float64 row by the tie rule (``-inf`` marks excluded entries)."""
    n = scores.shape[0]
    t = np.partition(scores, n - k)[n - k]  # the k-th largest value
    above = np.flatnonzero(scores > t)
    tied = np.flatnonzero(scores == t)[: k - above.size]
    take = np.concatenate([above, tied])
    return take[np.lexsort((take, -scores[take]))]


def _exact_rows(X: Any, q: np.ndarray, k: int, block_bytes: int) -> np.ndarray:
    """Top-k by the tie rule for query rows ``q``, all in float64 (the fallback)."""
    n = X.shape[0]
    out = np.empty((q.size, k), dtype=np.int64)
    per = max(1, block_bytes // (8 * n))
    for s in range(0, q.size, per):
        qs = q[s:s + per]
        Q = _unit64(X, qs)
        S = np.empty((qs.size, n), dtype=np.float64)
        for sl in iter_chunks(n):
            S[:, sl] = np.einsum("qd,jd->qj", Q, unit_rows(np.asarray(X[sl], dtype=np.float64)))
        S[np.arange(qs.size), qs] = -np.inf
        for i in range(qs.size):
            out[s + i] = _select(S[i], k)
    return out


def _top_candidates(U: np.ndarray, q: np.ndarray, kp: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``kp`` largest float32 cosines (self excluded) of query rows ``q`` against all rows, and
    their indices (unordered): ``U[q] @ U[tile].T`` over column tiles of ``cols`` rows (a tile's
    cosines stay in cache for argpartition), merged into a running ``(b, kp)`` best set."""
    n = U.shape[0]
    Q = U[q]
    best_i: Optional[np.ndarray] = None
    best_v: Optional[np.ndarray] = None
    for sl in iter_chunks(n, cols):
        S = Q @ U[sl].T  # (b, tile) float32
        own = np.flatnonzero((q >= sl.start) & (q < sl.stop))
        S[own, q[own] - sl.start] = -np.inf
        w = S.shape[1]
        if w > kp:
            idx = np.argpartition(S, w - kp, axis=1)[:, w - kp:]
            val = np.take_along_axis(S, idx, axis=1)
        else:
            idx = np.broadcast_to(np.arange(w), S.shape).copy()
            val = S
        idx = idx + sl.start
        if best_i is None or best_v is None:
            best_i, best_v = idx, val
            continue
        vi = np.concatenate([best_v, val], axis=1)
        ii = np.concatenate([best_i, idx], axis=1)
        if vi.shape[1] > kp:
            keep = np.argpartition(vi, vi.shape[1] - kp, axis=1)[:, vi.shape[1] - kp:]
            vi, ii = np.take_along_axis(vi, keep, axis=1), np.take_along_axis(ii, keep, axis=1)
        best_i, best_v = ii, vi
    assert best_i is not None and best_v is not None
    return best_i, best_v


def knn_block(X: Any, U: np.ndarray, q: np.ndarray, k: int, kp: int, cols: int,
              eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Task: the top ``k`` of query rows ``q`` (one block) from their float32 candidates, re-scored
    in float64 where the float32 order is unclear. Returns ``(neighbours (b, k), positions in the
    block of the rows whose candidates may miss a non-candidate)`` (the driver rechecks those)."""
    n = U.shape[0]
    cand, s32 = _top_candidates(U, q, kp, cols)
    by32 = np.argsort(-s32, axis=1, kind="stable")
    cand = np.take_along_axis(cand, by32, axis=1)
    s32 = np.take_along_axis(s32, by32, axis=1).astype(np.float64)
    out = cand[:, :k].copy()
    bad_rows = np.empty(0, dtype=np.int64)
    # fast path: float32 values within eps of the float64 ones, so gaps > 2 eps between the
    # first k + 1 sorted values make the float32 order and set the exact float64 ones
    if kp > k:
        unclear = ~(np.diff(s32[:, :k + 1], axis=1) < -2 * eps).all(axis=1)
    else:  # every other row is a candidate: only the order needs deciding
        unclear = ~(np.diff(s32, axis=1) < -2 * eps).all(axis=1)
    if unclear.any():
        rows = np.flatnonzero(unclear)
        C = _unit64(X, cand[rows])  # (r, kp, d): re-score the candidates in float64
        Q = _unit64(X, q[rows])
        s64 = np.einsum("bkd,bd->bk", C, Q)
        order = np.lexsort((cand[rows], -s64), axis=1)
        out[rows] = np.take_along_axis(cand[rows], order[:, :k], axis=1)
        if kp < n - 1:
            kth = np.take_along_axis(s64, order[:, k - 1:k], axis=1)[:, 0]
            bad = ~(kth > s32[rows, -1] + eps)  # a non-candidate could still reach the top k
            bad_rows = rows[bad]
    return out, bad_rows


def knn(X: Any, k: int, queries: Optional[np.ndarray] = None, *, block: Optional[int] = None,
        extra: Optional[int] = None, block_bytes: int = BLOCK_BYTES, progress: Progress = None,
        _u32: Optional[np.ndarray] = None, engine: Any = None) -> tuple[np.ndarray, int]:
    """Exact k nearest neighbours (cosine, self excluded, the tie rule) of ``queries`` (row indices;
    default all rows). Returns ``(neighbours (m, k) int64 ordered best first, rows rechecked in
    float64)``. Work memory ≈ n·d·4 bytes (float32 unit rows) + ``block_bytes``.

    The one driver: one :func:`knn_block` task per block of query rows on ``engine`` (this process
    when None; the float32 unit rows and ``X`` are shared through ``engine.put``), results in block
    order; the rows whose k-th place is not settled by their candidates are recomputed in float64
    against all rows by one :func:`_exact_rows` task. Exact, so the same neighbours on any engine."""
    from ..engine import running

    n, d = X.shape
    if not 1 <= k <= n - 1:
        raise InputError(f"k must be between 1 and n - 1 = {n - 1}, got {k}")
    q_all = np.arange(n, dtype=np.int64) if queries is None else np.asarray(queries, dtype=np.int64)
    m = q_all.size
    kp = min(n - 1, k + (extra if extra is not None else max(k, 8)))
    cols = int(min(n, COLUMN_TILE))
    if block is None:
        block = int(max(1, min(1024, block_bytes // (12 * cols))))
    U = _u32 if _u32 is not None else _unit32(X)
    eps = (d + 16) * _U32 + 1e-12  # float32 GEMM error bound for unit rows, and float64 slack
    out = np.empty((m, k), dtype=np.int64)
    recheck: list[np.ndarray] = []
    done = 0
    with running(engine) as eng:
        from ..io.source import Source

        x_ref = eng.put(X if eng.name == "local" or isinstance(X, Source) else np.asarray(X))  # no memmap travels
        u_ref = eng.put(U)
        starts = list(range(0, m, block))
        tasks = [(x_ref, u_ref, q_all[s:s + block], k, kp, cols, eps) for s in starts]
        for start, (nb, bad) in zip(starts, eng.imap(knn_block, tasks)):
            b = nb.shape[0]
            out[start:start + b] = nb
            if bad.size:
                recheck.append(start + bad)
            done += b
            if progress is not None:
                progress(done, m)
        rechecked = 0
        if recheck:
            pos = np.concatenate(recheck)
            out[pos] = eng.map(_exact_rows, [(x_ref, q_all[pos], k, block_bytes)])[0]
            rechecked = int(pos.size)
    return out, rechecked


def _overlap_counts(NA: np.ndarray, NB: np.ndarray) -> np.ndarray:
    """|N_A(q) ∩ N_B(q)| per row (each row's indices are distinct)."""
    out = np.empty(NA.shape[0], dtype=np.int64)
    for sl in iter_chunks(NA.shape[0], max(1, 2**22 // max(1, NA.shape[1] ** 2))):
        out[sl] = (NA[sl, :, None] == NB[sl, None, :]).any(axis=2).sum(axis=1)
    return out


def _bootstrap_mean_ci(values: np.ndarray, hist: np.ndarray, rng: np.random.Generator,
                       resamples: int) -> list[float]:
    """Percentile 95 % interval of the mean of a resample (with replacement) of rows whose values
    take ``len(hist)`` distinct levels ``values`` with counts ``hist``."""
    m = int(hist.sum())
    draws = rng.multinomial(m, hist / m, size=resamples)
    means = draws @ values / m
    lo, hi = np.quantile(means, [0.025, 0.975])
    return [float(lo), float(hi)]


@dataclass
class NeighborResult:
    n: int
    dim_a: int
    dim_b: int
    k: int
    queries: np.ndarray
    sampled: bool
    seed: int
    resamples: int
    neighbors_a: np.ndarray
    neighbors_b: np.ndarray
    overlap_counts: np.ndarray
    overlap: float
    overlap_ci95: list[float]
    top1_changed: float
    top1_changed_ci95: list[float]
    rechecked: dict[str, int]
    labels: Optional[dict[str, Any]] = None

    def to_dict(self) -> dict[str, Any]:
        hist = np.bincount(self.overlap_counts, minlength=self.k + 1)
        out: dict[str, Any] = {
            "n": self.n, "dim_a": self.dim_a, "dim_b": self.dim_b, "k": self.k,
            "queries": int(self.queries.size), "sampled": self.sampled, "seed": self.seed,
            "overlap": self.overlap, "overlap_ci95": self.overlap_ci95,
            "ci_method": f"bootstrap over query rows, {self.resamples} resamples, seed {self.seed} (percentile)",
            "overlap_histogram": [int(x) for x in hist],
            "top1_changed": self.top1_changed, "top1_changed_ci95": self.top1_changed_ci95,
            "tie_rule": TIE_RULE, "rechecked_rows": self.rechecked,
        }
        if self.labels is not None:
            out["labels"] = self.labels
        return out


def _label_figures(codes: np.ndarray, q: np.ndarray, NA: np.ndarray, NB: np.ndarray) -> dict[str, Any]:
    yq = codes[q][:, None]
    same_a = codes[NA] == yq
    same_b = codes[NB] == yq
    in_a = (NB[:, :, None] == NA[:, None, :]).any(axis=2)  # NB entries also in NA
    in_b = (NA[:, :, None] == NB[:, None, :]).any(axis=2)
    entering, leaving = int((~in_a).sum()), int((~in_b).sum())
    return {
        "same_label_a": float(same_a.mean()), "same_label_b": float(same_b.mean()),
        "same_label_change": float(same_b.mean() - same_a.mean()),
        "entering": entering, "leaving": leaving,
        "entering_same_label": float(same_b[~in_a].mean()) if entering else None,
        "leaving_same_label": float(same_a[~in_b].mean()) if leaving else None,
    }


def neighbors(A: Any, B: Any, k: int = 10, *, queries: Optional[int] = None, seed: int = 0,
              labels: Optional[np.ndarray] = None, resamples: int = 1000, block_bytes: int = BLOCK_BYTES,
              progress: Progress = None, engine: Any = None) -> NeighborResult:
    """Overlap@k of each query row's neighbours in ``A`` and ``B`` (same rows; dims may differ),
    the neighbour searches on ``engine`` (:func:`knn`; this process when None).

    ``queries``: sample this many query rows without replacement (seeded); neighbours are always
    searched among all n rows. ``labels``: integer codes or any 1-D labels, one per row.
    """
    n = A.shape[0]
    if B.shape[0] != n:
        raise InputError(f"A has {n} rows but B has {B.shape[0]}; neighbors compares two embeddings of the same rows")
    if n < 2:
        raise InputError("neighbors needs at least 2 rows")
    if not 1 <= k <= n - 1:
        raise InputError(f"k must be between 1 and n - 1 = {n - 1}, got {k}")
    if queries is not None and not 1 <= queries:
        raise InputError(f"queries must be >= 1, got {queries}")
    if resamples < 1:
        raise InputError(f"resamples must be >= 1, got {resamples}")
    rng = np.random.default_rng(seed)
    sampled = queries is not None and queries < n
    q = np.sort(rng.choice(n, size=queries, replace=False)) if sampled else np.arange(n, dtype=np.int64)

    def tick(side: int) -> Progress:
        if progress is None:
            return None
        return lambda done, total: progress(side * total + done, 2 * total)

    NA, ra = knn(A, k, q, block_bytes=block_bytes, progress=tick(0), engine=engine)
    NB, rb = knn(B, k, q, block_bytes=block_bytes, progress=tick(1), engine=engine)
    inter = _overlap_counts(NA, NB)
    hist = np.bincount(inter, minlength=k + 1).astype(np.float64)
    overlap_ci = _bootstrap_mean_ci(np.arange(k + 1) / k, hist, rng, resamples)
    changed = NA[:, 0] != NB[:, 0]
    ch_hist = np.array([(~changed).sum(), changed.sum()], dtype=np.float64)
    changed_ci = _bootstrap_mean_ci(np.array([0.0, 1.0]), ch_hist, rng, resamples)
    lab = None
    if labels is not None:
        from ..rows import encode_labels

        _, codes = encode_labels(labels, n)
        lab = _label_figures(codes, q, NA, NB)
    return NeighborResult(n=n, dim_a=int(A.shape[1]), dim_b=int(B.shape[1]), k=k, queries=q, sampled=sampled,
                          seed=seed, resamples=resamples, neighbors_a=NA, neighbors_b=NB, overlap_counts=inter,
                          overlap=float(inter.mean() / k), overlap_ci95=overlap_ci,
                          top1_changed=float(changed.mean()), top1_changed_ci95=changed_ci,
                          rechecked={"a": ra, "b": rb}, labels=lab)


# ---- --against ------------------------------------------------------------------------------


def neighbor_items(res: Any, codes: Optional[np.ndarray] = None) -> dict[str, np.ndarray]:
    """Per query row of a :class:`~embedcheck.geometry.neighbors.NeighborResult`: ``overlap``
    (shared neighbours / k), ``top1_changed`` (0/1) and, with label codes, ``labels.same_label_b``
    (the share of B's neighbours with the query's label)."""
    out = {"overlap": res.overlap_counts / res.k,
           "top1_changed": (res.neighbors_a[:, 0] != res.neighbors_b[:, 0]).astype(np.float64)}
    if codes is not None:
        out["labels.same_label_b"] = (codes[res.neighbors_b] == codes[res.queries][:, None]).mean(axis=1)
    return out


def neighbors_paired(items_a: dict[str, np.ndarray], items_b: dict[str, np.ndarray], **kw: Any) -> P.Paired:
    """overlap@k (higher), top-1 changed (lower) and the same-label share of two neighbour
    comparisons of the same rows and query rows."""
    better = {"top1_changed": "lower"}
    figs = {k: ItemFigure(items_a[k], items_b[k], better=better.get(k, "higher")) for k in items_a}
    return items_paired(figs, unit="query rows", **kw)



__all__ = ["neighbor_items", "neighbors_paired", "TIE_RULE", "NeighborResult", "knn", "knn_block", "neighbors"]
