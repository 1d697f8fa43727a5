"""Calibrate a similarity threshold for "match" / "duplicate": precision–recall, the threshold at a
target precision and at best F1 with bootstrap intervals, where a threshold sits in the
unrelated-pair floor, and how many pairs of a corpus it flags.

Pairs are row ``i`` of A against row ``i`` of B, scored by cosine. Two modes:

* **labels** — each pair labelled 1 (match) or 0 (not); the precision–recall curve is exactly
  scikit-learn's ``precision_recall_curve(labels, scores)`` (a pair is flagged when its score is
  ``>= threshold``; one point per distinct score; the last point precision 1, recall 0);
* **matched pairs** (no labels) — every row pair ``(a_i, b_i)`` is a match and every unrelated pair
  ``(a_i, b_j)``, ``i != j``, is not (the anisotropy check's floor, all ``n(n−1)`` of them, counted
  exactly in blocks).

In both modes the **floor** is the distribution of the ``n(n−1)`` unrelated cosines
``cos(a_i, b_j)``, ``i != j``: a threshold's ``floor_percentile`` is the percentage of unrelated
pairs scoring below it (``100 − floor_percentile`` % of unrelated pairs are flagged). A
threshold at the 90th percentile of the floor flags one unrelated pair in ten.

Intervals: a seeded percentile bootstrap over pairs of the chosen thresholds and of their precision
and recall (each resample chooses its own threshold, as the report does). Labels mode: each
resample's curve is the count-weighted curve of the resampled pairs, exactly the curve of the
expanded resample. Matched-pairs mode (up to ``MATCHED_BOOT_MAX`` pairs): a drawn pair ``i`` brings
its match and its row's unrelated pairs ``(a_i, b_j)``, ``j != i``. The
corpus count (:func:`count_pairs_above`) is exact: float32 products, the ones within 1e-5 of a
threshold recomputed in float64.

>>> import numpy as np
>>> s = np.array([0.1, 0.4, 0.35, 0.8]); y = np.array([0, 0, 1, 1])
>>> p, r, t = pr_curve(s, y)
>>> p.round(3).tolist(), r.tolist(), t.tolist()
([0.5, 0.667, 0.5, 1.0, 1.0], [1.0, 1.0, 0.5, 0.5, 0.0], [0.1, 0.35, 0.4, 0.8])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from ..errors import InputError
from ..report.result import Result, hidden, optional
from ..rows import unit_rows

#: rows of A per block of the floor count (block x n float64 products)
FLOOR_BLOCK = 1024
#: rows of A per task of the floor count (whole blocks)
FLOOR_TASK_ROWS = 8192
#: corpus rows per task and per block inside a task
CORPUS_TASK_ROWS = 4096
CORPUS_BLOCK = 1024
#: a float32 cosine this close to a threshold is recomputed in float64
RECHECK = 1e-5
#: points of the curve written to the report
CURVE_POINTS = 101


# ---- the curve ----------------------------------------------------------------------------------


def pr_curve(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(precision, recall, thresholds) exactly as ``sklearn.metrics.precision_recall_curve``:
    thresholds are the distinct scores in increasing order; ``precision[i]`` and ``recall[i]`` for
    flagging scores ``>= thresholds[i]``; a last point (1, 0) without a threshold."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    tp, fp, thr = _counts_desc(s, y, np.ones((1, len(s))))
    return _finish_curve(tp[0], fp[0], thr)


def _counts_desc(s: np.ndarray, y: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulative weighted true and false positives at each distinct score, in decreasing score
    order (b x m), and the distinct scores (m)."""
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    last = np.r_[ss[1:] != ss[:-1], True]  # the last item of each tie group
    cw = c[:, order]
    tp = np.cumsum(cw * y[order], axis=1)[:, last]
    fp = np.cumsum(cw * (1.0 - y[order]), axis=1)[:, last]
    return tp, fp, ss[last]


