"""The anisotropy check's rows and floor: unit rows, each side's sums, the derangements and the
exact floor over every unrelated pair, and the tasks of the check's first two passes.

Every row is read as a float64 unit row (:class:`UnitRows`; centred by :func:`_centre`), in
``CHUNK``-row blocks of the global row index. Pass 1 (:func:`unit_sum_range`, :func:`unit_sum`)
gives Σu and Σ‖u‖² per block — the anisotropy of a side and its mean; pass 2
(:func:`qnb_range`, :func:`pairs_range`) the matched and unrelated cosines of every row under the
seeded :func:`derangements`, with the Gram partials of the exact floor (:func:`floor_partials`,
merged by :func:`floor_merge`, finished by :func:`floor_finish`). The driver is
:func:`embedcheck.geometry.anisotropy.check_result`.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Optional

import numpy as np

from ..errors import InputError
from ..io.source import Part, Source, ranges, read_range, source_of_parts
from ..rows import iter_chunks

#: a spread below this is "no spread" (gap_over_floor_sd, cohens_d are then null)
ZERO_SD = 1e-12
#: rows per block when streaming
CHUNK = 2048


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
    """(mean, sd) of the cosine over all n(n−1) ordered unrelated pairs:
    Σ_{i≠j} a_i·b_j = S_a·S_b − Σ_i a_i·b_i and Σ_{i≠j} (a_i·b_j)² = tr(G_a G_b) − Σ_i (a_i·b_i)².

    The sd is the sample sd (ddof 1, the one convention of every floor sd: the unrelated pairs
    stand for the model's unrelated pairs at large, as the sampled floor's ``floor_sd`` and the
    threshold's floor do), ``sqrt(pairs / (pairs − 1))`` times the population sd.

    >>> A = np.eye(3); B = np.roll(np.eye(3), 1, axis=1)   # b_j = e_{j+1}: a_i·b_j = [i == j+1]
    >>> m, sd = floor_finish(floor_partials(A, B))          # 3 of 6 unrelated pairs score 1
    >>> m, round(sd, 6), round(float(np.std([1, 1, 1, 0, 0, 0], ddof=1)), 6)
    (0.5, 0.547723, 0.547723)
    """
    n = p["n"]
    pairs = float(n) * (n - 1)
    if pairs <= 0:
        raise ValueError("the exact floor needs at least 2 rows")
    s1 = float(p["sum_a"] @ p["sum_b"]) - p["diag"]
    s2 = float(np.einsum("ij,ij->", p["gram_a"], p["gram_b"])) - p["diag_sq"]
    mean = s1 / pairs
    var = max(0.0, s2 / pairs - mean * mean)
    return mean, math.sqrt(var * pairs / (pairs - 1))


#: rows per task (whole CHUNK blocks: every block is the same block whatever the sharding)
TASK_ROWS = 32 * CHUNK


def _unit_range(parts: tuple[Part, ...], a: int, b: int, name: str, W: np.ndarray | None,
                check: bool = False) -> np.ndarray:
    return UnitRows(read_range(parts, a, b, check=check, what=name), name, W).get(slice(None))


# ---- pass 1: Σu and Σ‖u‖² per CHUNK block ----------------------------------------------------


def unit_sum_range(parts: tuple[Part, ...], start: int, stop: int, name: str,
                   W: np.ndarray | None) -> list[tuple[np.ndarray, float]]:
    out = []
    for sl in iter_chunks(stop - start, CHUNK):
        U = _unit_range(parts, start + sl.start, start + sl.stop, name, W, check=True)
        out.append((U.sum(axis=0), float(np.einsum("ij,ij->", U, U))))
    return out


def unit_sum(engine: Any, src: Source, name: str, W: np.ndarray | None = None) -> tuple[np.ndarray, float, int]:
    """(Σ unit rows, Σ ‖u‖², n) in float64 over ``CHUNK``-row blocks added in row order from zero
    (rows checked; ``W`` maps A's rows into B's space)."""
    dim = src.dim if W is None else int(W.shape[1])
    s = np.zeros(dim)
    ssq = 0.0
    for blocks in engine.map(unit_sum_range, [(src.parts, a, b, name, W) for a, b in ranges(src.n, TASK_ROWS)]):
        for bs, bq in blocks:
            s += bs
            ssq += bq
    return s, ssq, src.n


# ---- pass 2: per-row matched and unrelated cosines -----------------------------------------


def qnb_range(b_parts: tuple[Part, ...], start: int, stop: int, mu_a: np.ndarray,
              mu_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """q_j = μa·b_j and ‖b_j − μb‖ for B's rows, per CHUNK block of the global row index."""
    q, nb = np.empty(stop - start), np.empty(stop - start)
    for sl in iter_chunks(stop - start, CHUNK):
        UB = _unit_range(b_parts, start + sl.start, start + sl.stop, "B", None)
        q[sl] = UB @ mu_a
        nb[sl] = _centre(UB, mu_b, "B", start + sl.start)[1]
    return q, nb


def pairs_range(a_parts: tuple[Part, ...], b_parts: tuple[Part, ...], start: int, stop: int, W: np.ndarray | None,
                mu_a: np.ndarray, mu_b: np.ndarray, P: np.ndarray, q: np.ndarray, nb: np.ndarray) -> dict[str, Any]:
    """Matched and unrelated cosines (raw and centred) of A's rows ``[start, stop)``; B's rows at the
    derangement targets are fetched by global index. ``P`` is ``P[:, start:stop]``."""
    rb = source_of_parts(b_parts)
    c = float(mu_a @ mu_b)
    r_n = stop - start
    perms = P.shape[0]
    out: dict[str, Any] = {"m_raw": np.empty(r_n), "m_cen": np.empty(r_n), "u_raw": np.empty((perms, r_n)),
                           "u_cen": np.empty((perms, r_n)), "floor_raw": [], "floor_cen": []}
    for sl in iter_chunks(r_n, CHUNK):
        a, b = start + sl.start, start + sl.stop
        UA = _unit_range(a_parts, a, b, "A", W)
        UB = _unit_range(b_parts, a, b, "B", None)
        CA, na = _centre(UA, mu_a, "A", a)
        CB, _ = _centre(UB, mu_b, "B", a)
        out["m_raw"][sl] = np.einsum("ij,ij->i", UA, UB)
        out["m_cen"][sl] = np.einsum("ij,ij->i", CA, CB)
        out["floor_raw"].append(floor_partials(UA, UB))  # exact floor: Gram partials per block
        out["floor_cen"].append(floor_partials(CA, CB))
        r = c - UA @ mu_b
        for p in range(perms):
            idx = P[p, sl]
            raw = np.einsum("ij,ij->i", UA, UnitRows(rb.take(idx), "B").get(slice(None)))
            out["u_raw"][p, sl] = raw
            out["u_cen"][p, sl] = (raw + r - q[idx]) / (na * nb[idx])
    return out
