"""Partner ranked first, exact in bounded memory: the anisotropy check's third pass.

A row's partner is ranked first when cos(a_i, b_i) beats cos(a_i, b_j) for every other row j by
more than ``TIE``. One task per (query tile × candidate tile) takes the float32 maximum over the
tile's candidates of the raw and the centred cosine (:func:`block_max`; the centred ones by a
rank-one correction of the raw ones); the tiles merge by element-wise max (exact: max is
order-free); a task per query tile decides each row against a rigorous float32 rounding bound
(:func:`decide_range`), and rows inside it are re-decided in float64 (:func:`exact_max`). The
counts equal a float64 brute force, whatever the tiling (:func:`partner_first`,
:func:`partner_ranked_first`).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..io.source import Part, Source, ranges, source_of_parts
from .anisotropy_floor import CHUNK, TASK_ROWS, UnitRows, _centre, _unit_range, qnb_range, unit_sum

#: cosines within this of each other are tied; a tied partner is not ranked first
TIE = 1e-12
_U32 = float(np.finfo(np.float32).eps) / 2  # unit roundoff of float32


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


# ---- pass 3: partner ranked first ----------------------------------------------------------


def block_max(a_parts: tuple[Part, ...], b_parts: tuple[Part, ...], q0: int, q1: int, c0: int, c1: int,
              W: np.ndarray | None, mu_a: np.ndarray, mu_b: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Float32 max over candidates j ≠ i in B's rows ``[c0, c1)`` of raw and centred cos(a_i, b_j),
    for A's rows ``[q0, q1)`` (the centred value before the 1/‖a_i − μa‖ scale, as in the
    in-memory kernel)."""
    c = float(mu_a @ mu_b)
    UB = _unit_range(b_parts, c0, c1, "B", None)
    B32 = UB.astype(np.float32)
    q = UB @ mu_a
    _, nb = _centre(UB, mu_b, "B", c0)
    w = 1.0 / nb
    w32, z32 = w.astype(np.float32), (-q * w).astype(np.float32)
    del UB
    rows = q1 - q0
    mr = np.full(rows, -np.inf, dtype=np.float32)
    mc = np.full(rows, -np.inf, dtype=np.float32)
    key_block = 4 * block
    for i0 in range(0, rows, block):
        i1 = min(i0 + block, rows)
        UA = _unit_range(a_parts, q0 + i0, q0 + i1, "A", W)
        r32 = (c - UA @ mu_b).astype(np.float32)[:, None]
        A32 = UA.astype(np.float32)
        g0 = q0 + i0  # global index of query row i0
        for j0 in range(0, c1 - c0, key_block):
            j1 = min(j0 + key_block, c1 - c0)
            S = A32 @ B32[j0:j1].T
            lo, hi = max(g0, c0 + j0), min(g0 + (i1 - i0), c0 + j1)
            if lo < hi:  # the partner itself is not a competitor
                k = np.arange(lo, hi)
                S[k - g0, k - c0 - j0] = -np.inf
            np.maximum(mr[i0:i1], S.max(axis=1), out=mr[i0:i1])
            S += r32
            S *= w32[j0:j1]
            S += z32[j0:j1]
            np.maximum(mc[i0:i1], S.max(axis=1), out=mc[i0:i1])
    return mr, mc


