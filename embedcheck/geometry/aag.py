"""Pure-numpy geometry of a labelled embedding space (SISE paper): AAG and variance share.

All functions take an ``(n, d)`` float array (a memmap is streamed in row chunks and accumulated in
float64; no ``n x n`` matrix is ever held) and labels of length ``n`` (ints or strings).

The Attribute Alignment Gap is mean cosine over same-label pairs minus mean cosine over
different-label pairs (unordered pairs ``i != j``, unit rows). It is exact in O(n·d): with
``S_c`` the sum of the unit rows of class ``c`` and ``S`` the sum of all of them,
``sum_same = Σ_c (|S_c|² − Σ_{i∈c} |u_i|²)`` and ``sum_all = |S|² − Σ_i |u_i|²`` (ordered pairs).

>>> import numpy as np
>>> X = np.array([[1.0, 0], [1, 0.1], [0, 1], [0.1, 1]])
>>> r = aag(X, np.array([0, 0, 1, 1]))
>>> round(r.aag, 4), r.n_same_pairs, r.n_diff_pairs
(0.8958, 2, 4)
"""

from __future__ import annotations
from dataclasses import asdict, dataclass, field
from typing import Any, Optional
import numpy as np
from ..rows import encode_labels, label_key, unit_rows
from ..rows import CHUNK_ROWS, iter_chunks



def _check_labels(n: int, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) != n:
        raise ValueError(f"labels have {labels.shape} entries but the embeddings have {n} rows")
    classes, codes = encode_labels(labels)
    counts = np.bincount(codes, minlength=len(classes))
    if len(classes) < 2:
        raise ValueError(f"need at least two classes, got one ({label_key(classes[0])!r} for all {n} rows)")
    if not (counts >= 2).any():
        raise ValueError("every class has a single row: there are no same-label pairs")
    return classes, codes, counts


