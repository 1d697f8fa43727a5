"""Leave-one-out label-retrieval MAP with its exact chance level (SISE paper), blocked.
"""

from __future__ import annotations
from dataclasses import asdict, dataclass
from typing import Any, Optional
import numpy as np
from .aag import _check_labels, _maybe_in_memory
from ..rows import unit_rows
from ..rows import iter_chunks



@dataclass
class MapResult:
    map: float  # x100
    chance: float  # x100, expected MAP of a random ranking (closed form)
    queries: int
    sampled: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def label_map(X: np.ndarray, labels: np.ndarray, *, queries: Optional[int] = None, seed: int = 0,
              block: int = 256, threads: Optional[int] = None) -> MapResult:
    """Leave-one-out label-retrieval MAP x100: each query row ranks all other rows by cosine
    (descending; ties broken by row order), relevant = same label; AP averaged over queries.

    Queries whose class has no other row are skipped (their AP is undefined). ``queries``
    samples that many query rows (seeded) for very large ``n``; memory is ``block x n``.
    """
    import os

    n = X.shape[0]
    classes, codes, counts = _check_labels(n, labels)
    threads = threads or min(4, os.cpu_count() or 1)
    U = _maybe_in_memory(X)
    eligible = np.flatnonzero(counts[codes] >= 2)
    sampled = queries is not None and 0 < queries < len(eligible)
    if sampled:
        rng = np.random.default_rng(seed)
        q_idx = np.sort(rng.choice(eligible, size=queries, replace=False))
    else:
        q_idx = eligible
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
        S = scores(qi)
        S[np.arange(len(qi)), qi] = -np.inf  # the query itself ranks last
        np.negative(S, out=S)
        order = np.argsort(S, axis=1, kind="stable")[:, : n - 1]
        rel = codes[order] == codes[qi][:, None]
        hits = np.cumsum(rel, axis=1)
        prec = hits / np.arange(1, n, dtype=np.float64)
        aps[start:start + len(qi)] = (prec * rel).sum(axis=1) / rel.sum(axis=1)

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
                     queries=int(len(q_idx)), sampled=bool(sampled))
