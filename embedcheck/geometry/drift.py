"""Two-sample tests for two populations of embeddings (REF and CUR, different rows): the maths of
``embedcheck drift``.

**MMD².** The unbiased estimator (Gretton et al. 2012, eq. 3) with the Gaussian kernel
``k(a, b) = exp(−‖a − b‖² / (2σ²))``, σ the median pairwise Euclidean distance of the pooled rows
(the median heuristic; over every pair of a seeded sample of :data:`BANDWIDTH_ROWS` pooled rows when
there are more). Its p-value comes from a pooled permutation null: ``P`` random splits of the pooled
rows into groups of the sizes of REF and CUR (``default_rng([seed, 2])``), p = (1 + #{null ≥
observed}) / (1 + P). Two estimators, one driver on any engine (tasks over pooled row ranges merged
in row order):

* ``exact`` (pooled rows ≤ :data:`EXACT_MAX`): the kernel matrix is computed once, block by block
  (:data:`BLOCK` rows × all columns), and every block serves every permutation at once: with the
  0/1 membership rows ``S`` (permutation × row), the within-group sums are ``s·K·s`` and
  ``s·(K·1)``, so the whole null is one matrix product per block (``K_B · Sᵀ``). The kernel is used
  shifted by the constant ``c = exp(−½)`` (the kernel at the median distance): MMD² is unchanged
  (the constant cancels), the sums are small, float32 blocks lose no precision that matters.
  Memory: the pooled rows, ``S`` (1 byte a cell) and one block.
* ``rff`` (more rows): random Fourier features (Rahimi & Recht 2007) ``φ(z) = √(2/D) cos(zW + b)``,
  ``W ~ N(0, σ⁻²)``, :data:`FEATURES` features; the unbiased estimator on ``⟨φ, φ⟩``; the
  permutations are drawn chunk by chunk (a sequential hypergeometric split of each permutation's
  REF count over the chunks, then uniform positions inside the chunk): uniform random splits with
  memory bounded by one chunk, whatever the row count.

Its 95 % interval: normal, with the standard error of the first-order (Hoeffding) projection of the
U-statistic (``4·var(h_x)/m + 4·var(h_y)/n`` from the per-row kernel sums) and the variance of the
permutation null added (the spread under no drift, where the first order vanishes).

**Classifier test.** A ridge classifier (least squares on ±1 labels, rows scaled to unit RMS norm)
cross-fitted over ``k`` folds (seeded): every row is scored by a model that did not see it. AUC of
the out-of-fold scores (CUR positive); its p-value from the permutation null of the whole
cross-fitted procedure (exact and cheap: the out-of-fold scores are linear in the labels); its
95 % interval normal, with the DeLong variance (Sun & Xu's fast algorithm) plus the permutation
null's variance (the extra spread of a cross-fitted AUC, which DeLong alone ignores).

**Attribution.** k-means clusters (seeded) of the pooled rows; per cluster the share of REF and of
CUR rows and the Newcombe (Wilson score) 95 % interval of their difference, Fisher's exact test of
the cluster's REF/CUR counts against the rest's (two-sided), and Holm's step-down adjustment of
those p-values over the clusters (family-wise error at ``alpha``, whatever their dependence): a
cluster has ``moved`` when its adjusted p-value is below ``alpha``. The rows most typical of each
side by out-of-fold classifier score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..io.source import Part, Source, read_range

#: pooled rows up to which the exact (blocked) MMD² estimator is used by default
EXACT_MAX = 20_000
#: rows of one kernel block of the exact estimator
BLOCK = 1024
#: pooled rows over whose pairs the median heuristic is taken (a seeded sample beyond)
BANDWIDTH_ROWS = 2_000
#: pooled rows up to which the exact estimator's kernel blocks are float64 (float32 beyond)
FLOAT64_MAX = 4_000
#: random Fourier features of the rff estimator
FEATURES = 1024
#: pooled rows of one task (one chunk of permutation draws) of the rff estimator
RFF_CHUNK = 8192
#: the kernel shift (the kernel at the median distance): MMD² is unchanged by a constant
SHIFT = math.exp(-0.5)
#: at least this many rows a side
MIN_ROWS = 10
#: pooled rows the classifier and k-means see at most (a seeded stratified sample beyond)
CLASSIFIER_MAX = 20_000
Z95 = 1.959963984540054
Z80 = 0.8416212335729143
ESTIMATORS = ("auto", "exact", "rff")


# ---- pooled rows ------------------------------------------------------------------------------


def pooled_range(ref: tuple[Part, ...], cur: tuple[Part, ...], m: int, a: int, b: int) -> np.ndarray:
    """Pooled rows ``[a, b)``: REF's rows first (``0..m-1``), then CUR's; checked (finite rows)."""
    out = []
    if a < m:
        out.append(read_range(ref, a, min(b, m), check=True, what="REF"))
    if b > m:
        out.append(read_range(cur, max(a, m) - m, b - m, check=True, what="CUR"))
    return out[0] if len(out) == 1 else np.concatenate(out)


def pooled_take(ref: Source, cur: Source, idx: np.ndarray) -> np.ndarray:
    """Pooled rows at indices ``idx`` (in that order)."""
    idx = np.asarray(idx, dtype=np.int64)
    m = ref.n
    out = np.empty((idx.size, ref.dim), dtype=np.result_type(ref.dtype, cur.dtype))
    r = idx < m
    if r.any():
        out[r] = ref.take(idx[r])
    if (~r).any():
        out[~r] = cur.take(idx[~r] - m)
    return out


def median_bandwidth(Z: np.ndarray) -> float:
    """The median Euclidean distance over all pairs ``i < j`` of the rows of ``Z`` (float64).

    >>> median_bandwidth(np.array([[0.0, 0], [3, 4], [0, 1]]))
    4.242640687119285
    """
    Z = np.asarray(Z, dtype=np.float64)
    sq = np.einsum("ij,ij->i", Z, Z)
    iu = np.triu_indices(len(Z), 1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (Z @ Z.T), 0.0)[iu]
    return float(np.median(np.sqrt(d2)))


def bandwidth(ref: Source, cur: Source, seed: int) -> tuple[float, int]:
    """(σ, rows whose pairs gave it): the median heuristic on the pooled rows, over a seeded sample
    of :data:`BANDWIDTH_ROWS` pooled rows when there are more (``default_rng([seed, 0])``)."""
    N = ref.n + cur.n
    if N <= BANDWIDTH_ROWS:
        idx = np.arange(N)
    else:
        idx = np.sort(np.random.default_rng([seed, 0]).choice(N, BANDWIDTH_ROWS, replace=False))
    sigma = median_bandwidth(pooled_take(ref, cur, idx))
    if not sigma > 0:
        raise InputError("REF and CUR: the median distance between pooled rows is 0 (most rows are identical); "
                         "the Gaussian kernel has no bandwidth")
    return sigma, int(idx.size)


# ---- permutations -----------------------------------------------------------------------------


def permutation_members(N: int, m: int, permutations: int, seed: int) -> np.ndarray:
    """Membership (``(permutations + 1) x N``, bool): row 0 the observed split (the first ``m``
    pooled rows are REF), row ``p`` REF's rows under permutation ``p``: the first ``m`` of
    ``default_rng([seed, 2]).permutation(N)``, drawn in order."""
    S = np.zeros((permutations + 1, N), dtype=bool)
    S[0, :m] = True
    rng = np.random.default_rng([seed, 2])
    for p in range(1, permutations + 1):
        S[p, rng.permutation(N)[:m]] = True
    return S


def _statistic(q: np.ndarray, sr: np.ndarray, total: float, m: int, n: int, diag: float) -> np.ndarray:
    """Unbiased MMD² of each split from ``q = s·K·s``, ``sr = s·K·1`` and ``total = 1·K·1`` (kernel
    shifted by a constant; ``diag`` its diagonal value)."""
    xx = q - m * diag
    yy = total - 2.0 * sr + q - n * diag
    xy = sr - q
    return xx / (m * (m - 1.0)) + yy / (n * (n - 1.0)) - 2.0 * xy / (m * float(n))


def exact_block(Z: Any, ST: Any, a: int, b: int, gamma: float, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A task of the exact estimator: kernel rows ``[a, b)`` against the pooled rows ``j ≥ a`` (the
    upper triangle: K is symmetric), shifted by :data:`SHIFT`. ``ST``: membership, rows × splits.
    Returns (this block's share of ``s·K·s`` per split, the kernel sums of columns ``≥ a`` over all
    rows of the triangle — row sums of the block plus column sums below it — and the same over the
    observed REF rows)."""
    Z = np.asarray(Z)
    ST = np.asarray(ST)
    Zw = Z[a:].astype(dtype, copy=False)
    sq = np.einsum("ij,ij->i", Zw, Zw)
    G = Zw[:b - a] @ Zw.T
    G *= -2.0
    G += sq[:b - a, None]
    G += sq[None, :]
    np.maximum(G, 0.0, out=G)
    G *= -gamma
    np.exp(G, out=G)
    i = np.arange(b - a)
    G[i, i] = 1.0  # exactly 1 on the diagonal (a distance of 0)
    G -= np.asarray(SHIFT, dtype=dtype)
    SB = ST[a:b].astype(dtype)
    KS = G @ ST[a:].astype(dtype, copy=False)  # (b - a) x splits: row i's kernel sums over each split's REF rows j >= a
    KD = G[:, :b - a] @ SB  # the same over the block's own columns
    S64 = SB.astype(np.float64)
    q = 2.0 * np.einsum("ip,ip->p", KS.astype(np.float64), S64) - np.einsum("ip,ip->p", KD.astype(np.float64), S64)
    sums = G.sum(axis=0, dtype=np.float64)  # column sums over the block's rows
    sums[:b - a] = G.sum(axis=1, dtype=np.float64)  # the block's own rows: their row sums over j >= a
    xs = SB[:, 0].astype(dtype) @ G  # column sums over the block's observed REF rows
    xs = xs.astype(np.float64)
    xs[:b - a] = KS[:, 0]
    return q, sums, xs


