"""AAG, variance share and their permutation / bootstrap draws as partial statistics per block.

A task covers global rows ``[start, stop)`` (a multiple of :data:`~embedcheck.rows.CHUNK_ROWS`,
read from whichever shards hold them) and returns, **per chunk of CHUNK_ROWS rows**, the small
partial of :func:`embedcheck.geometry.aag.class_sums` (k × d class sums of unit rows and k sums of
‖u‖²). The driver adds the chunk partials in global row order, starting from zeros — exactly the
additions the in-memory function makes — so the JSON is byte-identical to the one-file run, to a
local run and to a Ray run, whatever the sharding or the scheduling:

* pass 1 — per-class Σ unit rows and Σ‖u‖² (the driver has the codes, hence the counts);
* pass 2 — Σ‖Q(u − μ)‖² per chunk given μ and the class-mean basis Q from pass 1 (variance share);
* the label-shuffle null draws ``codes[rng.permutation(n)]`` and the bootstrap
  ``bincount(rng.integers(0, n, n))`` on the driver over the **global** row index, with
  ``np.random.default_rng(seed)`` in the same order as the in-memory functions, and ships each task
  its slice; like them, these passes use float32 unit rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..geometry import aag as geo
from ..rows import CHUNK_ROWS, iter_chunks, label_key, unit_rows
from .parts import Part, Source, ranges, read_range
from .runner import Engine

#: rows per task (whole chunks)
TASK_ROWS = 16 * CHUNK_ROWS


def class_sums_range(parts: tuple[Part, ...], start: int, stop: int, codes: np.ndarray, k: int,
                     weights: np.ndarray | None = None, check: bool = False,
                     unit32: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per chunk of rows ``[start, stop)``: (k × d class sums of unit rows, k sums of ‖u‖²).

    ``codes``/``weights`` are the range's slices. ``unit32``: rows first rounded to float32 unit
    rows, as the in-memory null and bootstrap do (``geometry.aag._maybe_in_memory``)."""
    out = []
    for sl in iter_chunks(stop - start, CHUNK_ROWS):
        X = read_range(parts, start + sl.start, start + sl.stop, check=check)
        if unit32:
            U = np.empty(X.shape, dtype=np.float32)
            U[:] = unit_rows(X)
            X = U
        out.append(geo.class_sums(X, codes[sl], k, weights=None if weights is None else weights[sl], chunk=CHUNK_ROWS))
    return out


def along_range(parts: tuple[Part, ...], start: int, stop: int, mu: np.ndarray, Q: np.ndarray) -> list[float]:
    """Per chunk: Σ over its unit rows of ‖Q(u − μ)‖² (as ``variance_share`` sums it)."""
    out = []
    for sl in iter_chunks(stop - start, CHUNK_ROWS):
        P = (unit_rows(read_range(parts, start + sl.start, start + sl.stop)) - mu) @ Q.T
        out.append(float(np.einsum("ij,ij->", P, P)))
    return out


def _sums(engine: Engine, src: Source, codes: np.ndarray, k: int, *, weights: np.ndarray | None = None,
          check: bool = False, unit32: bool = False) -> tuple[np.ndarray, np.ndarray]:
    tasks = [(src.parts, a, b, codes[a:b], k, None if weights is None else weights[a:b], check, unit32)
             for a, b in ranges(src.n, TASK_ROWS)]
    sums = np.zeros((k, src.dim), dtype=np.float64)
    sq = np.zeros(k, dtype=np.float64)
    for chunks in engine.map(class_sums_range, tasks):  # global row order
        for s, q in chunks:
            sums += s
            sq += q
    return sums, sq


