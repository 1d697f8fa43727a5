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

This module is the check and its driver; the unit rows, the floor and the tasks of the first two passes
are :mod:`~embedcheck.geometry.anisotropy_floor`, partner ranked first :mod:`~embedcheck.geometry.anisotropy_partner`.

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
from typing import Any, Callable, Optional

import numpy as np

from ..errors import InputError
from ..io.source import ranges
from ..report import readings as R
from ..report.result import Result, hidden, optional
from ..stats import paired as P
from ..stats.items import ItemFigure, items_paired
from .anisotropy_floor import (  # noqa: F401  (importable from here as before)
    CHUNK,
    TASK_ROWS,
    ZERO_SD,
    UnitRows,
    _centre,
    _normalise,
    _norms,
    _unit_range,
    anisotropy_from_sum,
    derangements,
    floor_finish,
    floor_merge,
    floor_partials,
    pairs_range,
    qnb_range,
    unit_sum,
    unit_sum_range,
)
from .anisotropy_partner import (  # noqa: F401  (importable from here as before)
    _U32,
    TIE,
    block_max,
    decide_range,
    exact_max,
    max_off_block,
    partner_first,
    partner_ranked_first,
    tiles,
)
from .intervals import normal_mean_ci, wilson_ci

#: anisotropy above this triggers the skill's warning
WARN_ANISOTROPY = 0.3
#: a mean fitted on fewer rows than this triggers the note
NOTE_MIN_FIT_ROWS = 1000

Progress = Optional[Callable[[int, int], None]]


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


# --------------------------------------------------------------------------------------------
# the one driver: tasks over row ranges, merged in row order, on any engine
#
# Tasks cover global row ranges made of whole ``CHUNK``-row blocks, read from whichever parts hold
# them; the driver combines their results in row order:
#
# 1. unit sums: per block (Σu, Σ‖u‖²) of A, B and the fit files, added in block order from zero
#    → anisotropy of each side and the means (own rows, fit rows, shared).
# 2. pairs: q_j = μa·b_j and ‖b_j − μb‖ per block of B; then per block of A the matched cosines
#    (raw, centred) and, for every derangement π, the unrelated cosines (a_i, b_π(i)), B's rows at
#    π(i) fetched by global index. The driver gathers these per-row values ((4 + 2·perms) floats
#    per row) and computes every figure with ``_section``.
# 3. partner ranked first: one task per (query tile × candidate tile) returns, per query row, the
#    float32 maximum over the tile's candidates j ≠ i of the raw and the centred cosine; the driver
#    merges tiles by element-wise max (exact: max is order-free). A task per query tile then decides
#    each row against the rigorous float32 rounding bound (:func:`partner_ranked_first`); rows
#    inside the bound are re-decided in float64 by (unsure rows × candidate tile) tasks, merged by
#    max again. The counts equal a float64 brute force, whatever the tiling.
#
# Derangements are drawn over the global row index on the driver (:func:`derangements`), which
# ships each task its columns ``P[:, a:b]``: the floor never depends on the sharding.


# ---- the check -------------------------------------------------------------------------------


