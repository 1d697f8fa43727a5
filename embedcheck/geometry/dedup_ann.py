"""``dedup --ann``: the near-duplicate pairs of corpora of millions of rows, approximately, and how many
it misses, measured.

An inverted file whose scans are GEMMs. The rows are put in lists by spherical k-means
(``faiss.Kmeans`` on a seeded sample of :data:`TRAIN_PER_LIST` rows per list; √n lists by default),
each row belongs to the list of its nearest centroid and probes the ``probes`` lists of its nearest
centroids, and every row is scored exactly — the float32 cosine as a GEMM of unit rows, in tiles,
read by the exact pass's tile kernel — against the members of the lists it probes (stored in list
order, so a list is one slice). A pair is found when one row's list is among the other's probes; each row's nearest is the best row it was scored against. What the
lists miss is measured, not assumed: :func:`sample_recall` scores a seeded sample of rows exactly
against every row and counts the share of their exact pairs that were found.

>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((2000, 16)).astype(np.float32)
>>> X[1000:1100] = X[:100] + 0.01 * rng.standard_normal((100, 16)).astype(np.float32)
>>> ix = Lists(X, lists=20, probes=4, seed=0)
>>> r = ix.range_pairs(0.99)
>>> sample_recall(ix, r, 0.99, rows=300, seed=0)["pairs_recall"]
1.0
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from .dedup import RangeResult
from .tiles import _better, scan_range

#: training rows drawn per list for k-means
TRAIN_PER_LIST = 64
#: lists probed per row by default
PROBES = 8
#: rows scored per GEMM against a list's members, and members per tile
ROW_BLOCK, MEMBER_TILE = 4096, 16384
#: rows of the seeded sample scored exactly to measure what the lists miss
SAMPLE_ROWS = 2000


def default_lists(n: int) -> int:
    """√n lists (at least 1, at most 65,536)."""
    return int(max(1, min(65536, round(math.sqrt(n)))))


def _unit32(X: Any, what: str = "embeddings") -> np.ndarray:
    """Float32 unit rows; NaN/inf and all-zero rows refused (``what`` names the rows), as the exact
    pass refuses them: k-means fails on them in faiss, and a scan would take them silently."""
    from ..rows import unit_rows

    X = np.asarray(X)
    finite = np.isfinite(X).all(axis=1)
    if not finite.all():
        raise InputError(f"{what}: row {int(np.flatnonzero(~finite)[0])} has NaN or inf "
                         f"({int((~finite).sum())} such rows)")
    return np.ascontiguousarray(unit_rows(X, dtype=np.float32, zero="raise", name=what))


def nearest_lists(X: np.ndarray, C: np.ndarray, probes: int, block: int = 65536) -> np.ndarray:
    """Each row's ``probes`` nearest centroids by cosine (``(n, probes)`` int64, nearest first; ties
    to the lower list)."""
    n, L = X.shape[0], C.shape[0]
    p = min(probes, L)
    out = np.empty((n, p), dtype=np.int64)
    for s in range(0, n, block):
        S = X[s:s + block] @ C.T
        idx = np.argpartition(-S, p - 1, axis=1)[:, :p] if p < L else np.broadcast_to(np.arange(L), S.shape).copy()
        vals = np.take_along_axis(S, idx, axis=1)
        order = np.lexsort((idx, -vals), axis=1)
        out[s:s + block] = np.take_along_axis(idx, order, axis=1)
    return out


def _groups(lists: np.ndarray, L: int, rows: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows ordered by list, bounds): list ``c`` holds ``rows[bounds[c]:bounds[c + 1]]``, ascending."""
    flat = lists.ravel()
    who = np.repeat(np.arange(lists.shape[0]), lists.shape[1] if lists.ndim > 1 else 1) if rows is None else rows
    order = np.argsort(flat, kind="stable")
    return who[order], np.searchsorted(flat[order], np.arange(L + 1))


