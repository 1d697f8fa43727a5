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
from typing import Any, Callable, Optional

import numpy as np

from ..io.source import Part, Source, source_of_parts
from ..result import Result, hidden, optional
from ..rows import iter_chunks, unit_rows
from . import intervals
from .aag import _check_labels, _maybe_in_memory

#: the key of the query itself: larger than any cosine's key, so it sorts last and is dropped
_SELF = np.int32(np.iinfo(np.int32).max)
#: bytes of int32 keys ranked at once (a few rows: the passes over them stay in the L2 cache)
_CHUNK_BYTES = 1 << 20
_LITTLE = np.little_endian


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
    mixed = np.flatnonzero(np.bitwise_xor(ranked[:, 1:], ranked[:, :-1], out=tmp[:, :n - 2]) == 1)
    rows, pos = mixed // (n - 2), mixed % (n - 2)
    if len(mixed):
        per_row = np.bincount(rows, minlength=r)
        for t in np.flatnonzero(per_row > _MAX_TIES).tolist():  # many ties: one stable argsort
            neg = np.subtract(np.float32(0.0), S[t])  # -0.0 -> +0.0
            neg[self_col[t]] = np.inf
            ranked[t] = rel_row[np.argsort(neg, kind="stable")[:-1]]  # only the lowest bit counts
        few = per_row[rows] <= _MAX_TIES
        rows, pos = rows[few], pos[few]
        even = ranked[rows, pos]
    low = keys.view(np.uint8)[:, 0:4 * (n - 1):4] if _LITTLE else keys.view(np.uint8)[:, 3:4 * (n - 1):4]
    relevant = np.bitwise_and(low, 1, out=tmp.view(np.uint8)[:, :n - 1]).view(bool)  # lowest bit
    flat = np.flatnonzero(relevant)
    n_rel = len(flat) // r
    if len(rows):
        before = np.searchsorted(flat, rows * (n - 1) + pos + 1) - rows * n_rel
        ties.add(rows + row0, pos, even, before)
    pos1 = flat.reshape(r, n_rel) - (np.arange(r) * (n - 1) - 1)[:, None]  # 1-based ranks
    return np.divide(np.arange(1, n_rel + 1, dtype=np.float64), pos1).sum(axis=1), n_rel