def class_sums(X: np.ndarray, codes: np.ndarray, k: int, *, weights: Optional[np.ndarray] = None,
               chunk: int = CHUNK_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """Per-class sums of unit rows (k x d, float64) and per-class sums of squared unit norms.

    ``weights`` (one per row) turns these into weighted sums, used by the bootstrap.
    """
    n, d = X.shape
    sums = np.zeros((k, d), dtype=np.float64)
    sq = np.zeros(k, dtype=np.float64)
    classes = np.arange(k)[:, None]
    for sl in iter_chunks(n, chunk):
        U = unit_rows(X[sl])
        c = codes[sl]
        w = np.ones(len(c)) if weights is None else np.asarray(weights[sl], dtype=np.float64)
        if k <= 64:  # a dense weighted one-hot (k x b) @ U is one BLAS call
            sums += ((c[None, :] == classes) * w) @ U
        else:  # many classes: a sparse one-hot
            from scipy.sparse import csr_matrix

            sums += csr_matrix((w, (c, np.arange(len(c)))), shape=(k, len(c))) @ U
        q = np.einsum("ij,ij->i", U, U)
        sq += np.bincount(c, weights=q * w * w, minlength=k)
    return sums, sq


@dataclass
class AAGResult:
    aag: float
    mean_same: float
    mean_diff: float
    n_same_pairs: int
    n_diff_pairs: int
    within: dict[str, Optional[float]] = field(default_factory=dict)
    class_counts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _aag_from_sums(sums: np.ndarray, sq: np.ndarray,
                   same_pairs: float, all_pairs: float) -> tuple[float, float, float, np.ndarray]:
    """(aag, mean_same, mean_diff, per-class ordered same sums) from class sums."""
    total = sums.sum(axis=0)
    per_class = np.einsum("ij,ij->i", sums, sums) - sq  # ordered same-class pair sums
    same_sum = per_class.sum()
    all_sum = float(total @ total) - sq.sum()
    diff_pairs = all_pairs - same_pairs
    mean_same = same_sum / same_pairs
    mean_diff = (all_sum - same_sum) / diff_pairs
    return mean_same - mean_diff, mean_same, mean_diff, per_class


def aag(X: np.ndarray, labels: np.ndarray, *, chunk: int = CHUNK_ROWS) -> AAGResult:
    """Exact Attribute Alignment Gap with mean_same, mean_diff, pair counts and per-class means.

    Pair counts are unordered pairs. ``within[c]`` is the mean cosine between different rows
    of class ``c`` (None for a class with one row).
    """
    n = X.shape[0]
    classes, codes, counts = _check_labels(n, labels)
    sums, sq = class_sums(X, codes, len(classes), chunk=chunk)
    same_pairs = float((counts * (counts - 1)).sum())
    all_pairs = float(n) * (n - 1)
    a, ms, md, per_class = _aag_from_sums(sums, sq, same_pairs, all_pairs)
    within = {
        label_key(c): (float(per_class[i] / (counts[i] * (counts[i] - 1))) if counts[i] > 1 else None)
        for i, c in enumerate(classes)
    }
    return AAGResult(aag=float(a), mean_same=float(ms), mean_diff=float(md),
                     n_same_pairs=int(same_pairs // 2), n_diff_pairs=int((all_pairs - same_pairs) // 2),
                     within=within, class_counts={label_key(c): int(counts[i]) for i, c in enumerate(classes)})


def aag_permutation_null(X: np.ndarray, labels: np.ndarray, permutations: int, seed: int = 0,
                         *, observed: Optional[float] = None, chunk: int = CHUNK_ROWS) -> dict[str, Any]:
    """Label-shuffle null for AAG: one-sided p-value ``(1 + #{null >= observed}) / (1 + P)``."""
    n = X.shape[0]
    classes, codes, counts = _check_labels(n, labels)
    if observed is None:
        observed = aag(X, labels, chunk=chunk).aag
    rng = np.random.default_rng(seed)
    k = len(classes)
    same_pairs = float((counts * (counts - 1)).sum())
    all_pairs = float(n) * (n - 1)
    U = _maybe_in_memory(X)
    null = np.empty(permutations)
    for p in range(permutations):
        perm_codes = codes[rng.permutation(n)]
        sums, sq = class_sums(U, perm_codes, k, chunk=chunk)
        null[p] = _aag_from_sums(sums, sq, same_pairs, all_pairs)[0]
    return {
        "permutations": int(permutations),
        "p_value": float((1 + np.sum(null >= observed - 1e-15)) / (1 + permutations)),
        "null_mean": float(null.mean()),
        "null_sd": float(null.std(ddof=1)) if permutations > 1 else None,
        "seed": int(seed),
    }


def aag_bootstrap(X: np.ndarray, labels: np.ndarray, resamples: int, seed: int = 0, *,
                  level: float = 0.95, chunk: int = CHUNK_ROWS) -> dict[str, Any]:
    """Percentile bootstrap CI for AAG, resampling rows with replacement.

    A row drawn twice is not paired with its own copy (pairs are between distinct original
    rows, weighted by how often each was drawn), so duplicates do not inflate ``mean_same``.
    """
    n = X.shape[0]
    classes, codes, _ = _check_labels(n, labels)
    k = len(classes)
    rng = np.random.default_rng(seed)
    U = _maybe_in_memory(X)
    vals = []
    for _ in range(resamples):
        w = np.bincount(rng.integers(0, n, size=n), minlength=n).astype(np.float64)
        sums, sq = class_sums(U, codes, k, weights=w, chunk=chunk)
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


def _maybe_in_memory(X: np.ndarray, limit_bytes: int = 2 << 30) -> np.ndarray:
    """Unit rows as float32 in memory when they fit (repeated passes are then cheap); else ``X``
    itself (callers that need unit rows then normalise each streamed chunk)."""
    n, d = X.shape
    if n * d * 4 <= limit_bytes:
        out = np.empty((n, d), dtype=np.float32)
        for sl in iter_chunks(n):
            out[sl] = unit_rows(X[sl])
        return out
    return X


def variance_share(X: np.ndarray, labels: np.ndarray, *, chunk: int = CHUNK_ROWS) -> dict[str, Any]:
    """Share of total variance of the unit rows lying in the span of the centred class means.

    For two classes this is the direction between the class means (the SISE paper's
    "polarity direction holds 2.4-6.7 % of the variance"). Total variance is the trace of
    the covariance; both are population (1/n) moments, so the ratio is exact.
    """
    n, d = X.shape
    classes, codes, counts = _check_labels(n, labels)
    k = len(classes)
    sums, sq = class_sums(X, codes, k, chunk=chunk)
    mu = sums.sum(axis=0) / n
    means = sums / counts[:, None]
    M = means - mu
    # orthonormal basis of the span of centred class means (rank <= k-1)
    _, s, vt = np.linalg.svd(M, full_matrices=False)
    rank = int((s > s.max() * 1e-10).sum()) if s.size and s.max() > 0 else 0
    Q = vt[:rank]
    total = float(sq.sum() / n - mu @ mu)
    along = 0.0
    for sl in iter_chunks(n, chunk):
        P = (unit_rows(X[sl]) - mu) @ Q.T
        along += float(np.einsum("ij,ij->", P, P))
    along /= n
    return {"variance_share": along / total if total > 0 else None, "dims": rank,
            "total_variance": total, "along_variance": along}


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
    classes, codes, _ = _check_labels(X.shape[0], labels)
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
