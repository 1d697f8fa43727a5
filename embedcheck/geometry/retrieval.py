"""Retrieval on precomputed vectors: exact top-k with trec_eval's tie order, trec_eval's metrics
(MTEB's), bootstrap intervals over queries. Arrays in, arrays and a typed result out.

**Scores.** ``score(Q, C)`` gives a ``(b, t)`` float32 block of query × document scores. The
default :func:`cosine` is MTEB's ``cos_sim``: both sides L2-normalised to float32 unit rows, then
one float32 GEMM ``Q @ C.T``. Another score (Hamming similarity of packed bits, int8 dot products
...) is any picklable function with the same signature (:mod:`embedcheck.geometry.search`).

**Tie rule** (:data:`TIE_RULE`). trec_eval sorts a query's run by score descending and, for equal
scores, by document id descending (``strcmp`` order of the ids, compared as bytes: ``"c"`` before
``"b"`` before ``"aa"`` before ``"a"``), and pytrec-eval-terrier (what MTEB's
``RetrievalEvaluator`` calls) does the same. The search ranks with exactly that key, so the top-k
list and every figure equal what trec_eval computes on the same scores. Each document gets its
*tie rank* (:func:`tie_ranks`): its position in descending id order; for equal scores the smaller
tie rank comes first. The k-th place is decided exactly: a block's top k comes from
``argpartition`` on the scores, and a row whose k-th score is tied with a score left outside is
re-selected by (score, tie rank).

**Metrics** (:func:`evaluate_run`) on the top ``max(k)`` documents of each query, as MTEB
computes them (it passes its top-``max(k)`` run to pytrec_eval): trec_eval's ``ndcg_cut`` (gain =
the qrels grade, discount ``log2(rank + 1)``, ideal from all judged documents of the query),
``map_cut`` (divided by the number of relevant documents), ``recall``, ``P`` (divided by k even
when fewer are retrieved); relevant means grade ≥ 1 (trec_eval's relevance level). ``mrr_at_k``
is MTEB's own: 1 / rank of the first document with grade > 0 within the first k (on the
trec_eval order here; MTEB's Python sort keeps insertion order for equal scores). Queries are
those that appear in the qrels (trec_eval evaluates those); a query judged but without a relevant
document counts with zeros, as in trec_eval; a query that has no qrels line is not evaluated and
is counted in ``queries_without_qrels``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..io.retrieval import id_bytes  # noqa: F401  (read here by the commands that rank)
from ..report.result import Figure
from ..report.schemas import FRACTION
from ..rows import unit_rows
from ..stats import paired as P
from ..stats.items import ItemFigure, items_paired
from . import intervals

TIE_RULE = ("score descending (float32 cosine, MTEB's cos_sim); equal scores: document id descending "
            "(byte order, as trec_eval and pytrec_eval sort a run)")
#: MTEB's default cut-offs
K_VALUES = (1, 3, 5, 10, 100, 1000)
#: the metric families, in report order (keys ``<family>_at_<k>``)
FAMILIES = ("ndcg", "map", "recall", "precision", "mrr")
MAIN_SCORE = "ndcg_at_10"


# ---- scores and the tie rule -----------------------------------------------------------------

def cosine(Q: np.ndarray, C: np.ndarray) -> np.ndarray:
    """MTEB's ``cos_sim`` in float32: unit rows (norms in float64), then ``Q @ C.T``."""
    return unit_rows(Q, dtype=np.float32) @ unit_rows(C, dtype=np.float32).T


def dot(Q: np.ndarray, C: np.ndarray) -> np.ndarray:
    """The plain float32 dot product (MTEB's ``dot`` similarity; vectors used as stored)."""
    return np.asarray(Q, dtype=np.float32) @ np.asarray(C, dtype=np.float32).T


def tie_ranks(ids: np.ndarray) -> np.ndarray:
    """Each id's position in descending byte order (0 = first among equal scores); ids must be
    distinct (checked by the caller)."""
    ids = np.asarray(ids)
    order = np.argsort(ids, kind="stable")  # ascending
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[order] = np.arange(len(ids) - 1, -1, -1, dtype=np.int64)
    return ranks


