"""Near-duplicates of a corpus and the leakage of a test set into it, by exact cosine.

* :func:`range_pairs`: every pair of rows with cosine ``>= threshold`` — in one corpus each
  unordered pair once (``i < j``), or every (test, train) pair — and each row's nearest other row
  with its cosine, in **one pass** over the same fixed grid as the exact top-k search
  (:mod:`embedcheck.geometry.search`: blocks of :data:`~embedcheck.geometry.search.QUERY_BLOCK`
  queries × global ranges of :data:`~embedcheck.geometry.search.CORPUS_ROWS` corpus rows, scored in
  tiles of :data:`~embedcheck.geometry.search.TILE` rows by the same float32 cosine). In one corpus
  only the upper triangle is scored: a tile's row maxima give the later rows' nearest, its column
  maxima the earlier rows'. The grid depends only on the row counts, so a shard set, a store and
  Ray give the same pairs.
* the threshold in three forms: a cosine; a percentile of the **unrelated-pair floor** (the cosines
  of random row pairs ``(i, π(i))`` over seeded derangements, as the anisotropy floor draws them,
  :func:`floor_cosines`); or a **target size** (:func:`threshold_for_keep`: the single-linkage cut
  that leaves that many groups, read off the minimum spanning tree of the pairs above a bound).
* :func:`groups`: connected components of the pair graph (``scipy.sparse.csgraph``), the kept
  representative of each group being its **lowest row index** (the first occurrence in row order).
* :func:`rate_curve`: the share of rows whose nearest other row is at or above each threshold of a
  grid — from the nearest cosines, no further pass.

>>> X = np.array([[1, 0], [1, 0.01], [0, 1], [0.01, 1], [-1, 0]], dtype=np.float32)
>>> r = range_pairs(X, 0.99)
>>> list(zip(r.i.tolist(), r.j.tolist()))
[(0, 1), (2, 3)]
>>> g = groups(5, r.i, r.j); g.kept.tolist(), g.removed.tolist()
([0, 2, 4], [1, 3])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..engine.runner import or_local
from . import search as S
from .retrieval import cosine
from .tiles import _better, scan_range

#: the thresholds of the duplicate-rate curve (the chosen threshold is added)
CURVE = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.92, 0.95, 0.97, 0.98, 0.99, 0.995, 1.0)
#: the upper edges of the similarity bands examples are drawn from (above the threshold)
BAND_EDGES = (0.9, 0.95, 0.98, 0.995)


@dataclass
class RangeResult:
    """Pairs at or above a threshold (``i`` query row, ``j`` corpus row, ``cos`` float32; in one
    corpus ``i < j``), sorted by ``(i, j)``, and each query row's nearest corpus row (itself left
    out in one corpus; the lowest index among ties) with its cosine."""

    i: np.ndarray
    j: np.ndarray
    cos: np.ndarray
    nn_row: np.ndarray
    nn_cos: np.ndarray


def range_task(q_src: Any, q_lo: int, q_hi: int, c_src: Any, c_lo: int, c_hi: int, thr: float, in_corpus: bool,
               tile: int, check_q: bool, check_c: bool,
               names: tuple[str, str] = ("queries", "corpus")) -> tuple[np.ndarray, ...]:
    """Pairs ``>= thr`` of queries ``[q_lo, q_hi)`` with corpus rows ``[c_lo, c_hi)`` (``in_corpus``:
    only corpus rows after the query), the queries' best row and cosine in the range and — in one
    corpus — the corpus rows' best earlier query row and cosine. ``names``: the two sides as a
    refused row's error names them."""
    Q = S._rows(q_src, q_lo, q_hi, check_q, names[0])
    b = q_hi - q_lo
    ii, jj, cc = [], [], []
    rv = np.full(b, -np.inf, dtype=np.float32)
    rr = np.full(b, -1, dtype=np.int64)
    cv = np.full(c_hi - c_lo, -np.inf, dtype=np.float32)
    cr = np.full(c_hi - c_lo, -1, dtype=np.int64)
    for t0 in range(c_lo, c_hi, tile):
        t1 = min(t0 + tile, c_hi)
        if in_corpus and t1 <= q_lo + 1:
            continue
        C = S._rows(c_src, t0, t1, check_c, names[1])
        M = np.asarray(cosine(Q, C), dtype=np.float32)
        sl = slice(t0 - c_lo, t1 - c_lo)
        r, c, v = scan_range(M, q_lo, t0, in_corpus, thr, rv, rr, cv[sl] if in_corpus else None,
                             cr[sl] if in_corpus else None)
        if r.size:
            ii.append(r)
            jj.append(c)
            cc.append(v)
    def cat(xs: list[Any], dt: Any) -> np.ndarray:
        return np.concatenate(xs).astype(dt) if xs else np.zeros(0, dtype=dt)

    return cat(ii, np.int64), cat(jj, np.int64), cat(cc, np.float32), rv, rr, cv, cr


