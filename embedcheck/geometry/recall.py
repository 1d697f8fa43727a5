"""Recall of an approximate-nearest-neighbour index against exact search: the maths.

Arrays in, arrays and plain results out (the index itself is opened and queried in
:mod:`embedcheck.io.stores`; the report is assembled in :mod:`embedcheck.measures.recall`), and the
driver: :class:`Truth` (the exact side over one set of vectors) and :func:`run_index` (the index
searched and scored against it) — what ``recall`` and ``upgrade --index`` both run.

**Metrics and distances.** An index searches under one metric; the exact side uses the same one,
through the blocked exact search that ``retrieve`` uses (:func:`embedcheck.geometry.search.search_topk`,
float32 GEMM tiles, the one tie rule: score descending, then trec_eval's id order — row number descending for rows without ids). Scores (higher = nearer) and
the distances of ann-benchmarks' k-nn recall:

========  ============================  ==========================
metric    score (exact search)          distance
========  ============================  ==========================
cosine    ``q̂ · ĉ`` (unit rows)          ``1 − cos`` (ann-benchmarks' angular)
ip        ``q · c``                     ``−q · c``
l2        ``−‖q − c‖²``                 ``‖q − c‖`` (Euclidean)
========  ============================  ==========================

**Two recall definitions** (both per query, then summarised):

* *id-overlap recall@k*: ``|returned ∩ exact top k| / k`` (a missing answer counts as a miss);
* *k-nn recall* (ann-benchmarks' ``knn``): a returned id counts when its exact distance to the
  query is at most the k-th exact distance + ``1e-3`` (ties at the k-th place and duplicates are
  not misses), divided by k.

**In-corpus queries.** A query that is a row of the index has its own row removed from both sides
(the exact list and the index's answer), so the answer to "the nearest other row" is measured; such
queries still over-state the recall of unseen queries.

**Summaries** (:func:`summarise`): mean with a percentile-bootstrap 95 % interval over queries, the
5th percentile, the worst query (value and id) and the share of queries below a threshold.

>>> exact = np.array([[0, 1, 2], [3, 4, 5]]); got = np.array([[2, 0, 9], [3, 4, 5]])
>>> id_recall(got, exact, 3).tolist()
[0.6666666666666666, 1.0]
"""

from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from . import intervals
from .retrieval import TopK, cosine, dot, ranking_ties

#: ann-benchmarks' tolerance on the k-th distance (``knn_threshold``'s epsilon)
KNN_EPSILON = 1e-3
METRICS = ("cosine", "ip", "l2")
DISTANCE = {"cosine": "1 - cosine (angular)", "ip": "minus the inner product", "l2": "Euclidean distance"}
#: share of queries below this recall is reported (``share_below``) unless told otherwise
BELOW = 0.9