def _tie_corrections(S: np.ndarray, qi: np.ndarray, codes: np.ndarray, ties: _Ties) -> np.ndarray:
    """The tie rule, as a correction to each row's AP sum: the run of equal cosines recorded in
    ``ties`` (ranked irrelevant-first) takes the relevance of the columns holding that cosine in
    row order. Exact, from the run's columns; memory bounded by comparing a few runs at once."""
    b, n = S.shape
    delta = np.zeros(b)
    if not ties.parts:
        return delta
    rows, pos, even, before = ties.arrays()
    step = max(1, (8 << 20) // n)  # runs compared at once
    for s in range(0, len(rows), step):
        t, p, c0 = rows[s:s + step], pos[s:s + step], before[s:s + step]
        hit = S[t] == _key_cosines(even[s:s + step])[:, None]  # (runs, n): the columns of each cosine
        hit[np.arange(len(t)), qi[t]] = False
        run, cols = np.divmod(np.flatnonzero(hit), n)  # by run, then row order
        rel = codes[cols] == codes[qi[t[run]]]
        size = np.bincount(run, minlength=len(t))
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


def label_map(X: np.ndarray, labels: np.ndarray, *, queries: int | None = None, seed: int = 0,
              block: int = 256, threads: int | None = None) -> MapResult:
    """Leave-one-out label-retrieval MAP x100: each query row ranks all other rows by cosine
    (descending; ties broken by row order), relevant = same label; AP averaged over queries.

    Queries whose class has no other row are skipped (their AP is undefined). ``queries``
    samples that many query rows (seeded) for very large ``n``; memory is ``threads x block x n``.
    ``MapResult.ap`` holds the per-query APs (fractions) in query order. ``threads`` (default:
    the free cores, at most 4, one for small inputs) changes nothing but the speed: each worker
    computes its block's cosines with BLAS on one thread and ranks them, so the workers never
    compete with BLAS's own threads, and a block's float32 cosines (OpenBLAS splits a product
    differently on 2 threads than on 1: other last bits, other order of near-equal cosines) are the
    same bits whatever the thread count or the machine's core count.
    """
    from ..threads import choose_threads

    n = X.shape[0]
    _classes, codes, counts = _check_labels(n, labels)
    U = _maybe_in_memory(X)
    eligible = np.flatnonzero(counts[codes] >= 2)
    sampled = queries is not None and 0 < queries < len(eligible)
    if sampled:
        rng = np.random.default_rng(seed)
        q_idx = np.sort(rng.choice(eligible, size=queries, replace=False))
    else:
        q_idx = eligible
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
            if not np.isfinite(S).all():
                raise ValueError("embeddings hold non-finite values")
            return S
    else:
        if not np.isfinite(U).all():  # unit rows: then every cosine is in [-1, 1] up to rounding
            raise ValueError("embeddings hold non-finite values")

        def scores(qi: np.ndarray) -> np.ndarray:
            return U[qi] @ U.T  # (b, n) float32 cosines; X @ Y.T, not the symmetric path

    # class by class (stable: row order within a class), so a block holds few relevance rows
    order = np.argsort(codes[q_idx], kind="stable")
    q_sorted = q_idx[order]
    aps_sorted = np.empty(len(q_idx))

    from ..threads import one_blas_thread

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
    chance = expected_random_ap(np.full(len(q_idx), n - 1), counts[codes[q_idx]] - 1)
    return MapResult(map=float(100 * aps.mean()), chance=float(100 * chance.mean()),
                     queries=int(len(q_idx)), sampled=bool(sampled), ap=aps)


# ---- over parts, on any engine (shard sets, Ray, MAP@K) ------------------------------------------
# Label-retrieval MAP over parts: sampled queries against all candidates, exact; and MAP@K.
#
# Queries are chosen on the driver over the global row index exactly as
# :func:`embedcheck.geometry.label_map.label_map` chooses them (``np.random.default_rng(seed)``,
# ``rng.choice(eligible, queries, replace=False)``, sorted). Candidates are ranked by float32 cosine
# of float32 unit rows, descending, ties broken by global row order; the query itself is never a
# candidate.
#
# * **MAP** (all ranks) in two rounds of (query block × candidate part) tasks: round 1 returns, per
#   query, the (score, row) of the relevant candidates in the part; the driver merges them in
#   (−score, row) order; round 2 counts, for each relevant candidate, the part's candidates ranked
#   above it; the driver adds the counts over parts, so rank_j = 1 + Σ counts and
#   AP = mean_j (position of j among the relevant) / rank_j — exact. To give the one-file run's
#   per-query APs bit for bit (its MAP and ``map_ci95`` bootstrap over them), round 2 also returns
#   the strictly-higher count and the irrelevant candidates of equal score, and the driver sums an AP
#   as ``geometry.label_map`` does: the pairwise sum over the irrelevant-first ranking of tied
#   scores plus its tie-rule corrections, batched as there (:func:`_ap_parts`, :func:`_tie_deltas`).
# * **MAP@K** (``--map-at K``) in one round: each task returns its part's top-K (score, row,
#   relevant) per query; the merge of per-part top-K lists in (−score, row) order is the global top
#   K, exactly. AP@K = (1 / min(R, K)) Σ_{k ≤ K} P@k · rel_k with R the query's relevant rows.
#
# With ``resamples`` > 0 both get ``map_ci95``: the percentile bootstrap over the merged per-query
# APs of :func:`embedcheck.geometry.label_map.with_interval` (seeded by ``seed``; the one-file bytes).

QUERY_BLOCK = 256
#: the query block of ``geometry.label_map.label_map`` (its default ``block``): tie corrections are
#: batched per block of queries there, and the bytes of an AP depend on that batching
MEM_BLOCK = 256


def _scores(parts: tuple[Part, ...], q_idx: np.ndarray, cpart: Part) -> np.ndarray:
    Q = unit_rows(source_of_parts(parts).take(q_idx)).astype(np.float32)
    C = unit_rows(cpart.read()).astype(np.float32)
    S = Q @ C.T
    own = (q_idx >= cpart.offset) & (q_idx < cpart.offset + cpart.rows)
    k = np.flatnonzero(own)
    S[k, q_idx[k] - cpart.offset] = -np.inf  # the query itself ranks last
    return S


def relevant_part(parts: tuple[Part, ...], q_idx: np.ndarray, q_codes: np.ndarray, cpart: Part,
                  c_codes: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Round 1: per query, (scores, global rows) of the part's relevant candidates (not itself)."""
    S = _scores(parts, q_idx, cpart)
    out = []
    for i in range(len(q_idx)):
        rel = np.flatnonzero((c_codes == q_codes[i]) & (np.arange(cpart.rows) + cpart.offset != q_idx[i]))
        out.append((S[i, rel], rel + cpart.offset))
    return out


def above_part(parts: tuple[Part, ...], q_idx: np.ndarray, q_codes: np.ndarray, cpart: Part, c_codes: np.ndarray,
               rel: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Round 2: per query, for each relevant (score, row): how many of the part's candidates rank
    above it (higher score, or equal score and a lower row), how many have a strictly higher
    score, and how many irrelevant ones have the same score (the in-memory ranking puts those
    first and corrects for the tie rule afterwards: :func:`_ap`)."""
    S = _scores(parts, q_idx, cpart)
    rows = np.arange(cpart.offset, cpart.offset + cpart.rows)
    out = []
    for i in range(len(q_idx)):
        s_rel, r_rel = rel[i]
        order = np.lexsort((rows, S[i]))  # by score ascending, then row
        s_sorted = S[i][order]
        r_sorted = rows[order]
        irr = np.concatenate(([0], np.cumsum(c_codes[order] != q_codes[i])))
        lo = np.searchsorted(s_sorted, s_rel, side="left")
        hi = np.searchsorted(s_sorted, s_rel, side="right")
        strict = (cpart.rows - hi).astype(np.int64)
        counts = strict.copy()
        for t in np.flatnonzero(hi > lo):  # ties: lower rows rank above
            counts[t] += int(np.searchsorted(r_sorted[lo[t]:hi[t]], r_rel[t], side="left"))
        # the query's own -inf entry never ranks above a finite score nor equals one
        out.append((counts, strict, (irr[hi] - irr[lo]).astype(np.int64)))
    return out


def _ap_parts(scores: np.ndarray, true_rank: np.ndarray, strict: np.ndarray,
              eq_irr: np.ndarray) -> tuple[float, list[list[float]] | None]:
    """A query's AP as :func:`embedcheck.geometry.label_map._rank_block` sums it, in two parts:
    the pairwise sum of ``j / rank_j`` over the ranking that puts the irrelevant candidates of a
    tied score first, and the per-run tie-rule corrections (None when the row has more than
    ``_MAX_TIES`` mixed runs: it is then ranked with the tie rule directly, no correction)."""
    R = len(true_rank)
    hit = np.arange(1, R + 1, dtype=np.float64)
    new_run = np.concatenate(([True], scores[1:] != scores[:-1])) if R else np.zeros(0, dtype=bool)
    starts = np.flatnonzero(new_run)
    j_in_run = np.arange(R) - np.repeat(starts, np.diff(np.append(starts, R)))
    if_rank = strict + eq_irr + 1 + j_in_run
    mixed = [int(a) for a in starts if eq_irr[a] > 0]
    if len(mixed) > _MAX_TIES:
        return float(np.divide(hit, true_rank[None, :]).sum(axis=1)[0]), None
    total = float(np.divide(hit, if_rank[None, :]).sum(axis=1)[0])
    runs = []
    for a in mixed:  # one correction per mixed run: its relevant members, in row order
        b = a + 1
        while b < R and not new_run[b]:
            b += 1
        runs.append([float(hit[m] / true_rank[m] - hit[m] / if_rank[m]) for m in range(a, b)])
    return total, runs


def _tie_deltas(n: int, q_codes: np.ndarray, runs: list[list[list[float]] | None]) -> np.ndarray:
    """The per-query tie corrections added as ``geometry.label_map._tie_corrections`` adds them:
    queries by class (stable) in blocks of :data:`MEM_BLOCK`, each block's runs (query, then rank
    order) in batches of ``max(1, 8 MiB // n)`` runs, each batch's terms summed in order from 0
    (``np.bincount``) and then added to the query's correction."""
    delta = np.zeros(len(runs))
    order = np.argsort(q_codes, kind="stable")
    step = max(1, (8 << 20) // n)
    for b0 in range(0, len(order), MEM_BLOCK):
        flat = [(int(q), t) for q in order[b0:b0 + MEM_BLOCK] for t in (runs[int(q)] or [])]
        for s0 in range(0, len(flat), step):
            part: dict[int, float] = {}
            for q, terms in flat[s0:s0 + step]:
                acc = part.get(q, 0.0)
                for x in terms:
                    acc = acc + x
                part[q] = acc
            for q, acc in part.items():
                delta[q] += acc
    return delta


def topk_part(parts: tuple[Part, ...], q_idx: np.ndarray, q_codes: np.ndarray, cpart: Part,
              c_codes: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per query, the part's top-k candidates as (scores, global rows, relevant) in rank order."""
    S = _scores(parts, q_idx, cpart)
    rows = np.arange(cpart.offset, cpart.offset + cpart.rows)
    out = []
    for i in range(len(q_idx)):
        order = np.lexsort((rows, -S[i]))[:k]
        order = order[np.isfinite(S[i][order])]
        out.append((S[i][order], rows[order], c_codes[order] == q_codes[i]))
    return out


def _queries(n: int, codes: np.ndarray, counts: np.ndarray, queries: int | None, seed: int) -> tuple[np.ndarray, bool]:
    eligible = np.flatnonzero(counts[codes] >= 2)
    sampled = queries is not None and 0 < queries < len(eligible)
    if sampled:
        rng = np.random.default_rng(seed)
        return np.sort(rng.choice(eligible, size=queries, replace=False)), True
    return eligible, False


def label_map_parts(engine: Any, src: Source, labels: np.ndarray, *, queries: int | None = None, seed: int = 0,
                    at: int | None = None, resamples: int = 0) -> dict[str, Any]:
    """MAP x100 (or MAP@K with ``at``) over parts; the report dict of ``aag``'s ``label_map``, with
    ``map_ci95`` over the per-query APs when ``resamples`` > 0."""
    return label_map_with_aps(engine, src, labels, queries=queries, seed=seed, at=at, resamples=resamples)[0]


def label_map_with_aps(engine: Any, src: Source, labels: np.ndarray, *, queries: int | None = None, seed: int = 0,
                       at: int | None = None, resamples: int = 0) -> tuple[dict[str, Any], np.ndarray]:
    """:func:`label_map`'s report dict and the per-query average precisions (0–1), in query order."""
    n = src.n
    _, codes, counts = _check_labels(n, labels)
    q_idx, sampled = _queries(n, codes, counts, queries, seed)
    blocks = [q_idx[s:s + QUERY_BLOCK] for s in range(0, len(q_idx), QUERY_BLOCK)]
    parts = src.parts
    aps = np.empty(len(q_idx))
    if at is not None:
        tasks = [(parts, qb, codes[qb], cp, codes[cp.global_slice], at) for qb in blocks for cp in parts]
        res = engine.map(topk_part, tasks)
        pos = 0
        for b, qb in enumerate(blocks):
            for i in range(len(qb)):
                lists = [res[b * len(parts) + j][i] for j in range(len(parts))]
                s = np.concatenate([x[0] for x in lists])
                r = np.concatenate([x[1] for x in lists])
                rel = np.concatenate([x[2] for x in lists])
                top = np.lexsort((r, -s))[:at]
                hit = rel[top]
                R = int(counts[codes[qb[i]]] - 1)
                prec = np.cumsum(hit) / np.arange(1, len(hit) + 1)
                aps[pos] = float((prec * hit).sum() / min(R, at))
                pos += 1
        out: dict[str, Any] = {"map": float(100 * aps.mean()), "at": int(at), "chance": None,
                               "queries": len(q_idx), "sampled": bool(sampled)}
        if resamples > 0 and len(aps):
            ci = intervals.percentile_ci(intervals.bootstrap_means(aps, resamples, seed))
            out["map_ci95"] = None if ci is None else [100 * ci[0], 100 * ci[1]]
            out["ci_method"] = intervals.method("queries", resamples, seed)
        return out, aps
    tasks1 = [(parts, qb, codes[qb], cp, codes[cp.global_slice]) for qb in blocks for cp in parts]
    res1 = engine.map(relevant_part, tasks1)
    merged: list[list[tuple[np.ndarray, np.ndarray]]] = []
    for b, qb in enumerate(blocks):
        per_q = []
        for i in range(len(qb)):
            s = np.concatenate([res1[b * len(parts) + j][i][0] for j in range(len(parts))])
            r = np.concatenate([res1[b * len(parts) + j][i][1] for j in range(len(parts))])
            o = np.lexsort((r, -s))
            per_q.append((s[o], r[o]))
        merged.append(per_q)
    del res1
    tasks2 = [(parts, qb, codes[qb], cp, codes[cp.global_slice], merged[b]) for b, qb in enumerate(blocks) for cp in parts]
    res2 = engine.map(above_part, tasks2)
    sums = np.empty(len(q_idx))
    runs: list[list[list[float]] | None] = []
    pos = 0
    for b, qb in enumerate(blocks):
        for i in range(len(qb)):
            got = [res2[b * len(parts) + j][i] for j in range(len(parts))]
            above, strict, eq_irr = (np.sum([g[x] for g in got], axis=0) for x in range(3))
            total, run_terms = _ap_parts(merged[b][i][0], 1 + above, strict, eq_irr)
            sums[pos] = total
            runs.append(run_terms)
            pos += 1
    n_rel = (counts[codes[q_idx]] - 1).astype(np.float64)
    aps = (sums + _tie_deltas(n, codes[q_idx], runs)) / n_rel  # as geometry.label_map._rank_block
    chance = expected_random_ap(np.full(len(q_idx), n - 1), counts[codes[q_idx]] - 1)
    m = MapResult(map=float(100 * aps.mean()), chance=float(100 * chance.mean()),
                  queries=len(q_idx), sampled=bool(sampled), ap=aps)
    return with_interval(m, resamples, seed).to_dict(), aps