def ranking_ties(ids: Optional[Sequence[Any] | np.ndarray], n: int) -> np.ndarray:
    """The one tie rule of every command that ranks rows (``retrieve`` and its re-ranks, ``hubness``,
    ``dedup``, ``upgrade``, ``recall``, ``compress``): each of the ``n`` corpus rows' tie rank for
    :func:`select_topk` — equal scores are ordered by document id descending, trec_eval's (and
    pytrec_eval's) order (:func:`tie_ranks` of the ids as UTF-8 bytes). Rows without ids (``ids``
    None) are ordered by row number descending, as if the row number were the id.

    >>> ranking_ties(["a", "c", "b"], 3).tolist()  # "c" first, then "b", then "a"
    [2, 0, 1]
    >>> ranking_ties(None, 3).tolist()
    [2, 1, 0]
    """
    if ids is None:
        return tie_ranks(np.arange(n, dtype=np.int64))
    b = ids if isinstance(ids, np.ndarray) and ids.dtype.kind == "S" else id_bytes(list(ids))
    if len(b) != n:
        raise ValueError(f"{len(b)} ids for {n} rows")
    return tie_ranks(b)


def _topk_by_threshold(S: np.ndarray, ranks: np.ndarray, kk: int) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """:func:`select_topk` of a wide block without a partition of every row: each row's ``kk``-th
    best among its first ``sub`` columns is a lower bound of its ``kk``-th best overall, so the
    entries at or above it (one comparison pass) hold the whole top ``kk`` — ties included — and
    only they are sorted by the tie rule. None when too many entries reach the bound (rows of
    near-equal scores): the caller partitions instead. The same columns and order as the partition."""
    from .tiles import reach

    b, t = S.shape
    sub = max(8 * kk, 1024)
    thr = np.partition(S[:, :sub], sub - kk, axis=1)[:, sub - kk]
    got = reach(S, thr, ranks, 0, max(t // 8, kk))
    if got is None:
        return None
    cand, vals, rk = got
    order = np.lexsort((rk, -vals), axis=1)[:, :kk]
    return np.take_along_axis(cand, order, axis=1), np.take_along_axis(vals, order, axis=1)


def select_topk(S: np.ndarray, ranks: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``min(k, t)`` columns of each row of the score block ``S`` (b, t) by the tie rule
    (score descending, then ``ranks`` ascending), in that order: ``(columns (b, kk), scores)``."""
    b, t = S.shape
    kk = min(k, t)
    if kk == 0:
        return np.zeros((b, 0), dtype=np.int64), np.zeros((b, 0), dtype=S.dtype)
    if kk < t and t >= 4096 and 64 * kk <= t:
        got = _topk_by_threshold(S, ranks, kk)
        if got is not None:
            return got
    if kk < t:
        cols = np.argpartition(S, t - kk, axis=1)[:, t - kk:]
        vals = np.take_along_axis(S, cols, axis=1)
        kth = vals.min(axis=1)
        # a tie at the k-th place that crosses the cut: argpartition chose arbitrarily among them
        cut = (S == kth[:, None]).sum(axis=1) > (vals == kth[:, None]).sum(axis=1)
        for i in np.flatnonzero(cut):
            above = np.flatnonzero(S[i] > kth[i])
            eq = np.flatnonzero(S[i] == kth[i])
            eq = eq[np.argsort(ranks[eq], kind="stable")][: kk - above.size]
            cols[i] = np.concatenate([above, eq])
            vals[i] = S[i, cols[i]]
    else:
        cols = np.broadcast_to(np.arange(t, dtype=np.int64), (b, t)).copy()
        vals = S.copy()
    order = np.lexsort((ranks[cols], -vals), axis=1)
    return np.take_along_axis(cols, order, axis=1).astype(np.int64), np.take_along_axis(vals, order, axis=1)


@dataclass
class TopK:
    """A run: for each query row, the corpus rows retrieved best first and their scores."""

    rows: np.ndarray  #: (m, kk) int64 corpus rows
    scores: np.ndarray  #: (m, kk) float32


def rescore(queries: np.ndarray, corpus: Any, candidates: np.ndarray, ranks: np.ndarray, k: int, *,
            score: Any = cosine) -> TopK:
    """Re-rank candidate lists (e.g. the ``m × k'`` rows found in a compressed index) with another
    score (default: float32 cosine on the float vectors ``corpus``), keeping the best ``k`` by the
    tie rule. ``queries`` row i goes with ``candidates`` row i."""
    m, kp = candidates.shape
    rows = np.empty((m, min(k, kp)), dtype=np.int64)
    vals = np.empty((m, min(k, kp)), dtype=np.float32)
    for i in range(m):
        c = candidates[i]
        s = score(np.asarray(queries[i:i + 1]), np.asarray(corpus[np.sort(c)]))[0]
        c_sorted = np.sort(c)
        o = np.lexsort((ranks[c_sorted], -s))[:k]
        rows[i], vals[i] = c_sorted[o], s[o]
    return TopK(rows, vals)


# ---- qrels -----------------------------------------------------------------------------------

@dataclass
class Qrels:
    """Judgements by row: the evaluated query rows (in query order) and, per evaluated query, its
    judged corpus rows and grades (CSR layout: ``offsets[i]:offsets[i + 1]``)."""

    query_rows: np.ndarray  #: (e,) int64 rows of the query matrix
    offsets: np.ndarray  #: (e + 1,) int64
    doc_rows: np.ndarray  #: (nnz,) int64 corpus rows
    grades: np.ndarray  #: (nnz,) int64

    @property
    def n_relevant(self) -> np.ndarray:
        """Relevant (grade ≥ 1) documents per evaluated query."""
        return np.add.reduceat((self.grades >= 1).astype(np.int64), self.offsets[:-1]) if len(self.grades) else \
            np.zeros(len(self.query_rows), dtype=np.int64)


def _lookup(sorted_ids: np.ndarray, order: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Row of each id of ``want`` (−1 when absent); ``sorted_ids = ids[order]``."""
    if len(sorted_ids) == 0:
        return np.full(len(want), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_ids, want)
    pos_c = np.minimum(pos, len(sorted_ids) - 1)
    found = sorted_ids[pos_c] == want
    return np.where(found, order[pos_c], -1).astype(np.int64)


def check_unique(ids: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(order, ids[order])`` ascending; a duplicate id is an :class:`InputError`."""
    order = np.argsort(ids, kind="stable")
    s = ids[order]
    dup = np.flatnonzero(s[1:] == s[:-1]) if len(s) > 1 else np.zeros(0, dtype=np.int64)
    if dup.size:
        ex = s[dup[0]].decode("utf-8", "replace")
        rows = sorted(int(r) for r in order[s == s[dup[0]]])[:2]
        raise InputError(f"{what} has {dup.size} duplicate id(s), e.g. {ex!r} at rows {rows[0]} and {rows[1]}")
    return order, s


def build_qrels(q_ids: np.ndarray, d_ids: np.ndarray, grades: np.ndarray, query_ids: np.ndarray,
                doc_ids: np.ndarray, *, what: str = "qrels") -> Qrels:
    """Map qrels id triples (bytes arrays, int grades) to rows of the query and corpus matrices.
    Ids absent from the queries or the corpus, a pair given twice and an empty qrels are errors."""
    if len(q_ids) == 0:
        raise InputError(f"{what} has no judgements")
    qo, qs = check_unique(query_ids, "queries")
    do, ds = check_unique(doc_ids, "corpus")
    qr = _lookup(qs, qo, q_ids)
    dr = _lookup(ds, do, d_ids)
    for rows, ids, side in ((qr, q_ids, "queries"), (dr, d_ids, "corpus")):
        miss = np.flatnonzero(rows < 0)
        if miss.size:
            n_ids = len(np.unique(ids[miss]))
            raise InputError(f"{what} names {n_ids} {'query' if side == 'queries' else 'document'} id(s) that are "
                             f"in no {side} row (e.g. {ids[miss[0]].decode('utf-8', 'replace')!r}, line "
                             f"{int(miss[0]) + 1} of the judgements)")
    order = np.lexsort((dr, qr))
    qr, dr, g = qr[order], dr[order], np.asarray(grades, dtype=np.int64)[order]
    same = np.flatnonzero((qr[1:] == qr[:-1]) & (dr[1:] == dr[:-1]))
    if same.size:
        raise InputError(f"{what} judges the pair ({query_ids[qr[same[0]]].decode()!r}, "
                         f"{doc_ids[dr[same[0]]].decode()!r}) twice")
    starts = np.flatnonzero(np.concatenate(([True], qr[1:] != qr[:-1])))
    offsets = np.append(starts, len(qr)).astype(np.int64)
    return Qrels(query_rows=qr[starts], offsets=offsets, doc_rows=dr, grades=g)


# ---- metrics ---------------------------------------------------------------------------------

def _run_grades(run_rows: np.ndarray, qrels: Qrels, n_docs: int) -> np.ndarray:
    """(e, K) grade of each retrieved document for the evaluated queries (0 when not judged)."""
    e = len(qrels.query_rows)
    qpos = np.repeat(np.arange(e, dtype=np.int64), np.diff(qrels.offsets))
    keys = qpos * n_docs + qrels.doc_rows  # sorted: the qrels are sorted by (query row, doc row)
    R = run_rows[qrels.query_rows]
    want = np.arange(e, dtype=np.int64)[:, None] * n_docs + R
    pos = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
    return np.where(keys[pos] == want, qrels.grades[pos], 0)


def evaluate_run(run: Any, qrels: Qrels, k_values: Sequence[int] = K_VALUES, *,
                 n_docs: Optional[int] = None) -> dict[str, np.ndarray]:
    """Per-query metrics of a run (``TopK`` or an ``(m, K)`` array of corpus rows, best first, row
    i for query row i) for the queries of ``qrels``: ``{"ndcg_at_10": (e,) float64, ...}`` for
    every family of :data:`FAMILIES` and cut-off; trec_eval's definitions on the first
    ``min(k, K)`` documents (module docstring)."""
    R = np.asarray(run.rows if isinstance(run, TopK) else run, dtype=np.int64)
    if n_docs is None:
        n_docs = int(max(R.max(initial=-1), qrels.doc_rows.max(initial=-1))) + 1
    e, K = len(qrels.query_rows), R.shape[1]
    G = _run_grades(R, qrels, n_docs) if K else np.zeros((e, 0), dtype=np.int64)
    rel = G >= 1
    gain = np.where(G > 0, G, 0).astype(np.float64)
    n_rel = qrels.n_relevant.astype(np.float64)
    ranks = np.arange(1, K + 1, dtype=np.float64)
    disc = 1.0 / np.log2(ranks + 1.0)
    cum_rel = np.cumsum(rel, axis=1)
    prec_at = cum_rel / ranks
    first = np.where((G > 0).any(axis=1), np.argmax(G > 0, axis=1) + 1, 0) if K else np.zeros(e, dtype=np.int64)
    # ideal DCG: the query's judged grades sorted descending
    counts = np.diff(qrels.offsets)
    width = int(counts.max(initial=0))
    ideal = np.zeros((e, max(width, 1)))
    if width:
        col = np.arange(len(qrels.grades)) - np.repeat(qrels.offsets[:-1], counts)
        ideal[np.repeat(np.arange(e), counts), col] = np.where(qrels.grades > 0, qrels.grades, 0)
        ideal = -np.sort(-ideal, axis=1)
    ideal_disc = 1.0 / np.log2(np.arange(1, ideal.shape[1] + 1, dtype=np.float64) + 1.0)
    out: dict[str, np.ndarray] = {}
    safe = np.where(n_rel > 0, n_rel, 1.0)
    for k in k_values:
        kk = min(k, K)
        hits = cum_rel[:, kk - 1].astype(np.float64) if kk else np.zeros(e)
        dcg = (gain[:, :kk] * disc[:kk]).sum(axis=1)
        ik = min(k, ideal.shape[1])
        idcg = (ideal[:, :ik] * ideal_disc[:ik]).sum(axis=1)
        out[f"ndcg_at_{k}"] = np.divide(dcg, idcg, out=np.zeros(e), where=idcg > 0)
        out[f"map_at_{k}"] = np.where(n_rel > 0, (prec_at[:, :kk] * rel[:, :kk]).sum(axis=1) / safe, 0.0)
        out[f"recall_at_{k}"] = np.where(n_rel > 0, hits / safe, 0.0)
        out[f"precision_at_{k}"] = hits / k
        out[f"mrr_at_{k}"] = np.where((first > 0) & (first <= kk), 1.0 / np.maximum(first, 1), 0.0)
    return {f"{fam}_at_{k}": out[f"{fam}_at_{k}"] for fam in FAMILIES for k in k_values}


def bootstrap_intervals(per_query: dict[str, np.ndarray], resamples: int, seed: int) -> dict[str, list[float]]:
    """Percentile 95 % interval of every metric's mean over the same resamples of queries (one
    draw of query weights serves all metrics, so their intervals are paired)."""
    names = list(per_query)
    M = np.stack([per_query[n] for n in names], axis=1)  # (e, metrics)
    e = M.shape[0]
    rng = np.random.default_rng(seed)
    means = np.concatenate([np.stack([np.bincount(r, minlength=e) for r in idx]) @ M / e
                            for idx in intervals.resample_indices(e, resamples, rng)])
    out = {}
    for j, n in enumerate(names):
        ci = intervals.percentile_ci(means[:, j])
        out[n] = ci if ci is not None else [float("nan"), float("nan")]
    return out


# ---- the report ------------------------------------------------------------------------------

#: what each metric family means, one line per family (the HTML page shows it beside the figure)
FAMILY_HELP = {"ndcg": "nDCG: graded relevance of the first {k} results, discounted by rank (1: ideal order)",
               "map": "mean average precision of the first {k} results",
               "recall": "share of the relevant documents found in the first {k} results",
               "precision": "share of the first {k} results that are relevant",
               "mrr": "mean reciprocal rank of the first relevant document within {k}"}


def retrieval_figures(k_values: Sequence[int] = K_VALUES) -> dict[str, Figure]:
    """The declared figures of a run at cut-offs ``k_values`` (nDCG@10 the headline)."""
    return {f"metrics.{f}_at_{k}": Figure("higher", headline=(f == "ndcg" and k == 10),
                                          interval=f"metrics.{f}_at_{k}_ci95",
                                          help=FAMILY_HELP.get(f, "").format(k=k), unit=FRACTION, range=(0, 1))
            for f in FAMILIES for k in k_values}


def metric_key(name: str) -> str:
    """``ndcg@10``, ``P@5``, ``ndcg_at_10`` → the report's key (``ndcg_at_10``, ``precision_at_5``).

    >>> metric_key("P@5"), metric_key("ndcg_at_10")
    ('precision_at_5', 'ndcg_at_10')
    """
    key = name.strip().lower().replace("@", "_at_")
    fam, sep, rest = key.partition("_at_")
    return {"p": "precision", "r": "recall", "ap": "map"}.get(fam, fam) + sep + rest


def run_figures(run: TopK, qrels: Qrels, *, k_values: Sequence[int], n_queries: int, n_docs: int, dim: int,
                resamples: int, seed: int, query_ids: np.ndarray, score: str = "cosine",
                model: Optional[str] = None) -> tuple[dict[str, Any], dict[str, np.ndarray], np.ndarray]:
    """Evaluate a run: the ``retrieve`` report's figures (counts, every metric with its interval
    over the evaluated queries, the tie rule), the per-query values (metric → ``(queries,)``, in
    qrels query order) and the evaluated queries' ids."""
    per_query = evaluate_run(run, qrels, k_values, n_docs=n_docs)
    means = {n: float(v.mean()) for n, v in per_query.items()}
    cis = bootstrap_intervals(per_query, resamples, seed) if resamples > 0 else {}
    metrics: dict[str, Any] = {}
    for n, v in means.items():
        metrics[n] = v
        if n in cis:
            metrics[f"{n}_ci95"] = cis[n]
    e = len(qrels.query_rows)
    body: dict[str, Any] = {
        "queries": e, "queries_without_relevant": int((qrels.n_relevant == 0).sum()),
        "queries_without_qrels": int(n_queries - e), "corpus": int(n_docs), "dim": int(dim),
        "judgements": int(len(qrels.doc_rows)), "k": [int(k) for k in k_values], "main_score": MAIN_SCORE,
        "metrics": metrics}
    if resamples > 0:
        body["ci_method"] = intervals.method("queries", resamples, seed)
    body.update({"tie_rule": TIE_RULE, "score": score})
    if model is not None:
        body["model"] = model
    return body, per_query, query_ids[qrels.query_rows]


def check_k_values(k_values: Any) -> list[int]:
    """The cut-offs: integers ≥ 1, sorted, distinct."""
    try:
        ks = sorted({int(k) for k in k_values})
    except (TypeError, ValueError):
        raise InputError(f"k must be a list of integers, got {k_values!r}") from None
    if not ks:
        raise InputError("k must name at least one cut-off")
    if ks[0] <= 0:
        raise InputError(f"k must be >= 1, got {ks[0]}")
    return ks


# ---- --against ------------------------------------------------------------------------------


def retrieval_paired(per_query_a: dict[str, np.ndarray], per_query_b: dict[str, np.ndarray], metrics: list[str],
                     **kw: Any) -> P.Paired:
    """Retrieval metrics (``ndcg_at_10`` ...) of two runs over the same evaluated queries, from
    their per-query values (trec_eval's), on the same resampled queries."""
    figs = {m: ItemFigure(per_query_a[m], per_query_b[m]) for m in metrics}
    return items_paired(figs, unit="queries", **kw)



__all__ = ["retrieval_paired", "FAMILIES", "K_VALUES", "MAIN_SCORE", "metric_key", "TIE_RULE", "Qrels", "TopK", "bootstrap_intervals",
           "build_qrels", "check_k_values", "check_unique", "cosine", "dot", "evaluate_run", "id_bytes",
           "ranking_ties", "rescore", "retrieval_figures", "run_figures", "select_topk", "tie_ranks"]