def check(A: Any, B: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`check_result` as its report dict (``check_result(...).to_dict()``)."""
    return check_result(A, B, **kwargs).to_dict()


def check_result(A: Any, B: Any, *, fit_a: Any = None, fit_b: Any = None,
                 shared: bool = False, perms: int = 20, seed: int = 0, names: dict[str, str] | None = None,
                 map_fit: tuple[Any, Any] | None = None, block: int = 1024, progress: Progress = None,
                 keep: dict[str, np.ndarray] | None = None, engine: Any = None) -> AnisotropyResult:
    """The whole check — the one driver, on every engine (this process when ``engine`` is None).
    ``A``, ``B``, ``fit_a``, ``fit_b``: arrays, memmaps, ``.npy`` paths, shard sets or Sources.
    Beside the derangement floor, each view carries the exact floor over all n(n−1) unrelated
    pairs (:func:`floor_partials`, O(n·d²), float64).

    ``names`` gives file names for ``means`` (keys ``fit_a``, ``fit_b``); ``map_fit`` =
    (TRAIN_A, TRAIN_B) fits :func:`fit_orthogonal_map` and compares A's mapped rows. A ``keep``
    dict receives the cosines behind the figures (for the plot and paired comparisons):
    ``matched_raw`` and ``matched_centred`` (n,), ``unrelated_raw`` and ``unrelated_centred``
    (perms, n), and the partner-ranked-first flags ``first_raw``, ``first_centred`` (n,).
    """
    from ..engine import or_local
    from ..io.source import open_source

    engine = or_local(engine)
    A, B = open_source(A, what="A"), open_source(B, what="B")
    fit_a = open_source(fit_a, what="--fit-a") if fit_a is not None else None
    fit_b = open_source(fit_b, what="--fit-b") if fit_b is not None else None
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
        raise InputError(f"perms must be >= 1, got {perms}")
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
        mapping = fit_orthogonal_map(TA, TB)
        W = mapping.W
    d = B.dim
    sa, ssa, _ = unit_sum(engine, A, "A", W)
    sb, ssb, _ = unit_sum(engine, B, "B")
    aniso = {"a": anisotropy_from_sum(sa, ssa, n), "b": anisotropy_from_sum(sb, ssb, n)}
    fits = {}
    for side, F, own_sum in (("a", fit_a, sa), ("b", fit_b, sb)):
        if F is None:
            fits[side] = (own_sum, n, f"compared rows of {side.upper()}")
        else:
            label = names.get(f"fit_{side}") or f"--fit-{side}"
            fs, _, fn = unit_sum(engine, F, label, W if side == "a" else None)
            fits[side] = (fs, fn, label)
    mu_a, mu_b, means = side_means(fits, shared, W is not None)

    # per-row cosines, computed in the global CHUNK blocks and gathered in row order, so the
    # figures are the in-memory ones, byte for byte
    qnb = engine.map(qnb_range, [(B.parts, a, b, mu_a, mu_b) for a, b in ranges(n, TASK_ROWS)])
    q = np.concatenate([x[0] for x in qnb])
    nb = np.concatenate([x[1] for x in qnb])
    del qnb
    P = derangements(n, perms, seed)
    q_ref, nb_ref = engine.put(q), engine.put(nb)
    pairs = engine.map(pairs_range, [(A.parts, B.parts, a, b, W, mu_a, mu_b, P[:, a:b], q_ref, nb_ref)
                                     for a, b in ranges(n, TASK_ROWS)])
    m_raw = np.concatenate([x["m_raw"] for x in pairs])
    m_cen = np.concatenate([x["m_cen"] for x in pairs])
    u_raw = np.concatenate([x["u_raw"] for x in pairs], axis=1)
    u_cen = np.concatenate([x["u_cen"] for x in pairs], axis=1)
    floors: dict[str, Any] = {}
    for key in ("floor_raw", "floor_cen"):  # merged block after block, in row order
        acc: list[dict[str, Any]] = []
        for x in pairs:
            for part in x[key]:
                acc = [floor_merge(acc + [part])]
        floors[key] = floor_finish(acc[0])
    del pairs, P
    wmax = float((1.0 / nb).max())
    qmax = float(np.abs(q).max())
    first = partner_first(engine, A, B, W, mu_a, mu_b, wmax, qmax, block=block)
    if progress:
        progress(n, n)
    res = AnisotropyResult(
        n=n, dim=d, means=means, anisotropy=aniso,
        raw=_section(m_raw, u_raw, first["raw"], n, floors["floor_raw"]),
        centred=_section(m_cen, u_cen, first["centred"], n, floors["floor_cen"]),
        partner_first_by_chance=1.0 / n,
        warning=R.anisotropy_warning(aniso, WARN_ANISOTROPY), note=R.fit_note(means, NOTE_MIN_FIT_ROWS), map=mapping)
    res.reading = R.anisotropy_reading(res.to_dict())
    if keep is not None:
        keep.update(matched_raw=m_raw, matched_centred=m_cen, unrelated_raw=u_raw, unrelated_centred=u_cen,
                    first_raw=first["first_raw"], first_centred=first["first_centred"])
    return res


# ---- --against ------------------------------------------------------------------------------


def _floor_moments(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weighted matched mean, floor mean, floor sd with ddof 1) of rows ``x = [matched, unrelated
    under each derangement]`` — the floor's sums shifted by the sample floor, for accuracy."""
    W = w.sum(axis=1)
    m = (w @ x[:, 0]) / W
    U = x[:, 1:]
    c = float(U.mean())
    per = U.shape[1]
    s1 = w @ (U - c).sum(axis=1)
    s2 = w @ ((U - c) ** 2).sum(axis=1)
    N = W * per
    fm = s1 / N
    var = (s2 - N * fm * fm) / np.maximum(N - 1, 1)
    return m, fm + c, np.sqrt(np.maximum(var, 0.0))


def _gap_over_floor_sd(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    m, fm, sd = _floor_moments(x, w)
    return np.divide(m - fm, sd, out=np.full(len(w), np.nan), where=sd > 0)


def _floor_share(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    m, fm, _ = _floor_moments(x, w)
    return np.divide(fm, m, out=np.full(len(w), np.nan), where=m > 0)


def anisotropy_paired(cos_a: dict[str, np.ndarray], cos_b: dict[str, np.ndarray], **kw: Any) -> P.Paired:
    """The anisotropy check's headline figures of A's pairs and B's pairs of the same rows, from
    the per-row cosines each check keeps (``matched_<view>`` (n,), ``unrelated_<view>`` (perms, n)
    under the same seeded derangements, ``first_<view>`` (n,) partner-ranked-first flags)."""
    figs: dict[str, ItemFigure] = {}

    def rows(c: dict[str, np.ndarray], view: str) -> np.ndarray:
        return np.c_[c[f"matched_{view}"], np.asarray(c[f"unrelated_{view}"]).T]

    for view, key in (("raw", "raw"), ("centred", "centred")):
        xa, xb = rows(cos_a, key), rows(cos_b, key)
        gap_a = xa[:, 0] - xa[:, 1:].mean(axis=1)
        gap_b = xb[:, 0] - xb[:, 1:].mean(axis=1)
        figs[f"{view}.gap"] = ItemFigure(gap_a, gap_b)
        figs[f"{view}.gap_over_floor_sd"] = ItemFigure(xa, xb, _gap_over_floor_sd)
        if view == "centred":
            figs["centred.matched"] = ItemFigure(xa[:, 0], xb[:, 0])
        figs[f"{view}.partner_ranked_first"] = ItemFigure(np.asarray(cos_a[f"first_{key}"], dtype=np.float64),
                                                          np.asarray(cos_b[f"first_{key}"], dtype=np.float64))
        if view == "raw":
            figs["raw.floor_share"] = ItemFigure(xa, xb, _floor_share, better="lower")
    return items_paired(figs, unit="rows", **kw)
