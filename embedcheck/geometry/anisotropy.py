"""The anisotropy check: matched cosine against a permutation floor, raw and mean-centred.

Most encoders put every vector near one shared direction, so an unrelated pair already scores
a high raw cosine. This module makes a matched-pair comparison carry its own floor (seed skill
``003``). Definitions — the skill ships no script, so these are embedcheck's and
``scripts/anisotropy_check.py`` (numpy only) implements the same ones independently:

* **Unit rows.** Every row of A, B and the fit files is L2-normalised first (with ``map_fit``,
  A's unit rows are mapped into B's space and normalised again).
* **Means.** By default each side's mean is the mean of its own unit compared rows; ``fit_a`` /
  ``fit_b`` fit it on those (train) rows instead; ``shared=True`` uses one mean for both sides,
  the mean of the union of both sides' fit rows (the compared rows of a side without a fit file).
* **anisotropy** of a side: the mean cosine between different rows of that side, exact in O(n·d)
  as ``(||Σu||² − Σ||u||²) / (n(n−1))``.
* **raw** compares unit rows; **centred** compares unit rows minus the side's mean, normalised
  again (cosine of the centred vectors). For each: ``matched`` = mean_i cos(a_i, b_i); unrelated
  pairs are (a_i, b_π(i)) over ``perms`` derangements π (drawn with
  ``np.random.default_rng(seed)``: ``rng.permutation(n)`` redrawn until no i maps to itself; the
  same derangements for raw and centred); ``floor`` = their mean cosine, ``floor_sd`` = the sd
  (ddof=1) of all unrelated cosines pooled, ``gap`` = matched − floor, ``gap_over_floor_sd`` =
  gap / floor_sd (``None`` when floor_sd < 1e-12: the floor has no spread, read the plain gap),
  ``gap_se`` = sd_i(matched_i − mean_p unrelated_p,i)/sqrt(n) (rows are the independent units),
  ``gap_ci95`` = gap ± 1.96·gap_se and ``min_detectable_gap`` = 2.80·gap_se (the smallest gap a
  two-sided test at α = 0.05 finds with 80 % power — the skill asks for the gap "with its spread
  and the smallest effect the test could have detected"),
  ``cohens_d`` = gap / sqrt((var_matched + var_unrelated) / 2) (ddof=1; ``None`` when that is
  < 1e-12), ``floor_share`` = floor / matched (the skill's "an unrelated pair already scores 70 %
  of what the matching pair scores"; ``None`` when matched ≤ 0), ``partner_ranked_first`` = the
  fraction of rows i whose cos(a_i, b_i) is strictly greater than every cos(a_i, b_j), j ≠ i.
  Ties are not first: a partner within 1e-12 (``TIE``) of the best other row does not count.
  Chance is 1/n (``partner_first_by_chance``).
* **warning** when a side's anisotropy exceeds 0.3; **note** when a mean is fitted on fewer than
  1,000 rows.

``partner_ranked_first`` is computed in row blocks (never an n×n matrix): one float32 GEMM per
block pair gives the raw cosines, and the centred ones follow from them by a rank-one correction,
``(a−μa)·(b−μb) = a·b − a·μb − μa·b + μa·μb``. Rows whose float32 margin lies within a rigorous
rounding bound of zero are re-decided exactly in float64, so the counts equal a float64 brute
force. Memory: one float32 copy of B's unit rows plus O(block · key_block).

Worked example (two matched pairs, identity-like rows):

>>> import numpy as np
>>> A = np.array([[1.0, 0.0], [0.0, 1.0]]); B = np.array([[1.0, 0.1], [0.1, 1.0]])
>>> r = check(A, B, perms=1, seed=0)
>>> round(r["raw"]["matched"], 4), round(r["raw"]["floor"], 4), r["raw"]["partner_ranked_first_count"]
(0.995, 0.0995, 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

import numpy as np

from ..errors import InputError
from ..result import Result, hidden, optional
from .intervals import normal_mean_ci, wilson_ci

#: anisotropy above this triggers the skill's warning
WARN_ANISOTROPY = 0.3
#: a mean fitted on fewer rows than this triggers the note
NOTE_MIN_FIT_ROWS = 1000
#: a spread below this is "no spread" (gap_over_floor_sd, cohens_d are then null)
ZERO_SD = 1e-12
#: cosines within this of each other are tied; a tied partner is not ranked first
TIE = 1e-12
#: rows per block when streaming
CHUNK = 2048
_U32 = float(np.finfo(np.float32).eps) / 2  # unit roundoff of float32

Progress = Optional[Callable[[int, int], None]]


# --------------------------------------------------------------------------------------------
# rows


class UnitRows:
    """Float64 unit rows of a matrix (memmap fine), read by block; optionally mapped by ``W``.

    With ``W`` (d_a × d_b), a row is normalised, multiplied by ``W`` and normalised again.

    >>> UnitRows(np.array([[3.0, 4.0]]), "A").get(slice(0, 1))
    array([[0.6, 0.8]])
    """

    def __init__(self, X: Any, name: str, W: Optional[np.ndarray] = None):
        self.X, self.name, self.W = X, name, W
        self.n = int(X.shape[0])
        self.dim = int(X.shape[1] if W is None else W.shape[1])

    def get(self, idx: Any) -> np.ndarray:
        U = np.array(self.X[idx], dtype=np.float64)
        U = _normalise(U, self.name, idx)
        if self.W is not None:
            U = _normalise(U @ self.W, f"{self.name} (mapped)", idx)
        return U

    def blocks(self, chunk: int = CHUNK):
        for start in range(0, self.n, chunk):
            sl = slice(start, min(start + chunk, self.n))
            yield sl, self.get(sl)


def _norms(U: np.ndarray) -> np.ndarray:
    return np.sqrt(np.einsum("ij,ij->i", U, U))


def _normalise(U: np.ndarray, name: str, idx: Any) -> np.ndarray:
    norms = _norms(U)
    bad = ~(norms > 0)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        row = (idx.start or 0) + k if isinstance(idx, slice) else int(np.asarray(idx)[k])
        raise InputError(f"row {row} of {name} has length zero and no direction")
    U /= norms[:, None]
    return U


def _centre(U: np.ndarray, mu: np.ndarray, name: str, offset: Any) -> tuple[np.ndarray, np.ndarray]:
    """(unit rows of U − mu, their lengths before normalising)."""
    C = U - mu
    norms = _norms(C)
    bad = norms < ZERO_SD
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        row = offset + k if isinstance(offset, int) else int(np.asarray(offset)[k])
        raise InputError(f"row {row} of {name} coincides with its side's mean; its centred cosine is undefined")
    C /= norms[:, None]
    return C, norms


def unit_sum(rows: UnitRows, chunk: int = CHUNK) -> tuple[np.ndarray, float, int]:
    """(Σ unit rows, Σ ||u||², n) in float64, streamed."""
    s = np.zeros(rows.dim)
    ssq = 0.0
    for _, U in rows.blocks(chunk):
        s += U.sum(axis=0)
        ssq += float(np.einsum("ij,ij->", U, U))
    return s, ssq, rows.n


def anisotropy_from_sum(s: np.ndarray, ssq: float, n: int) -> float:
    """Mean cosine over ordered pairs i ≠ j: (||Σu||² − Σ||u||²) / (n(n−1)).

    >>> U = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    >>> anisotropy_from_sum(U.sum(0), 3.0, 3)   # pairs: 0, 1, 0 (each twice) → 1/3
    0.3333333333333333
    """
    return float((s @ s - ssq) / (n * (n - 1)))


def derangements(n: int, perms: int, seed: int) -> np.ndarray:
    """``perms`` derangements of ``range(n)`` (shape perms × n), seeded.

    Each is ``rng.permutation(n)`` with ``rng = np.random.default_rng(seed)``, redrawn until no
    i maps to itself (uniform over derangements; ~e draws each).

    >>> derangements(2, 1, 0).tolist()
    [[1, 0]]
    """
    if n < 2:
        raise InputError(f"derangements need at least 2 rows, got {n}")
    rng = np.random.default_rng(seed)
    out = np.empty((perms, n), dtype=np.int64)
    ar = np.arange(n)
    for p in range(perms):
        while True:
            pi = rng.permutation(n)
            if not np.any(pi == ar):
                break
        out[p] = pi
    return out


# --------------------------------------------------------------------------------------------
# partner ranked first (blocked)


def _exact_maxoff(ra: UnitRows, rb: UnitRows, mu_a: np.ndarray, mu_b: np.ndarray, rows: np.ndarray,
                  key_block: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 max over j ≠ i of raw and centred cos(a_i, b_j) for the given rows i."""
    UA = ra.get(rows)
    CA, _ = _centre(UA, mu_a, ra.name, rows)
    mr = np.full(len(rows), -np.inf)
    mc = np.full(len(rows), -np.inf)
    for start in range(0, rb.n, key_block):
        stop = min(start + key_block, rb.n)
        UB = rb.get(slice(start, stop))
        CB, _ = _centre(UB, mu_b, rb.name, start)
        max_off_block(UA, CA, UB, CB, rows, start, mr, mc)
    return mr, mc


