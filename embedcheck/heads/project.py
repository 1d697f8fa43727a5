"""Projection of rows through a head, streamed by the caller in chunks.

``compact`` is the head output ``h``; ``fused`` is ``[√(1−α)·u, √α·h]`` with ``u`` the unit input,
renormalised, so that ``cos_fused = (1 − α)·cos_original + α·cos_head`` (α = 0.5: the paper's
concatenation of unit vectors, renormalised).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..io.source import Part, Source, read_range
from .base import MODES, Head


def _unit32(X: np.ndarray) -> np.ndarray:
    """Rows L2-normalised (norms in float64), returned as float32; zero rows stay zero."""
    X = np.asarray(X)
    sq = np.einsum("ij,ij->i", X, X, dtype=np.float64)
    inv = np.zeros_like(sq)
    np.divide(1.0, np.sqrt(sq), out=inv, where=sq > 0)
    if X.dtype == np.float32:  # multiplying by the reciprocal is ~6x faster than dividing
        return X * inv.astype(np.float32)[:, None]
    return (X * inv[:, None]).astype(np.float32)


def project_dim(head: Head, mode: str) -> int:
    """Output width of :func:`project_rows`: ``k`` (compact) or ``d + k`` (fused)."""
    return head.output_dim if mode == "compact" else head.input_dim + head.output_dim


def project_rows(head: Head, X: np.ndarray, mode: str = "compact", alpha: float = 0.5) -> np.ndarray:
    """Project rows: ``compact`` = unit head output; ``fused`` = ``[√(1−α)·u, √α·h]`` renormalised.

    Because ``u`` and ``h`` are unit, ``cos(f_i, f_j) = (1−α)·u_i·u_j + α·h_i·h_j``.

    >>> h = Head("probe-scale", {"weight": np.eye(2, dtype=np.float32), "bias": np.zeros(2, np.float32)})
    >>> project_rows(h, np.array([[3.0, 4.0]]), "fused", 0.5).astype(float).round(4).tolist()
    [[0.4243, 0.5657, 0.4243, 0.5657]]
    """
    if mode not in MODES:
        raise InputError(f"unknown --mode {mode!r}; use compact or fused")
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"--alpha must be in [0, 1], got {alpha}")
    if X.shape[1] != head.input_dim:
        raise InputError(f"the vectors have dimension {X.shape[1]} but the head expects {head.input_dim}")
    n = X.shape[0]
    if n <= BLOCK_ROWS:
        from ..engine.threads import one_blas_thread

        with one_blas_thread():  # the bits of a product follow BLAS's thread count: one thread, as a Ray worker
            return _project_block(head, X, mode, alpha)
    # fixed blocks of rows (the grid depends on n only), on the free cores, each with BLAS on one thread
    # and yielded in order: the same bytes whatever the cores and the engine
    from ..engine.chunks import in_order

    blocks = [slice(s, min(s + BLOCK_ROWS, n)) for s in range(0, n, BLOCK_ROWS)]
    out = np.empty((n, project_dim(head, mode)), dtype=np.float32)
    for sl, P in zip(blocks, in_order(blocks, lambda sl: _project_block(head, X[sl], mode, alpha), cap=4)):
        out[sl] = P
    return out


#: rows of one block of :func:`project_rows` (a GEMM of this many rows; more run on the free cores)
BLOCK_ROWS = 2048


def _project_block(head: Head, X: np.ndarray, mode: str, alpha: float) -> np.ndarray:
    """One block of :func:`project_rows` (BLAS already on one thread)."""
    U = _unit32(X)
    Hh = _unit32(head.raw(U))
    if mode == "compact":
        return Hh
    d = U.shape[1]
    F = np.empty((U.shape[0], d + Hh.shape[1]), dtype=np.float32)
    np.multiply(U, np.float32(math.sqrt(1.0 - alpha)), out=F[:, :d])
    np.multiply(Hh, np.float32(math.sqrt(alpha)), out=F[:, d:])
    return _unit32(F)  # |F|² = (1−α)|u|² + α|h|² = 1 already; this only removes rounding


# ---- the sharded driver: one task per part, on any engine ------------------------------------


def project_part(parts: tuple[Part, ...], start: int, stop: int, n: int, sidecar: str | None, head_path: str,
                 mode: str, alpha: float, chunk: int, folder: str, name: str, use: str = "head") -> dict[str, Any]:
    """Project global rows ``[start, stop)`` (one output shard) in the global ``chunk``-row blocks of
    the one-file run — a block that straddles the shard is projected whole and cut — so the bytes are
    those of ``project`` in-process; rows are checked as ``project`` checks them."""
    from ..io.atomic import AtomicBatch
    from ..io.npy import check_rows
    from ..io.shards import write_shard
    from .io import read_map

    head = read_map(Path(head_path), use)
    k = project_dim(head, mode)
    Y = np.empty((stop - start, k), dtype="<f4")
    first = (start // chunk) * chunk
    for b0 in range(first, stop, chunk):
        b1 = min(b0 + chunk, n)
        X = read_range(parts, b0, b1)
        for p in parts:  # the checks of stream_rows, naming the shard and its row
            lo, hi = max(b0, p.offset), min(b1, p.offset + p.rows)
            if hi > lo:
                check_rows(X[lo - b0:hi - b0], p.start + lo - p.offset, Path(p.path), work="float32",
                           overflow_in_work=True)
        P = project_rows(head, X, mode, alpha)
        lo, hi = max(b0, start), min(b1, stop)
        Y[lo - start:hi - start] = P[lo - b0:hi - b0]
    if sidecar and Path(sidecar).is_file():  # pinned by the manifest's sidecar_sha256 (verified when opened)
        from ..io.jsonio import parse_jsonl, utf8_error_at

        try:
            with open(sidecar, encoding="utf-8") as f:
                rows = parse_jsonl(f, sidecar)
        except UnicodeDecodeError:
            raise InputError(f"sidecar {sidecar}: not valid UTF-8 (byte {utf8_error_at(Path(sidecar))})") from None
        if len(rows) == n and stop - start != n:  # the one file's rows, cut to this shard's range
            rows = rows[start:stop]
    else:
        rows = [{"index": start + i} for i in range(stop - start)]
    with AtomicBatch() as batch:
        e = write_shard(batch, folder, name, Y, rows, start=start)
    return {"path": e.path, "rows": int(e.rows), "sha256": e.sha256, "sidecar_sha256": e.sidecar_sha256,
            "start": start, "dim": k}


def project_parts(engine: Any, src: Source, head_path: Path, out: Path, *, mode: str, alpha: float, chunk: int,
                  model: str | None = None, meta: Callable[[float, int], dict[str, Any]] | None = None,
                  use: str = "head") -> dict[str, Any]:
    """Project every part of ``src`` (a shard of a shard set, or a fixed row range) into one output
    shard each of the new shard-set folder ``out``, on ``engine``; the manifest (and ``meta(seconds,
    shards)`` as ``manifest.meta.json``) is written last and the folder appears whole or not at all.
    ``use``: how each task applies the file (:data:`embedcheck.heads.io.USES`: a head, an adapter, its inverse)."""
    import time

    from ..io.atomic import save_json

    t0 = time.perf_counter()
    from ..io.shards import ShardEntry, new_shard_folder, write_manifest

    names = [Path(e.path).stem if "/" not in e.path else f"shard-{i:05d}" for i, e in enumerate(src.shard_set.shards)] \
        if src.sharded else [f"shard-{i:05d}" for i in range(len(src.parts))]
    # a shard's own sidecar; for one .npy cut in row ranges, its .jsonl rows (each task takes its range)
    sidecars = [str(Path(p.path).with_suffix(".jsonl")) for p in src.parts]
    with new_shard_folder(out) as tmp:  # the whole set appears at once, or nothing does
        res = engine.map(project_part, [(src.parts, p.offset, p.offset + p.rows, src.n, sc, str(head_path.resolve()),
                                         mode, alpha, chunk, str(tmp.resolve()), nm, use)
                                        for p, sc, nm in zip(src.parts, sidecars, names)])
        dim = res[0]["dim"]
        write_manifest(tmp, [ShardEntry(path=r["path"], rows=r["rows"], sha256=r["sha256"], start=r["start"],
                                        sidecar_sha256=r["sidecar_sha256"]) for r in res],
                       dim=dim, dtype="float32", model=model)
        if meta is not None:
            save_json(tmp / "manifest.meta.json", meta(time.perf_counter() - t0, len(res)))
    return {"shards": len(res), "rows": sum(r["rows"] for r in res), "dim": dim}