def _finish_curve(tp: np.ndarray, fp: np.ndarray, thr_desc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    flagged = tp + fp
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(flagged > 0, tp / flagged, 1.0)
        recall = tp / tp[-1] if tp[-1] > 0 else np.ones_like(tp)
    keep = flagged > 0
    precision, recall, thr = precision[keep][::-1], recall[keep][::-1], thr_desc[keep][::-1]
    return np.r_[precision, 1.0], np.r_[recall, 0.0], thr


def at_precision(precision: np.ndarray, recall: np.ndarray, thresholds: np.ndarray,
                 target: float) -> Optional[int]:
    """Index of the threshold with the highest recall whose precision is ``>= target`` (the lowest
    such threshold); None when no threshold reaches it."""
    ok = np.flatnonzero(precision[:-1] >= target - 1e-12)
    return int(ok[0]) if ok.size else None


def best_f1(precision: np.ndarray, recall: np.ndarray) -> Optional[int]:
    """Index of the threshold with the highest F1 (the lowest threshold among ties)."""
    p, r = precision[:-1], recall[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = np.where(p + r > 0, 2 * p * r / (p + r), 0.0)
    return int(np.argmax(f1)) if f1.size else None


def average_precision(precision: np.ndarray, recall: np.ndarray) -> float:
    """``Σ (R_i − R_{i+1}) P_i`` — scikit-learn's ``average_precision_score``."""
    return float(-np.sum(np.diff(recall) * precision[:-1]))


def _choose(tp: np.ndarray, fp: np.ndarray, pos: np.ndarray, valid: np.ndarray, thr: np.ndarray,
            target: float) -> dict[str, np.ndarray]:
    """Per resample (rows of ``tp``/``fp``: weighted counts at each distinct score, decreasing):
    the threshold at the target precision and at best F1, with their precision and recall (NaN
    where a resample has no positive, or no threshold reaches the target)."""
    flagged = tp + fp
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = tp / flagged
        rec = tp / pos
        f1 = np.where(prec + rec > 0, 2 * prec * rec / (prec + rec), 0.0)
    valid = valid & (flagged > 0) & (pos > 0)
    okp = valid & (prec >= target - 1e-12)
    rows = np.arange(len(tp))
    out: dict[str, np.ndarray] = {}
    # highest recall = lowest threshold = last index in decreasing order
    has_p = okp.any(axis=1)
    idx_p = okp.shape[1] - 1 - np.argmax(okp[:, ::-1], axis=1)
    # best F1, ties to the lowest threshold: the last maximum in decreasing order
    has_f = valid.any(axis=1)
    idx_f = valid.shape[1] - 1 - np.argmax(np.where(valid, f1, -1.0)[:, ::-1], axis=1)
    for key, has, idx in (("at_precision", has_p, idx_p), ("best_f1", has_f, idx_f)):
        out[f"{key}.threshold"] = np.where(has, thr[idx], np.nan)
        out[f"{key}.precision"] = np.where(has, prec[rows, idx], np.nan)
        out[f"{key}.recall"] = np.where(has, rec[rows, idx], np.nan)
    return out


def _merge(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {}


def _boot_thresholds(s: np.ndarray, y: np.ndarray, target: float, resamples: int,
                     seed: int) -> dict[str, np.ndarray]:
    """Labels mode: the chosen thresholds (at the target precision, at best F1) and their precision
    and recall in every bootstrap resample of the pairs."""
    n = len(s)
    rng = np.random.default_rng(seed)
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    last = np.r_[ss[1:] != ss[:-1], True]
    starts = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]])
    thr = ss[last]
    parts = []
    per = max(1, 2_000_000 // max(n, 1))
    for s0 in range(0, resamples, per):
        b = min(per, resamples - s0)
        c = rng.multinomial(n, np.full(n, 1.0 / n), size=b).astype(np.float64)
        cw = c[:, order]
        tp = np.cumsum(cw * y[order], axis=1)[:, last]
        fp = np.cumsum(cw * (1.0 - y[order]), axis=1)[:, last]
        present = np.add.reduceat(cw, starts, axis=1) > 0  # a threshold is a score drawn in the resample
        parts.append(_choose(tp, fp, tp[:, -1:], present, thr, target))
    return _merge(parts)


#: matched-pairs mode: intervals up to this many pairs (an n x n count table; every weighted count is
#: below n(n-1) < 2^24, so float32 products are exact)
MATCHED_BOOT_MAX = 4000


def _boot_matched(UA: np.ndarray, UB: np.ndarray, s: np.ndarray, target: float, resamples: int,
                  seed: int, block: int = FLOOR_BLOCK) -> dict[str, np.ndarray]:
    """Matched-pairs mode: a bootstrap over pairs — a resample draws pairs ``i`` with counts
    ``c_i``; each drawn pair brings its match (``s_i``) and its row's unrelated pairs
    ``(a_i, b_j), j != i`` — and in each, the chosen thresholds with their precision and recall.
    Thresholds are the distinct matched scores, as in the report's curve."""
    n = len(s)
    thr = np.unique(s)[::-1]  # decreasing
    m = len(thr)
    ta = thr[::-1]  # increasing, for searchsorted
    F = np.empty((n, m), dtype=np.float32)  # F[i, k]: unrelated pairs of row i scoring >= thr[k]
    for i0 in range(0, n, block):
        i1 = min(n, i0 + block)
        S = UA[i0:i1] @ UB.T
        k = np.arange(i0, i1)
        S[k - i0, k] = -np.inf
        S.sort(axis=1)
        for r in range(i1 - i0):
            F[i0 + r] = (n - np.searchsorted(S[r], ta, side="left"))[::-1]
    T = (s[:, None] >= thr[None, :]).astype(np.float32)  # T[i, k]: is the match of row i flagged at thr[k]
    E = (s[:, None] == thr[None, :]).astype(np.float32)
    rng = np.random.default_rng(seed)
    parts = []
    per = max(1, 1_000_000 // max(m, 1))  # resamples per block: (per x m) tables of a few MB
    for s0 in range(0, resamples, per):
        b = min(per, resamples - s0)
        c = rng.multinomial(n, np.full(n, 1.0 / n), size=b).astype(np.float32)
        tp, fp = (c @ T).astype(np.float64), (c @ F).astype(np.float64)
        present = (c @ E) > 0  # a threshold is a matched score drawn in the resample
        parts.append(_choose(tp, fp, np.full((b, 1), float(n)), present, thr, target))
    return _merge(parts)


# ---- unrelated pairs: the floor -----------------------------------------------------------------


def unrelated_range(UA: np.ndarray, UB: np.ndarray, i0: int, i1: int, ts: np.ndarray,
                    block: int = FLOOR_BLOCK) -> np.ndarray:
    """Task: for each sorted threshold of ``ts``, the unrelated pairs ``cos(a_i, b_j) >= t``,
    ``i`` in ``[i0, i1)``, ``j != i`` (float64 products of unit rows, ``block`` rows of A at a time)."""
    counts = np.zeros(len(ts), dtype=np.int64)
    for b0 in range(i0, i1, block):
        b1 = min(i1, b0 + block)
        S = UA[b0:b1] @ UB.T
        k = np.arange(b0, b1)
        S[k - b0, k] = -np.inf  # the matched pair is not unrelated
        v = np.sort(S, axis=None)
        counts += v.size - np.searchsorted(v, ts, side="left")
    return counts


def count_unrelated_at_least(UA: np.ndarray, UB: np.ndarray, thresholds: np.ndarray,
                             block: int = FLOOR_BLOCK, engine: Any = None) -> np.ndarray:
    """For each threshold, the number of unrelated pairs ``cos(a_i, b_j) >= t``, ``i != j``
    (unit rows in, float64 products, blocked: never an n x n matrix): :func:`unrelated_range`
    tasks of :data:`FLOOR_TASK_ROWS` rows of A on ``engine`` (this process when None; A and B put
    once), their integer counts summed — the same counts on any engine."""
    from ..engine import or_local

    t = np.asarray(thresholds, dtype=np.float64)
    order = np.argsort(t)
    ts = t[order]
    n = UA.shape[0]
    eng = or_local(engine)
    ua, ub = eng.put(UA), eng.put(UB)
    step = max(block, FLOOR_TASK_ROWS // block * block)  # whole blocks per task: the blocks of one pass
    counts = np.zeros(len(t), dtype=np.int64)
    for c in eng.imap(unrelated_range, [(ua, ub, i0, min(n, i0 + step), ts, block) for i0 in range(0, n, step)]):
        counts += c
    out = np.empty_like(counts)
    out[order] = counts
    return out


def floor_moments(UA: np.ndarray, UB: np.ndarray) -> tuple[float, float]:
    """Mean and sd (ddof 1) of the ``n(n−1)`` unrelated cosines, exact in O(n·d²) from sums: the
    anisotropy check's exact floor (:func:`embedcheck.geometry.anisotropy_floor.floor_finish`)."""
    from .anisotropy_floor import floor_finish, floor_partials

    return floor_finish(floor_partials(UA, UB))


# ---- corpus: pairs above a threshold ------------------------------------------------------------


def count_pairs_range(parts: Any, n: int, i0: int, i1: int, thresholds: np.ndarray,
                      block: Optional[int] = None) -> np.ndarray:
    """Pairs ``(i, j)``, ``i`` in ``[i0, i1)``, ``j > i``, with ``cos(c_i, c_j) >= t`` for each ``t``
    (one engine task; float32 products, near-threshold values recomputed in float64)."""
    from ..io.source import read_range

    block = block or CORPUS_BLOCK
    t = np.asarray(thresholds, dtype=np.float64)
    counts = np.zeros(len(t), dtype=np.int64)
    for q0 in range(i0, i1, block):
        q1 = min(i1, q0 + block)
        Q = unit_rows(read_range(parts, q0, q1, check=True, what="corpus"))
        Q32 = Q.astype(np.float32)
        for c0 in range(q0, n, block):
            c1 = min(n, c0 + block)
            C = Q if (c0, c1) == (q0, q1) else unit_rows(read_range(parts, c0, c1, what="corpus"))
            S = (Q32 @ C.astype(np.float32).T).astype(np.float64)
            if c0 < q1:  # pairs j <= i are not counted (each unordered pair once)
                rows = np.arange(q0, q1)[:, None]
                cols = np.arange(c0, c1)[None, :]
                S[cols <= rows] = -np.inf
            near = np.zeros(S.shape, dtype=bool)
            for x in t:
                near |= np.abs(S - x) < RECHECK
            if near.any():
                r, c = np.nonzero(near)
                S[r, c] = np.einsum("ij,ij->i", Q[r], C[c])
            for k, x in enumerate(t):
                counts[k] += int(np.count_nonzero(S >= x))
    return counts


def count_pairs_above(corpus: Any, thresholds: Sequence[float], *, engine: Any = None) -> dict[str, Any]:
    """Exact number of unordered corpus pairs ``i < j`` whose cosine is ``>= t``, for each ``t``;
    row ranges run as :func:`count_pairs_range` tasks on ``engine`` (an
    :class:`~embedcheck.engine.Engine` from :func:`~embedcheck.engine.running`; this process when
    None) and their integer counts are summed: the same counts on any engine."""
    from ..engine import or_local
    from ..io.source import Source, open_source, ranges

    src = corpus if isinstance(corpus, Source) else open_source(corpus, what="corpus", min_rows=2)
    n = src.n
    t = np.asarray(list(thresholds), dtype=np.float64)
    eng = or_local(engine)
    parts = eng.put(src.parts)
    tasks = [(parts, n, a, b, t, CORPUS_BLOCK) for a, b in ranges(n, CORPUS_TASK_ROWS)]
    total = np.zeros(len(t), dtype=np.int64)
    for c in eng.imap(count_pairs_range, tasks):
        total += c
    return {"rows": int(n), "pairs": int(n * (n - 1) // 2), "counts": [int(x) for x in total]}


# ---- results ------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class ThresholdPoint(Result):
    """One threshold: where it sits on the curve and in the floor."""

    threshold: Optional[float]
    threshold_ci95: Optional[list[float]] = optional()
    precision: Optional[float] = None
    precision_ci95: Optional[list[float]] = optional()
    recall: Optional[float] = None
    recall_ci95: Optional[list[float]] = optional()
    f1: Optional[float] = None
    floor_percentile: Optional[float] = None  #: % of unrelated pairs scoring below the threshold
    unrelated_flagged: Optional[int] = None  #: unrelated pairs scoring >= the threshold
    corpus_pairs_above: Optional[int] = optional()
    target_precision: Optional[float] = optional()


@dataclass(kw_only=True)
class ThresholdResult(Result):
    """The ``threshold`` report's body (its figures and schema are declared by
    :mod:`embedcheck.measures.threshold`)."""

    n: int
    dim: int
    mode: str  #: "labels" or "matched pairs"
    positives: int
    negatives: int
    average_precision: float
    at_precision: ThresholdPoint
    best_f1: ThresholdPoint
    check: Optional[ThresholdPoint] = optional()
    floor: dict[str, Any] = field(default_factory=dict)
    corpus: Optional[dict[str, Any]] = optional()
    curve: list[dict[str, float]] = field(default_factory=list)
    ci_method: Optional[str] = optional()
    inputs: Optional[dict[str, Any]] = optional()  #: ``rows_matched_by``: how B and the labels met A's rows
    models: Optional[dict[str, str]] = optional()  #: the model each store input says it holds
    precision_curve: Optional[np.ndarray] = hidden()
    recall_curve: Optional[np.ndarray] = hidden()
    thresholds: Optional[np.ndarray] = hidden()
    scores: Optional[np.ndarray] = hidden()  #: per-pair cosines (for a paired comparison)


def binary_labels(labels: Any, n: int, *, match_at: Optional[float] = None, what: str = "labels") -> np.ndarray:
    """0/1 labels as float64: ``labels`` must be 0/1 (ints, bools or "0"/"1"), or, with
    ``match_at``, numeric scores (a match when ``>= match_at``)."""
    y = np.asarray(labels)
    if y.shape != (n,):
        raise InputError(f"{what} have shape {y.shape} but A has {n} rows")
    if match_at is not None:
        try:
            v = y.astype(np.float64)
        except (TypeError, ValueError):
            raise InputError(f"{what} must be numbers to use match_at") from None
        if not np.isfinite(v).all():
            raise InputError(f"{what} hold a non-finite score at row {int(np.flatnonzero(~np.isfinite(v))[0])}")
        return (v >= match_at).astype(np.float64)
    if y.dtype.kind in "US":
        bad = ~np.isin(y, ["0", "1"])
    elif y.dtype.kind == "b":
        bad = np.zeros(n, dtype=bool)
    elif y.dtype.kind in "iuf":
        bad = ~np.isin(y, [0, 1])
    else:
        bad = np.ones(n, dtype=bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{what} must be 0 or 1 (match or not), got {y[i]!r} at row {i}; "
                         "for similarity scores give match_at (e.g. 4.0 for STS-B)")
    return (y.astype(str) == "1").astype(np.float64) if y.dtype.kind in "US" else y.astype(np.float64)


def check_precision(precision: float) -> float:
    if not (isinstance(precision, (int, float)) and math.isfinite(precision) and 0 < precision <= 1):
        raise InputError(f"precision must be in (0, 1], got {precision}")
    return float(precision)


def calibrate(A: np.ndarray, B: np.ndarray, labels: Optional[np.ndarray] = None, *, precision: float = 0.95,
              check: Optional[float] = None, resamples: int = 1000, seed: int = 0, engine: Any = None) -> ThresholdResult:
    """The threshold report of pairs ``(a_i, b_i)`` (without corpus counts; see
    :func:`count_pairs_above`). ``labels``: 0/1 per pair (None: matched pairs against the
    unrelated pairs). ``engine``: where the counts of the ``n(n−1)`` unrelated pairs run
    (:func:`count_unrelated_at_least`; this process when None); the rest is O(n log n), or bounded
    (the matched-pairs intervals, up to :data:`MATCHED_BOOT_MAX` pairs), and stays here."""
    target = check_precision(precision)
    if A.shape != B.shape:
        raise InputError(f"A has shape {A.shape} but B has {B.shape}; row i of A is paired with row i of B")
    n, d = A.shape
    if n < 2:
        raise InputError(f"need at least 2 pairs, got {n}")
    if check is not None and not (math.isfinite(check) and -1 <= check <= 1):
        raise InputError(f"check must be a cosine in [-1, 1], got {check}")
    UA, UB = unit_rows(A), unit_rows(B)
    s = np.einsum("ij,ij->i", UA, UB)
    if labels is not None:
        y = np.asarray(labels, dtype=np.float64)
        if y.sum() == 0:
            raise InputError("labels hold no match (no 1): there is no precision-recall curve")
        p, r, t = pr_curve(s, y)
        mode, pos, neg = "labels", int(y.sum()), int(n - y.sum())
    else:
        y = None
        p, r, t, pos, neg = _matched_curve(UA, UB, s, engine)
        mode = "matched pairs"
    ip, ifl = at_precision(p, r, t, target), best_f1(p, r)
    chosen = [t[ip] if ip is not None else None, t[ifl] if ifl is not None else None, check]
    thr_list = [x for x in chosen if x is not None]
    unrelated = count_unrelated_at_least(UA, UB, np.array(thr_list), engine=engine) if thr_list else np.array([])
    pairs = n * (n - 1)
    flagged = dict(zip(range(len(thr_list)), unrelated.tolist()))

    def point(i: Optional[int], k: int) -> ThresholdPoint:
        if i is None:
            return ThresholdPoint(threshold=None)
        u = int(flagged[k])
        return ThresholdPoint(threshold=float(t[i]), precision=float(p[i]), recall=float(r[i]),
                              f1=_f1(p[i], r[i]), floor_percentile=100.0 * (pairs - u) / pairs, unrelated_flagged=u)

    k = 0
    ap = point(ip, k)
    k += ip is not None
    ap.target_precision = target
    bf = point(ifl, k)
    k += ifl is not None
    ck = None
    if check is not None:
        u = int(flagged[k])
        cp, cr = _at_threshold(s, y, check, UA, UB, u)
        ck = ThresholdPoint(threshold=float(check), precision=cp, recall=cr, f1=_f1(cp, cr) if cp is not None else None,
                            floor_percentile=100.0 * (pairs - u) / pairs, unrelated_flagged=u)
    mean, sd = floor_moments(UA, UB)
    res = ThresholdResult(n=int(n), dim=int(d), mode=mode, positives=pos, negatives=neg,
                          average_precision=average_precision(p, r), at_precision=ap, best_f1=bf, check=ck,
                          floor={"pairs": int(pairs), "mean": mean, "sd": sd,
                                 "matched_mean": float(s.mean())},
                          curve=_curve_points(p, r, t), precision_curve=p, recall_curve=r, thresholds=t, scores=s)
    if resamples > 0 and (y is not None or n <= MATCHED_BOOT_MAX):
        from .intervals import percentile_ci

        boot = (_boot_thresholds(s, y, target, resamples, seed) if y is not None
                else _boot_matched(UA, UB, s, target, resamples, seed))
        for key, pt in (("at_precision", ap), ("best_f1", bf)):
            if pt.threshold is None:
                continue
            pt.threshold_ci95 = percentile_ci(boot[f"{key}.threshold"])
            pt.precision_ci95 = percentile_ci(boot[f"{key}.precision"])
            pt.recall_ci95 = percentile_ci(boot[f"{key}.recall"])
        res.ci_method = (f"percentile bootstrap over pairs, {resamples} resamples, seed {seed}" +
                         ("" if y is not None else "; a drawn pair brings its row's unrelated pairs (a_i, b_j), j != i"))
    elif resamples > 0:
        res.ci_method = (f"none: matched-pairs intervals need an n x n count table, computed up to "
                         f"{MATCHED_BOOT_MAX} pairs (give 0/1 labels for intervals on more)")
    return res


def _f1(p: Optional[float], r: Optional[float]) -> Optional[float]:
    if p is None or r is None:
        return None
    return float(2 * p * r / (p + r)) if p + r > 0 else 0.0


def _at_threshold(s: np.ndarray, y: Optional[np.ndarray], t: float, UA: np.ndarray, UB: np.ndarray,
                  unrelated_flagged: int) -> tuple[Optional[float], Optional[float]]:
    """(precision, recall) of flagging scores ``>= t``."""
    if y is not None:
        flag = s >= t
        tp = float((flag * y).sum())
        nf = int(flag.sum())
        return (tp / nf if nf else None), tp / float(y.sum())
    tpm = float((s >= t).sum())
    nfm = tpm + unrelated_flagged
    return (tpm / nfm if nfm else None), tpm / len(s)


def _matched_curve(UA: np.ndarray, UB: np.ndarray, s: np.ndarray,
                   engine: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """The curve of matched pairs (positives) against all unrelated pairs (negatives): thresholds
    are the distinct matched scores (an unrelated score between two of them changes precision
    only at the next matched one below, where the curve is evaluated)."""
    n = len(s)
    t = np.unique(s)
    fp = count_unrelated_at_least(UA, UB, t, engine=engine).astype(np.float64)
    tp = (n - np.searchsorted(np.sort(s), t, side="left")).astype(np.float64)
    prec = tp / (tp + fp)
    rec = tp / n
    return np.r_[prec, 1.0], np.r_[rec, 0.0], t, n, n * (n - 1)


def _curve_points(p: np.ndarray, r: np.ndarray, t: np.ndarray, points: int = CURVE_POINTS) -> list[dict[str, float]]:
    """At most ``points`` points of the curve, evenly spaced over its thresholds."""
    m = len(t)
    idx = np.unique(np.linspace(0, m - 1, min(points, m)).round().astype(int)) if m else np.array([], dtype=int)
    return [{"threshold": float(t[i]), "precision": float(p[i]), "recall": float(r[i])} for i in idx]


__all__ = ["ThresholdPoint", "ThresholdResult", "at_precision", "average_precision", "best_f1", "binary_labels",
           "calibrate", "check_precision", "count_pairs_above", "count_pairs_range", "count_unrelated_at_least",
           "floor_moments", "pr_curve", "unrelated_range"]
