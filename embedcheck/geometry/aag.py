"""Pure-numpy geometry of a labelled embedding space (SISE paper): AAG and variance share.

All functions take an ``(n, d)`` float array (a memmap is streamed in row chunks and accumulated in
float64; no ``n x n`` matrix is ever held) and labels of length ``n`` (ints or strings).

The Attribute Alignment Gap is mean cosine over same-label pairs minus mean cosine over
different-label pairs (unordered pairs ``i != j``, unit rows). It is exact in O(n·d): with
``S_c`` the sum of the unit rows of class ``c`` and ``S`` the sum of all of them,
``sum_same = Σ_c (|S_c|² − Σ_{i∈c} |u_i|²)`` and ``sum_all = |S|² − Σ_i |u_i|²`` (ordered pairs).

This module is the driver: it sends the kernels over row ranges (:mod:`~embedcheck.geometry.aag_kernels`)
to an engine, adds their partials in row order and turns the sums into figures and intervals
(:mod:`~embedcheck.geometry.aag_sums`: the algebra on class sums and the group bootstrap).

>>> import numpy as np
>>> X = np.array([[1.0, 0], [1, 0.1], [0, 1], [0.1, 1]])
>>> r = aag(X, np.array([0, 0, 1, 1]))
>>> round(r.aag, 4), r.n_same_pairs, r.n_diff_pairs
(0.8958, 2, 4)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import numpy as np

from ..errors import InputError
from ..report.result import Result, hidden, optional
from ..rows import iter_chunks, label_key, unit_rows  # noqa: F401  (iter_chunks: a name tests patch here)
from ..stats import paired as P
from ..stats.items import check_margins, margin_of
from .aag_kernels import (  # noqa: F401  (importable from here as before)
    AAG_CHUNK_ROWS,
    _maybe_in_memory,
    _sums_with_groups,
    _unit32_fits,
    along_steps,
    boot_z2_range,
    class_sums_chunks,
    class_sums_steps,
    group_sums_steps,
)
from .aag_sums import (
    BOOT_GROUPS,
    GroupBoot,
    _aag_from_sums,
    _group_count,
    _share,
    aag_interval,
    boot_variance_shares,
    check_labels,
    group_boot_aag,
)
from .intervals import percentile_ci


@dataclass(kw_only=True)
class AAGResult(Result):
    """AAG and its parts; ``aag_ci95`` when an interval was asked for (``ci_method`` names it)."""

    n: int = 0
    dim: int = 0
    classes: int = 0
    class_counts: dict[str, int] = field(default_factory=dict)
    aag: float
    aag_ci95: Optional[list[float]] = optional()
    mean_same: float
    mean_diff: float
    n_same_pairs: int
    n_diff_pairs: int
    within: dict[str, Optional[float]] = field(default_factory=dict)
    ci_method: Optional[str] = hidden()
    #: the bootstrap's group sums, reused by :func:`variance_share` for the same resamples
    boot: Optional["GroupBoot"] = hidden()


# ---- the one driver: per-range kernels (tasks) merged in row order, on any engine -------------
#
# A task covers global rows ``[start, stop)`` (a multiple of the chunk size, read from whichever
# parts hold them) and returns, **per chunk**, small partial statistics (k × d class sums of unit
# rows and k sums of ‖u‖²; with the interval also the per-(group, class) sums). The driver adds
# the chunk partials in global row order, starting from zeros, so the bytes never depend on the
# engine (this process or Ray), the sharding or the scheduling. Random draws (row groups, group
# weights, label permutations, bootstrap weights) are made on the driver over the global row index.

#: rows per task, in chunks (131,072 rows: a part of a file, so a task's rows are one view)
TASK_CHUNKS = 4
#: at most this many bytes of per-chunk partials per task (the per-group class sums are G × k × d)
TASK_PARTIAL_BYTES = 64 << 20
#: resamples per pass of the variance-share interval
VS_BATCH = 64



def _listed(fn: Callable[..., Iterator[Any]], *args: Any) -> list[Any]:
    """A task on an engine: the results of one of the ``*_steps`` kernels, as a list."""
    return list(fn(*args))


def _stream(eng: Any, src: Any, fn: Callable[..., Iterator[Any]], step: int,
            args_of: Callable[[int, int], tuple[Any, ...]], *, whole: bool = True) -> Iterator[Any]:
    """The results of kernel ``fn`` over every row, in row order: ``fn(parts, a, b, *args_of(a, b),
    step)`` per task of ``step`` rows on the engine; in this process over files and arrays
    (``whole``), one call over all rows, whose chunks stream through the workers without a pause at
    a task's end — the same results, since a kernel's partials are fixed by ``step`` and the chunk
    size, never by the range it is given."""
    from ..io.source import ranges

    n = src.n
    if whole and eng.name == "local" and not any(p.store for p in src.parts):
        yield from fn(src.parts, 0, n, *args_of(0, n), step)
        return
    tasks = [(fn, src.parts, a, b, *args_of(a, b), step) for a, b in ranges(n, step)]
    for results in eng.imap(_listed, tasks):  # global row order, one task at a time
        yield from results


def _task_rows(per_chunk_bytes: int, chunk: int) -> int:
    return chunk * int(min(TASK_CHUNKS, max(1, TASK_PARTIAL_BYTES // max(1, per_chunk_bytes))))


def _sums(eng: Any, src: Any, codes: np.ndarray, k: int, *, weights: np.ndarray | None = None,
          check: bool = False, unit32: bool = False, chunk: int = AAG_CHUNK_ROWS) -> tuple[np.ndarray, np.ndarray]:
    sums = np.zeros((k, src.dim), dtype=np.float64)
    sq = np.zeros(k, dtype=np.float64)
    for s, q in _stream(eng, src, class_sums_steps, TASK_CHUNKS * chunk,
                        lambda a, b: (codes[a:b], k, None if weights is None else weights[a:b], check, unit32, chunk),
                        whole=not unit32):  # global row order
        sums += s
        sq += q
    return sums, sq


def _opened(X: Any, engine: Any) -> tuple[Any, Any]:
    """(Source, engine): the input opened once, the engine (this process when None)."""
    from ..engine import or_local
    from ..io.source import open_source

    return open_source(X), or_local(engine)


def aag_and_variance_share(X: Any, labels: np.ndarray, *, resamples: int = 0, seed: int = 0,
                           groups: int = BOOT_GROUPS, ci: bool = False, level: float = 0.95,
                           share: bool = True, engine: Any = None,
                           chunk: int = AAG_CHUNK_ROWS) -> tuple[AAGResult, Optional[VarianceShare]]:
    """AAG (with ``aag_ci95`` when ``resamples`` > 0) and, with ``share``, the variance share (with
    ``variance_share_ci95`` when ``ci``) from one first pass over the rows of ``X`` (an array, a
    memmap, a ``.npy``, a shard set or a Source) on ``engine`` (this process when None)."""

    src, eng = _opened(X, engine)
    n, d = src.n, src.dim
    classes, codes, counts = check_labels(n, labels)
    k = len(classes)
    boot = None
    if resamples > 0:
        G = _group_count(n, k, d, groups)
        rng = np.random.default_rng(seed)
        perm = rng.permutation(n)
        group_of = perm & (G - 1) if G & (G - 1) == 0 else perm % G  # the same groups; a mask is cheaper
        cells = group_of * k + codes  # each row's (group, class) cell
        step = _task_rows(8 * (G * k * d + G * k + k * d + k), chunk)
        sums = np.zeros((k, d), dtype=np.float64)
        sq = np.zeros(k, dtype=np.float64)
        gsums = np.zeros((G, k, d), dtype=np.float64)
        gsq = np.zeros((G, k), dtype=np.float64)
        invs = []
        for class_parts, gs, gq, inv_c in _stream(eng, src, group_sums_steps, step,
                                                  lambda a, b: (codes[a:b], k, cells[a:b], G, chunk)):  # row order
            for s_, q_ in class_parts:
                sums += s_
                sq += q_
            gsums += gs
            gsq += gq
            invs.extend(inv_c)  # per chunk, in row order
        gcounts = np.bincount(cells, minlength=G * k).reshape(G, k).astype(np.float64)
        draws = rng.integers(0, G, size=(resamples, G)) + (np.arange(resamples) * G)[:, None]
        W = np.bincount(draws.ravel(), minlength=resamples * G).reshape(resamples, G).astype(np.float64)
        boot = GroupBoot(groups=G, group_of=group_of, sums=gsums, sq=gsq, counts=gcounts, W=W, seed=int(seed))
        inv_all: Optional[np.ndarray] = np.concatenate(invs)
    else:
        inv_all = None
        sums, sq = _sums(eng, src, codes, k, check=True, chunk=chunk)
    same_pairs = float((counts * (counts - 1)).sum())
    all_pairs = float(n) * (n - 1)
    a, ms, md, per_class = _aag_from_sums(sums, sq, same_pairs, all_pairs)
    within = {label_key(c): (float(per_class[i] / (counts[i] * (counts[i] - 1))) if counts[i] > 1 else None)
              for i, c in enumerate(classes)}
    res = AAGResult(n=int(n), dim=int(d), classes=int(k),
                    class_counts={label_key(c): int(counts[i]) for i, c in enumerate(classes)},
                    aag=float(a), mean_same=float(ms), mean_diff=float(md),
                    n_same_pairs=int(same_pairs // 2), n_diff_pairs=int((all_pairs - same_pairs) // 2),
                    within=within, boot=boot)
    if boot is not None:
        res.aag_ci95 = aag_interval(res.aag, boot, level)
        res.ci_method = boot.method()
    if not share:
        return res, None
    return res, _variance_share_from(eng, src, sums, sq, counts, boot if ci else None, level, chunk, inv_all)


def _variance_share_from(eng: Any, src: Any, sums: np.ndarray, sq: np.ndarray, counts: np.ndarray,
                         boot: Optional[GroupBoot], level: float, chunk: int,
                         inv: Optional[np.ndarray] = None) -> VarianceShare:
    """The variance share from the class sums of a first pass: one more pass for the variance along
    the class-mean span (per-chunk sums added in row order), and with ``boot`` its interval."""

    n = src.n
    mu, total, Q, rank = _share(sums, counts.astype(np.float64), float(sq.sum()))
    along = 0.0
    for x in _stream(eng, src, along_steps, TASK_CHUNKS * chunk,
                     lambda a, b: (mu, Q, chunk, None if inv is None else inv[a:b])):  # row order
        along += x
    along /= n
    out = VarianceShare(variance_share=along / total if total > 0 else None, variance_share_dims=rank,
                        total_variance=total, along_variance=along)
    if boot is not None:
        out.variance_share_ci95 = percentile_ci(boot_variance_share_values(src, boot, engine=eng, chunk=chunk), level)
    return out


def aag(X: Any, labels: np.ndarray, *, resamples: int = 0, seed: int = 0, groups: int = BOOT_GROUPS,
        level: float = 0.95, engine: Any = None, chunk: int = AAG_CHUNK_ROWS) -> AAGResult:
    """Exact Attribute Alignment Gap with mean_same, mean_diff, pair counts and per-class means.

    Pair counts are unordered pairs. ``within[c]`` is the mean cosine between different rows
    of class ``c`` (None for a class with one row). With ``resamples`` > 0, ``aag_ci95`` is the
    percentile interval of a bootstrap over ``groups`` seeded random row groups (see
    :class:`GroupBoot`; the ordinary row bootstrap when ``n <= groups``), from the same pass.
    ``X``: an array, a memmap, a ``.npy``, a shard set or a Source; ``engine``: where the
    per-chunk work runs (this process when None).
    """
    return aag_and_variance_share(X, labels, resamples=resamples, seed=seed, groups=groups, level=level,
                                  share=False, engine=engine, chunk=chunk)[0]


def variance_share(X: Any, labels: np.ndarray, *, boot: Optional[GroupBoot] = None,
                   level: float = 0.95, engine: Any = None, chunk: int = AAG_CHUNK_ROWS) -> VarianceShare:
    """Share of total variance of the unit rows lying in the span of the centred class means.

    For two classes this is the direction between the class means (the SISE paper's
    "polarity direction holds 2.4-6.7 % of the variance"). Total variance is the trace of
    the covariance; both are population (1/n) moments, so the ratio is exact.

    ``boot`` (from ``aag(..., resamples=R)``) adds ``variance_share_ci95`` over the same
    resamples: each recomputes the class means and their span from the resampled group sums
    (exact) and the variance along it in one streamed product per batch of resamples.
    """
    src, eng = _opened(X, engine)
    classes, codes, counts = check_labels(src.n, labels)
    sums, sq = _sums(eng, src, codes, len(classes), chunk=chunk)
    return _variance_share_from(eng, src, sums, sq, counts, boot, level, chunk)


def boot_variance_share_values(X: Any, boot: GroupBoot, *, engine: Any = None, chunk: int = AAG_CHUNK_ROWS,
                               batch: int = VS_BATCH) -> np.ndarray:
    """The resampled variance shares of ``boot``, one pass over the rows per batch of resamples."""
    from ..io.source import ranges

    src, eng = _opened(X, engine)
    n, G = src.n, boot.groups
    unit32 = _unit32_fits(n, src.dim)

    def z2(Qs: np.ndarray) -> np.ndarray:
        Z2 = np.zeros((G, Qs.shape[0]))
        step = _task_rows(8 * G * Qs.shape[0], chunk)
        tasks = [(src.parts, a, b, boot.group_of[a:b], G, Qs, unit32, chunk) for a, b in ranges(n, step)]
        for chunks in eng.imap(boot_z2_range, tasks):
            for z in chunks:
                Z2 += z
        return Z2

    return boot_variance_shares(boot, batch, z2)


def aag_permutation_null(X: Any, labels: np.ndarray, permutations: int, seed: int = 0, *,
                         observed: Optional[float] = None, engine: Any = None,
                         chunk: int = AAG_CHUNK_ROWS) -> dict[str, Any]:
    """Label-shuffle null for AAG: one-sided p-value ``(1 + #{null >= observed}) / (1 + P)``; one
    pass over the rows per draw (``codes[rng.permutation(n)]`` over the global row index)."""
    src, eng = _opened(X, engine)
    n = src.n
    classes, codes, counts = check_labels(n, labels)
    if observed is None:
        observed = aag(src, labels, engine=eng, chunk=chunk).aag
    rng = np.random.default_rng(seed)
    k = len(classes)
    same_pairs = float((counts * (counts - 1)).sum())
    all_pairs = float(n) * (n - 1)
    null = np.empty(permutations)
    for p in range(permutations):
        perm_codes = codes[rng.permutation(n)]
        sums, sq = _sums(eng, src, perm_codes, k, unit32=True, chunk=chunk)
        null[p] = _aag_from_sums(sums, sq, same_pairs, all_pairs)[0]
    return {
        "permutations": int(permutations),
        "p_value": float((1 + np.sum(null >= observed - 1e-15)) / (1 + permutations)),
        "null_mean": float(null.mean()),
        "null_sd": float(null.std(ddof=1)) if permutations > 1 else None,
        "seed": int(seed),
    }


def aag_bootstrap(X: Any, labels: np.ndarray, resamples: int, seed: int = 0, *,
                  level: float = 0.95, engine: Any = None, chunk: int = AAG_CHUNK_ROWS) -> dict[str, Any]:
    """Percentile bootstrap CI for AAG, resampling rows with replacement (weights
    ``bincount(rng.integers(0, n, n))`` over the global row index; one pass per resample).

    A row drawn twice is not paired with its own copy (pairs are between distinct original
    rows, weighted by how often each was drawn), so duplicates do not inflate ``mean_same``.
    """
    src, eng = _opened(X, engine)
    n = src.n
    classes, codes, _ = check_labels(n, labels)
    k = len(classes)
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(resamples):
        w = np.bincount(rng.integers(0, n, size=n), minlength=n).astype(np.float64)
        sums, sq = _sums(eng, src, codes, k, weights=w, unit32=True, chunk=chunk)
        wc = np.bincount(codes, weights=w, minlength=k)
        w2c = np.bincount(codes, weights=w * w, minlength=k)
        same_pairs = float((wc * wc - w2c).sum())
        all_pairs = float(w.sum() ** 2 - (w * w).sum())
        if same_pairs <= 0 or all_pairs - same_pairs <= 0:
            continue
        vals.append(_aag_from_sums(sums, sq, same_pairs, all_pairs)[0])
    v = np.asarray(vals)
    lo, hi = np.quantile(v, [(1 - level) / 2, 1 - (1 - level) / 2]) if len(v) else (np.nan, np.nan)
    return {"resamples": int(len(v)), "level": float(level), "ci_low": float(lo), "ci_high": float(hi),
            "sd": float(v.std(ddof=1)) if len(v) > 1 else None, "seed": int(seed)}



@dataclass
class VarianceShare(Result):
    """Share of the unit rows' variance in the span of the centred class means."""

    variance_share: Optional[float]
    variance_share_dims: int
    variance_share_ci95: Optional[list[float]] = optional()
    total_variance: float = hidden(0.0)
    along_variance: float = hidden(0.0)



def sample_pair_cosines(X: np.ndarray, labels: np.ndarray, pairs: int = 2000,
                        seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """Cosines of seeded random pairs, per class: ``{class: {"within": ..., "between": ...}}``.

    ``within``: ``pairs`` pairs (i, j), i ≠ j, both of the class (empty for a one-row class);
    ``between``: ``pairs`` pairs with i in the class and j outside it. Pairs are drawn with
    replacement by ``numpy.random.default_rng(seed)``, in class order, so the same seed gives the
    same cosines. Only the sampled rows are read (a memmap is never loaded whole). For the
    ``aag --plot`` figure: the exact means are :func:`aag`'s.

    >>> X = np.array([[1.0, 0], [1, 0.1], [0, 1], [0.1, 1]])
    >>> s = sample_pair_cosines(X, np.array([0, 0, 1, 1]), pairs=5)
    >>> sorted(s), s["0"]["within"].shape, bool((s["0"]["within"] > 0.99).all())
    (['0', '1'], (5,), True)
    """
    if pairs < 1:
        raise ValueError(f"pairs must be >= 1, got {pairs}")
    classes, codes, _ = check_labels(X.shape[0], labels)
    rng = np.random.default_rng(seed)

    def cos(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", unit_rows(X[i]), unit_rows(X[j]))

    out: dict[str, dict[str, np.ndarray]] = {}
    for k, c in enumerate(classes):
        members = np.flatnonzero(codes == k)
        others = np.flatnonzero(codes != k)
        m = len(members)
        if m >= 2:
            a = rng.integers(0, m, pairs)
            b = (a + rng.integers(1, m, pairs)) % m  # another member: never the row itself
            within = cos(members[a], members[b])
        else:
            within = np.empty(0)
        between = cos(members[rng.integers(0, m, pairs)], others[rng.integers(0, len(others), pairs)])
        out[label_key(c)] = {"within": within, "between": between}
    return out


# ---- --against ------------------------------------------------------------------------------


def aag_paired(XA: Any, XB: Any, labels: np.ndarray, *, resamples: int = P.RESAMPLES,
               permutations: int = P.RESAMPLES, seed: int = 0, margins: Optional[dict[str, float]] = None,
               ap_a: Optional[np.ndarray] = None, ap_b: Optional[np.ndarray] = None,
               groups: int = BOOT_GROUPS, against: Optional[str] = None, engine: Any = None) -> P.Paired:
    """AAG of A and of B on the same row groups and group weights (``aag_ci95``'s bootstrap; both
    passes on ``engine``, this process when None: the same bytes on any engine), and, given the per-query average precisions of both (same queries), ``label_map.map`` ×100."""
    check_margins(margins, ["aag", "label_map.map"])
    if XA.shape[0] != XB.shape[0]:
        raise InputError(f"A has {XA.shape[0]} rows but B has {XB.shape[0]}; a paired comparison needs the same rows")
    if resamples < 2:
        raise InputError(f"resamples must be >= 2 for a paired comparison, got {resamples}")
    n = XA.shape[0]
    k = len(np.unique(np.asarray(labels)))
    G = min(_group_count(n, k, XA.shape[1], groups), _group_count(n, k, XB.shape[1], groups))
    ra = aag(XA, labels, resamples=resamples, seed=seed, groups=G, engine=engine)
    rb = aag(XB, labels, resamples=resamples, seed=seed, groups=G, engine=engine)
    ba, bb = ra.boot, rb.boot
    assert ba is not None and bb is not None
    assert np.array_equal(ba.group_of, bb.group_of) and np.array_equal(ba.W, bb.W)
    J = np.ones((G, G)) - np.eye(G)
    figs = {"aag": P.paired_figure(
        ra.aag, rb.aag, group_boot_aag(ba), group_boot_aag(bb),
        jack_a=group_boot_aag(dataclasses.replace(ba, W=J)),
        jack_b=group_boot_aag(dataclasses.replace(bb, W=J)),
        margin=margin_of(margins, "aag"))}
    unit = f"{G} seeded random groups of rows" if G < n else "rows"
    method = P.method_text(unit, resamples, permutations, seed).replace(
        "paired permutation p-value (A and B swapped per unit)",
        "aag: bootstrap p-value (A and B in different spaces); label_map.map: paired permutation p-value "
        "(per-query AP swapped per query)")
    if ap_a is not None and ap_b is not None:
        if len(ap_a) != len(ap_b):
            raise InputError("label MAP of A and B were computed over different queries")
        figs["label_map.map"] = P.paired_items(100 * np.asarray(ap_a), 100 * np.asarray(ap_b), resamples=resamples,
                                               permutations=permutations, seed=seed,
                                               margin=margin_of(margins, "label_map.map"))
    return P.Paired(against=against, ci_method=method, items=figs)