def range_pairs(corpus: Any, threshold: float, *, queries: Any = None, engine: Any = None,
                query_block: Optional[int] = None, corpus_rows: Optional[int] = None, tile: Optional[int] = None,
                check: bool = True, names: Optional[tuple[str, str]] = None) -> RangeResult:
    """Every pair with cosine ``>= threshold`` and each query row's nearest corpus row (see the
    module docstring). ``queries`` None: the corpus against itself, each unordered pair once.
    ``corpus``/``queries``: 2-D arrays or :class:`~embedcheck.io.source.Source` s. ``names``: the
    queries and the corpus as a refused (NaN/inf, zero) row's error names them (default
    ``("queries", "corpus")``; in one corpus both sides are the ``embeddings``)."""
    engine = or_local(engine)
    query_block = query_block or S.QUERY_BLOCK
    corpus_rows = corpus_rows or S.CORPUS_ROWS
    tile = tile or S.TILE
    in_corpus = queries is None
    if names is None:
        names = ("embeddings", "embeddings") if in_corpus else ("queries", "corpus")
    cs, n, _ = S._src(corpus, engine)
    qs, m, _ = (cs, n, 0) if in_corpus else S._src(queries, engine)
    q_blocks = [(s, min(s + query_block, m)) for s in range(0, m, query_block)]
    c_ranges = [(s, min(s + corpus_rows, n)) for s in range(0, n, corpus_rows)]
    tasks, firsts = [], set()
    for bi, (q0, q1) in enumerate(q_blocks):
        for ci, (c0, c1) in enumerate(c_ranges):
            if in_corpus and c1 <= q0 + 1:
                continue
            first = bi not in firsts
            firsts.add(bi)
            tasks.append((qs, q0, q1, cs, c0, c1, float(threshold), in_corpus, tile, check and first, check and bi == 0,
                          names))
    rv = np.full(m, -np.inf, dtype=np.float32)
    rr = np.full(m, -1, dtype=np.int64)
    cv = np.full(n, -np.inf, dtype=np.float32)
    cr = np.full(n, -1, dtype=np.int64)
    ii, jj, cc = [], [], []
    for task, got in zip(tasks, engine.imap(range_task, tasks, cores=True)):
        q0, q1, c0, c1 = task[1], task[2], task[4], task[5]
        gi, gj, gc, tv, tr, tcv, tcr = got
        ii.append(gi)
        jj.append(gj)
        cc.append(gc)
        up = _better(tv, tr, rv[q0:q1], rr[q0:q1])
        rv[q0:q1][up], rr[q0:q1][up] = tv[up], tr[up]
        if in_corpus:
            up0 = _better(tcv, tcr, cv[c0:c1], cr[c0:c1])
            cv[c0:c1][up0], cr[c0:c1][up0] = tcv[up0], tcr[up0]
    i = np.concatenate(ii) if ii else np.zeros(0, dtype=np.int64)
    j = np.concatenate(jj) if jj else np.zeros(0, dtype=np.int64)
    c = np.concatenate(cc) if cc else np.zeros(0, dtype=np.float32)
    order = np.lexsort((j, i))
    if in_corpus:  # a row's nearest: the better of its later (row maxima) and earlier (column maxima) rows
        up = _better(cv, cr, rv, rr)
        rv[up], rr[up] = cv[up], cr[up]
    return RangeResult(i[order], j[order], c[order], rr, rv)