def decide_range(a_parts: tuple[Part, ...], b_parts: tuple[Part, ...], q0: int, q1: int, W: np.ndarray | None,
                 mu_a: np.ndarray, mu_b: np.ndarray, mr: np.ndarray, mc: np.ndarray, wmax: float,
                 qmax: float, exact: bool = False) -> dict[str, Any]:
    """Sure counts for A's rows ``[q0, q1)`` and the rows to re-decide in float64 (global indices),
    with the rounding bound of :func:`partner_ranked_first`."""
    d = int(mu_b.shape[0])
    c = float(mu_a @ mu_b)
    UA = _unit_range(a_parts, q0, q1, "A", W)
    UB = _unit_range(b_parts, q0, q1, "B", None)
    CA, na = _centre(UA, mu_a, "A", q0)
    CB, _ = _centre(UB, mu_b, "B", q0)
    d_raw = np.einsum("ij,ij->i", UA, UB)
    d_cen = np.einsum("ij,ij->i", CA, CB)
    r = c - UA @ mu_b
    u32 = _U32
    eps = (d + 2) * u32 / (1 - (d + 2) * u32)
    g_raw = 2 * eps
    g_cen = 2 * (eps + u32 * (4 + 5 * np.abs(r) + 2 * qmax)) * wmax / na
    m_raw = d_raw - mr.astype(np.float64)
    m_cen = d_cen - mc.astype(np.float64) / na
    unsure = (np.abs(m_raw) <= g_raw) | (np.abs(m_cen) <= g_cen)
    if exact:  # the slow reference: every row re-decided in float64
        unsure = np.ones_like(unsure)
    sure = ~unsure
    first_raw = (m_raw > g_raw) & sure
    first_cen = (m_cen > g_cen) & sure
    return {"raw": int(np.count_nonzero(first_raw)), "centred": int(np.count_nonzero(first_cen)),
            "first_raw": first_raw, "first_centred": first_cen,
            "rows": np.arange(q0, q1)[unsure], "d_raw": d_raw[unsure], "d_cen": d_cen[unsure]}