def max_off_block(UA: np.ndarray, CA: np.ndarray, UB: np.ndarray, CB: np.ndarray, rows: np.ndarray,
                  start: int, mr: np.ndarray, mc: np.ndarray) -> None:
    """Fold one block of candidates (B's rows ``start:start + len(UB)``, raw ``UB`` and centred
    ``CB``) into the running float64 maxima ``mr`` / ``mc`` of each query row's cosine to every
    other row (a query's own partner, row ``rows[i]``, is left out)."""
    S = UA @ UB.T
    Sc = CA @ CB.T
    hit = np.flatnonzero((rows >= start) & (rows < start + UB.shape[0]))
    S[hit, rows[hit] - start] = -np.inf
    Sc[hit, rows[hit] - start] = -np.inf
    np.maximum(mr, S.max(axis=1), out=mr)
    np.maximum(mc, Sc.max(axis=1), out=mc)


def partner_ranked_first(
    A: Any,
    B: Any,
    mean_a: Optional[np.ndarray] = None,
    mean_b: Optional[np.ndarray] = None,
    *,
    block: int = 1024,
    key_block: Optional[int] = None,
    exact: bool = False,
    progress: Progress = None,
) -> dict[str, int]:
    """Count rows whose partner is ranked first, raw and centred, in bounded memory.

    ``A``/``B`` are raw arrays (normalised here) or :class:`UnitRows`. ``mean_a``/``mean_b``
    default to each side's mean unit row. Returns ``{"raw", "centred", "n", "rechecked"}``:
    counts of i with cos(a_i, b_i) > max_{j≠i} cos(a_i, b_j) + ``TIE``; ``rechecked`` is the
    number of rows re-decided in float64 because their float32 margin was within the rounding
    bound (``exact=True`` re-decides every row: the slow reference path).

    Float32 bounds used: a dot product of float32-rounded unit vectors is off by at most
    ε = (d+2)u/(1−(d+2)u); the centred values (S + r_i)·w_j + z_j, computed in float32, add
    u(4 + 5|r_i| + 2|q_j|) before scaling by w_j = 1/|b_j − μb| and 1/|a_i − μa|. A row is
    re-decided when |margin| ≤ 2× its bound.

    >>> A = np.eye(3); B = np.eye(3) + 0.1
    >>> partner_ranked_first(A, B, block=2)["raw"]
    3
    """
    ra = A if isinstance(A, UnitRows) else UnitRows(A, "A")
    rb = B if isinstance(B, UnitRows) else UnitRows(B, "B")
    n, d = ra.n, ra.dim
    if rb.n != n or rb.dim != d:
        raise InputError(f"A has shape ({n}, {d}) but B has ({rb.n}, {rb.dim})")
    if block < 1:
        raise InputError(f"block must be ≥ 1, got {block}")
    key_block = key_block or 4 * block
    if mean_a is None:
        mean_a = unit_sum(ra)[0] / n
    if mean_b is None:
        mean_b = unit_sum(rb)[0] / n
    mu_a = np.asarray(mean_a, dtype=np.float64)
    mu_b = np.asarray(mean_b, dtype=np.float64)
    c = float(mu_a @ mu_b)

    # pass over B: float32 unit rows, q_j = μa·b_j, w_j = 1/|b_j − μb|, z_j = −q_j w_j
    B32 = np.empty((n, d), dtype=np.float32)
    q = np.empty(n)
    w = np.empty(n)
    for sl, UB in rb.blocks(CHUNK):
        B32[sl] = UB
        q[sl] = UB @ mu_a
        _, nb = _centre(UB, mu_b, rb.name, sl.start)
        w[sl] = 1.0 / nb
    z = -q * w
    w32, z32 = w.astype(np.float32), z.astype(np.float32)
    eps = (d + 2) * _U32 / (1 - (d + 2) * _U32)
    wmax = float(w.max())
    qmax = float(np.abs(q).max())

    count_raw = count_cen = 0
    recheck: list[np.ndarray] = []
    recheck_dr: list[np.ndarray] = []
    recheck_dc: list[np.ndarray] = []
    for i0 in range(0, n, block):
        i1 = min(i0 + block, n)
        UA = ra.get(slice(i0, i1))
        UB = rb.get(slice(i0, i1))
        CA, na = _centre(UA, mu_a, ra.name, i0)
        CB, _ = _centre(UB, mu_b, rb.name, i0)
        d_raw = np.einsum("ij,ij->i", UA, UB)
        d_cen = np.einsum("ij,ij->i", CA, CB)
        if exact:
            rows = np.arange(i0, i1)
            recheck.append(rows)
            recheck_dr.append(d_raw)
            recheck_dc.append(d_cen)
            if progress:
                progress(i1, n)
            continue
        r = c - UA @ mu_b
        r32 = r.astype(np.float32)[:, None]
        A32 = UA.astype(np.float32)
        mr = np.full(i1 - i0, -np.inf, dtype=np.float32)
        mc = np.full(i1 - i0, -np.inf, dtype=np.float32)
        for j0 in range(0, n, key_block):
            j1 = min(j0 + key_block, n)
            S = A32 @ B32[j0:j1].T
            lo, hi = max(i0, j0), min(i1, j1)
            if lo < hi:
                k = np.arange(lo, hi)
                S[k - i0, k - j0] = -np.inf
            np.maximum(mr, S.max(axis=1), out=mr)
            S += r32
            S *= w32[j0:j1]
            S += z32[j0:j1]
            np.maximum(mc, S.max(axis=1), out=mc)
        g_raw = 2 * eps
        g_cen = 2 * (eps + _U32 * (4 + 5 * np.abs(r) + 2 * qmax)) * wmax / na
        m_raw = d_raw - mr.astype(np.float64)
        m_cen = d_cen - mc.astype(np.float64) / na
        count_raw += int(np.count_nonzero(m_raw > g_raw))
        count_cen += int(np.count_nonzero(m_cen > g_cen))
        unsure = (np.abs(m_raw) <= g_raw) | (np.abs(m_cen) <= g_cen)
        if unsure.any():
            k = np.flatnonzero(unsure)
            # undo the fast decision for these rows; they are re-decided exactly below
            count_raw -= int(np.count_nonzero(m_raw[k] > g_raw))
            count_cen -= int(np.count_nonzero(m_cen[k] > g_cen[k]))
            recheck.append(i0 + k)
            recheck_dr.append(d_raw[k])
            recheck_dc.append(d_cen[k])
        if progress:
            progress(i1, n)

    rechecked = 0
    if recheck:
        rows_all = np.concatenate(recheck)
        dr_all = np.concatenate(recheck_dr)
        dc_all = np.concatenate(recheck_dc)
        rechecked = len(rows_all)
        for s in range(0, rechecked, block):
            rows = rows_all[s:s + block]
            mr64, mc64 = _exact_maxoff(ra, rb, mu_a, mu_b, rows, key_block)
            count_raw += int(np.count_nonzero(dr_all[s:s + block] > mr64 + TIE))
            count_cen += int(np.count_nonzero(dc_all[s:s + block] > mc64 + TIE))
    return {"raw": count_raw, "centred": count_cen, "n": n, "rechecked": rechecked}


