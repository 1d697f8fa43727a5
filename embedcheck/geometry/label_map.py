"""Leave-one-out label-retrieval MAP with its exact chance level (SISE paper), blocked.

Each query ranks every other row by cosine (descending, ties broken by row order). No row is
sorted with its indices and nothing is widened: cosines of unit rows lie in (-2, 2), so bit 30 of
their float32 pattern is always 0, and the pattern maps to an int32 key that orders like the
cosine with one bit to spare. That bit holds the candidate's relevance: ``key = ~((i << 1) ^ ((i
>> 30) | irrelevant))`` for the float32 bits ``i`` (``-0.0`` made ``+0.0`` first), smaller key =
higher cosine, lowest bit set = relevant. One SIMD int32 values-only sort per row (numpy's
``ndarray.sort``) then ranks the candidates while the bit still tells relevant from irrelevant,
and a relevant row at ranked position ``p`` (0-based) that is the ``j``-th relevant one (0-based)
adds ``(j + 1) / (p + 1)`` to its query's AP. A run of exactly equal cosines that mixes relevant
and irrelevant rows (common in float32) sorts irrelevant-first; once per block of queries, the
tie rule (row order) is applied as an exact correction of that query's AP sum, from the few
columns that hold that cosine (a row with more than ``_MAX_TIES`` such runs is re-ranked by one
stable argsort instead). Queries are taken class by class (every query of a class has the same
candidates' relevance row and the same number of relevant rows), a few rows at a time so the
passes over them stay in the core's L2 cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, cast

import numpy as np

from ..io.source import Part, Source, source_of_parts
from ..report.result import Result, hidden, optional
from ..rows import iter_chunks, unit_rows
from . import intervals
from .aag_kernels import _maybe_in_memory
from .aag_sums import check_labels

#: the key of the query itself: larger than any cosine's key, so it sorts last and is dropped
_SELF = np.int32(np.iinfo(np.int32).max)
#: bytes of int32 keys ranked at once (a few rows: the passes over them stay in the L2 cache)
_CHUNK_BYTES = 1 << 20


@dataclass
class MapResult(Result):
    map: float  # x100
    chance: float  # x100, expected MAP of a random ranking (closed form)
    queries: int
    sampled: bool
    map_ci95: Optional[list[float]] = optional()  # x100, see :func:`with_interval`
    ci_method: Optional[str] = optional()
    ap: Optional[np.ndarray] = hidden()  # per-query average precision (0..1), in query order


def with_interval(res: MapResult, resamples: int = intervals.RESAMPLES, seed: int = 0) -> MapResult:
    """Add ``map_ci95``: a percentile bootstrap over the queries (their APs resampled with
    replacement; the ranked pool stays fixed, so it is the interval of the MAP over queries drawn
    from the same population against this collection).

    >>> r = with_interval(MapResult(50.0, 10.0, 4, False, ap=np.array([0.0, 0.5, 0.5, 1.0])), 200)
    >>> r.map_ci95[0] < 50 < r.map_ci95[1], r.ci_method
    (True, 'percentile bootstrap over queries, 200 resamples, seed 0')
    """
    if res.ap is None or len(res.ap) == 0 or resamples <= 0:
        return res
    ci = intervals.percentile_ci(intervals.bootstrap_means(res.ap, resamples, seed))
    res.map_ci95 = None if ci is None else [100 * ci[0], 100 * ci[1]]
    res.ci_method = intervals.method("queries", resamples, seed)
    return res


def expected_random_ap(n_items: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
    """Expected average precision of a uniformly random ranking of N items, R relevant:
    ``(R−1)/(N−1) + H_N·(N−R)/(N(N−1))`` (H_N the N-th harmonic number).

    >>> round(float(expected_random_ap(np.array([2]), np.array([1]))[0]), 4)  # 1 of 2: (1 + 1/2)/2
    0.75
    """
    N = np.asarray(n_items, dtype=np.float64)
    R = np.asarray(n_relevant, dtype=np.float64)
    uniq, inv = np.unique(N, return_inverse=True)  # one harmonic number per distinct N
    H = np.array([np.sum(1.0 / np.arange(1, int(m) + 1)) for m in uniq])[inv.reshape(N.shape)]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(N > 1, (R - 1) / (N - 1) + H * (N - R) / (N * (N - 1)), 1.0)
    return out


def _key_cosines(even: np.ndarray) -> np.ndarray:
    """The float32 cosines of ranking keys (the relevance bit ignored): the inverse of the key map."""
    half = np.right_shift(np.invert(even.astype(np.int64)), 1)  # the ascending key, no relevance bit
    bits = np.where(half >= 0, half, (-half - 1) | 0x80000000).astype(np.uint32)
    return bits.view(np.float32)


#: a row with more mixed ties than this is re-ranked by one stable argsort instead
_MAX_TIES = 16


class _Ties:
    """Mixed ties left for the block: block row, position of the run's last irrelevant key in the
    sorted row, that key, and the number of relevant candidates ranked before the run."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(self, rows: np.ndarray, pos: np.ndarray, even: np.ndarray, before: np.ndarray) -> None:
        self.parts.append((rows, pos, even, before))

    def arrays(self) -> tuple[np.ndarray, ...]:
        return tuple(np.concatenate(a) for a in zip(*self.parts))