@dataclass
class MMDNull:
    mmd2: float
    null: np.ndarray
    row_sums: np.ndarray  #: per pooled row: (sum over all columns, sum over REF columns) of the shifted kernel
    diag: float


def mmd_exact(engine: Any, Z: np.ndarray, m: int, sigma: float, permutations: int, seed: int,
              dtype: Optional[str] = None) -> MMDNull:
    """The exact estimator on pooled rows ``Z`` (REF = first ``m``): MMD², its permutation null and
    the per-row kernel sums (for the interval). float64 up to :data:`FLOAT64_MAX` pooled rows,
    float32 blocks beyond (``dtype`` forces one)."""
    N = len(Z)
    n = N - m
    dtype = dtype or ("float64" if N <= FLOAT64_MAX else "float32")
    S = permutation_members(N, m, permutations, seed)
    ST = np.ascontiguousarray(S.T).astype(dtype)
    gamma = 1.0 / (2.0 * sigma * sigma)
    z_ref, s_ref = engine.put(Z), engine.put(ST)
    q = np.zeros(permutations + 1)
    rows = np.zeros(N)
    xcols = np.zeros(N)
    tasks = [(z_ref, s_ref, a, min(a + BLOCK, N), gamma, dtype) for a in range(0, N, BLOCK)]
    for (_, _, a, _, _, _), (qp, r, x) in zip(tasks, engine.imap(exact_block, tasks)):
        q += qp
        rows[a:] += r
        xcols[a:] += x
    total = float(rows.sum())
    sr = S.astype(np.float64) @ rows
    stats = _statistic(q, sr, total, m, n, 1.0 - SHIFT)
    return MMDNull(float(stats[0]), stats[1:], np.stack([rows, xcols], axis=1), 1.0 - SHIFT)