def aag_report(engine: Engine, src: Source, labels: np.ndarray) -> tuple[geo.AAGResult, geo.VarianceShare]:
    """(AAG result, variance share) over all rows, as :func:`embedcheck.geometry.aag.aag` and
    ``variance_share`` build them without intervals; rows are checked (NaN/inf, zero) in pass 1."""
    n, d = src.n, src.dim
    classes, codes, counts = geo._check_labels(n, labels)
    k = len(classes)
    sums, sq = _sums(engine, src, codes, k, check=True)
    same_pairs = float((counts * (counts - 1)).sum())
    all_pairs = float(n) * (n - 1)
    a, ms, md, per_class = geo._aag_from_sums(sums, sq, same_pairs, all_pairs)
    within = {label_key(c): (float(per_class[i] / (counts[i] * (counts[i] - 1))) if counts[i] > 1 else None)
              for i, c in enumerate(classes)}
    res = geo.AAGResult(n=int(n), dim=int(d), classes=int(k),
                        class_counts={label_key(c): int(counts[i]) for i, c in enumerate(classes)},
                        aag=float(a), mean_same=float(ms), mean_diff=float(md),
                        n_same_pairs=int(same_pairs // 2), n_diff_pairs=int((all_pairs - same_pairs) // 2),
                        within=within, boot=None)
    mu, total, Q, rank = geo._share(sums, counts.astype(np.float64), float(sq.sum()))
    along = 0.0
    for chunks in engine.map(along_range, [(src.parts, a0, b0, mu, Q) for a0, b0 in ranges(n, TASK_ROWS)]):
        for x in chunks:
            along += x
    along /= n
    vs = geo.VarianceShare(variance_share=along / total if total > 0 else None, variance_share_dims=rank,
                           total_variance=total, along_variance=along)
    return res, vs


def permutation_null(engine: Engine, src: Source, labels: np.ndarray, permutations: int, seed: int,
                     observed: float) -> dict[str, Any]:
    """:func:`embedcheck.geometry.aag.aag_permutation_null`, one engine pass per draw."""
    n = src.n
    classes, codes, counts = geo._check_labels(n, labels)
    rng = np.random.default_rng(seed)
    k = len(classes)
    same_pairs = float((counts * (counts - 1)).sum())
    all_pairs = float(n) * (n - 1)
    null = np.empty(permutations)
    for p in range(permutations):
        perm_codes = codes[rng.permutation(n)]
        sums, sq = _sums(engine, src, perm_codes, k, unit32=True)
        null[p] = geo._aag_from_sums(sums, sq, same_pairs, all_pairs)[0]
    return {
        "permutations": int(permutations),
        "p_value": float((1 + np.sum(null >= observed - 1e-15)) / (1 + permutations)),
        "null_mean": float(null.mean()),
        "null_sd": float(null.std(ddof=1)) if permutations > 1 else None,
        "seed": int(seed),
    }


def bootstrap(engine: Engine, src: Source, labels: np.ndarray, resamples: int, seed: int, *,
              level: float = 0.95) -> dict[str, Any]:
    """:func:`embedcheck.geometry.aag.aag_bootstrap`, one engine pass per resample."""
    n = src.n
    classes, codes, _ = geo._check_labels(n, labels)
    k = len(classes)
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(resamples):
        w = np.bincount(rng.integers(0, n, size=n), minlength=n).astype(np.float64)
        sums, sq = _sums(engine, src, codes, k, weights=w, unit32=True)
        wc = np.bincount(codes, weights=w, minlength=k)
        w2c = np.bincount(codes, weights=w * w, minlength=k)
        same_pairs = float((wc * wc - w2c).sum())
        all_pairs = float(w.sum() ** 2 - (w * w).sum())
        if same_pairs <= 0 or all_pairs - same_pairs <= 0:
            continue
        vals.append(geo._aag_from_sums(sums, sq, same_pairs, all_pairs)[0])
    v = np.asarray(vals)
    lo, hi = np.quantile(v, [(1 - level) / 2, 1 - (1 - level) / 2]) if len(v) else (np.nan, np.nan)
    return {"resamples": len(v), "level": float(level), "ci_low": float(lo), "ci_high": float(hi),
            "sd": float(v.std(ddof=1)) if len(v) > 1 else None, "seed": int(seed)}