def floor_cosines(U: np.ndarray, pairs: int, seed: int) -> np.ndarray:
    """Cosines (float64, of unit rows ``U``) of ``pairs`` unrelated row pairs ``(i, π(i))``, ``π``
    seeded derangements of the rows (:func:`embedcheck.geometry.anisotropy_floor.derangements`, as many
    as needed, the last one cut)."""
    from .anisotropy_floor import derangements

    n = U.shape[0]
    perms = max(1, -(-pairs // n))
    P = derangements(n, perms, seed)
    a = np.tile(np.arange(n), perms)[:pairs]
    b = P.ravel()[:pairs]
    out = np.empty(a.size, dtype=np.float64)
    for s in range(0, a.size, 65536):
        e = min(s + 65536, a.size)
        out[s:e] = np.einsum("ij,ij->i", U[a[s:e]], U[b[s:e]])
    return out


def keep_bound(nn_cos: np.ndarray, keep: int) -> float:
    """A cosine low enough that the pairs at or above it leave at most ``keep`` groups: the rows
    with a neighbour at or above it number at least ``2 (n - keep)`` (every group of two or more
    rows removes at least half its rows)."""
    n = nn_cos.shape[0]
    need = min(n, 2 * (n - keep))
    if need <= 0:
        return float("inf")
    return float(np.sort(nn_cos)[::-1][need - 1])


def threshold_for_keep(n: int, i: np.ndarray, j: np.ndarray, cos: np.ndarray, keep: int) -> float:
    """The cosine whose pairs leave ``keep`` groups (single linkage): the ``(n - keep)``-th largest
    edge of the maximum-cosine spanning forest of the pairs given (which must leave at most ``keep``
    groups). Ties at that cosine merge together, so the groups may be fewer. ``inf`` for ``keep = n``."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import minimum_spanning_tree

    m = n - keep
    if m <= 0:
        return float("inf")
    w = 2.0 - np.asarray(cos, dtype=np.float64)  # >= 1: no edge weighs zero
    T = minimum_spanning_tree(coo_matrix((w, (i, j)), shape=(n, n)).tocsr()).tocoo()
    edges = np.sort(2.0 - T.data)[::-1]
    if edges.size < m:
        raise ValueError(f"the pairs leave {n - edges.size} groups, more than {keep}")
    return float(edges[m - 1])


@dataclass
class Groups:
    """Connected components of the pair graph: ``label`` per row, ``kept`` (each group's lowest row,
    sorted), ``removed`` (the other rows, sorted), ``sizes`` of the groups of two or more rows."""

    label: np.ndarray
    kept: np.ndarray
    removed: np.ndarray
    sizes: np.ndarray


def groups(n: int, i: np.ndarray, j: np.ndarray) -> Groups:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    G = coo_matrix((np.ones(i.size, dtype=np.int8), (i, j)), shape=(n, n)).tocsr()
    _, label = connected_components(G, directed=False)
    first = np.full(label.max(initial=-1) + 1, n, dtype=np.int64)
    np.minimum.at(first, label, np.arange(n))
    kept = np.sort(first)
    mask = np.ones(n, dtype=bool)
    mask[kept] = False
    sizes = np.bincount(label)
    return Groups(label, kept, np.flatnonzero(mask), np.sort(sizes[sizes > 1])[::-1])


def rate_curve(nn_cos: np.ndarray, thresholds: Any) -> list[dict[str, float]]:
    """The share of rows whose nearest other row scores at or above each threshold."""
    v = np.asarray(nn_cos, dtype=np.float32)
    return [{"threshold": float(t), "duplicate_share": float(np.mean(v >= np.float32(t)))} for t in thresholds]


def bands(threshold: float) -> list[tuple[float, float]]:
    """The similarity bands ``[lo, hi)`` above ``threshold`` (the last one closed at 1)."""
    edges = [threshold] + [e for e in BAND_EDGES if e > threshold] + [np.inf]
    return [(float(a), float(b)) for a, b in zip(edges[:-1], edges[1:])]


def sample_pairs(cos: np.ndarray, lo: float, hi: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """Up to ``size`` indices of the pairs with ``lo <= cos < hi``, drawn without replacement, sorted."""
    idx = np.flatnonzero((cos >= np.float32(lo)) & (cos < np.float32(hi)))
    if idx.size > size:
        idx = np.sort(rng.choice(idx, size=size, replace=False))
    return idx



def weighted_aag(U: np.ndarray, codes: np.ndarray, W: np.ndarray) -> np.ndarray:
    """AAG of unit rows ``U`` with class codes ``codes`` under each row-weight vector of ``W``
    (``(B, n)``): pairs between distinct rows weighted by the product of their weights (a row drawn
    twice is not paired with its own copy, as :func:`embedcheck.geometry.aag.aag_bootstrap` counts
    them), from the weighted class sums. Weights 1 give the exact AAG; weight 0 leaves a row out.
    ``(B,)`` float64 (NaN where a resample has no same-class or no cross-class pair)."""
    k = int(codes.max()) + 1
    W = np.atleast_2d(np.asarray(W, dtype=np.float64))
    Uf = np.asarray(U, dtype=np.float64)
    sq_norm = np.einsum("ij,ij->i", Uf, Uf)
    B = W.shape[0]
    per_class = np.zeros((B, k))
    total = np.zeros((B, Uf.shape[1]))
    sq = np.zeros(B)
    wc = np.zeros((B, k))
    w2c = np.zeros((B, k))
    for c in range(k):
        m = codes == c
        Wm = W[:, m]
        sums = Wm @ Uf[m]
        sq_c = (Wm * Wm) @ sq_norm[m]
        per_class[:, c] = np.einsum("bd,bd->b", sums, sums) - sq_c
        total += sums
        sq += sq_c
        wc[:, c] = Wm.sum(axis=1)
        w2c[:, c] = (Wm * Wm).sum(axis=1)
    same_pairs = (wc * wc - w2c).sum(axis=1)
    all_pairs = W.sum(axis=1) ** 2 - (W * W).sum(axis=1)
    same_sum = per_class.sum(axis=1)
    all_sum = np.einsum("bd,bd->b", total, total) - sq
    with np.errstate(invalid="ignore", divide="ignore"):
        out = same_sum / same_pairs - (all_sum - same_sum) / (all_pairs - same_pairs)
    out[(same_pairs <= 0) | (all_pairs - same_pairs <= 0)] = np.nan
    return out


def aag_effect(U: np.ndarray, codes: np.ndarray, kept: np.ndarray, resamples: int, seed: int,
               block: int = 64) -> tuple[float, float, np.ndarray, np.ndarray]:
    """AAG over every row and over the kept rows only, and both on the same row bootstrap
    (weights ``bincount`` of ``n`` draws with replacement; the kept arm counts only the kept rows
    among them): ``(aag_all, aag_kept, boot_all, boot_kept)``."""
    n = U.shape[0]
    keep = np.zeros(n)
    keep[kept] = 1.0
    a, b = weighted_aag(U, codes, np.vstack([np.ones(n), keep]))
    rng = np.random.default_rng(seed)
    ba, bb = [], []
    for s in range(0, resamples, block):
        W = np.vstack([np.bincount(rng.integers(0, n, size=n), minlength=n) for _ in range(min(block, resamples - s))])
        v = weighted_aag(U, codes, np.vstack([W, W * keep]))
        ba.append(v[:len(W)])
        bb.append(v[len(W):])
    return float(a), float(b), np.concatenate(ba), np.concatenate(bb)

__all__ = ["BAND_EDGES", "CURVE", "Groups", "RangeResult", "aag_effect", "bands", "floor_cosines", "groups", "keep_bound",
           "range_pairs", "range_task", "rate_curve", "sample_pairs", "threshold_for_keep", "weighted_aag"]