def neg_sq_l2(Q: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``−‖q − c‖²`` in float32 (higher = nearer): ``2 q·c − ‖q‖² − ‖c‖²``."""
    Qf = np.asarray(Q, dtype=np.float32)
    Cf = np.asarray(C, dtype=np.float32)
    qn = np.einsum("ij,ij->i", Qf, Qf)
    cn = np.einsum("ij,ij->i", Cf, Cf)
    S = Qf @ Cf.T
    S *= 2.0
    S -= qn[:, None]
    S -= cn[None, :]
    return S


SCORES = {"cosine": cosine, "ip": dot, "l2": neg_sq_l2}


def check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise InputError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    return metric


def distance_of_score(scores: np.ndarray, metric: str) -> np.ndarray:
    """The ann-benchmarks distance of each exact-search score (float64)."""
    s = np.asarray(scores, dtype=np.float64)
    if metric == "cosine":
        return 1.0 - s
    if metric == "ip":
        return -s
    return np.sqrt(np.maximum(-s, 0.0))


def exact_topk(queries: Any, corpus: Any, k: int, metric: str, *, engine: Any = None,
               progress: Any = None) -> TopK:
    """Exact top ``k`` corpus rows of every query under ``metric`` (equal scores: the one tie rule, :func:`~embedcheck.geometry.retrieval.ranking_ties`), on any engine."""
    from .search import search_topk

    n = int(corpus.n if hasattr(corpus, "n") else np.shape(corpus)[0])
    ranks = ranking_ties(None, n)  # the one tie rule (rows without ids: row number descending)
    return search_topk(queries, corpus, k, ranks, score=SCORES[check_metric(metric)], engine=engine,
                       check=False, progress=progress)


def prepared(queries: np.ndarray, corpus: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray, str]:
    """``(queries, corpus, metric)`` for :func:`exact_topk` with the per-call work done once: under
    cosine, both sides as float32 unit rows searched by their dot product (the same bits as
    :func:`~embedcheck.geometry.retrieval.cosine`, which normalises them on every call)."""
    from ..rows import unit_rows

    if check_metric(metric) == "cosine":
        return unit_rows(queries, dtype=np.float32), unit_rows(corpus, dtype=np.float32), "ip"
    return queries, corpus, metric


def drop_self(rows: np.ndarray, self_rows: Optional[np.ndarray], k: int,
              scores: Optional[np.ndarray] = None) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Each row's list without its query's own row (``self_rows[i]``; None: no query is a row),
    cut to ``k`` columns (−1 pads a list that is too short; its score is NaN). ``scores`` (same
    shape as ``rows``) are cut alike."""
    rows = np.asarray(rows, dtype=np.int64)
    m = rows.shape[0]
    out = np.full((m, k), -1, dtype=np.int64)
    sc = None if scores is None else np.full((m, k), np.nan, dtype=np.float64)
    for i in range(m):
        keep = rows[i] >= 0
        if self_rows is not None:
            keep &= rows[i] != self_rows[i]
        idx = np.flatnonzero(keep)[:k]
        out[i, :idx.size] = rows[i, idx]
        if sc is not None and scores is not None:
            sc[i, :idx.size] = scores[i, idx]
    return out, sc


def id_recall(returned: np.ndarray, exact: np.ndarray, k: int) -> np.ndarray:
    """Per query: ``|returned[:k] ∩ exact[:k]| / k`` (−1 entries never match). Exact lists shorter
    than k (a corpus of fewer rows) divide by their length."""
    R = np.asarray(returned, dtype=np.int64)[:, :k]
    E = np.asarray(exact, dtype=np.int64)[:, :k]
    out = np.empty(R.shape[0], dtype=np.float64)
    for i in range(R.shape[0]):
        e = E[i][E[i] >= 0]
        r = R[i][R[i] >= 0]
        out[i] = np.intersect1d(np.unique(r), e).size / max(e.size, 1)
    return out


def returned_distances(queries: np.ndarray, vectors: Any, returned: np.ndarray, metric: str) -> np.ndarray:
    """The exact distance (float64) of each returned row to its query (``inf`` for −1)."""
    Q = np.asarray(queries)
    R = np.asarray(returned, dtype=np.int64)
    out = np.full(R.shape, np.inf, dtype=np.float64)
    score = SCORES[metric]
    for i in range(R.shape[0]):
        ok = R[i] >= 0
        if ok.any():
            s = score(Q[i:i + 1], np.asarray(vectors[R[i][ok]]))[0]
            out[i, ok] = distance_of_score(s, metric)
    return out


def knn_recall(returned_dist: np.ndarray, kth_dist: np.ndarray, k: int, epsilon: float = KNN_EPSILON) -> np.ndarray:
    """ann-benchmarks' k-nn recall per query: returned items whose exact distance is at most the
    k-th exact distance + ``epsilon``, divided by ``k``."""
    D = np.asarray(returned_dist, dtype=np.float64)[:, :k]
    return (D <= (np.asarray(kth_dist, dtype=np.float64)[:, None] + epsilon)).sum(axis=1) / float(k)


def summarise(values: np.ndarray, query_ids: Any, *, resamples: int, seed: int, below: float = BELOW) -> dict[str, Any]:
    """Mean with its 95 % interval over queries, 5th percentile, worst query (first in query order
    among equals) and the share of queries below ``below``."""
    v = np.asarray(values, dtype=np.float64)
    out: dict[str, Any] = {"mean": float(v.mean())}
    if resamples > 0 and v.size > 1:
        out["mean_ci95"] = intervals.percentile_ci(intervals.bootstrap_means(v, resamples, seed))
    out["p5"] = float(np.percentile(v, 5))
    w = int(np.argmin(v))
    out["worst"] = float(v[w])
    qid = query_ids[w]
    out["worst_query"] = qid.item() if hasattr(qid, "item") else qid
    out["share_below"] = float((v < below).mean())
    return out


def latency(seconds: np.ndarray) -> dict[str, float]:
    """Median and 95th percentile, in milliseconds."""
    s = np.asarray(seconds, dtype=np.float64) * 1e3
    return {"median_ms": float(np.median(s)), "p95_ms": float(np.percentile(s, 95))}


def ties_at_k(exact_scores: np.ndarray, k: int, tol: float = 0.0) -> int:
    """Queries whose k-th and (k+1)-th exact scores are equal (within ``tol``): their id-overlap
    recall depends on which of the tied rows the index returns (the k-nn recall does not)."""
    S = np.asarray(exact_scores, dtype=np.float64)
    if S.shape[1] <= k:
        return 0
    return int((np.abs(S[:, k - 1] - S[:, k]) <= tol).sum())


def norm_spread(X: Any, chunk: int = 65536) -> dict[str, float]:
    """Minimum, median (of a chunked pass: exact) and maximum L2 norm of the rows."""
    n = int(np.shape(X)[0])
    norms = np.empty(n, dtype=np.float64)
    for s in range(0, n, chunk):
        B = np.asarray(X[s:s + chunk], dtype=np.float64)
        norms[s:s + B.shape[0]] = np.sqrt(np.einsum("ij,ij->i", B, B))
    return {"min": float(norms.min()), "median": float(np.median(norms)), "max": float(norms.max()),
            "relative_spread": float((norms.max() - norms.min()) / max(float(np.median(norms)), 1e-300))}


def duplicate_rows(X: Any, chunk: int = 65536) -> dict[str, int]:
    """Rows whose vector equals another row's, exactly: ``rows`` (in a group of two or more) and
    ``groups``. One 64-bit hash per row (bounded memory), candidates checked byte for byte."""
    A = np.asarray(X)
    n = A.shape[0]
    if n == 0:
        return {"rows": 0, "groups": 0}
    rng = np.random.default_rng(12345)
    width = A.dtype.itemsize * A.shape[1]
    w = (rng.integers(1, 2 ** 62, size=(width + 7) // 8, dtype=np.uint64) | np.uint64(1))
    h = np.empty(n, dtype=np.uint64)
    for s in range(0, n, chunk):
        B = np.ascontiguousarray(A[s:s + chunk])
        raw = B.view(np.uint8).reshape(B.shape[0], width)
        if width % 8:
            raw = np.concatenate([raw, np.zeros((B.shape[0], 8 - width % 8), np.uint8)], axis=1)
        words = raw.view(np.uint64)
        with np.errstate(over="ignore"):
            h[s:s + B.shape[0]] = (words * w).sum(axis=1, dtype=np.uint64)
    order = np.argsort(h, kind="stable")
    hs = h[order]
    same = np.flatnonzero(hs[1:] == hs[:-1])
    if same.size == 0:
        return {"rows": 0, "groups": 0}
    cand = np.unique(np.concatenate([order[same], order[same + 1]]))
    sub = np.ascontiguousarray(A[np.sort(cand)])
    _, inv, counts = np.unique(sub.view(np.dtype((np.void, width))).ravel(), return_inverse=True, return_counts=True)
    dup = counts[counts > 1]
    return {"rows": int(dup.sum()), "groups": int(dup.size)}


def pareto(points: list[tuple[float, float]]) -> list[bool]:
    """For (recall, cost) points: True for those no other point beats (recall ≥ and cost ≤, one
    strictly)."""
    out = []
    for i, (r, c) in enumerate(points):
        dominated = any((r2 >= r and c2 <= c and (r2 > r or c2 < c)) for j, (r2, c2) in enumerate(points) if j != i)
        out.append(not dominated)
    return out


def sample_queries(n: int, m: int, seed: int) -> np.ndarray:
    """``m`` distinct rows of ``n`` (all when ``m >= n``), sorted, drawn from ``default_rng(seed)``."""
    if m >= n:
        return np.arange(n, dtype=np.int64)
    return np.sort(np.random.default_rng(seed).choice(n, size=m, replace=False)).astype(np.int64)


# ---- the driver: an index queried against the exact side ----------------------------------------

class Truth:
    """The exact side over one set of vectors, for one set of queries."""

    def __init__(self, Q: np.ndarray, X: np.ndarray, k: int, metric: str, self_rows: Optional[np.ndarray],
                 engine: Any) -> None:
        n = X.shape[0]
        extra = 1 if self_rows is not None else 0
        kk = min(k + 1 + extra, n)
        self.Qs, self.Xs, self.search_metric = prepared(Q, X, metric)
        t0 = time.perf_counter()
        ex = exact_topk(self.Qs, self.Xs, kk, self.search_metric, engine=engine)
        self.seconds = time.perf_counter() - t0
        self.rows, scores = drop_self(ex.rows, self_rows, k + 1, ex.scores)
        assert scores is not None
        self.scores = scores
        self.kth = distance_of_score(scores[:, k - 1], metric)
        self.Q, self.X, self.k, self.metric, self.self_rows = Q, X, k, metric, self_rows

    def score(self, returned_rows: np.ndarray) -> dict[str, np.ndarray]:
        R, _ = drop_self(returned_rows, self.self_rows, self.k)
        rd = returned_distances(self.Q, self.X, R, self.metric)
        return {"recall": id_recall(R, self.rows[:, :self.k], self.k),
                "knn_recall": knn_recall(rd, self.kth, self.k), "rows": R}


def run_index(idx: Any, truth: Truth, ids: np.ndarray, settings: dict[str, Any], ask: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``idx`` (an opened index, :mod:`embedcheck.io.stores`) searched for ``truth``'s queries with
    ``settings``, ``ask`` answers each, scored against the exact side: (per-query ``recall``,
    ``knn_recall`` and ``rows``; seconds per query)."""
    from ..io.stores import rows_of

    got, secs = idx.search(truth.Q, ask, **settings)
    return truth.score(rows_of(ids, got)), secs


__all__ = ["BELOW", "Truth", "run_index", "DISTANCE", "KNN_EPSILON", "METRICS", "SCORES", "check_metric", "distance_of_score", "drop_self", "prepared",
           "duplicate_rows", "exact_topk", "id_recall", "knn_recall", "latency", "neg_sq_l2", "norm_spread", "pareto",
           "returned_distances", "sample_queries", "summarise", "ties_at_k"]