def _rank_chunk(S: np.ndarray, self_col: np.ndarray, xor_row: np.ndarray, rel_row: np.ndarray,
                keys: np.ndarray, tmp: np.ndarray, ties: _Ties, row0: int) -> tuple[np.ndarray, int]:
    """Sum of ``(j + 1) / (p + 1)`` over the relevant candidates of each query row of ``S`` (r x n
    float32 cosines, all queries of one class; query ``t`` is column ``self_col[t]``) and the number
    of relevant candidates, with each mixed tie ranked irrelevant-first: those runs are recorded
    in ``ties`` (rows offset by ``row0``) for :func:`_tie_corrections`. ``xor_row`` is -1 on relevant
    columns and -2 on irrelevant ones, ``rel_row`` the same as booleans; ``keys`` and ``tmp`` are
    r x n int32 work buffers."""
    r, n = S.shape
    np.add(S, np.float32(0.0), out=keys.view(np.float32))  # a copy with -0.0 made +0.0
    np.right_shift(keys, 30, out=tmp)  # 0 or -2 (bit 30 is 0 for |cosine| < 2)
    np.bitwise_xor(tmp, xor_row, out=tmp)
    np.left_shift(keys, 1, out=keys)
    np.bitwise_xor(keys, tmp, out=keys)  # = ~(ascending key | irrelevant): descending, relevant odd
    keys[np.arange(r), self_col] = _SELF
    keys.sort(axis=1)
    ranked = keys[:, :-1]  # the query itself, last, dropped
    # a relevant and an irrelevant candidate with the same cosine sit side by side, keys 1 apart
    # (work arrays laid out contiguously, r x (n - 2) and r x (n - 1): flatnonzero never copies them)
    adjacent = tmp.reshape(-1)[:r * (n - 2)].reshape(r, n - 2)
    np.bitwise_xor(ranked[:, 1:], ranked[:, :-1], out=adjacent)
    mixed = np.flatnonzero(adjacent == 1)
    rows, pos = np.divmod(mixed, n - 2)
    if len(mixed):
        per_row = np.bincount(rows, minlength=r)
        for t in np.flatnonzero(per_row > _MAX_TIES).tolist():  # many ties: one stable argsort
            neg = np.subtract(np.float32(0.0), S[t])  # -0.0 -> +0.0
            neg[self_col[t]] = np.inf
            ranked[t] = rel_row[np.argsort(neg, kind="stable")[:-1]]  # only the lowest bit counts
        few = per_row[rows] <= _MAX_TIES
        rows, pos = rows[few], pos[few]
        even = ranked[rows, pos]
    low = tmp.reshape(-1)[:r * (n - 1)].reshape(r, n - 1)
    np.bitwise_and(ranked, 1, out=low)  # the lowest bit
    # as booleans (flatnonzero is ~8x faster on them than on int32), over the keys' own memory
    relevant = np.not_equal(low, 0, out=keys.view(bool).reshape(-1)[:r * (n - 1)].reshape(r, n - 1))
    flat = np.flatnonzero(relevant)
    n_rel = len(flat) // r
    if len(rows):
        before = np.searchsorted(flat, rows * (n - 1) + pos + 1) - rows * n_rel
        ties.add(rows + row0, pos, even, before)
    pos1 = flat.astype(np.float64).reshape(r, n_rel)  # exact: positions < 2**53
    pos1 -= (np.arange(r) * (n - 1) - 1.0)[:, None]  # 1-based ranks
    return np.divide(_ones_to(n_rel), pos1, out=pos1).sum(axis=1), n_rel


