"""Exact top-k search of every query over a whole corpus, in blocks, on any engine.

The work is a grid of tasks: **fixed blocks of** :data:`QUERY_BLOCK` **queries × fixed global
ranges of** :data:`CORPUS_ROWS` **corpus rows** (``[0, R), [R, 2R) …`` of the global row order,
read from whichever shards or file parts hold them). Inside a task the range is scored in tiles
of :data:`TILE` rows (one float32 GEMM per tile via ``score``), each tile's top k is selected by
the tie rule (:func:`embedcheck.geometry.retrieval.select_topk`) and merged into the task's top k.
The driver merges the tasks' lists of a query block **in range order**, one task at a time
(``engine.imap``: memory stays at one block's lists).

The grid depends only on the number of rows, never on the sharding nor on the engine: every GEMM
has the same shape and the same rows whether the corpus is one ``.npy``, a shard set cut any way,
or runs on Ray, so every score has the same bits and the report the same bytes. The merge
order does not even matter for the result (the tie rule is a total order: score, then the
document's tie rank), only for the memory.

``score`` is any picklable ``f(Q, C) -> (b, t) float32`` (default: float32 cosine); queries and
corpus are 2-D arrays or :class:`~embedcheck.io.source.Source` s (paths travel to the workers,
rows are read there). The compress path passes int8 / packed-bit arrays and its own score, then
re-ranks the candidates with :func:`embedcheck.geometry.retrieval.rescore`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from ..engine.runner import Engine, or_local
from ..io.source import Source, read_range
from .retrieval import TopK, cosine, select_topk
from .tiles import reach

#: queries per task
QUERY_BLOCK = 1024
#: corpus rows per task (a fixed global grid)
CORPUS_ROWS = 131072
#: corpus rows per GEMM inside a task
TILE = 16384

Score = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _rows(src: Any, lo: int, hi: int, check: bool, what: str) -> np.ndarray:
    if isinstance(src, tuple):  # parts of a Source
        return read_range(src, lo, hi, check=check, what=what)
    X = np.asarray(src[lo:hi])
    if check and X.dtype.kind == "f":
        from ..io.npyfile import check_rows

        check_rows(X, lo, Path(f"<{what} array>"), what=what, work="float64" if X.dtype.itemsize == 8 else "float32")
    return X


def merge_ranked(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                 k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge ``(rows, scores, tie ranks)`` lists (each ``(b, k_i)``) into the top ``k``."""
    if len(parts) == 1:
        return parts[0]
    rows = np.concatenate([p[0] for p in parts], axis=1)
    vals = np.concatenate([p[1] for p in parts], axis=1)
    rk = np.concatenate([p[2] for p in parts], axis=1)
    order = np.lexsort((rk, -vals), axis=1)[:, :k]
    return (np.take_along_axis(rows, order, axis=1), np.take_along_axis(vals, order, axis=1),
            np.take_along_axis(rk, order, axis=1))


def topk_task(q_src: Any, q_lo: int, q_hi: int, c_src: Any, c_lo: int, c_hi: int, ranks: np.ndarray, k: int,
              score: Score, tile: int, check_q: bool, check_c: bool,
              names: tuple[str, str] = ("queries", "corpus")) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top ``k`` of queries ``[q_lo, q_hi)`` among corpus rows ``[c_lo, c_hi)`` (``ranks``: the tie
    ranks of those rows): ``(global rows, scores, tie ranks)``, each ``(b, min(k, c_hi - c_lo))``.

    The first tiles go through :func:`select_topk`; once every query holds k documents, a tile
    only contributes the entries that reach the query's k-th best score (a comparison pass
    instead of a partition), merged by the same rule: the result is the same. ``names``: the two
    sides as a refused row's error names them."""
    Q = _rows(q_src, q_lo, q_hi, check_q, names[0])
    best: Optional[tuple[np.ndarray, np.ndarray, np.ndarray]] = None
    for t0 in range(c_lo, c_hi, tile):
        t1 = min(t0 + tile, c_hi)
        S = np.asarray(score(Q, _rows(c_src, t0, t1, check_c, names[1])), dtype=np.float32)
        rk = ranks[t0 - c_lo:t1 - c_lo]
        part = None
        if best is not None and best[0].shape[1] >= k:
            part = reach(S, best[1][:, k - 1], rk, t0, 2 * k)
        if part is None:
            cols, vals = select_topk(S, rk, k)
            part = (cols + t0, vals, rk[cols])
        best = part if best is None else merge_ranked([best, part], k)
    assert best is not None
    return best


def _src(x: Any, engine: Engine) -> tuple[Any, int, int]:
    """(what a task reads, rows, dim) of an array or a Source."""
    if isinstance(x, Source):
        return tuple(x.parts), x.n, x.dim
    X = x if hasattr(x, "shape") else np.asarray(x)
    return (X if engine.name == "local" else engine.put(np.asarray(X))), int(X.shape[0]), int(X.shape[1])


def search_topk(queries: Any, corpus: Any, k: int, ranks: np.ndarray, *, score: Score = cosine,
                engine: Optional[Engine] = None, query_block: Optional[int] = None,
                corpus_rows: Optional[int] = None, tile: Optional[int] = None, check: bool = True,
                progress: Optional[Callable[[int, int], None]] = None,
                names: tuple[str, str] = ("queries", "corpus")) -> TopK:
    """Exact top ``k`` corpus rows of every query row by ``score`` and the tie rule.

    ``queries``, ``corpus``: 2-D arrays (or memmaps) or :class:`~embedcheck.io.source.Source` s;
    ``ranks``: each corpus row's tie rank (:func:`embedcheck.geometry.retrieval.tie_ranks` of the
    document ids); ``engine``: where the tasks run (default: this process). ``check``: refuse
    NaN/inf and zero rows (float inputs), each row checked once; ``names``: the queries and the
    corpus as such an error names them (the command's own input names). Returns a
    :class:`~embedcheck.geometry.retrieval.TopK` with ``min(k, corpus rows)`` columns."""
    engine = or_local(engine)
    query_block = query_block or QUERY_BLOCK  # read at call time (tests shrink the grid)
    corpus_rows = corpus_rows or CORPUS_ROWS
    tile = tile or TILE
    qs, m, _ = _src(queries, engine)
    cs, n, _ = _src(corpus, engine)
    ranks = np.asarray(ranks, dtype=np.int64)
    kk = min(k, n)
    q_blocks = [(s, min(s + query_block, m)) for s in range(0, m, query_block)]
    c_ranges = [(s, min(s + corpus_rows, n)) for s in range(0, n, corpus_rows)]
    tasks = [(qs, q0, q1, cs, c0, c1, ranks[c0:c1], k, score, tile, check and j == 0, check and i == 0,
              names)
             for i, (q0, q1) in enumerate(q_blocks) for j, (c0, c1) in enumerate(c_ranges)]
    rows = np.empty((m, kk), dtype=np.int64)
    vals = np.empty((m, kk), dtype=np.float32)
    results = engine.imap(topk_task, tasks, cores=True)
    for i, (q0, q1) in enumerate(q_blocks):
        best = None
        for _ in c_ranges:
            got = next(results)
            best = got if best is None else merge_ranked([best, got], k)
        assert best is not None
        rows[q0:q1], vals[q0:q1] = best[0], best[1]
        if progress is not None:
            progress(q1, m)
    return TopK(rows, vals)


__all__ = ["CORPUS_ROWS", "QUERY_BLOCK", "TILE", "merge_ranked", "search_topk", "topk_task"]
