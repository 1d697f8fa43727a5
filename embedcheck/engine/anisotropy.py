"""The anisotropy check (:func:`embedcheck.geometry.anisotropy.check`) over blocks of rows, exact.

Tasks cover global row ranges made of whole ``CHUNK``-row blocks — the blocks of the in-memory
check — read from whichever shards hold them; the driver combines their results in row order:

1. **unit sums**: per block (Σu, Σ‖u‖²) of A, B and the fit files, added in block order from zero
   as the in-memory ``unit_sum`` does → anisotropy of each side and the means (own rows,
   ``--fit-a``/``--fit-b``, ``--shared``).
2. **pairs**: q_j = μa·b_j and ‖b_j − μb‖ per block of B; then per block of A the matched
   cosines (raw, centred) and, for every derangement π, the unrelated cosines (a_i, b_π(i)), B's
   rows at π(i) fetched by global index. The driver gathers these per-row values (it holds
   (4 + 2·perms) floats per row, as the in-memory check does) and computes every figure with the
   in-memory ``_section``: the JSON is byte-identical to the one-file run.
3. **partner ranked first**: one task per (query tile × candidate tile) returns, per query row, the
   float32 maximum over the tile's candidates j ≠ i of the raw and the centred cosine; the driver
   merges tiles by element-wise max (exact: max is order-free). A task per query tile then decides
   each row against the rigorous float32 rounding bound of
   :func:`~embedcheck.geometry.anisotropy.partner_ranked_first`; rows inside the bound are
   re-decided in float64 by (unsure rows × candidate tile) tasks, merged by max again. The counts
   equal a float64 brute force, whatever the tiling.

**Derangements are drawn over the global row index** exactly as the in-memory check draws them
(:func:`~embedcheck.geometry.anisotropy.derangements`: ``np.random.default_rng(seed)``,
``rng.permutation(n)`` redrawn until no i maps to itself) on the driver, which ships each task its
columns ``P[:, a:b]``; the floor never depends on how the rows are cut into shards.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from ..geometry import anisotropy as core
from ..io.source import Part, Source, ranges, read_range, source_of_parts
from ..rows import iter_chunks
from .runner import Engine

#: rows per task (whole CHUNK blocks, so every block is a block of the in-memory check)
TASK_ROWS = 32 * core.CHUNK


def _unit_range(parts: tuple[Part, ...], a: int, b: int, name: str, W: np.ndarray | None,
                check: bool = False) -> np.ndarray:
    return core.UnitRows(read_range(parts, a, b, check=check, what=name), name, W).get(slice(None))


# ---- pass 1: Σu and Σ‖u‖² per CHUNK block ----------------------------------------------------


def unit_sum_range(parts: tuple[Part, ...], start: int, stop: int, name: str,
                   W: np.ndarray | None) -> list[tuple[np.ndarray, float]]:
    out = []
    for sl in iter_chunks(stop - start, core.CHUNK):
        U = _unit_range(parts, start + sl.start, start + sl.stop, name, W, check=True)
        out.append((U.sum(axis=0), float(np.einsum("ij,ij->", U, U))))
    return out


def unit_sum(engine: Engine, src: Source, name: str, W: np.ndarray | None = None) -> tuple[np.ndarray, float, int]:
    """:func:`embedcheck.geometry.anisotropy.unit_sum`: the same block sums, added in the same order."""
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
    """q_j = μa·b_j and ‖b_j − μb‖ for B's rows, per CHUNK block as the in-memory check."""
    q, nb = np.empty(stop - start), np.empty(stop - start)
    for sl in iter_chunks(stop - start, core.CHUNK):
        UB = _unit_range(b_parts, start + sl.start, start + sl.stop, "B", None)
        q[sl] = UB @ mu_a
        nb[sl] = core._centre(UB, mu_b, "B", start + sl.start)[1]
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
    for sl in iter_chunks(r_n, core.CHUNK):
        a, b = start + sl.start, start + sl.stop
        UA = _unit_range(a_parts, a, b, "A", W)
        UB = _unit_range(b_parts, a, b, "B", None)
        CA, na = core._centre(UA, mu_a, "A", a)
        CB, _ = core._centre(UB, mu_b, "B", a)
        out["m_raw"][sl] = np.einsum("ij,ij->i", UA, UB)
        out["m_cen"][sl] = np.einsum("ij,ij->i", CA, CB)
        out["floor_raw"].append(core.floor_partials(UA, UB))  # exact floor: Gram partials per block
        out["floor_cen"].append(core.floor_partials(CA, CB))
        r = c - UA @ mu_b
        for p in range(perms):
            idx = P[p, sl]
            raw = np.einsum("ij,ij->i", UA, core.UnitRows(rb.take(idx), "B").get(slice(None)))
            out["u_raw"][p, sl] = raw
            out["u_cen"][p, sl] = (raw + r - q[idx]) / (na * nb[idx])
    return out


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
    _, nb = core._centre(UB, mu_b, "B", c0)
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
                 qmax: float) -> dict[str, Any]:
    """Sure counts for A's rows ``[q0, q1)`` and the rows to re-decide in float64 (global indices),
    with the rounding bound of :func:`embedcheck.geometry.anisotropy.partner_ranked_first`."""
    d = int(mu_b.shape[0])
    c = float(mu_a @ mu_b)
    UA = _unit_range(a_parts, q0, q1, "A", W)
    UB = _unit_range(b_parts, q0, q1, "B", None)
    CA, na = core._centre(UA, mu_a, "A", q0)
    CB, _ = core._centre(UB, mu_b, "B", q0)
    d_raw = np.einsum("ij,ij->i", UA, UB)
    d_cen = np.einsum("ij,ij->i", CA, CB)
    r = c - UA @ mu_b
    u32 = core._U32
    eps = (d + 2) * u32 / (1 - (d + 2) * u32)
    g_raw = 2 * eps
    g_cen = 2 * (eps + u32 * (4 + 5 * np.abs(r) + 2 * qmax)) * wmax / na
    m_raw = d_raw - mr.astype(np.float64)
    m_cen = d_cen - mc.astype(np.float64) / na
    unsure = (np.abs(m_raw) <= g_raw) | (np.abs(m_cen) <= g_cen)
    sure = ~unsure
    return {"raw": int(np.count_nonzero((m_raw > g_raw) & sure)),
            "centred": int(np.count_nonzero((m_cen > g_cen) & sure)),
            "rows": np.arange(q0, q1)[unsure], "d_raw": d_raw[unsure], "d_cen": d_cen[unsure]}