# --------------------------------------------------------------------------------------------
# orthogonal map for two different models


@dataclass(kw_only=True)
class MapFit(Result):
    """An orthogonal (or semi-orthogonal) map W from A's space onto B's: rows map as ``a @ W``."""

    W: np.ndarray = hidden()
    method: str
    train_rows: int
    dim_a: int
    dim_b: int
    train_matched: float
    train_matched_unmapped: Optional[float]


def fit_orthogonal_map(train_a: Any, train_b: Any) -> MapFit:
    """Orthogonal Procrustes from A's space onto B's on paired unit training rows.

    Equal dimensions: ``scipy.linalg.orthogonal_procrustes`` (W orthogonal, minimises
    ||A W − B||_F). Different dimensions: W = U Vᵀ from the thin SVD of A_trainᵀ B_train, the
    d_a × d_b semi-orthogonal map maximising tr(Wᵀ AᵀB) — orthonormal rows when d_a < d_b (an
    isometry into B's space), orthonormal columns when d_a > d_b (a projection; mapped rows are
    normalised again). Quality: ``train_matched`` = mean cos(a_i W, b_i) on the training pairs.

    >>> R = np.array([[0.0, 1.0], [-1.0, 0.0]]); X = np.array([[1.0, 0.2], [0.3, 1.0], [1.0, -1.0]])
    >>> m = fit_orthogonal_map(X, X @ R)
    >>> bool(np.allclose(m.W, R)), round(m.train_matched, 6)
    (True, 1.0)
    """
    ta, tb = UnitRows(train_a, "--map-fit TRAIN_A"), UnitRows(train_b, "--map-fit TRAIN_B")
    if ta.n != tb.n:
        raise InputError(f"--map-fit: TRAIN_A has {ta.n} rows but TRAIN_B has {tb.n}; the rows must be paired")
    if ta.n < 2:
        raise InputError(f"--map-fit needs at least 2 paired training rows, got {ta.n}")
    Ua, Ub = ta.get(slice(None)), tb.get(slice(None))
    if ta.dim == tb.dim:
        from scipy.linalg import orthogonal_procrustes

        W, _ = orthogonal_procrustes(Ua, Ub)
        method = "orthogonal_procrustes"
        unmapped = float(np.mean(np.einsum("ij,ij->i", Ua, Ub)))
    else:
        U, _, Vt = np.linalg.svd(Ua.T @ Ub, full_matrices=False)
        W = U @ Vt
        method = "semi-orthogonal (thin SVD of A_train^T B_train)"
        unmapped = None
    M = _normalise(Ua @ W, "--map-fit TRAIN_A (mapped)", slice(0, ta.n))
    return MapFit(W=W, method=method, train_rows=ta.n, dim_a=int(W.shape[0]), dim_b=int(W.shape[1]),
                  train_matched=float(np.mean(np.einsum("ij,ij->i", M, Ub))),
                  train_matched_unmapped=unmapped)