def mmd_first_order_var(row_sums: np.ndarray, m: int, diag: float) -> float:
    """First-order variance of the unbiased MMD²: ``4·var(h_x)/m + 4·var(h_y)/n`` with
    ``h_x(i) = Σ_{j∈X, j≠i} k_ij/(m−1) − Σ_{j∈Y} k_ij/n`` and ``h_y`` alike."""
    N = len(row_sums)
    n = N - m
    rows, xs = row_sums[:, 0], row_sums[:, 1]
    hx = (xs[:m] - diag) / (m - 1) - (rows[:m] - xs[:m]) / n
    hy = (rows[m:] - xs[m:] - diag) / (n - 1) - xs[m:] / m
    return float(4.0 * hx.var(ddof=1) / m + 4.0 * hy.var(ddof=1) / n)


# ---- random Fourier features ------------------------------------------------------------------


def rff_params(dim: int, sigma: float, features: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``W`` (dim x D, N(0, σ⁻²)) and ``b`` (D, uniform on [0, 2π)), from ``default_rng([seed, 4])``."""
    rng = np.random.default_rng([seed, 4])
    W = (rng.standard_normal((dim, features)) / sigma).astype(np.float32)
    b = rng.uniform(0.0, 2.0 * math.pi, features).astype(np.float32)
    return W, b


def rff_features(X: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    Phi = X.astype(np.float32, copy=False) @ W
    Phi += b
    np.cos(Phi, out=Phi)
    Phi *= np.float32(math.sqrt(2.0 / W.shape[1]))
    return Phi


def rff_counts(N: int, m: int, permutations: int, seed: int, chunk: int = RFF_CHUNK) -> np.ndarray:
    """REF rows per chunk of each split (``(permutations + 1) x chunks``): row 0 the observed split,
    then a sequential hypergeometric split of ``m`` over the chunks (``default_rng([seed, 3])``)."""
    starts = list(range(0, N, chunk))
    C = np.zeros((permutations + 1, len(starts)), dtype=np.int64)
    rng = np.random.default_rng([seed, 3])
    left_x = np.full(permutations, m, dtype=np.int64)
    left = N
    for k, s in enumerate(starts):
        size = min(chunk, N - s)
        C[0, k] = max(0, min(m, s + size) - s)
        if size == left:
            take = left_x
        else:
            take = rng.hypergeometric(np.maximum(left_x, 0), np.maximum(left - left_x, 0), size) \
                if permutations else left_x
        C[1:, k] = take
        left_x = left_x - take
        left -= size
    return C


def rff_members(counts: np.ndarray, a: int, size: int, m: int, k: int, seed: int) -> np.ndarray:
    """Membership of chunk ``k`` (pooled rows ``[a, a + size)``) in every split: the observed REF
    rows for row 0, ``counts[p]`` uniform positions for split ``p`` (``default_rng([seed, 3, k])``)."""
    P = len(counts) - 1
    S = np.zeros((P + 1, size), dtype=bool)
    S[0, :max(0, min(m - a, size))] = True
    if P:
        keys = np.random.default_rng([seed, 3, k]).random((P, size))
        order = np.argsort(keys, axis=1)
        pick = np.arange(size)[None, :] < counts[1:, None]
        np.put_along_axis(S[1:], order, pick, axis=1)
    return S


def rff_chunk(ref: tuple[Part, ...], cur: tuple[Part, ...], m: int, a: int, b: int, k: int, counts: np.ndarray,
              W: np.ndarray, bias: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """A task of the rff estimator: features of pooled rows ``[a, b)``; per split the sum of its
    REF rows' features and squared norms; the chunk's total feature sum and squared norm."""
    Phi = rff_features(pooled_range(ref, cur, m, a, b), W, bias)
    S = rff_members(np.asarray(counts), a, b - a, m, k, seed).astype(np.float32)
    nrm = np.einsum("ij,ij->i", Phi, Phi, dtype=np.float64)
    return ((S @ Phi).astype(np.float64), S.astype(np.float64) @ nrm, Phi.sum(axis=0, dtype=np.float64),
            float(nrm.sum()))


def rff_h(ref: tuple[Part, ...], cur: tuple[Part, ...], m: int, n: int, a: int, b: int, W: np.ndarray,
          bias: np.ndarray, sx: np.ndarray, sy: np.ndarray) -> tuple[float, float, int, float, float, int]:
    """Second pass of the rff estimator: (Σh, Σh², count) of the first-order projections of the
    REF rows and of the CUR rows in ``[a, b)``."""
    Phi = rff_features(pooled_range(ref, cur, m, a, b), W, bias).astype(np.float64)
    nrm = np.einsum("ij,ij->i", Phi, Phi)
    px, py = Phi @ sx, Phi @ sy
    is_x = np.arange(a, b) < m
    hx = (px[is_x] - nrm[is_x]) / (m - 1) - py[is_x] / n
    hy = (py[~is_x] - nrm[~is_x]) / (n - 1) - px[~is_x] / m
    return float(hx.sum()), float((hx * hx).sum()), int(hx.size), float(hy.sum()), float((hy * hy).sum()), int(hy.size)


def mmd_rff(engine: Any, ref: Source, cur: Source, sigma: float, permutations: int, seed: int,
            features: int = FEATURES) -> tuple[MMDNull, float]:
    """The rff estimator: (MMD² and its null, first-order variance)."""
    m, n = ref.n, cur.n
    N = m + n
    W, bias = rff_params(ref.dim, sigma, features, seed)
    counts = rff_counts(N, m, permutations, seed)
    w_ref, b_ref = engine.put(W), engine.put(bias)
    tasks = [(ref.parts, cur.parts, m, a, min(a + RFF_CHUNK, N), k, counts[:, k], w_ref, b_ref, seed)
             for k, a in enumerate(range(0, N, RFF_CHUNK))]
    A = np.zeros((permutations + 1, features))
    nA = np.zeros(permutations + 1)
    T = np.zeros(features)
    nT = 0.0
    for a_, na_, t_, nt_ in engine.imap(rff_chunk, tasks):
        A += a_
        nA += na_
        T += t_
        nT += nt_
    B = T[None, :] - A
    nB = nT - nA
    stats = ((np.einsum("pd,pd->p", A, A) - nA) / (m * (m - 1.0)) + (np.einsum("pd,pd->p", B, B) - nB) / (n * (n - 1.0))
             - 2.0 * np.einsum("pd,pd->p", A, B) / (m * float(n)))
    sx, sy = A[0], B[0]
    parts = engine.map(rff_h, [(ref.parts, cur.parts, m, n, a, min(a + RFF_CHUNK, N), w_ref, b_ref, sx, sy)
                               for a in range(0, N, RFF_CHUNK)])
    s1x, s2x, cx, s1y, s2y, cy = (sum(p[i] for p in parts) for i in range(6))
    vx = (s2x - s1x * s1x / cx) / (cx - 1)
    vy = (s2y - s1y * s1y / cy) / (cy - 1)
    var1 = float(4.0 * vx / m + 4.0 * vy / n)
    return MMDNull(float(stats[0]), stats[1:], np.empty((0, 2)), 1.0), var1


def permutation_p(observed: float, null: np.ndarray) -> float:
    """``(1 + #{null ≥ observed}) / (1 + P)`` (a relative tolerance of 1e-12 for ties)."""
    tol = 1e-12 * max(1.0, abs(observed))
    return float((1 + np.count_nonzero(null >= observed - tol)) / (1 + null.size))


# ---- classifier test --------------------------------------------------------------------------


#: ridge penalty of the classifier (on rows scaled to unit RMS norm)
RIDGE = 1.0


def cross_fitted_scores(Z: np.ndarray, y: np.ndarray, folds: int, seed: int, permutations: int = 0,
                        ridge: float = RIDGE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(out-of-fold scores of the observed labels, fold of each row, cross-fitted AUC under each of
    ``permutations`` label permutations).

    The classifier is ridge regression on ±1 labels with an intercept (scikit-learn's
    ``RidgeClassifier(alpha=ridge)``), on the rows divided by their pooled root-mean-square norm (one
    scalar: the geometry is kept, the penalty does not depend on the embedding's scale), fitted on
    ``folds − 1`` folds (``KFold(shuffle=True, random_state=seed)``: the folds do not depend on the
    labels) and scoring the held-out fold. Its out-of-fold scores are linear in the labels, so the
    same fits score every permuted label vector (``default_rng([seed, 6])``) at the cost of a matrix
    product: an exact permutation null of the cross-fitted AUC, every fold refitted."""
    from sklearn.model_selection import KFold

    rms = math.sqrt(float(np.einsum("ij,ij->", Z, Z)) / max(len(Z), 1))
    Zs = np.asarray(Z / rms if rms > 0 else Z, dtype=np.float64)
    N, d = Zs.shape
    t = np.where(np.asarray(y) == 1, 1.0, -1.0)
    fits = []
    fold_of = np.empty(N, dtype=np.int64)
    for f, (tr, te) in enumerate(KFold(n_splits=folds, shuffle=True, random_state=seed).split(Zs)):
        mu = Zs[tr].mean(axis=0)
        Xc = Zs[tr] - mu
        A = Xc.T @ Xc
        A[np.diag_indices(d)] += ridge
        fits.append((tr, te, Xc, Zs[te] - mu, np.linalg.inv(A)))
        fold_of[te] = f

    def oof(T: np.ndarray) -> np.ndarray:  # (N, c) label columns → (N, c) out-of-fold scores
        out = np.empty_like(T)
        for tr, te, Xc, Xte, Ainv in fits:
            Ttr = T[tr]
            tbar = Ttr.mean(axis=0)
            out[te] = Xte @ (Ainv @ (Xc.T @ (Ttr - tbar))) + tbar
        return out

    scores = oof(t[:, None])[:, 0]
    rng = np.random.default_rng([seed, 6])
    null = np.empty(permutations)
    step = max(1, min(permutations, 4_000_000 // max(N, 1)))
    for s in range(0, permutations, step):
        c = min(step, permutations - s)
        T = np.empty((N, c))
        for j in range(c):
            T[:, j] = t[rng.permutation(N)]
        null[s:s + c] = auc_columns(oof(T), T > 0)
    return scores, fold_of, null


def auc_columns(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """AUC of each column of ``scores`` ``(N, c)`` with the positives of the same column of
    ``positive`` (bool ``(N, c)``), midranks for ties."""
    from scipy.stats import rankdata

    R = np.asarray(rankdata(scores, axis=0), dtype=np.float64)
    n1 = positive.sum(axis=0)
    n0 = positive.shape[0] - n1
    return ((R * positive).sum(axis=0) - n1 * (n1 + 1) / 2.0) / (n0 * n1)


def _midranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return np.asarray(rankdata(x), dtype=np.float64)


def delong(pos: np.ndarray, neg: np.ndarray) -> tuple[float, float]:
    """(AUC, its DeLong variance) of scores ``pos`` (positives) against ``neg`` (Sun & Xu 2014:
    placement values from midranks, O(N log N)).

    >>> auc, var = delong(np.array([0.9, 0.8, 0.3]), np.array([0.1, 0.4, 0.35]))
    >>> round(auc, 4), round(var, 4)
    (0.7778, 0.0617)
    """
    m, n = len(pos), len(neg)
    tz = _midranks(np.concatenate([pos, neg]))
    tx, ty = _midranks(pos), _midranks(neg)
    auc = (tz[:m].sum() - m * (m + 1) / 2.0) / (m * float(n))
    v10 = (tz[:m] - tx) / n  # per positive: share of negatives below it (ties ½)
    v01 = 1.0 - (tz[m:] - ty) / m  # per negative: share of positives above it
    var = v10.var(ddof=1) / m + v01.var(ddof=1) / n
    return float(auc), float(var)


# ---- attribution ------------------------------------------------------------------------------


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson score 95 % interval of the proportion ``k / n``."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = Z95 * Z95
    den = 1 + z2 / n
    mid = (p + z2 / (2 * n)) / den
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """Newcombe's hybrid score 95 % interval (method 10) of ``k2/n2 − k1/n1`` (independent samples).

    >>> [round(v, 4) for v in newcombe(56, 70, 48, 80)]   # Newcombe (1998), table II: 0.0524, 0.3339 for p1 − p2
    [-0.3339, -0.0524]
    """
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1)
    l2, u2 = wilson(k2, n2)
    d = p2 - p1
    lo = d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
    hi = d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    return lo, hi


def fisher_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test that a cluster holds the same share of REF (``k1``
    of ``n1`` rows) and of CUR (``k2`` of ``n2``): the 2 x 2 table (cluster, rest) x (REF, CUR)
    (``scipy.stats.fisher_exact``: the tables at most as likely as the observed one under the
    hypergeometric law of the cluster's CUR count given its size). Under no drift a random split
    of the pooled rows makes that law exact, whatever clustering of the pooled rows was made.

    >>> round(fisher_p(3, 10, 7, 10), 4)
    0.1789
    """
    from scipy.stats import fisher_exact

    return float(fisher_exact([[k1, k2], [n1 - k1, n2 - k2]], alternative="two-sided").pvalue)


def holm(p: Any) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control under any dependence):
    with ``p`` sorted ascending, ``adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``, returned in
    the input order; a hypothesis is rejected at level α when its adjusted p-value is ≤ α.

    >>> holm([0.01, 0.04, 0.03, 0.5]).tolist()
    [0.04, 0.09, 0.09, 0.5]
    """
    p = np.asarray(p, dtype=np.float64)
    m = p.size
    order = np.argsort(p, kind="stable")
    steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adj = np.empty(m)
    adj[order] = np.maximum.accumulate(steps)
    return adj


def cluster_flags(counts: Any, n_ref: int, n_cur: int, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(raw p, Holm-adjusted p, moved) of clusters with ``counts`` (``(REF rows, CUR rows)`` per
    cluster) out of ``n_ref`` / ``n_cur``: Fisher's exact p per cluster (:func:`fisher_p`), Holm over
    the clusters (:func:`holm`), moved when the adjusted p-value is below ``alpha``."""
    raw = np.array([fisher_p(int(kr), n_ref, int(kc), n_cur) for kr, kc in counts], dtype=np.float64)
    adj = holm(raw)
    return raw, adj, adj < alpha


def kmeans_clusters(Z: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(cluster of each row, the row nearest each centre): ``sklearn.cluster.KMeans(k,
    random_state=seed, n_init=3)`` on the rows."""
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=k, random_state=seed, n_init=3).fit(Z)
    lab = km.labels_.astype(np.int64)
    d = km.transform(Z)
    nearest = np.array([int(np.flatnonzero(lab == c)[np.argmin(d[lab == c, c])]) if (lab == c).any() else -1
                        for c in range(k)])
    return lab, nearest


def stratified_rows(m: int, n: int, cap: int, seed: int) -> np.ndarray:
    """Pooled row indices the classifier sees: all when ``m + n ≤ cap``, else a seeded sample of
    each side in proportion (``default_rng([seed, 5])``), sorted."""
    N = m + n
    if N <= cap:
        return np.arange(N)
    rng = np.random.default_rng([seed, 5])
    km = max(MIN_ROWS, int(round(cap * m / N)))
    kn = max(MIN_ROWS, cap - km)
    return np.sort(np.concatenate([rng.choice(m, km, replace=False), m + rng.choice(n, kn, replace=False)]))


# ---- decisions --------------------------------------------------------------------------------


def decide(p: Optional[float], ci: Optional[list[float]], null_value: float, margin: Optional[float],
           mde: Optional[float], alpha: float) -> str:
    """The verdict of one test: ``no-drift`` when the 95 % interval lies below ``margin`` (the
    change, if any, is immaterial), ``drift`` when the test rejects (p < ``alpha``),
    ``underpowered`` when the minimum detectable effect exceeds the margin's distance from the
    null value, else ``inconclusive`` (without a margin, no-drift cannot be shown).

    >>> decide(0.001, [0.6, 0.7], 0.5, None, 0.02, 0.025), decide(0.3, [0.49, 0.52], 0.5, 0.55, 0.02, 0.025)
    ('drift', 'no-drift')
    >>> decide(0.3, [0.45, 0.6], 0.5, 0.55, 0.1, 0.025), decide(0.3, [0.45, 0.6], 0.5, None, 0.1, 0.025)
    ('underpowered', 'inconclusive')
    """
    if margin is not None and ci is not None and all(math.isfinite(v) for v in ci) and ci[1] < margin:
        return "no-drift"
    if p is not None and p < alpha:
        return "drift"
    if margin is not None and mde is not None and mde > margin - null_value:
        return "underpowered"
    return "inconclusive"


def min_detectable(se: float) -> float:
    """Smallest true effect found with 80 % power at two-sided α 0.05: ``(z₀.₉₇₅ + z₀.₈₀)·se``."""
    return (Z95 + Z80) * se
