"""``embedcheck.retrieve``: retrieval quality of precomputed query and document vectors.

>>> import numpy as np, embedcheck
>>> Q = np.array([[1.0, 0.0], [0.0, 1.0]]); C = np.array([[1.0, 0.1], [0.1, 1.0], [1.0, 1.0]])
>>> r = embedcheck.retrieve(Q, C, {"q1": {"a": 1}, "q2": {"b": 1}}, k=(1, 3), resamples=0,
...                         query_ids=["q1", "q2"], doc_ids=["a", "b", "c"])
>>> r.metrics["ndcg_at_1"], r.to_dict()["queries"]
(1.0, 2)
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Callable, Optional

import numpy as np

from ..errors import InputError
from ..geometry.hubness import REPAIRS
from ..geometry.retrieval import (
    K_VALUES,
    RetrievalReport,
    build_qrels,
    check_k_values,
    cosine,
    ranking_ties,
    report_from_run,
)
from ..io.retrieval import ids_of, is_path, qrels_of
from ..report.result import optional
from ..spec import Option, takes

PathLike = str | os.PathLike


@dataclass(kw_only=True)
class StoreRetrievalReport(RetrievalReport):
    """The ``retrieve`` report when a store names the model it holds: ``models`` (role → model:
    queries, corpus, against_queries, against_corpus), as every paired command records them."""

    models: Optional[dict[str, str]] = optional()


def _shown(x: Any) -> str:
    from ..io.stores import display_name

    return display_name(x)


def _open(x: Any, what: str) -> tuple[Any, int, int]:
    """(search input, rows, dim) of a path (``.npy`` or shard set) or a 2-D float array."""
    if is_path(x):
        from ..io.source import open_source

        src = open_source(x, what=what)
        return src, src.n, src.dim
    X = x if isinstance(x, np.ndarray) else np.asarray(x)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise InputError(f"{what} must be a 2-D array with at least one row, got shape {X.shape}")
    if X.dtype.kind != "f":
        X = X.astype(np.float64)
    return X, int(X.shape[0]), int(X.shape[1])


@takes(
    Option("k", int, K_VALUES, "Cut-offs, comma-separated (10 is always added: nDCG@10 is the main score).", min=1,
           sep=","),
    Option("query_id_field", str, "id", "Sidecar field holding the query ids.", spelled="query-field"),
    Option("doc_id_field", str, "id", "Sidecar field holding the document ids.", spelled="doc-field"),
    Option("resamples", int, 1000, "Bootstrap resamples over queries of the 95% intervals; 0: none.", min=0),
    Option("rerank", str, None, "A hubness repair re-scoring the neighbours: 'paired' compares it (B) with plain cosine "
           "(A) on the same queries.", choices=tuple(REPAIRS), show_default=False),
    cli=(Option("dataset_revision", str, "unknown", "With --mteb-json: the data set revision recorded.", spelled="revision"),
         Option("split", str, "test", "With --mteb-json: the split the scores are filed under.")),
)
def retrieve(queries: Any, corpus: Any, qrels: Any, *, k: Sequence[int] = K_VALUES, resamples: int = 1000,
             seed: int = 0, engine: Any = "local", address: Optional[str] = None,
             query_ids: Optional[Sequence[Any]] = None, doc_ids: Optional[Sequence[Any]] = None,
             query_id_field: str = "id", doc_id_field: str = "id",
             score: Callable[[np.ndarray, np.ndarray], np.ndarray] = cosine, score_name: str = "cosine",
             progress: Optional[Callable[[int, int], None]] = None, against: Optional[Sequence[Any]] = None,
             margins: Optional[Mapping[str, float]] = None, rerank: Optional[str] = None) -> RetrievalReport:
    """Retrieval quality of query vectors against corpus vectors, judged by qrels.

    ``queries``, ``corpus``: a ``.npy`` path, a shard-set folder or a 2-D array. ``qrels``: a
    BEIR/MTEB TSV or JSONL path, a ``{query_id: {doc_id: grade}}`` mapping or ``(query_id,
    doc_id, grade)`` triples. Row ids come from ``query_ids`` / ``doc_ids`` or the artifacts'
    sidecars (field ``query_id_field`` / ``doc_id_field``). Every query row is searched over all
    documents (exact top ``max(k)``, trec_eval's tie order); the metrics are trec_eval's / MTEB's at
    each cut-off of ``k`` over the queries that appear in the qrels, with percentile bootstrap
    95 % intervals over queries (``resamples``, ``seed``; 0 resamples: none). ``engine``:
    ``"local"`` or ``"ray"`` (``address``: a running cluster) or an engine already made; the report
    is the same bytes (``against``'s search runs on the same engine).
    ``score``: a picklable ``f(Q, C) -> float32 (b, t)`` replacing the cosine (``score_name``
    names it in the report).

    ``against`` = (B_queries, B_corpus): a second embedding of the same query and document rows
    (the same ids); the same search runs on it and the report gains ``paired``: nDCG@10 (and
    every metric named in ``margins``, e.g. ``{"recall@100": 0.01}``) of both on the same
    resampled queries, the difference with its 95 % interval, paired permutation p-value,
    minimum detectable effect and verdict at the margin.

    ``rerank``: a hubness repair (``centring``, ``csls``, ``mutual-proximity``, ``qbnorm``;
    :mod:`embedcheck.geometry.hubness`) re-scores every query's neighbours; ``paired`` then compares
    the repaired run (B) with plain cosine (A, the report's metrics) on the same resampled queries.
    """
    from ..geometry.search import search_topk
    from ._common import running

    t0 = time.perf_counter()
    ks = check_k_values([*check_k_values(k), 10])  # nDCG@10, the main score, always
    if resamples < 0:
        raise InputError(f"resamples must be >= 0, got {resamples}")
    q_src, m, dq = _open(queries, "queries")
    c_src, n, dc = _open(corpus, "corpus")
    if dq != dc:
        from ._common import role_name

        raise InputError(f"{role_name(queries, 'queries')} have dimension {dq} but {role_name(corpus, 'the corpus')} "
                         f"has {dc}; embed both with the same model")
    model = None
    if is_path(queries) and is_path(corpus):
        from ..io.retrieval import artifact_model

        mq, mc = artifact_model(queries), artifact_model(corpus)
        if mq is not None and mc is not None and mq != mc:
            from ..io.stores import display_name

            raise InputError(f"queries {display_name(queries)} were embedded with {mq} but corpus {display_name(corpus)} "
                             f"with {mc}; "
                             "retrieval compares vectors of one model")
        model = mq or mc
    qids = ids_of(query_ids, queries, query_id_field, "queries", "query_ids", m)
    dids = ids_of(doc_ids, corpus, doc_id_field, "corpus", "doc_ids", n)
    paired_metrics: list[str] = []
    if rerank is not None:
        from ..geometry.hubness import REPAIRS

        if rerank not in REPAIRS:
            raise InputError(f"rerank {rerank!r}: choose from {', '.join(REPAIRS)}")
        if against is not None:
            raise InputError("rerank and against both name a B to compare with: give one")
        paired_metrics, margins = _paired_plan(ks, margins, (None, None), resamples)
    if against is not None:
        paired_metrics, margins = _paired_plan(ks, margins, against, resamples)
        for given, x, field, what, param, ids in ((query_ids, against[0], query_id_field, "against queries",
                                                   "query_ids", qids),
                                                  (doc_ids, against[1], doc_id_field, "against corpus", "doc_ids",
                                                   dids)):
            # A's row count: B is opened (and a shard set's hashes checked) once, by its own run below;
            # a store's count is in its catalog (the store stays open for that run)
            from ..io.stores import is_store, open_store

            n_b = open_store(x).n if given is None and is_path(x) and is_store(x) else len(ids)
            other = ids_of(given, x, field, what, param, n_b)
            _same_ids(ids, other, what)
    qq, dd, gg = qrels_of(qrels)
    where = f"qrels {qrels}" if is_path(qrels) else "qrels"
    judged = build_qrels(qq, dd, gg, qids, dids, what=where)
    ranks = ranking_ties(dids, n)
    with running(engine, address) as eng:
        run = search_topk(q_src, c_src, max(ks), ranks, score=score, engine=eng, progress=progress)
        rep = report_from_run(run, judged, k_values=ks, n_queries=m, n_docs=n, dim=dq, resamples=resamples,
                              seed=seed, query_ids=qids, score=score_name, model=model)
        from ..rows import content_sha256

        rep.inputs = {"qrels_sha256": content_sha256(sorted(f"{q!r}\t{d!r}\t{g}" for q, d, g in
                                                            zip(qq.tolist(), dd.tolist(), gg.tolist())))}
        if against is not None:
            from ..geometry.retrieval import retrieval_paired

            try:
                rep_b = retrieve(against[0], against[1], qrels, k=ks, resamples=0, seed=seed, engine=eng,
                                 query_ids=query_ids, doc_ids=doc_ids, query_id_field=query_id_field,
                                 doc_id_field=doc_id_field, score=score, score_name=score_name)
            except InputError as exc:  # the second embedding's own fault: said to be the against side's
                raise InputError(f"against (B_QUERIES, B_CORPUS): {exc}") from None
            rep.paired = retrieval_paired(rep.per_query, _per_query_in_order(rep, rep_b), paired_metrics,
                                          resamples=resamples, permutations=resamples, seed=seed, margins=margins,
                                          against=" ".join(_shown(x) if is_path(x) else "array" for x in against))
        if rerank is not None:
            from ..geometry.hubness import repaired_neighbours
            from ..geometry.retrieval import evaluate_run, retrieval_paired

            Q = np.asarray(q_src[:], dtype=np.float64)
            C = np.asarray(c_src[:], dtype=np.float64)
            rows, method = repaired_neighbours(Q, C, min(max(ks), n), rerank, in_corpus=False, seed=seed,
                                               ranks=ranks)  # the plain run's tie rule: a tie is not a change
            per_b = evaluate_run(rows, judged, ks, n_docs=n)
            rep.paired = retrieval_paired(rep.per_query, per_b, paired_metrics, resamples=resamples,
                                          permutations=resamples, seed=seed, margins=margins,
                                          against=f"--rerank {rerank}: {method}")
    from ._common import store_models

    models = store_models(queries=queries, corpus=corpus, **({"against_queries": against[0], "against_corpus": against[1]}
                                                             if against is not None else {}))
    if models:
        rep = StoreRetrievalReport(**{f.name: getattr(rep, f.name) for f in fields(rep)}, models=models)
    rep.seconds = time.perf_counter() - t0
    return rep


def _per_query_in_order(a: RetrievalReport, b: RetrievalReport) -> dict[str, np.ndarray]:
    """B's per-query values in the order of A's evaluated queries: each run lists its queries in its
    own row order, and B may hold the same query rows in another order (paired by id)."""
    qa, qb = list(np.asarray(a.query_ids).tolist()), list(np.asarray(b.query_ids).tolist())
    if qa == qb:
        return dict(b.per_query)
    pos = {q: i for i, q in enumerate(qb)}
    missing = [q for q in qa if q not in pos]
    if missing or len(qa) != len(qb):
        raise InputError(f"against queries: {len(qa)} queries evaluated for A, {len(qb)} for B "
                         f"({len(missing)} of A's not among B's); a paired comparison needs the same queries")
    order = np.array([pos[q] for q in qa], dtype=np.int64)
    return {k: np.asarray(v)[order] for k, v in b.per_query.items()}


def _paired_plan(ks: list[int], margins: Optional[Mapping[str, float]], against: Any,
                 resamples: int) -> tuple[list[str], dict[str, float]]:
    """The metrics compared (nDCG@10 and every metric given a margin) and the margins by key."""
    from ..geometry.retrieval import FAMILIES, metric_key
    from ..stats.paired import check_margin

    if len(against) != 2:
        raise InputError(f"against must be two embeddings (B_queries, B_corpus), got {len(against)}")
    if resamples < 2:
        raise InputError(f"resamples must be >= 2 for a paired comparison, got {resamples}")
    known = [f"{f}_at_{k}" for f in FAMILIES for k in ks]
    by_key: dict[str, float] = {}
    for name, x in (margins or {}).items():
        key = metric_key(name)
        if key not in known:
            raise InputError(f"margin {name!r}: no such metric; e.g. ndcg@10, map@100, recall@1000, p@5, mrr@10 "
                             f"at a cut-off of k ({', '.join(map(str, ks))})")
        by_key[key] = float(check_margin(x, f"margin {name}") or 0.0)
    return ["ndcg_at_10", *(k for k in known if k in by_key and k != "ndcg_at_10")], by_key


def _same_ids(a: np.ndarray, b: np.ndarray, what: str) -> None:
    """B's rows are A's rows: the same set of ids (each run searches and judges by id, so another
    order is matched by id: :func:`embedcheck.io.rowids.match_rows`)."""
    from ..io.rowids import match_rows

    if len(a) == len(b) and np.array_equal(a, b):
        return
    match_rows(a.tolist(), b.tolist(), names=(f"A's {what.split()[-1]}", what))  # other ids: refused with the counts
    if len(a) != len(b):
        raise InputError(f"{what} has {len(b)} rows but A has {len(a)}; a paired comparison needs the same rows")


__all__ = ["StoreRetrievalReport", "retrieve"]