def exact_max(a_parts: tuple[Part, ...], b_parts: tuple[Part, ...], c0: int, c1: int, W: np.ndarray | None,
              mu_a: np.ndarray, mu_b: np.ndarray, rows: np.ndarray, key_block: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 max over candidates j ≠ i in B's rows ``[c0, c1)`` of raw and centred cos(a_i, b_j)."""
    UA = UnitRows(source_of_parts(a_parts).take(rows), "A", W).get(slice(None))
    CA, _ = _centre(UA, mu_a, "A", rows)
    mr = np.full(len(rows), -np.inf)
    mc = np.full(len(rows), -np.inf)
    for j0 in range(c0, c1, key_block):
        j1 = min(j0 + key_block, c1)
        UB = _unit_range(b_parts, j0, j1, "B", None)
        CB, _ = _centre(UB, mu_b, "B", j0)
        max_off_block(UA, CA, UB, CB, rows, j0, mr, mc)
    return mr, mc


def tiles(n: int, target: int = 8) -> list[tuple[int, int]]:
    """About ``target`` ranges of whole CHUNK blocks (at least one block each)."""
    step = max(CHUNK, -(-n // target // CHUNK) * CHUNK)
    return ranges(n, step)


def partner_first(engine: Any, A: Source, B: Source, W: np.ndarray | None, mu_a: np.ndarray, mu_b: np.ndarray,
                  wmax: float, qmax: float, block: int = 1024, exact: bool = False) -> dict[str, Any]:
    """Exact counts of rows whose partner is ranked first, raw and centred (see module doc), and
    the per-row flags behind them (``first_raw``, ``first_centred``: bool (n,))."""
    tl = tiles(A.n)
    blocks = engine.map(block_max, [(A.parts, B.parts, q0, q1, c0, c1, W, mu_a, mu_b, block)
                                    for q0, q1 in tl for c0, c1 in tl])
    decide_tasks = []
    for i, (q0, q1) in enumerate(tl):
        mr, mc = blocks[i * len(tl)]
        for j in range(1, len(tl)):  # element-wise max: exact, order-free
            br, bc = blocks[i * len(tl) + j]
            mr, mc = np.maximum(mr, br), np.maximum(mc, bc)
        decide_tasks.append((A.parts, B.parts, q0, q1, W, mu_a, mu_b, mr, mc, wmax, qmax, exact))
    del blocks
    decided = engine.map(decide_range, decide_tasks)
    first_raw = np.concatenate([x["first_raw"] for x in decided])
    first_cen = np.concatenate([x["first_centred"] for x in decided])
    rows = np.concatenate([x["rows"] for x in decided])
    if len(rows):
        dr = np.concatenate([x["d_raw"] for x in decided])
        dc = np.concatenate([x["d_cen"] for x in decided])
        starts = list(range(0, len(rows), block))
        res = engine.map(exact_max, [(A.parts, B.parts, c0, c1, W, mu_a, mu_b, rows[s:s + block], 4 * block)
                                     for s in starts for c0, c1 in tl])
        for k, s in enumerate(starts):
            mr64, mc64 = res[k * len(tl)]
            for j in range(1, len(tl)):
                br, bc = res[k * len(tl) + j]
                mr64, mc64 = np.maximum(mr64, br), np.maximum(mc64, bc)
            first_raw[rows[s:s + block]] = dr[s:s + block] > mr64 + TIE
            first_cen[rows[s:s + block]] = dc[s:s + block] > mc64 + TIE
    return {"raw": int(np.count_nonzero(first_raw)), "centred": int(np.count_nonzero(first_cen)), "n": A.n,
            "rechecked": len(rows), "first_raw": first_raw, "first_centred": first_cen}


def partner_ranked_first(A: Any, B: Any, mean_a: Optional[np.ndarray] = None, mean_b: Optional[np.ndarray] = None, *,
                         block: int = 1024, exact: bool = False, engine: Any = None) -> dict[str, int]:
    """Count rows whose partner is ranked first, raw and centred, in bounded memory.

    ``A``/``B``: arrays, sources or :class:`UnitRows` (``W`` maps A). ``mean_a``/``mean_b`` default
    to each side's mean unit row. Returns ``{"raw", "centred", "n", "rechecked"}``: counts of i
    with cos(a_i, b_i) > max_{j≠i} cos(a_i, b_j) + ``TIE``; ``rechecked`` is the number of rows
    re-decided in float64 because their float32 margin was within the rounding bound
    (``exact=True`` re-decides every row: the slow reference path).

    Float32 bounds used: a dot product of float32-rounded unit vectors is off by at most
    ε = (d+2)u/(1−(d+2)u); the centred values (S + r_i)·w_j + z_j, computed in float32, add
    u(4 + 5|r_i| + 2|q_j|) before scaling by w_j = 1/|b_j − μb| and 1/|a_i − μa|. A row is
    re-decided when |margin| ≤ 2× its bound.

    >>> A = np.eye(3); B = np.eye(3) + 0.1
    >>> partner_ranked_first(A, B, block=2)["raw"]
    3
    """
    from ..engine import or_local
    from ..io.source import open_source

    W = A.W if isinstance(A, UnitRows) else None
    SA = open_source(A.X if isinstance(A, UnitRows) else A, what="A")
    SB = open_source(B.X if isinstance(B, UnitRows) else B, what="B")
    n = SA.n
    d = SA.dim if W is None else int(W.shape[1])
    if SB.n != n or SB.dim != d:
        raise InputError(f"A has shape ({n}, {d}) but B has ({SB.n}, {SB.dim})")
    if block < 1:
        raise InputError(f"block must be ≥ 1, got {block}")
    eng = or_local(engine)
    mu_a = np.asarray(mean_a if mean_a is not None else unit_sum(eng, SA, "A", W)[0] / n, dtype=np.float64)
    mu_b = np.asarray(mean_b if mean_b is not None else unit_sum(eng, SB, "B")[0] / n, dtype=np.float64)
    qnb = eng.map(qnb_range, [(SB.parts, a, b, mu_a, mu_b) for a, b in ranges(n, TASK_ROWS)])
    q = np.concatenate([x[0] for x in qnb])
    nb = np.concatenate([x[1] for x in qnb])
    got = partner_first(eng, SA, SB, W, mu_a, mu_b, float((1.0 / nb).max()), float(np.abs(q).max()),
                        block=block, exact=exact)
    return {k: got[k] for k in ("raw", "centred", "n", "rechecked")}
