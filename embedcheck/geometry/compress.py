"""Compression of an embedding matrix and search over a compressed index (arrays in, arrays out).

* :func:`fit_pca` — the ``pca:K`` projection: the top-K right singular vectors of the calibration
  rows (numpy SVD of the uncentred rows, so ``pca:d`` is a rotation and changes no cosine), each
  signed so that its largest-magnitude entry is positive (deterministic). K is at most the rank of
  the calibration rows (fewer rows than dimensions: at most the row count); beyond it, refused.
* :func:`reduce_rows` — ``dims:K`` (first K dimensions) or ``pca:K`` (``x @ Wᵀ``), rows
  renormalised to unit length in float64, returned as float32.
* :func:`compress_matrix` — reduction, calibration ranges (int8/uint8) and quantisation
  (:func:`embedcheck.io.compressed.quantize`, sentence-transformers' maths), streamed in row
  chunks: the bytes do not depend on the chunking, so a shard set compresses to the same bytes as
  the one file it stands for.
* :func:`search_compressed` — top-k of float queries against a compressed corpus, with optional
  rescoring as sentence-transformers does it: search the compressed index for
  ``rescore_multiplier × k`` candidates, then rescore them with the float32 queries against the
  decoded documents (int8/uint8: dequantised values; bits: ±1 vectors — the same order as
  sentence-transformers' float-query · {0,1}-bits, since ``q·(2b − 1) = 2 q·b − Σq``).

Scores of the compressed search are cosines of the decoded vectors (queries compressed with the
same record: same reduction, same ranges), so a binary index scores ``1 − 2·Hamming/d``. Ties are
ordered by the smaller corpus row first.

>>> X = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.6, 0.8]], dtype=np.float32)
>>> rec = {"format": "float32", "precision": "float32", "original_dim": 3, "dim": 3}
>>> S, I = search_compressed(X[:1], X, rec, 2)
>>> I.tolist(), S.round(2).tolist()
([[0, 1]], [[1.0, 0.6]])
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..io.compressed import Spec, calibration_ranges, decode, quantize
from ..rows import CHUNK_ROWS, iter_chunks


def rank_of(sv: np.ndarray, n: int, d: int) -> int:
    """Numerical rank from singular values (float32 data: tolerance ``max(n, d) * eps32 * s_max``)."""
    if not len(sv) or sv[0] <= 0:
        return 0
    return int((sv > sv[0] * max(n, d) * float(np.finfo(np.float32).eps)).sum())


def pca_rank(C: Any) -> int:
    """The largest K ``pca:K`` can be fitted with on the calibration rows ``C``."""
    A = np.asarray(C[:], dtype=np.float64)
    n, d = A.shape
    return rank_of(np.linalg.svd(A, compute_uv=False), n, d) if n >= 2 else 0


def fit_pca(C: Any, k: int) -> np.ndarray:
    """``(k, d)`` float32 projection: top-k right singular vectors of the calibration rows."""
    A = np.asarray(C, dtype=np.float64)
    n, d = A.shape
    if not 0 < k <= d:
        raise InputError(f"pca k must be between 1 and the dimension {d}, got {k}")
    if n < 2:
        raise InputError("pca needs at least 2 calibration rows")
    _, sv, vt = np.linalg.svd(A, full_matrices=False)
    r = rank_of(sv, n, d)
    if k > r:
        raise InputError(f"pca:{k} needs K <= the rank {r} of the calibration rows ({n} rows x {d} dimensions): "
                         f"use pca:{r} or fewer, or calibrate on more rows")
    W = vt[:k]
    sign = np.sign(W[np.arange(len(W)), np.argmax(np.abs(W), axis=1)])
    sign[sign == 0] = 1
    return (W * sign[:, None]).astype(np.float32)


def _unit32(Y: np.ndarray, offset: int, what: str) -> np.ndarray:
    Y = np.asarray(Y, dtype=np.float64)
    norm = np.sqrt(np.einsum("ij,ij->i", Y, Y))
    bad = ~(norm > 0)
    if bad.any():
        raise InputError(f"{what}: row {offset + int(np.flatnonzero(bad)[0])} has no direction after the reduction")
    return (Y / norm[:, None]).astype(np.float32)


def reduce_rows(X: Any, spec: Spec, W: Optional[np.ndarray] = None, *, offset: int = 0,
                what: str = "embeddings") -> np.ndarray:
    """Rows of ``X`` reduced by ``spec`` (``dims``/``pca``; unit rows, float32); unchanged (as an
    array) without a reduction."""
    X = np.asarray(X)
    if spec.reduce is None:
        return X
    if spec.reduce == "dims":
        return _unit32(X[:, : spec.k], offset, what)
    if W is None:
        raise InputError("pca needs its projection")
    return _unit32(np.asarray(X, dtype=np.float64) @ W.T.astype(np.float64), offset, what)


@dataclass
class Compressed:
    """A compressed matrix: the stored array, its compression record and the pca projection."""

    stored: np.ndarray
    record: dict[str, Any]
    projection: Optional[np.ndarray] = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def decoded(self) -> np.ndarray:
        return decode(self.stored, self.record)


def _streamed_ranges(X: Any, spec: Spec, W: Optional[np.ndarray], chunk: int) -> np.ndarray:
    lo: Optional[np.ndarray] = None
    hi: Optional[np.ndarray] = None
    for sl in iter_chunks(X.shape[0], chunk):
        r = calibration_ranges(reduce_rows(X[sl], spec, W, offset=sl.start, what="calibration"))
        lo = r[0] if lo is None else np.minimum(lo, r[0])
        hi = r[1] if hi is None else np.maximum(hi, r[1])
    assert lo is not None and hi is not None
    return np.vstack((lo, hi)).astype(np.float32)


def compress_matrix(X: Any, spec: Spec, *, calibration: Any = None, chunk: int = CHUNK_ROWS,
                    projection: Optional[np.ndarray] = None) -> Compressed:
    """Compress the rows of ``X`` (array, memmap or shard matrix) by ``spec``. The pca projection
    and the int8/uint8 ranges come from ``calibration`` (rows of the same dimension; default
    ``X`` itself), or ``projection`` when given (to compress queries with a corpus' projection)."""
    t0 = time.perf_counter()
    n, d = X.shape
    if spec.k is not None and not 0 < spec.k <= d:
        raise InputError(f"format {spec.name}: K must be between 1 and the dimension {d}")
    C = X if calibration is None else calibration
    if C.shape[1] != d:
        raise InputError(f"calibration has dimension {C.shape[1]} but the embeddings have {d}")
    W = projection
    if spec.reduce == "pca" and W is None:
        W = fit_pca(np.asarray(C[:]), int(spec.k))  # type: ignore[arg-type]
    ranges = _streamed_ranges(C, spec, W, chunk) if spec.precision in ("int8", "uint8") else None
    if spec.precision in ("int8", "uint8") and C.shape[0] < 2:
        raise InputError("int8/uint8 ranges need at least 2 calibration rows")
    from ..io.compressed import STORED_DTYPE

    out = np.empty((n, spec.columns(d)), dtype=STORED_DTYPE[spec.precision])
    for sl in iter_chunks(n, chunk):
        out[sl] = quantize(reduce_rows(X[sl], spec, W, offset=sl.start), spec.precision, ranges)
    record: dict[str, Any] = {
        "format": spec.name, "reduce": spec.reduce, "k": spec.k, "precision": spec.precision,
        "original_dim": int(d), "dim": int(spec.out_dim(d)), "stored_dtype": out.dtype.name,
        "stored_columns": int(out.shape[1]), "bytes_per_vector": int(spec.bytes_per_vector(d)),
    }
    if ranges is not None:
        record["ranges"] = ranges.tolist()
    return Compressed(out, record, W, time.perf_counter() - t0)


# ---- search over a compressed index -------------------------------------------------------------


def _unit(Y: np.ndarray) -> np.ndarray:
    Y = np.asarray(Y, dtype=np.float32)
    nrm = np.linalg.norm(Y, axis=1, keepdims=True)
    return np.divide(Y, nrm, out=np.zeros_like(Y), where=nrm > 0)


def topk_rows(S: np.ndarray, k: int, ranks: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best columns of each row of ``S``: score descending, then ``ranks`` ascending (the
    tie rank of each column; default :func:`~embedcheck.geometry.retrieval.ranking_ties` of rows without ids), as ``(scores, columns)``: the retrieval
    module's :func:`~embedcheck.geometry.retrieval.select_topk`."""
    from .retrieval import ranking_ties, select_topk

    r = ranking_ties(None, S.shape[1]) if ranks is None else np.asarray(ranks, dtype=np.int64)
    cols, vals = select_topk(S, r, k)
    return vals, cols


def _query_side(Q: Any, record: dict[str, Any], projection: Optional[np.ndarray]) -> np.ndarray:
    """Float queries in the corpus' reduced space (float32; unit rows when reduced)."""
    from ..io.compressed import parse_format

    spec = parse_format(record["format"], int(record["original_dim"]))
    Q = np.asarray(Q)
    if spec.reduce and Q.shape[1] == int(record["original_dim"]):
        Q = reduce_rows(Q, spec, projection, what="queries")
    if Q.shape[1] != int(record["dim"]):
        raise InputError(f"queries have dimension {Q.shape[1]} but the corpus has {record['original_dim']} "
                         f"(compressed to {record['dim']})")
    return np.asarray(Q, dtype=np.float32)


def _words(B: np.ndarray) -> np.ndarray:
    """Packed bits as uint64 words (zero-padded to a multiple of 8 bytes) for xor + popcount."""
    B = np.ascontiguousarray(B, dtype=np.uint8)
    pad = (-B.shape[1]) % 8
    if pad:
        B = np.concatenate([B, np.zeros((B.shape[0], pad), dtype=np.uint8)], axis=1)
    return B.view(np.uint64)


def hamming(Qw: np.ndarray, Dw: np.ndarray) -> np.ndarray:
    """Hamming distances (q, n) int32 between packed rows (uint64 words)."""
    out = np.zeros((Qw.shape[0], Dw.shape[0]), dtype=np.uint16)
    for w in range(Qw.shape[1]):
        out += np.bitwise_count(Qw[:, w:w + 1] ^ Dw[None, :, w])
    return out


#: extra candidates asked of faiss beyond k, so the tie group at the k-th distance is seen whole
TIE_PAD = 64


def _faiss_binary(packed: np.ndarray) -> Any:
    """A faiss ``IndexBinaryFlat`` over packed rows (compiled xor + popcount), or None when
    faiss-cpu is not installed (the numpy words are used then)."""
    try:
        import faiss
    except ImportError:
        return None
    codes = np.ascontiguousarray(packed, dtype=np.uint8)
    index = faiss.IndexBinaryFlat(8 * codes.shape[1])  # padding bits are 0 on both sides: no distance
    index.add(codes)
    return index


def binary_topk(index: Any, words: np.ndarray, Qp: np.ndarray, Qw: np.ndarray, k: int, dim: int,
                ranks: Optional[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Exact top ``k`` by Hamming distance (score ``1 − 2·H/dim`` descending, ties by ``ranks``):
    faiss's compiled kernel returns ``k + TIE_PAD`` nearest rows; a query whose tie group at the
    k-th distance may run past them is scored over every row with the numpy words instead, so the
    result is :func:`topk_rows` of the full score row, byte for byte."""
    n = words.shape[0]
    k2 = min(n, k + TIE_PAD)
    D, I = index.search(np.ascontiguousarray(Qp, dtype=np.uint8), k2)
    S = 1.0 - 2.0 * D.astype(np.uint16) / dim
    v, i = topk_rows_with_ids(S, I.astype(np.int64), k, ranks)
    if k2 < n:
        for r in np.flatnonzero(D[:, k2 - 1] <= D[:, k - 1]):  # the tie group may continue past k2
            full = 1.0 - 2.0 * hamming(Qw[r:r + 1], words) / dim
            v[r], i[r] = (x[0] for x in topk_rows(full, k, ranks))
    return v, i


def bits_cosine(Q: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Score function ``(b, d) x (t, d) → (b, t)`` float32 for decoded ±1 rows (a binary corpus as
    every reader decodes it): ``1 − 2·Hamming/d`` exactly — the dot product is an integer, exact in
    float64, so equal Hamming distances give equal scores and ties stay ties (a float32 GEMM of
    unit rows could split them). Module level, hence picklable for an engine's tasks."""
    d = np.shape(Q)[1]
    return ((np.asarray(Q, dtype=np.float64) @ np.asarray(C, dtype=np.float64).T) / d).astype(np.float32)


class CompressedIndex:
    """A compressed corpus prepared for search once (decoded unit rows, or packed words for bits);
    :meth:`search` is then timed alone. See :func:`search_compressed`."""

    def __init__(self, corpus: Any, record: dict[str, Any], projection: Optional[np.ndarray] = None, *,
                 ranks: Optional[np.ndarray] = None):
        from ..io.compressed import packed_u8

        self.record, self.projection, self.ranks = record, projection, ranks
        self.precision = prec = record["precision"]
        self.stored = np.asarray(corpus)
        self.bits = prec in ("binary", "ubinary")
        self.dim = int(record["dim"])
        self.raw = decode(self.stored, record).astype(np.float32, copy=False)  # what rescoring reads
        if self.bits:
            packed = packed_u8(self.stored, prec)
            self.words = _words(packed)
            self.faiss = _faiss_binary(packed)
        else:
            self.unit = _unit(self.raw)
        self.ranges = np.asarray(record["ranges"], dtype=np.float32) if prec in ("int8", "uint8") else None

    @property
    def rows(self) -> int:
        return int(self.stored.shape[0])

    def search(self, queries: Any, k: int, *, rescore_multiplier: int = 0,
               block: int = 256) -> tuple[np.ndarray, np.ndarray]:
        if k <= 0:
            raise InputError(f"k must be positive, got {k}")
        if rescore_multiplier < 0:
            raise InputError(f"rescore_multiplier must be >= 0, got {rescore_multiplier}")
        Qf = _query_side(queries, self.record, self.projection)
        Qq = quantize(Qf, self.precision, self.ranges)
        if self.bits:
            from ..io.compressed import packed_u8

            Qp = packed_u8(Qq, self.precision)
            Qw = _words(Qp)
        else:
            Qc = _unit(decode(Qq, self.record).astype(np.float32, copy=False))
        n, nq = self.rows, Qf.shape[0]
        kk = min(n, k * rescore_multiplier if rescore_multiplier > 0 else k)
        scores = np.empty((nq, min(k, n)), dtype=np.float64)
        rows = np.empty((nq, min(k, n)), dtype=np.int64)
        for s in range(0, nq, block):
            if self.bits and self.faiss is not None:  # compiled Hamming kernel, exact tie order
                v, i = binary_topk(self.faiss, self.words, Qp[s:s + block], Qw[s:s + block], kk, self.dim,
                                   self.ranks)
            else:
                if self.bits:  # the index itself: Hamming distance on packed words, score 1 − 2·H/d
                    S = 1.0 - 2.0 * hamming(Qw[s:s + block], self.words) / self.dim
                else:
                    S = Qc[s:s + block] @ self.unit.T
                v, i = topk_rows(S, kk, self.ranks)
            if rescore_multiplier > 0:  # float32 query · decoded document, as sentence-transformers rescores
                q64 = Qf[s:s + block].astype(np.float64)
                # one query at a time: the candidates' rows are gathered per query (a (b, m·k, d)
                # gather of the whole block costs more memory traffic than the products)
                v = np.stack([self.raw[i[r]].astype(np.float64) @ q64[r] for r in range(len(q64))]) if len(q64) \
                    else np.zeros((0, i.shape[1]))
                v, i = topk_rows_with_ids(v, i, k, self.ranks)
            scores[s:s + block] = v[:, :k]
            rows[s:s + block] = i[:, :k]
        return scores, rows


def search_compressed(queries: Any, corpus: Any, record: dict[str, Any], k: int, *,
                      rescore_multiplier: int = 0, projection: Optional[np.ndarray] = None,
                      ranks: Optional[np.ndarray] = None, block: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` corpus rows for each float query against a compressed corpus.

    ``corpus`` holds the stored rows (``record`` says how to decode them; a float record reads
    them as they are). Queries are float rows in the original or the reduced space (``projection``
    for pca). Without rescoring, queries are compressed with the corpus' record (same reduction
    and ranges) and both sides scored by the cosine of their decoded vectors — for bits
    ``1 − 2·Hamming/d`` (computed as Hamming distances on packed words). With
    ``rescore_multiplier`` m > 0 the compressed search returns m·k candidates, which are rescored
    as sentence-transformers does: float32 query · decoded document (dequantised int8/uint8
    values, ±1 bits), best ``k`` kept.

    Returns ``(scores (q, k) float64, corpus rows (q, k) int64)``, best first. Equal scores are
    ordered by ``ranks`` (each corpus row's tie rank, e.g. trec_eval's id order from the
    retrieval module's ``ranking_ties``; default the one rule for rows without ids: the higher row first).
    """
    return CompressedIndex(corpus, record, projection, ranks=ranks).search(queries, k, rescore_multiplier=rescore_multiplier,
                                                              block=block)


def topk_rows_with_ids(V: np.ndarray, ids: np.ndarray, k: int,
                       ranks: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """Best ``k`` of candidate scores ``V`` whose corpus rows are ``ids`` (score descending, then
    tie rank ``ranks[row]`` ascending; default the one tie rule for rows without ids: the higher row first)."""
    tie = -ids if ranks is None else np.asarray(ranks)[ids]  # no ranks: rows without ids, the higher row first
    order = np.lexsort((tie, -V), axis=1)[:, :k]
    return np.take_along_axis(V, order, axis=1), np.take_along_axis(ids, order, axis=1)


__all__ = ["Compressed", "CompressedIndex", "bits_cosine", "hamming", "compress_matrix", "fit_pca", "reduce_rows", "search_compressed", "topk_rows"]