# --------------------------------------------------------------------------------------------
# the exact floor: every unrelated pair, from Gram terms (mergeable partial sums)


def floor_partials(block_a: np.ndarray, block_b: np.ndarray) -> dict[str, Any]:
    """Partial sums of a block of paired unit rows (row i of A pairs with row i of B) from which
    :func:`floor_finish` gives the exact mean and sd of cos(a_i, b_j) over all ordered pairs
    i ≠ j. Partials of disjoint blocks (or shards) add up: :func:`floor_merge`.

    Keys: ``n``; ``sum_a``, ``sum_b`` (Σ rows); ``gram_a``, ``gram_b`` (Σ a aᵀ, Σ b bᵀ, d x d);
    ``diag`` = Σ_i a_i·b_i and ``diag_sq`` = Σ_i (a_i·b_i)², all float64.
    """
    a = np.asarray(block_a, dtype=np.float64)
    b = np.asarray(block_b, dtype=np.float64)
    dots = np.einsum("ij,ij->i", a, b)
    return {"n": int(a.shape[0]), "sum_a": a.sum(axis=0), "sum_b": b.sum(axis=0),
            "gram_a": a.T @ a, "gram_b": b.T @ b, "diag": float(dots.sum()), "diag_sq": float(dots @ dots)}


def floor_merge(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sum of :func:`floor_partials` of disjoint blocks (in any order, e.g. over shards)."""
    out: Optional[dict[str, Any]] = None
    for p in parts:
        if out is None:
            out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in p.items()}
        else:
            for k, v in p.items():
                out[k] = out[k] + v
    if out is None:
        raise ValueError("floor_merge needs at least one partial")
    return out


def floor_finish(p: dict[str, Any]) -> tuple[float, float]:
    """(mean, sd) of the cosine over all n(n−1) ordered unrelated pairs (population sd):
    Σ_{i≠j} a_i·b_j = S_a·S_b − Σ_i a_i·b_i and Σ_{i≠j} (a_i·b_j)² = tr(G_a G_b) − Σ_i (a_i·b_i)².

    >>> A = np.eye(3); B = np.roll(np.eye(3), 1, axis=1)   # b_j = e_{j+1}: a_i·b_j = [i == j+1]
    >>> floor_finish(floor_partials(A, B))                   # 3 of 6 unrelated pairs score 1
    (0.5, 0.5)
    """
    n = p["n"]
    pairs = float(n) * (n - 1)
    if pairs <= 0:
        raise ValueError("the exact floor needs at least 2 rows")
    s1 = float(p["sum_a"] @ p["sum_b"]) - p["diag"]
    s2 = float(np.einsum("ij,ij->", p["gram_a"], p["gram_b"])) - p["diag_sq"]
    mean = s1 / pairs
    return mean, math.sqrt(max(s2 / pairs - mean * mean, 0.0))


# --------------------------------------------------------------------------------------------
# the check


#: z_{0.975} + z_{0.80}: the smallest gap a two-sided test at alpha = 0.05 detects with 80 % power
DETECTABLE_Z = 1.959963984540054 + 0.8416212335729143


#: how the intervals of a section are made (no resampling: closed forms over the rows)
SECTION_CI_METHOD = ("matched_ci95 and gap_ci95: normal, mean ± 1.96·sd/√n over rows (rows independent); "
                     "partner_ranked_first_ci95: Wilson score interval over the n rows")


@dataclass(kw_only=True)
class Section(Result):
    """The figures of one view (raw or centred); keys as documented in the module docstring."""

    matched: float
    matched_ci95: Optional[list[float]] = optional()
    floor: float
    floor_sd: float
    floor_exact: Optional[float] = optional()
    floor_exact_sd: Optional[float] = optional()
    gap: float
    gap_se: float
    gap_ci95: list[float]
    min_detectable_gap: float
    gap_over_floor_sd: Optional[float]
    gap_over_floor_exact_sd: Optional[float] = optional()
    cohens_d: Optional[float]
    floor_share: Optional[float]
    floor_share_exact: Optional[float] = optional()
    partner_ranked_first: float
    partner_ranked_first_ci95: Optional[list[float]] = optional()
    partner_ranked_first_count: int
    unrelated_pairs: int
    ci_method: str = SECTION_CI_METHOD


@dataclass(kw_only=True)
class AnisotropyResult(Result):
    n: int
    dim: int
    means: dict[str, dict[str, Any]]
    anisotropy: dict[str, float]
    raw: Section
    centred: Section
    partner_first_by_chance: float
    reading: str = ""
    warning: Optional[str] = None
    note: Optional[str] = None
    map: Optional[MapFit] = optional()


def _section(matched: np.ndarray, unrelated_by_perm: np.ndarray, first: int, n: int,
             exact: Optional[tuple[float, float]] = None) -> Section:
    """Figures for one view (raw or centred). ``unrelated_by_perm`` is (perms, n): row i's unrelated
    cosine under each derangement. The gap's spread treats rows as the independent units: with
    d_i = matched_i − mean_p unrelated_{p,i}, gap = mean(d) and gap_se = sd(d)/sqrt(n).
    ``exact`` = (mean, sd) of the exact floor over all unrelated pairs (:func:`floor_finish`)."""
    unrelated = unrelated_by_perm.ravel()
    m = float(matched.mean())
    floor = float(unrelated.mean())
    floor_sd = float(unrelated.std(ddof=1)) if unrelated.size > 1 else 0.0
    gap = m - floor
    var_m = float(matched.var(ddof=1))
    pooled = math.sqrt((var_m + floor_sd ** 2) / 2)
    per_row = matched - unrelated_by_perm.mean(axis=0)
    gap_se = float(per_row.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    sec = Section(
        matched=m,
        matched_ci95=normal_mean_ci(matched),
        floor=floor,
        floor_sd=floor_sd,
        gap=gap,
        gap_se=gap_se,
        gap_ci95=[gap - 1.959963984540054 * gap_se, gap + 1.959963984540054 * gap_se],
        min_detectable_gap=DETECTABLE_Z * gap_se,
        gap_over_floor_sd=gap / floor_sd if floor_sd >= ZERO_SD else None,
        cohens_d=gap / pooled if pooled >= ZERO_SD else None,
        floor_share=floor / m if m > 0 else None,
        partner_ranked_first=first / n,
        partner_ranked_first_ci95=wilson_ci(int(first), n),
        partner_ranked_first_count=int(first),
        unrelated_pairs=int(unrelated.size),
    )
    if exact is not None:
        fe, fsd = exact
        sec.floor_exact, sec.floor_exact_sd = fe, fsd
        sec.gap_over_floor_exact_sd = (m - fe) / fsd if fsd >= ZERO_SD else None
        sec.floor_share_exact = fe / m if m > 0 else None
    return sec


def _gap_words(sec: dict[str, Any]) -> str:
    if sec["gap_over_floor_sd"] is None:
        return f"a plain {sec['gap']:.4f} (the floor has no spread)"
    return f"{sec['gap_over_floor_sd']:.2f} floor sd"


def reading(report: dict[str, Any]) -> str:
    """One or two plain sentences in the skill's words (floor share, gap in floor sd, partner first)."""
    raw, cen, n = report["raw"], report["centred"], report["n"]
    if raw["floor"] <= 0 and raw["matched"] > 0:
        s1 = (f"Before centring an unrelated pair scores {raw['floor']:.4f}, at or below zero, against "
              f"{raw['matched']:.4f} for the matched pair.")
    elif raw["floor_share"] is not None:
        s1 = (f"Before centring an unrelated pair already scores {100 * raw['floor_share']:.0f}% of what "
              f"the matched pair scores (floor {raw['floor']:.4f}, matched {raw['matched']:.4f}).")
    else:
        s1 = (f"Before centring the matched pairs average {raw['matched']:.4f}, not above zero, so the "
              f"floor share is undefined (floor {raw['floor']:.4f}).")
    s2 = (f"The matched-minus-floor gap is {_gap_words(raw)} raw and {_gap_words(cen)} centred, and the "
          f"partner ranks first for {raw['partner_ranked_first_count']} and "
          f"{cen['partner_ranked_first_count']} of {n} rows (chance 1/{n}).")
    weak = [name for name, sec in (("raw", raw), ("centred", cen)) if abs(sec["gap"]) < sec["min_detectable_gap"]]
    s3 = ""
    if weak:
        s3 = (f" The {' and '.join(weak)} gap is below the smallest gap this comparison could detect "
              f"({(raw if weak[0] == 'raw' else cen)['min_detectable_gap']:.4f}, 80% power at alpha 0.05): "
              "it is underpowered, not a refutation.")
    return f"{s1} {s2}{s3}"


def _warning(aniso: dict[str, float]) -> Optional[str]:
    high = [f"side {k.upper()} ({v:.4f})" for k, v in aniso.items() if v > WARN_ANISOTROPY]
    if not high:
        return None
    return (f"anisotropy above {WARN_ANISOTROPY} on {' and '.join(high)}: rows cluster strongly around a "
            "mean direction; check raw.floor for how much of it is shared across sides and report the raw "
            "and centred matched-versus-floor readings side by side")


def _note(means: dict[str, dict[str, Any]]) -> Optional[str]:
    if means["a"]["shared"]:
        few = [("the shared mean", means["a"]["rows"])] if means["a"]["rows"] < NOTE_MIN_FIT_ROWS else []
    else:
        few = [(f"the mean of side {k.upper()}", m["rows"]) for k, m in means.items() if m["rows"] < NOTE_MIN_FIT_ROWS]
    if not few:
        return None
    parts = " and ".join(f"{what} on {rows} rows" for what, rows in few)
    return (f"{parts} (fewer than {NOTE_MIN_FIT_ROWS:,}): the centred figures rest on a noisy mean; fit it on "
            "a larger train split from the same domain, model and modality (--fit-a/--fit-b)")


def side_means(fits: dict[str, tuple[np.ndarray, int, str]], shared: bool,
               mapped: bool) -> tuple[np.ndarray, np.ndarray, dict[str, dict[str, Any]]]:
    """Each side's mean from its fitted unit-row sum ``fits[side] = (sum, rows, source)`` — or, with
    ``shared``, one mean of both sides' fit rows — and the report's ``means`` section."""
    if shared:
        total = fits["a"][0] + fits["b"][0]
        rows = fits["a"][1] + fits["b"][1]
        mu_a = mu_b = total / rows
        src = f"{fits['a'][2]} + {fits['b'][2]}"
        means = {k: {"source": src, "rows": int(rows), "shared": True} for k in ("a", "b")}
    else:
        mu_a, mu_b = fits["a"][0] / fits["a"][1], fits["b"][0] / fits["b"][1]
        means = {k: {"source": fits[k][2], "rows": int(fits[k][1]), "shared": False} for k in ("a", "b")}
    if mapped:
        means["a"]["mapped_into_b"] = True
    return mu_a, mu_b, means


def check(A: Any, B: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`check_result` as its report dict (``check_result(...).to_dict()``)."""
    return check_result(A, B, **kwargs).to_dict()


def check_result(
    A: Any,
    B: Any,
    *,
    fit_a: Any = None,
    fit_b: Any = None,
    shared: bool = False,
    perms: int = 20,
    seed: int = 0,
    names: Optional[dict[str, str]] = None,
    map_fit: Optional[tuple[Any, Any]] = None,
    block: int = 1024,
    progress: Progress = None,
    keep: Optional[dict[str, np.ndarray]] = None,
) -> AnisotropyResult:
    """The whole check on arrays (memmaps fine); returns the result (its ``to_dict`` is the
    report without gates). Beside the derangement floor, each view carries the exact floor over
    all n(n−1) unrelated pairs (:func:`floor_partials`, O(n·d²), float64).

    ``names`` gives file names for ``means`` (keys ``fit_a``, ``fit_b``); ``map_fit`` =
    (TRAIN_A, TRAIN_B) fits :func:`fit_orthogonal_map` and compares A's mapped rows. A ``keep``
    dict receives the cosines behind the figures (for the plot): ``matched_raw`` and
    ``matched_centred`` (n,), ``unrelated_raw`` and ``unrelated_centred`` (perms, n).
    """
    names = names or {}
    for X, what in ((A, "A"), (B, "B")):
        if getattr(X, "ndim", None) != 2:
            raise InputError(f"{what} must be 2-D (rows x dims), got shape {getattr(X, 'shape', None)}")
    n = int(A.shape[0])
    if B.shape[0] != n:
        raise InputError(f"A has {n} rows but B has {B.shape[0]}; row i of A must pair with row i of B")
    if n < 2:
        raise InputError(f"A and B need at least 2 paired rows, got {n}")
    if map_fit is None and A.shape[1] != B.shape[1]:
        raise InputError(f"A has dimension {A.shape[1]} but B has {B.shape[1]}; "
                         "for two different models fit a map first (--map-fit TRAIN_A TRAIN_B)")
    if perms < 1:
        raise InputError(f"--perms must be ≥ 1, got {perms}")
    for F, X, side in ((fit_a, A, "a"), (fit_b, B, "b")):
        if F is None:
            continue
        label = f"--fit-{side} {names[f'fit_{side}']}" if names.get(f"fit_{side}") else f"--fit-{side}"
        if getattr(F, "ndim", None) != 2:
            raise InputError(f"{label} must be 2-D (rows x dims), got shape {getattr(F, 'shape', None)}")
        if F.shape[1] != X.shape[1]:
            raise InputError(f"{label} has dimension {F.shape[1]} but {side.upper()} has {X.shape[1]}")
        if F.shape[0] < 1:
            raise InputError(f"{label} has no rows")

    mapping: Optional[MapFit] = None
    W = None
    if map_fit is not None:
        TA, TB = map_fit
        if TA.shape[1] != A.shape[1]:
            raise InputError(f"--map-fit TRAIN_A has dimension {TA.shape[1]} but A has {A.shape[1]}")
        if TB.shape[1] != B.shape[1]:
            raise InputError(f"--map-fit TRAIN_B has dimension {TB.shape[1]} but B has {B.shape[1]}")
        mapping = fit_orthogonal_map(TA, TB)
        W = mapping.W

    ra, rb = UnitRows(A, "A", W), UnitRows(B, "B")
    d = rb.dim
    sa, ssa, _ = unit_sum(ra)
    sb, ssb, _ = unit_sum(rb)
    aniso = {"a": anisotropy_from_sum(sa, ssa, n), "b": anisotropy_from_sum(sb, ssb, n)}

    # means
    fits = {}
    for side, F, own_sum in (("a", fit_a, sa), ("b", fit_b, sb)):
        if F is None:
            fits[side] = (own_sum, n, f"compared rows of {side.upper()}")
        else:
            label = names.get(f"fit_{side}") or f"--fit-{side}"
            fs, _, fn = unit_sum(UnitRows(F, label, W if side == "a" else None))
            fits[side] = (fs, fn, label)
    mu_a, mu_b, means = side_means(fits, shared, W is not None)

    # matched and unrelated pairs, raw and centred, with the same derangements. Centred
    # unrelated cosines follow from the raw ones (float64) by the rank-one identity
    # (a−μa)·(b−μb) = a·b − a·μb − μa·b + μa·μb, so B's gathered rows are normalised only once.
    q, nb = np.empty(n), np.empty(n)
    for sl, UB in rb.blocks(CHUNK):
        q[sl] = UB @ mu_a
        nb[sl] = _centre(UB, mu_b, "B", sl.start)[1]
    c = float(mu_a @ mu_b)
    P = derangements(n, perms, seed)
    m_raw, m_cen = np.empty(n), np.empty(n)
    u_raw, u_cen = np.empty((perms, n)), np.empty((perms, n))
    parts_raw: list[dict[str, Any]] = []
    parts_cen: list[dict[str, Any]] = []
    for sl, UA in ra.blocks(CHUNK):
        UB = rb.get(sl)
        CA, na = _centre(UA, mu_a, "A", sl.start)
        CB, _ = _centre(UB, mu_b, "B", sl.start)
        m_raw[sl] = np.einsum("ij,ij->i", UA, UB)
        m_cen[sl] = np.einsum("ij,ij->i", CA, CB)
        parts_raw = [floor_merge(parts_raw + [floor_partials(UA, UB)])]
        parts_cen = [floor_merge(parts_cen + [floor_partials(CA, CB)])]
        r = c - UA @ mu_b
        for p in range(perms):
            idx = P[p, sl]
            raw = np.einsum("ij,ij->i", UA, rb.get(idx))
            u_raw[p, sl] = raw
            u_cen[p, sl] = (raw + r - q[idx]) / (na * nb[idx])

    if keep is not None:
        keep.update(matched_raw=m_raw, matched_centred=m_cen, unrelated_raw=u_raw, unrelated_centred=u_cen)
    first = partner_ranked_first(ra, rb, mu_a, mu_b, block=block, progress=progress)
    res = AnisotropyResult(
        n=n, dim=d, means=means, anisotropy=aniso,
        raw=_section(m_raw, u_raw, first["raw"], n, floor_finish(parts_raw[0])),
        centred=_section(m_cen, u_cen, first["centred"], n, floor_finish(parts_cen[0])),
        partner_first_by_chance=1.0 / n,
        warning=_warning(aniso), note=_note(means), map=mapping)
    res.reading = reading(res.to_dict())
    return res