class Lists:
    """The corpus's k-means lists (see the module docstring). ``X``: the corpus rows (any 2-D
    array; kept as float32 unit rows)."""

    def __init__(self, X: Any, *, lists: Optional[int] = None, probes: int = PROBES, seed: int = 0) -> None:
        try:
            import faiss
        except ImportError:
            raise InputError("--ann needs faiss-cpu (its k-means), which is not installed: "
                             "pip install 'embedcheck[stores]'") from None
        self.U = _unit32(X)
        n, d = self.U.shape
        self.n, self.seed = n, seed
        self.L = min(lists or default_lists(n), n)
        self.probes = min(probes, self.L)
        rng = np.random.default_rng(seed)
        m = min(n, TRAIN_PER_LIST * self.L)
        sample = self.U[np.sort(rng.choice(n, m, replace=False))]
        km = faiss.Kmeans(d, self.L, niter=10, seed=seed, spherical=True, verbose=False,
                          max_points_per_centroid=TRAIN_PER_LIST, min_points_per_centroid=1)
        km.train(np.ascontiguousarray(sample))
        self.centroids = np.asarray(km.centroids, dtype=np.float32)
        self.own = nearest_lists(self.U, self.centroids, self.probes)
        self.members, self.m_bounds = _groups(self.own[:, :1], self.L)
        self.by_list = self.U[self.members]  # the rows in list order: a list's members are one slice

    def describe(self) -> dict[str, Any]:
        sizes = np.diff(self.m_bounds)
        return {"method": ("inverted file: spherical k-means lists (faiss.Kmeans), each row scored exactly "
                           "(float32 cosine) against the members of the lists of its nearest centroids"),
                "lists": self.L, "probes": self.probes, "train_rows": int(min(self.n, TRAIN_PER_LIST * self.L)),
                "largest_list": int(sizes.max()), "seed": self.seed}

    def range_pairs(self, threshold: float, queries: Any = None) -> RangeResult:
        """Pairs ``>= threshold`` found through the lists and each row's nearest scored row (in one
        corpus each unordered pair once, ``i < j``; with ``queries``, (query, corpus) pairs), as
        :func:`embedcheck.geometry.dedup.range_pairs` returns them."""
        in_corpus = queries is None
        Q = self.U if in_corpus else _unit32(queries, "queries")
        m = Q.shape[0]
        if in_corpus:  # the other lists a row probes (its own list is scanned as members)
            probers, p_bounds = _groups(self.own[:, 1:], self.L)
        else:
            probers, p_bounds = _groups(nearest_lists(Q, self.centroids, self.probes), self.L)
        gv = np.full(m, -np.inf, dtype=np.float32)
        gr = np.full(m, -1, dtype=np.int64)
        ii: list[np.ndarray] = []
        jj: list[np.ndarray] = []
        cc: list[np.ndarray] = []

        def merge(rows: np.ndarray, v: np.ndarray, r: np.ndarray) -> None:
            ok = r >= 0
            rows, v, r = rows[ok], v[ok], r[ok]
            up = _better(v, r, gv[rows], gr[rows])
            gv[rows[up]], gr[rows[up]] = v[up], r[up]

        def scan(qrows: np.ndarray, QQ: np.ndarray, mem: np.ndarray, Um: np.ndarray, diag: bool,
                 cols: bool) -> tuple[np.ndarray, ...]:
            rv = np.full(qrows.size, -np.inf, dtype=np.float32)
            rr = np.full(qrows.size, -1, dtype=np.int64)
            cv = np.full(mem.size, -np.inf, dtype=np.float32)
            cr = np.full(mem.size, -1, dtype=np.int64)
            for r0 in range(0, qrows.size, ROW_BLOCK):
                r1 = min(r0 + ROW_BLOCK, qrows.size)
                Qb = QQ[qrows[r0:r1]]
                for t0 in range(0, mem.size, MEMBER_TILE):
                    t1 = min(t0 + MEMBER_TILE, mem.size)
                    if diag and t1 <= r0 + 1:
                        continue
                    M = Qb @ Um[t0:t1].T  # unit rows: the cosine
                    a, b, v = scan_range(M, r0, t0, diag, threshold, rv[r0:r1], rr[r0:r1],
                                         cv[t0:t1] if cols else None, cr[t0:t1] if cols else None)
                    if a.size:
                        ii.append(qrows[a])
                        jj.append(mem[b])
                        cc.append(v)
            return rv, rr, cv, cr

        for c in range(self.L):
            lo, hi = self.m_bounds[c], self.m_bounds[c + 1]
            mem, Um = self.members[lo:hi], self.by_list[lo:hi]
            oth = probers[p_bounds[c]:p_bounds[c + 1]]
            if mem.size == 0:
                continue
            if in_corpus:  # members against later members (the triangle), then the other probers
                rv, rr, cv, cr = scan(mem, self.U, mem, Um, True, True)
                merge(mem, rv, np.where(rr >= 0, mem[np.maximum(rr, 0)], -1))
                merge(mem, cv, np.where(cr >= 0, mem[np.maximum(cr, 0)], -1))
            if oth.size:
                rv, rr, cv, cr = scan(oth, Q, mem, Um, False, in_corpus)
                merge(oth, rv, np.where(rr >= 0, mem[np.maximum(rr, 0)], -1))
                if in_corpus:
                    merge(mem, cv, np.where(cr >= 0, oth[np.maximum(cr, 0)], -1))
        i = np.concatenate(ii) if ii else np.zeros(0, dtype=np.int64)
        j = np.concatenate(jj) if jj else np.zeros(0, dtype=np.int64)
        v = np.concatenate(cc) if cc else np.zeros(0, dtype=np.float32)
        if in_corpus:  # canonical (i < j), each pair once (found from both ends when each probes the other's list)
            i, j = np.minimum(i, j), np.maximum(i, j)
            _, first = np.unique(i * np.int64(self.n) + j, return_index=True)
            i, j, v = i[first], j[first], v[first]
        order = np.lexsort((j, i))
        return RangeResult(i[order], j[order], v[order], gr, gv)