def exact_max(a_parts: tuple[Part, ...], b_parts: tuple[Part, ...], c0: int, c1: int, W: np.ndarray | None,
              mu_a: np.ndarray, mu_b: np.ndarray, rows: np.ndarray, key_block: int) -> tuple[np.ndarray, np.ndarray]:
    """Float64 max over candidates j ≠ i in B's rows ``[c0, c1)`` of raw and centred cos(a_i, b_j)."""
    UA = core.UnitRows(source_of_parts(a_parts).take(rows), "A", W).get(slice(None))
    CA, _ = core._centre(UA, mu_a, "A", rows)
    mr = np.full(len(rows), -np.inf)
    mc = np.full(len(rows), -np.inf)
    for j0 in range(c0, c1, key_block):
        j1 = min(j0 + key_block, c1)
        UB = _unit_range(b_parts, j0, j1, "B", None)
        CB, _ = core._centre(UB, mu_b, "B", j0)
        core.max_off_block(UA, CA, UB, CB, rows, j0, mr, mc)
    return mr, mc


def tiles(n: int, target: int = 8) -> list[tuple[int, int]]:
    """About ``target`` ranges of whole CHUNK blocks (at least one block each)."""
    step = max(core.CHUNK, -(-n // target // core.CHUNK) * core.CHUNK)
    return ranges(n, step)


def partner_first(engine: Engine, A: Source, B: Source, W: np.ndarray | None, mu_a: np.ndarray, mu_b: np.ndarray,
                  wmax: float, qmax: float, block: int = 1024) -> dict[str, int]:
    """Exact counts of rows whose partner is ranked first, raw and centred (see module doc)."""
    tl = tiles(A.n)
    blocks = engine.map(block_max, [(A.parts, B.parts, q0, q1, c0, c1, W, mu_a, mu_b, block)
                                    for q0, q1 in tl for c0, c1 in tl])
    decide_tasks = []
    for i, (q0, q1) in enumerate(tl):
        mr, mc = blocks[i * len(tl)]
        for j in range(1, len(tl)):  # element-wise max: exact, order-free
            br, bc = blocks[i * len(tl) + j]
            mr, mc = np.maximum(mr, br), np.maximum(mc, bc)
        decide_tasks.append((A.parts, B.parts, q0, q1, W, mu_a, mu_b, mr, mc, wmax, qmax))
    del blocks
    decided = engine.map(decide_range, decide_tasks)
    count_raw = sum(x["raw"] for x in decided)
    count_cen = sum(x["centred"] for x in decided)
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
            count_raw += int(np.count_nonzero(dr[s:s + block] > mr64 + core.TIE))
            count_cen += int(np.count_nonzero(dc[s:s + block] > mc64 + core.TIE))
    return {"raw": count_raw, "centred": count_cen, "n": A.n, "rechecked": len(rows)}


# ---- the check -------------------------------------------------------------------------------


def check(engine: Engine, A: Source, B: Source, *, fit_a: Source | None = None, fit_b: Source | None = None,
          shared: bool = False, perms: int = 20, seed: int = 0, names: dict[str, str] | None = None,
          map_fit: tuple[Any, Any] | None = None, block: int = 1024,
          keep: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The anisotropy report over parts (the one driver, on every engine); ``keep`` receives the
    per-row matched and unrelated cosines (raw and centred) for the figure."""
    return check_result(engine, A, B, fit_a=fit_a, fit_b=fit_b, shared=shared, perms=perms, seed=seed,
                        names=names, map_fit=map_fit, block=block, keep=keep).to_dict()


def check_result(engine: Engine, A: Source, B: Source, *, fit_a: Source | None = None, fit_b: Source | None = None,
                 shared: bool = False, perms: int = 20, seed: int = 0, names: dict[str, str] | None = None,
                 map_fit: tuple[Any, Any] | None = None, block: int = 1024,
                 keep: dict[str, np.ndarray] | None = None) -> core.AnisotropyResult:
    """:func:`check` as the typed result."""
    names = names or {}
    n = A.n
    if B.n != n:
        raise InputError(f"A has {n} rows but B has {B.n}; row i of A must pair with row i of B")
    if n < 2:
        raise InputError(f"A and B need at least 2 paired rows, got {n}")
    if map_fit is None and A.dim != B.dim:
        raise InputError(f"A has dimension {A.dim} but B has {B.dim}; "
                         "for two different models fit a map first (--map-fit TRAIN_A TRAIN_B)")
    if perms < 1:
        raise InputError(f"--perms must be ≥ 1, got {perms}")
    for F, X, side in ((fit_a, A, "a"), (fit_b, B, "b")):
        if F is not None and F.dim != X.dim:
            label = f"--fit-{side} {names[f'fit_{side}']}" if names.get(f"fit_{side}") else f"--fit-{side}"
            raise InputError(f"{label} has dimension {F.dim} but {side.upper()} has {X.dim}")
    mapping = None
    W = None
    if map_fit is not None:
        TA, TB = map_fit
        if TA.shape[1] != A.dim:
            raise InputError(f"--map-fit TRAIN_A has dimension {TA.shape[1]} but A has {A.dim}")
        if TB.shape[1] != B.dim:
            raise InputError(f"--map-fit TRAIN_B has dimension {TB.shape[1]} but B has {B.dim}")
        mapping = core.fit_orthogonal_map(TA, TB)
        W = mapping.W
    d = B.dim
    sa, ssa, _ = unit_sum(engine, A, "A", W)
    sb, ssb, _ = unit_sum(engine, B, "B")
    aniso = {"a": core.anisotropy_from_sum(sa, ssa, n), "b": core.anisotropy_from_sum(sb, ssb, n)}
    fits = {}
    for side, F, own_sum in (("a", fit_a, sa), ("b", fit_b, sb)):
        if F is None:
            fits[side] = (own_sum, n, f"compared rows of {side.upper()}")
        else:
            label = names.get(f"fit_{side}") or f"--fit-{side}"
            fs, _, fn = unit_sum(engine, F, label, W if side == "a" else None)
            fits[side] = (fs, fn, label)
    mu_a, mu_b, means = core.side_means(fits, shared, W is not None)

    # per-row cosines, computed in the in-memory check's blocks and gathered in row order, so the
    # figures are the in-memory ones, byte for byte
    qnb = engine.map(qnb_range, [(B.parts, a, b, mu_a, mu_b) for a, b in ranges(n, TASK_ROWS)])
    q = np.concatenate([x[0] for x in qnb])
    nb = np.concatenate([x[1] for x in qnb])
    del qnb
    P = core.derangements(n, perms, seed)
    q_ref, nb_ref = engine.put(q), engine.put(nb)
    pairs = engine.map(pairs_range, [(A.parts, B.parts, a, b, W, mu_a, mu_b, P[:, a:b], q_ref, nb_ref)
                                     for a, b in ranges(n, TASK_ROWS)])
    m_raw = np.concatenate([x["m_raw"] for x in pairs])
    m_cen = np.concatenate([x["m_cen"] for x in pairs])
    u_raw = np.concatenate([x["u_raw"] for x in pairs], axis=1)
    u_cen = np.concatenate([x["u_cen"] for x in pairs], axis=1)
    floors: dict[str, Any] = {}
    for key in ("floor_raw", "floor_cen"):  # merged block after block, as the in-memory check merges them
        acc: list[dict[str, Any]] = []
        for x in pairs:
            for part in x[key]:
                acc = [core.floor_merge(acc + [part])]
        floors[key] = core.floor_finish(acc[0])
    del pairs, P
    wmax = float((1.0 / nb).max())
    qmax = float(np.abs(q).max())
    first = partner_first(engine, A, B, W, mu_a, mu_b, wmax, qmax, block=block)
    res = core.AnisotropyResult(
        n=n, dim=d, means=means, anisotropy=aniso,
        raw=core._section(m_raw, u_raw, first["raw"], n, floors["floor_raw"]),
        centred=core._section(m_cen, u_cen, first["centred"], n, floors["floor_cen"]),
        partner_first_by_chance=1.0 / n,
        warning=core._warning(aniso), note=core._note(means), map=mapping)
    res.reading = core.reading(res.to_dict())
    if keep is not None:
        keep.update(matched_raw=m_raw, matched_centred=m_cen, unrelated_raw=u_raw, unrelated_centred=u_cen)
    return res