def _ones_to(m: int, _cache: dict[int, np.ndarray] = {}) -> np.ndarray:  # noqa: B006 - a deliberate cache
    """``1.0, 2.0, ..., m`` (float64, read-only, cached: every query of a class uses the same)."""
    a = _cache.get(m)
    if a is None:
        if len(_cache) > 64:
            _cache.clear()
        a = _cache[m] = np.arange(1, m + 1, dtype=np.float64)
        a.flags.writeable = False
    return a


def _tie_corrections(S: np.ndarray, qi: np.ndarray, codes: np.ndarray, ties: _Ties) -> np.ndarray:
    """The tie rule, as a correction to each row's AP sum: the run of equal cosines recorded in
    ``ties`` (ranked irrelevant-first) takes the relevance of the columns holding that cosine in
    row order. Exact, from the run's columns, found one run at a time (a row compared in place)."""
    b, n = S.shape
    delta = np.zeros(b)
    if not ties.parts:
        return delta
    rows, pos, even, before = ties.arrays()
    values = _key_cosines(even)
    hit = np.empty(n, dtype=bool)
    step = max(1, (8 << 20) // n)  # runs whose corrections are summed at once
    for s in range(0, len(rows), step):
        t, p, c0 = rows[s:s + step], pos[s:s + step], before[s:s + step]
        found = []
        for row, value in zip(t.tolist(), values[s:s + step]):  # one row's columns at a time: no gathered copy
            np.equal(S[row], value, out=hit)
            hit[qi[row]] = False
            found.append(np.flatnonzero(hit))
        size = np.array([len(c) for c in found], dtype=np.int64)
        run = np.repeat(np.arange(len(t)), size)  # by run, then row order
        cols = np.concatenate(found)
        rel = codes[cols] == codes[qi[t[run]]]
        n_rel = np.bincount(run, weights=rel, minlength=len(t)).astype(np.int64)
        if np.any(n_rel == 0) or np.any(n_rel == size):  # pragma: no cover - broken key invariant
            raise AssertionError("label MAP: a tied run does not match its columns")
        first = np.concatenate(([0], np.cumsum(size)[:-1]))
        at1 = (p + 2 - (size - n_rel))[run] + np.arange(len(run)) - first[run]  # 1-based, row order
        cum = np.cumsum(rel)
        j = cum - (cum - rel)[first][run]  # 1-based index of a relevant member within its run
        hit_rank = (c0[run] + j).astype(np.float64)
        # row order minus irrelevant-first (relevant members at p + 2, p + 3, ... in the sort)
        term = np.where(rel, hit_rank / at1 - hit_rank / (p[run] + 1 + j), 0.0)
        delta += np.bincount(t[run], weights=term, minlength=b)
    return delta


def _rank_block(S: np.ndarray, qi: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """AP of each query row of ``S`` (b x n float32 cosines, query ``qi[t]`` is row t, the rows
    grouped by class)."""
    b, n = S.shape
    rows = max(1, min(b, _CHUNK_BYTES // (4 * n)))
    keys = np.empty((rows, n), dtype=np.int32)
    tmp = np.empty((rows, n), dtype=np.int32)
    sums = np.empty(b)
    n_rel = np.empty(b)
    ties = _Ties()
    qcodes = codes[qi]
    bounds = np.flatnonzero(np.diff(qcodes)) + 1
    for lo, hi in zip(np.concatenate(([0], bounds)).tolist(), np.concatenate((bounds, [b])).tolist()):
        rel_row = codes == qcodes[lo]
        xor_row = np.where(rel_row, np.int32(-1), np.int32(-2))
        for s in range(lo, hi, rows):
            e = min(hi, s + rows)
            sums[s:e], n_rel[s:e] = _rank_chunk(S[s:e], qi[s:e], xor_row, rel_row, keys[:e - s],
                                                tmp[:e - s], ties, s)
    return (sums + _tie_corrections(S, qi, codes, ties)) / n_rel


def query_rows(codes: np.ndarray, counts: np.ndarray, queries: int | None, seed: int) -> tuple[np.ndarray, bool]:
    """The query rows of label MAP and whether they are a sample: every row whose class has another
    row, or ``queries`` of them drawn without replacement by ``np.random.default_rng(seed)``, sorted."""
    eligible = np.flatnonzero(counts[codes] >= 2)
    if queries is not None and 0 < queries < len(eligible):
        return np.sort(np.random.default_rng(seed).choice(eligible, size=queries, replace=False)), True
    return eligible, False


def _result(aps: np.ndarray, q_idx: np.ndarray, n: int, codes: np.ndarray, counts: np.ndarray,
            sampled: bool) -> MapResult:
    chance = expected_random_ap(np.full(len(q_idx), n - 1), counts[codes[q_idx]] - 1)
    return MapResult(map=float(100 * aps.mean()), chance=float(100 * chance.mean()),
                     queries=int(len(q_idx)), sampled=bool(sampled), ap=aps)


def _check_finite(S: np.ndarray) -> np.ndarray:
    if not np.isfinite(S).all():
        raise ValueError("embeddings hold non-finite values")
    return S


def label_map(X: np.ndarray, labels: np.ndarray, *, queries: int | None = None, seed: int = 0,
              block: int = 256, threads: int | None = None) -> MapResult:
    """Leave-one-out label-retrieval MAP x100: each query row ranks all other rows by cosine
    (descending; ties broken by row order), relevant = same label; AP averaged over queries.

    Queries whose class has no other row are skipped (their AP is undefined). ``queries``
    samples that many query rows (seeded, :func:`query_rows`) for very large ``n``; memory is
    ``threads x block x n``. ``X`` is an array or a :class:`~embedcheck.io.source.Source`.
    ``MapResult.ap`` holds the per-query APs (fractions) in query order. ``threads`` (default:
    the free cores, at most 4, one for small inputs) changes nothing but the speed: each worker
    computes its block's cosines with BLAS on one thread and ranks them, so the workers never
    compete with BLAS's own threads, and a block's float32 cosines (OpenBLAS splits a product
    differently on 2 threads than on 1: other last bits, other order of near-equal cosines) are the
    same bits whatever the thread count or the machine's core count.
    """
    from ..engine.threads import choose_threads

    n = X.shape[0]
    _classes, codes, counts = check_labels(n, labels)
    U = _maybe_in_memory(X)
    q_idx, sampled = query_rows(codes, counts, queries, seed)
    threads = threads or choose_threads(4, work=len(q_idx), min_work_per_thread=2 * block)
    scores: Callable[[np.ndarray], np.ndarray]
    if U is X:  # too large to hold unit rows: stream candidates in chunks, scaled by 1/|x_j|
        sq = np.concatenate([np.einsum("ij,ij->i", *(2 * (np.asarray(X[sl], dtype=np.float64),)))
                             for sl in iter_chunks(n)])
        inv_norm = np.divide(1.0, np.sqrt(sq), out=np.zeros_like(sq), where=sq > 0).astype(np.float32)

        def scores(qi: np.ndarray) -> np.ndarray:
            Q = unit_rows(X[qi]).astype(np.float32)
            S = np.empty((len(qi), n), dtype=np.float32)
            for sl in iter_chunks(n):
                S[:, sl] = (Q @ np.asarray(X[sl], dtype=np.float32).T) * inv_norm[sl]
            return _check_finite(S)
    else:
        _check_finite(U)  # unit rows: then every cosine is in [-1, 1] up to rounding

        def scores(qi: np.ndarray) -> np.ndarray:
            return U[qi] @ U.T  # (b, n) float32 cosines; X @ Y.T, not the symmetric path

    # class by class (stable: row order within a class), so a block holds few relevance rows
    order = np.argsort(codes[q_idx], kind="stable")
    q_sorted = q_idx[order]
    aps_sorted = np.empty(len(q_idx))

    from ..engine.threads import one_blas_thread

    def one_block(start: int) -> None:  # each worker its own Gram block on one core (docstring)
        qi = q_sorted[start:start + block]
        aps_sorted[start:start + len(qi)] = _rank_block(scores(qi), qi, codes)

    starts = range(0, len(q_idx), block)
    with one_blas_thread():
        if threads > 1 and len(q_idx) > block:
            from concurrent.futures import ThreadPoolExecutor  # BLAS and numpy sorts release the GIL

            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(one_block, starts))
        else:
            for start in starts:
                one_block(start)
    aps = np.empty(len(q_idx))
    aps[order] = aps_sorted
    return _result(aps, q_idx, n, codes, counts, sampled)


# ---- on any engine (shard sets, Ray, MAP@K) ------------------------------------------------------
# On the local engine :func:`label_map_with_aps` is :func:`label_map` over the source. On another
# engine a task ranks one block of :data:`QUERY_BLOCK` queries (taken class by class, as
# :func:`label_map` takes them) against every part: it computes the block's float32 cosines of
# float32 unit rows part by part, side by side, and ranks them with :func:`label_map`'s own
# :func:`_rank_block`, so the per-query APs are the one-file bytes (memory ``QUERY_BLOCK x n`` a task).
#
# **MAP@K** (``at``) in one round: each (query block x part) task returns its part's top-K (score,
# row, relevant) per query; the merge of per-part top-K lists in (-score, row) order is the global
# top K, exactly. AP@K = (1 / min(R, K)) sum_{k <= K} P@k rel_k with R the query's relevant rows.
#
# With ``resamples`` > 0 both get ``map_ci95``: the percentile bootstrap over the per-query APs of
# :func:`with_interval` (seeded by ``seed``; the one-file bytes).

#: queries ranked by one task; the block of :func:`label_map` (its default ``block``): tie
#: corrections are batched per block of queries, and the bytes of an AP depend on that batching
QUERY_BLOCK = 256


def block_aps(parts: tuple[Part, ...], qi: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The APs of the queries ``qi`` (grouped by class) against every row of ``parts``."""
    Q = unit_rows(source_of_parts(parts).take(qi)).astype(np.float32)
    S = np.concatenate([Q @ unit_rows(p.read()).astype(np.float32).T for p in parts], axis=1)
    return _rank_block(_check_finite(S), qi, codes)


def topk_part(parts: tuple[Part, ...], q_idx: np.ndarray, q_codes: np.ndarray, cpart: Part,
              c_codes: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per query, the part's top-k candidates as (scores, global rows, relevant) in rank order."""
    Q = unit_rows(source_of_parts(parts).take(q_idx)).astype(np.float32)
    S = Q @ unit_rows(cpart.read()).astype(np.float32).T
    own = np.flatnonzero((q_idx >= cpart.offset) & (q_idx < cpart.offset + cpart.rows))
    S[own, q_idx[own] - cpart.offset] = -np.inf  # the query itself is never a candidate
    rows = np.arange(cpart.offset, cpart.offset + cpart.rows)
    out = []
    for i in range(len(q_idx)):
        order = np.lexsort((rows, -S[i]))[:k]
        order = order[np.isfinite(S[i][order])]
        out.append((S[i][order], rows[order], c_codes[order] == q_codes[i]))
    return out


def _map_at(engine: Any, parts: tuple[Part, ...], q_idx: np.ndarray, codes: np.ndarray, counts: np.ndarray,
            at: int) -> np.ndarray:
    blocks = [q_idx[s:s + QUERY_BLOCK] for s in range(0, len(q_idx), QUERY_BLOCK)]
    shared = engine.put(parts)  # stored once (an in-memory array's parts are not copied per task)
    tasks = [(shared, qb, codes[qb], cp, codes[cp.global_slice], at) for qb in blocks for cp in parts]
    res = engine.map(topk_part, tasks)
    aps = np.empty(len(q_idx))
    pos = 0
    for b, qb in enumerate(blocks):
        for i in range(len(qb)):
            lists = [res[b * len(parts) + j][i] for j in range(len(parts))]
            s, r, rel = (np.concatenate([x[f] for x in lists]) for f in range(3))
            hit = rel[np.lexsort((r, -s))[:at]]
            R = int(counts[codes[qb[i]]] - 1)
            prec = np.cumsum(hit) / np.arange(1, len(hit) + 1)
            aps[pos] = float((prec * hit).sum() / min(R, at))
            pos += 1
    return aps


def label_map_with_aps(engine: Any, src: Source, labels: np.ndarray, *, queries: int | None = None, seed: int = 0,
                       at: int | None = None, resamples: int = 0) -> tuple[dict[str, Any], np.ndarray]:
    """:func:`label_map`'s report dict (MAP x100, or MAP@K with ``at``; ``map_ci95`` over the
    per-query APs when ``resamples`` > 0) and the per-query average precisions (0-1), in query order."""
    if at is None and getattr(engine, "name", None) == "local":
        m = label_map(cast(np.ndarray, src), labels, queries=queries, seed=seed, block=QUERY_BLOCK)
        return with_interval(m, resamples, seed).to_dict(), cast(np.ndarray, m.ap)
    if at is not None:
        _, codes, counts = check_labels(src.n, labels)
        q_idx, sampled = query_rows(codes, counts, queries, seed)
        aps = _map_at(engine, src.parts, q_idx, codes, counts, at)
        out: dict[str, Any] = {"map": float(100 * aps.mean()), "at": int(at), "chance": None,
                               "queries": len(q_idx), "sampled": bool(sampled)}
        if resamples > 0 and len(aps):
            ci = intervals.percentile_ci(intervals.bootstrap_means(aps, resamples, seed))
            out["map_ci95"] = None if ci is None else [100 * ci[0], 100 * ci[1]]
            out["ci_method"] = intervals.method("queries", resamples, seed)
        return out, aps
    m = map_over_parts(engine, src, labels, queries=queries, seed=seed)
    return with_interval(m, resamples, seed).to_dict(), cast(np.ndarray, m.ap)


def map_over_parts(engine: Any, src: Source, labels: np.ndarray, *, queries: int | None = None,
                   seed: int = 0) -> MapResult:
    """:func:`label_map` as tasks on ``engine``: one :func:`block_aps` a block of queries."""
    n = src.n
    _, codes, counts = check_labels(n, labels)
    q_idx, sampled = query_rows(codes, counts, queries, seed)
    order = np.argsort(codes[q_idx], kind="stable")  # class by class, as label_map takes them
    q_sorted = q_idx[order]
    parts = engine.put(src.parts)  # stored once (an in-memory array's parts are not copied per task)
    tasks = [(parts, q_sorted[s:s + QUERY_BLOCK], codes) for s in range(0, len(q_idx), QUERY_BLOCK)]
    aps = np.empty(len(q_idx))
    aps[order] = np.concatenate(engine.map(block_aps, tasks)) if tasks else np.empty(0)
    return _result(aps, q_idx, n, codes, counts, sampled)