def _share(k: int, m: int) -> tuple[Optional[float], Optional[list[float]]]:
    if m == 0:
        return None, None
    from scipy.stats import binomtest

    ci = binomtest(k, m).proportion_ci(confidence_level=0.95, method="wilson")
    return k / m, [float(ci.low), float(ci.high)]


def sample_recall(ix: Lists, found: RangeResult, threshold: float, *, rows: int = SAMPLE_ROWS, seed: int = 0,
                  queries: Any = None) -> dict[str, Any]:
    """The share of the exact pairs of a seeded sample of rows (of ``queries`` when given: the
    leakage pass) that the lists found, and of the sample's rows with an exact pair the share
    given one, each with a Wilson interval."""
    from .dedup import range_pairs

    Q = ix.U if queries is None else _unit32(queries, "queries")
    m = Q.shape[0]
    rng = np.random.default_rng(seed + 1)
    s = np.sort(rng.choice(m, min(rows, m), replace=False))
    exact = range_pairs(ix.U, threshold, queries=Q[s])
    a, b = s[exact.i], exact.j
    if queries is None:  # a row against every row: its own entry left out
        keep = a != b
        a, b = a[keep], b[keep]
        key_e = np.minimum(a, b) * np.int64(ix.n) + np.maximum(a, b)
    else:
        key_e = a * np.int64(ix.n) + b
    key_e = np.unique(key_e)  # a pair of two sampled rows is found from both
    key_f = found.i * np.int64(ix.n) + found.j
    hit = int(np.isin(key_e, key_f).sum())
    dup_rows = np.unique(a)  # sample rows with an exact near-duplicate (or, leakage: leaked test rows)
    out: dict[str, Any] = {"sample_rows": int(s.size), "sample_seed": seed + 1, "exact_pairs": int(key_e.size),
                           "found_pairs": hit, "rows_with_pairs": int(dup_rows.size)}
    out["pairs_recall"], out["pairs_recall_ci95"] = _share(hit, int(key_e.size))
    got = int(np.count_nonzero(found.nn_cos[dup_rows] >= np.float32(threshold)))
    out["rows_recall"], out["rows_recall_ci95"] = _share(got, int(dup_rows.size))
    out["recall_method"] = (f"{s.size} rows drawn (seed {seed + 1}) scored exactly against every row: the share of their "
                     "exact pairs found (pairs_recall; Wilson interval over the pairs, which are not independent "
                     "within a row) and of their rows with a pair that were given one (rows_recall)")
    return out


__all__ = ["Lists", "PROBES", "SAMPLE_ROWS", "default_lists", "nearest_lists", "sample_recall"]
