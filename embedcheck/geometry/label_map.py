"""Leave-one-out label-retrieval MAP with its exact chance level (SISE paper), blocked.

Each query ranks every other row by cosine (descending, ties broken by row order). No row is
sorted with its indices: the negated float32 scores of a block of queries are widened to float64
(exact: 29 spare mantissa bits) and every irrelevant score gets its lowest mantissa bit set, so one
values-only sort per row (numpy's vectorised sort) ranks the candidates while the bit still tells
relevant from irrelevant, and no two distinct float32 scores change order. A relevant row at
ranked position ``p`` (0-based) that is the ``j``-th relevant one (0-based) adds
``(j + 1) / (p + 1)`` to its query's AP. Runs of exactly equal scores that mix relevant and
irrelevant rows (common in float32) are then put in row order, the tie rule, from the few columns
that hold that score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..result import Result, hidden, optional
from ..rows import iter_chunks, unit_rows
from . import intervals
from .aag import _check_labels, _maybe_in_memory


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
    H = np.array([np.sum(1.0 / np.arange(1, int(m) + 1)) for m in N])
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(N > 1, (R - 1) / (N - 1) + H * (N - R) / (N * (N - 1)), 1.0)
    return out


def _block_order(S: np.ndarray, qi: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Per query row of ``S`` (b x n float32 cosines, query ``qi[i]`` is row i): the irrelevance
    flags of its n - 1 candidates in ranked order (descending score, ties by row order)."""
    b = len(qi)
    W = np.subtract(0.0, S, dtype=np.float64)  # negated, widened, and -0.0 -> +0.0
    W[np.arange(b), qi] = np.inf  # the query itself sorts last and is dropped
    bits = W.view(np.int64)
    qcodes = codes[qi]
    for c in np.unique(qcodes):  # irrelevant: lowest mantissa bit set (one 0/1 row per class)
        irr = (codes != c).astype(np.int64)
        for t in np.flatnonzero(qcodes == c):
            np.bitwise_or(bits[t], irr, out=bits[t])
    W.sort(axis=1)
    bits = W[:, :-1].view(np.int64)
    flag = (bits & 1).astype(bool)  # True = irrelevant
    # a relevant and an irrelevant row with the same float32 score sit side by side, bits 1 apart
    mixed = (bits[:, 1:] ^ bits[:, :-1]) == 1
    for t in np.flatnonzero(mixed.any(axis=1)):
        ranked = W[t, :-1].astype(np.float32)  # an irrelevant score rounds back to its float32 value
        _fix_ties(flag[t], ranked, np.unique(ranked[1:][mixed[t]]), S[t], int(qi[t]), codes == codes[qi[t]])
    return flag


def _fix_ties(flag_row: np.ndarray, ranked: np.ndarray, values: np.ndarray, srow: np.ndarray, q: int,
              rel_row: np.ndarray) -> None:
    """The tie rule, in place: the run of each negated score in ``values`` (within the sorted
    ``ranked``) is given the relevance of the columns holding that score, in row order."""
    neg = np.subtract(np.float32(0.0), srow, dtype=np.float32)
    neg[q] = np.nan  # the query itself is not a candidate
    for v in values:
        start, end = np.searchsorted(ranked, v, side="left"), np.searchsorted(ranked, v, side="right")
        flag_row[start:end] = ~rel_row[np.flatnonzero(neg == v)]


def _aps(flag: np.ndarray) -> np.ndarray:
    """Average precision of each row of ranked irrelevance flags."""
    rows, pos = np.nonzero(~flag)
    counts = np.bincount(rows, minlength=flag.shape[0])
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    j1 = np.arange(1, len(rows) + 1, dtype=np.float64) - first[rows]
    return np.bincount(rows, weights=j1 / (pos + 1.0), minlength=flag.shape[0]) / counts


def label_map(X: np.ndarray, labels: np.ndarray, *, queries: int | None = None, seed: int = 0,
              block: int = 256, threads: int | None = None) -> MapResult:
    """Leave-one-out label-retrieval MAP x100: each query row ranks all other rows by cosine
    (descending; ties broken by row order), relevant = same label; AP averaged over queries.

    Queries whose class has no other row are skipped (their AP is undefined). ``queries``
    samples that many query rows (seeded) for very large ``n``; memory is ``block x n``.
    ``MapResult.ap`` holds the per-query APs (fractions) in query order. ``threads`` (default:
    the free cores, at most 4, one for small inputs) changes nothing but the speed.
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
    aps = np.empty(len(q_idx))
    if U is X:  # too large to hold unit rows: stream candidates in chunks, scaled by 1/|x_j|
        inv_norm = np.concatenate([1.0 / np.linalg.norm(np.asarray(X[sl], dtype=np.float64), axis=1)
                                   for sl in iter_chunks(n)]).astype(np.float32)

        def scores(qi: np.ndarray) -> np.ndarray:
            Q = unit_rows(X[qi]).astype(np.float32)
            S = np.empty((len(qi), n), dtype=np.float32)
            for sl in iter_chunks(n):
                S[:, sl] = (Q @ np.asarray(X[sl], dtype=np.float32).T) * inv_norm[sl]
            return S
    else:
        def scores(qi: np.ndarray) -> np.ndarray:
            return U[qi] @ U.T  # (b, n) float32 cosines; X @ Y.T, not the symmetric path

    def one_block(start: int) -> None:
        qi = q_idx[start:start + block]
        aps[start:start + len(qi)] = _aps(_block_order(scores(qi), qi, codes))

    starts = range(0, len(q_idx), block)
    if threads > 1 and len(q_idx) > block:
        from concurrent.futures import ThreadPoolExecutor  # numpy sorts release the GIL

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one_block, starts))
    else:
        for start in starts:
            one_block(start)
    chance = expected_random_ap(np.full(len(q_idx), n - 1), counts[codes[q_idx]] - 1)
    return MapResult(map=float(100 * aps.mean()), chance=float(100 * chance.mean()),
                     queries=int(len(q_idx)), sampled=bool(sampled), ap=aps)
