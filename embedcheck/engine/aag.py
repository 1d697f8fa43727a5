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
  its slice; like them, these passes use float32 unit rows;
* the default interval ``aag_ci95``: the row groups ``rng.permutation(n) % G`` are drawn on
  the driver over the global row index exactly as :func:`embedcheck.geometry.aag.aag` draws them;
  pass 1 then also returns, per chunk, the per-group class sums (G × k × d, G × k) of
  ``geometry.aag._sums_with_groups``, added in row order, one task's result at a time
  (:meth:`Engine.imap`); the multinomial group weights follow from the same generator, and the
  resampled AAGs come from :func:`embedcheck.geometry.aag.group_boot_aag` — the one-file bytes;
* ``--ci`` (``variance_share_ci95``): per batch of 64 resamples the driver builds each resample's
  class-mean basis from the group sums; a pass returns per chunk the per-group sums of the squared
  projections (G × r), added in row order, as ``geometry.aag._boot_variance_share`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..geometry import aag as geo
from ..geometry.intervals import percentile_ci
from ..rows import CHUNK_ROWS, iter_chunks, label_key, unit_rows
from .parts import Part, Source, ranges, read_range
from .runner import Engine

#: rows per task (whole chunks)
TASK_ROWS = 16 * CHUNK_ROWS
#: at most this many bytes of per-chunk partials per task (the per-group class sums are G × k × d)
TASK_PARTIAL_BYTES = 64 << 20
#: resamples per pass of the --ci variance-share interval (as geometry.aag._boot_variance_share)
VS_BATCH = 64


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


def group_sums_range(parts: tuple[Part, ...], start: int, stop: int, codes: np.ndarray, k: int,
                     group_of: np.ndarray, G: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per chunk of rows ``[start, stop)`` (rows checked): class sums, Σ‖u‖² per class, and the
    per-(group, class) sums (G × k × d) and Σ‖u‖² (G × k) — ``geometry.aag._sums_with_groups`` on
    the chunk. ``codes``/``group_of`` are the range's slices."""
    out = []
    for sl in iter_chunks(stop - start, CHUNK_ROWS):
        X = read_range(parts, start + sl.start, start + sl.stop, check=True)
        out.append(geo._sums_with_groups(X, codes[sl], k, group_of[sl], G, CHUNK_ROWS))
    return out


def _unit32_fits(n: int, d: int) -> bool:
    """Whether the in-memory functions hold float32 unit rows (``geometry.aag._maybe_in_memory``)."""
    return n * d * 4 <= 2 << 30


def boot_z2_range(parts: tuple[Part, ...], start: int, stop: int, group_of: np.ndarray, G: int, Qs: np.ndarray,
                  unit32: bool) -> list[np.ndarray]:
    """Per chunk: Σ over each group's rows of (u · q)² for every basis row q of ``Qs`` (G × r)."""
    from scipy.sparse import csr_matrix

    out = []
    for sl in iter_chunks(stop - start, CHUNK_ROWS):
        X = read_range(parts, start + sl.start, start + sl.stop)
        if unit32:
            U = np.empty(X.shape, dtype=np.float32)
            U[:] = unit_rows(X)
        else:
            U = unit_rows(X)
        Z = np.asarray(U, dtype=np.float64) @ Qs.T
        b = sl.stop - sl.start
        onehot = csr_matrix((np.ones(b), (group_of[sl], np.arange(b))), shape=(G, b))
        out.append(onehot @ (Z * Z))
    return out


def _task_rows(per_chunk_bytes: int) -> int:
    return CHUNK_ROWS * int(min(16, max(1, TASK_PARTIAL_BYTES // max(1, per_chunk_bytes))))


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


def aag_report(engine: Engine, src: Source, labels: np.ndarray, *, resamples: int = 0, seed: int = 0,
               ci: bool = False, level: float = 0.95) -> tuple[geo.AAGResult, geo.VarianceShare]:
    """(AAG result, variance share) over all rows, as :func:`embedcheck.geometry.aag.aag` (with
    ``resamples`` and ``seed``) and ``variance_share`` (with its interval when ``ci``) build them;
    rows are checked (NaN/inf, zero) in pass 1."""
    n, d = src.n, src.dim
    classes, codes, counts = geo._check_labels(n, labels)
    k = len(classes)
    boot = None
    if resamples > 0:
        G = geo._group_count(n, k, d, geo.BOOT_GROUPS)
        rng = np.random.default_rng(seed)
        group_of = rng.permutation(n) % G
        step = _task_rows(8 * (G * k * d + G * k + k * d + k))
        sums = np.zeros((k, d), dtype=np.float64)
        sq = np.zeros(k, dtype=np.float64)
        gsums = np.zeros((G, k, d), dtype=np.float64)
        gsq = np.zeros((G, k), dtype=np.float64)
        tasks = [(src.parts, a, b, codes[a:b], k, group_of[a:b], G) for a, b in ranges(n, step)]
        for chunks in engine.imap(group_sums_range, tasks):  # global row order, one task at a time
            for s_, q_, gs, gq in chunks:
                sums += s_
                sq += q_
                gsums += gs
                gsq += gq
        gcounts = np.bincount(group_of * k + codes, minlength=G * k).reshape(G, k).astype(np.float64)
        draws = rng.integers(0, G, size=(resamples, G)) + (np.arange(resamples) * G)[:, None]
        W = np.bincount(draws.ravel(), minlength=resamples * G).reshape(resamples, G).astype(np.float64)
        boot = geo.GroupBoot(groups=G, group_of=group_of, sums=gsums, sq=gsq, counts=gcounts, W=W, seed=int(seed))
    else:
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
                        within=within, boot=boot)
    if boot is not None:
        res.aag_ci95 = geo.aag_interval(res.aag, boot, level)
        res.ci_method = boot.method()
    # variance_share recomputes the class sums (same bits as pass 1 either way: class_sums)
    mu, total, Q, rank = geo._share(sums, counts.astype(np.float64), float(sq.sum()))
    along = 0.0
    for chunks in engine.map(along_range, [(src.parts, a0, b0, mu, Q) for a0, b0 in ranges(n, TASK_ROWS)]):
        for x in chunks:
            along += x
    along /= n
    vs = geo.VarianceShare(variance_share=along / total if total > 0 else None, variance_share_dims=rank,
                           total_variance=total, along_variance=along)
    if ci and boot is not None:
        vs.variance_share_ci95 = percentile_ci(boot_variance_share(engine, src, boot), level)
    return res, vs


def boot_variance_share(engine: Engine, src: Source, boot: geo.GroupBoot) -> np.ndarray:
    """The resampled variance shares of ``geometry.aag._boot_variance_share``, one engine pass per
    batch of :data:`VS_BATCH` resamples (same arithmetic, same order: the same bytes)."""
    n, G = src.n, boot.groups
    unit32 = _unit32_fits(n, src.dim)

    def z2(Qs: np.ndarray) -> np.ndarray:
        Z2 = np.zeros((G, Qs.shape[0]))
        step = _task_rows(8 * G * Qs.shape[0])
        tasks = [(src.parts, a, b, boot.group_of[a:b], G, Qs, unit32) for a, b in ranges(n, step)]
        for chunks in engine.imap(boot_z2_range, tasks):
            for z in chunks:
                Z2 += z
        return Z2

    return geo.boot_variance_shares(boot, VS_BATCH, z2)


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
