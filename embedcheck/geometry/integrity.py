"""The maths of ``integrity`` (pure numpy): the health header of a matrix of rows, which candidate
recipe reproduces each stored row (cosine and norm), the greedy attribution of rows to recipes and
the Wilson interval of each share, and the label-free check for two populations in one index.

>>> X = np.array([[1.0, 0.0], [0.6, 0.8], [0.6, 0.8], [np.nan, 0.0], [0.0, 0.0]], dtype=np.float32)
>>> h = health(X)
>>> h["unit_norm_rows"], h["nonfinite_rows"], h["zero_rows"], h["duplicate_vectors"]
(3, 1, 1, 1)
>>> [round(v, 4) for v in wilson(8, 10)]
[0.4902, 0.9433]
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np

#: a row is a unit row when its norm is within this of 1
UNIT_TOL = 1e-3
#: a stored row's norm is reproduced by a raw (unnormalised) candidate within this relative difference
NORM_RTOL = 1e-3
#: the two-sided 95 % normal quantile
Z95 = 1.959963984540054


def row_norms(X: np.ndarray) -> np.ndarray:
    """Each row's Euclidean norm in float64 (NaN/inf where the row has one)."""
    X64 = np.asarray(X, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.sqrt(np.einsum("ij,ij->i", X64, X64))


class Health:
    """The health header accumulated over consecutive chunks of rows (:meth:`add`, in row order), so
    an index of any size is read once, a chunk at a time; :meth:`result` is :func:`health`'s dict.
    Per row it keeps one byte (finite and non-zero), the norm (float64) and a 16-byte digest of the
    row's bytes for exact duplicates."""

    def __init__(self, dim: int, dtype: Any, examples: int = 5) -> None:
        self.dim, self.dtype, self.examples = int(dim), np.dtype(dtype), examples
        self.n = 0
        self.norms: list[np.ndarray] = []
        self.finite: list[np.ndarray] = []
        self.first: dict[bytes, int] = {}
        self.dups: list[list[int]] = []
        self.dup_rows = 0
        self.groups: set[int] = set()

    def add(self, X: np.ndarray) -> None:
        import hashlib

        X = np.ascontiguousarray(X)
        fin = np.isfinite(X).all(axis=1)
        self.finite.append(fin)
        self.norms.append(row_norms(X))
        for i, row in enumerate(X):
            key = hashlib.blake2b(row.tobytes(), digest_size=16).digest()
            at = self.first.setdefault(key, self.n + i)
            if at != self.n + i:
                self.dup_rows += 1
                self.groups.add(at)
                if len(self.dups) < self.examples:
                    self.dups.append([int(at), self.n + i])
        self.n += X.shape[0]

    def good(self) -> np.ndarray:
        """Rows with finite values and a non-zero norm (what has a direction)."""
        fin = np.concatenate(self.finite) if self.finite else np.zeros(0, dtype=bool)
        nrm = np.concatenate(self.norms) if self.norms else np.zeros(0)
        return fin & (nrm > 0)

    def result(self, ids: Optional[Sequence[Any]] = None) -> dict[str, Any]:
        n, ex = self.n, self.examples
        finite = np.concatenate(self.finite) if self.finite else np.zeros(0, dtype=bool)
        nrm = np.concatenate(self.norms) if self.norms else np.zeros(0)
        zero = finite & (nrm == 0)
        unit = finite & (np.abs(nrm - 1.0) <= UNIT_TOL)
        out: dict[str, Any] = {"rows": int(n), "dim": self.dim, "dtype": str(self.dtype),
                               "unit_norm_rows": int(unit.sum()), "unit_norm_share": float(unit.mean()) if n else None,
                               "nonfinite_rows": int((~finite).sum()), "nonfinite_examples": np.flatnonzero(~finite)[:ex].tolist(),
                               "zero_rows": int(zero.sum()), "zero_examples": np.flatnonzero(zero)[:ex].tolist()}
        good = finite & ~zero
        out["norm"] = ({"min": float(nrm[good].min()), "median": float(np.median(nrm[good])), "max": float(nrm[good].max())}
                       if good.any() else None)
        out["duplicate_vectors"] = int(self.dup_rows)
        out["duplicate_vector_groups"] = len(self.groups)
        out["duplicate_vector_examples"] = list(self.dups)
        if ids is None:
            out["duplicate_ids"] = None
        else:
            seen: set[Any] = set()
            rep: list[Any] = []
            reps = 0
            for k in ids:
                key = k.item() if isinstance(k, np.generic) else k
                if key in seen:
                    reps += 1
                    if len(rep) < ex and key not in rep:
                        rep.append(key)
                else:
                    seen.add(key)
            out["duplicate_ids"] = int(reps)
            out["duplicate_id_examples"] = rep
        out["norm_mix"] = {"unit_rows": int(unit.sum()), "other_rows": int((good & ~unit).sum()),
                           "mixed": bool(unit.sum() > 0 and (good & ~unit).sum() > 0)}
        return out


def health(X: np.ndarray, ids: Optional[Sequence[Any]] = None, *, examples: int = 5) -> dict[str, Any]:
    """The checks users write by hand before trusting an index, of the rows ``X`` (and their ``ids``):
    rows, dimension, dtype, the unit-norm share (``|norm - 1| <= UNIT_TOL``, of all rows), rows with a
    NaN or inf, all-zero rows, ids that repeat, and exact duplicate vectors (rows whose bytes equal an
    earlier row's; ``-0.0`` and ``0.0`` differ), each with the first rows that show it. The same as
    :class:`Health` over chunks."""
    h = Health(X.shape[1], X.dtype, examples)
    h.add(X)
    out = h.result(ids)
    out.pop("norm_mix")
    return out


def wilson(k: int, n: int, z: float = Z95) -> list[float]:
    """The Wilson score interval of a share ``k / n`` (95 % by default); ``[0, 1]`` for ``n = 0``. Its
    closed form ends at exactly 0 for ``k = 0`` and 1 for ``k = n`` (not at a rounding residue).

    >>> wilson(0, 600)[0], wilson(600, 600)[1], [round(x, 4) for x in wilson(0, 600)]
    (0.0, 1.0, [0.0, 0.0064])
    """
    if n <= 0:
        return [0.0, 1.0]
    p = k / n
    den = 1.0 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo = 0.0 if k <= 0 else max(0.0, mid - half)
    hi = 1.0 if k >= n else min(1.0, mid + half)
    return [float(lo), float(hi)]


def cosines(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Row-wise cosine of ``A`` and ``B`` in float64 (NaN where a row has no direction)."""
    A64, B64 = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.einsum("ij,ij->i", A64, B64) / (row_norms(A64) * row_norms(B64))


def reproduces(stored: np.ndarray, raw: np.ndarray, tol: float) -> dict[str, np.ndarray]:
    """For stored rows and a candidate's raw (unnormalised) re-embedding of the same texts: the
    cosine, and whether the candidate reproduces each row as unit rows (cosine >= ``tol`` and a unit
    norm) or as raw rows (cosine >= ``tol`` and the raw norm within :data:`NORM_RTOL`)."""
    cos = cosines(stored, raw)
    sn, rn = row_norms(stored), row_norms(raw)
    close = np.nan_to_num(cos, nan=-2.0) >= tol
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = close & (np.abs(sn - 1.0) <= UNIT_TOL)
        rawok = close & (np.abs(sn - rn) <= NORM_RTOL * rn)
    return {"cosine": cos, "unit": unit, "raw": rawok}


def attribute(matches: Mapping[str, np.ndarray], m: int) -> tuple[list[str], np.ndarray]:
    """Greedy attribution of ``m`` rows to recipes: ``matches`` maps a recipe to the rows it
    reproduces (a bool array of ``m``); the recipe reproducing the most rows takes them, then the
    recipe reproducing most of the rest, and so on (ties: the order of ``matches``). Returns the
    recipes in the order they were taken and each row's index into it (-1: no recipe reproduces it).

    >>> order, who = attribute({"a": np.array([1, 1, 0, 0], bool), "b": np.array([0, 1, 1, 0], bool)}, 4)
    >>> order, who.tolist()
    (['a', 'b'], [0, 0, 1, -1])
    """
    who = np.full(m, -1, dtype=np.int64)
    order: list[str] = []
    left = np.ones(m, dtype=bool)
    names = list(matches)
    while left.any():
        gains = [int((matches[k] & left).sum()) for k in names]
        if not gains or max(gains) == 0:
            break
        best = names[int(np.argmax(gains))]
        take = matches[best] & left
        who[take] = len(order)
        order.append(best)
        left &= ~take
        names.remove(best)
    return order, who


# ---- the label-free check: two populations in one index, without texts -----------------------------

def _two_means(U: np.ndarray, rng: np.random.Generator, iters: int = 30, starts: int = 3) -> tuple[float, np.ndarray]:
    """The best of ``starts`` seeded 2-means runs (k-means++ starts) of the rows ``U``: the share of
    the rows' total sum of squares between the two groups (R², 0 to 1) and the labels."""
    n = U.shape[0]
    centred = U - U.mean(axis=0)
    total = float((centred * centred).sum())
    best_r2, best_lab = -1.0, np.zeros(n, dtype=np.int64)
    sq = (U * U).sum(axis=1)
    for _ in range(starts):
        c0 = U[rng.integers(n)]
        d0 = np.maximum(sq - 2 * U @ c0 + c0 @ c0, 0)
        c1 = U[rng.choice(n, p=d0 / d0.sum())] if d0.sum() > 0 else U[rng.integers(n)]
        C = np.stack([c0, c1])
        lab = np.zeros(n, dtype=np.int64)
        for it in range(iters):
            dist = sq[:, None] - 2 * U @ C.T + (C * C).sum(axis=1)[None, :]
            new = np.argmin(dist, axis=1)
            if it and np.array_equal(new, lab):
                break
            lab = new
            if lab.min() == lab.max():
                break
            C = np.stack([U[lab == j].mean(axis=0) for j in (0, 1)])
        if lab.min() == lab.max():
            continue
        within = sum(float(((U[lab == j] - U[lab == j].mean(axis=0)) ** 2).sum()) for j in (0, 1))
        r2 = 1.0 - within / total if total > 0 else 0.0
        if r2 > best_r2:
            best_r2, best_lab = r2, lab
    return max(best_r2, 0.0), best_lab


def unit_rows(X: np.ndarray) -> np.ndarray:
    """The finite non-zero rows of ``X`` scaled to unit norm (float64)."""
    X64 = np.asarray(X, dtype=np.float64)
    nrm = row_norms(X64)
    keep = np.isfinite(nrm) & (nrm > 0)
    return X64[keep] / nrm[keep, None]


def split_test(X: np.ndarray, *, draws: int, seed: int, max_rows: int = 2000) -> dict[str, Any]:
    """Do the rows' directions split into two groups pointing apart? The best 2-means split of the unit
    rows (a seeded sample of at most ``max_rows``): its R², the cosine of its two centroids (rows of
    one model share a mean direction, so a clean index's groups stay at a positive cosine; rows of
    two unrelated spaces split near 0), and its R² against ``draws`` Gaussian draws of the same size,
    mean and covariance (``ratio``; the p-value is (1 + draws at or above) / (1 + draws) — real rows
    beat a Gaussian null without being mixed, so it is context, not a call)."""
    rng = np.random.default_rng(seed)
    U = unit_rows(X)
    if U.shape[0] > max_rows:
        U = U[np.sort(rng.choice(U.shape[0], max_rows, replace=False))]
    n, d = U.shape
    if n < 8:
        return {"rows": int(n), "r2": None, "ratio": None, "p_value": None, "null_r2_mean": None, "draws": 0,
                "centroid_cosine": None, "mean_norm": None}
    r2, lab = _two_means(U, rng)
    mu = U.mean(axis=0)
    centred = U - mu
    # Gaussian rows with the sample's covariance: centred rows times standard normal mixing weights
    null = []
    for _ in range(draws):
        G = mu + (rng.standard_normal((n, n)) @ centred) / np.sqrt(max(n - 1, 1))
        G /= np.linalg.norm(G, axis=1, keepdims=True)
        null.append(_two_means(G, rng)[0])
    null_arr = np.asarray(null)
    p = (1 + int((null_arr >= r2).sum())) / (1 + draws) if draws else None
    smaller = int(min((lab == 0).sum(), (lab == 1).sum()))
    c0, c1 = U[lab == 0].mean(axis=0), U[lab == 1].mean(axis=0)
    den = float(np.linalg.norm(c0) * np.linalg.norm(c1))
    ccos = float(c0 @ c1 / den) if den > 0 else None
    ratio = float(r2 / null_arr.mean()) if draws and null_arr.mean() > 0 else None
    return {"rows": int(n), "r2": float(r2), "ratio": ratio, "null_r2_mean": float(null_arr.mean()) if draws else None,
            "null_r2_max": float(null_arr.max()) if draws else None, "draws": int(draws), "p_value": p,
            "smaller_group_share": smaller / n, "centroid_cosine": ccos, "mean_norm": float(np.linalg.norm(mu))}


def norm_mix(X: np.ndarray) -> dict[str, Any]:
    """Unit and non-unit rows side by side (among the finite non-zero rows): one index holding
    normalised and unnormalised vectors."""
    nrm = row_norms(X)
    ok = np.isfinite(nrm) & (nrm > 0)
    unit = ok & (np.abs(nrm - 1.0) <= UNIT_TOL)
    u, v = int(unit.sum()), int((ok & ~unit).sum())
    return {"unit_rows": u, "other_rows": v, "mixed": bool(u > 0 and v > 0)}


__all__ = ["Health", "NORM_RTOL", "UNIT_TOL", "attribute", "cosines", "health", "norm_mix", "reproduces", "row_norms",
           "split_test", "unit_rows", "wilson"]
