"""PhysScore recalibration probe (paper Table 3; spec §4).

Can a linear map of |e_a − e_b| recover physical distance where cosine does not? Per range and
split, a ridge regression (``RidgeCV`` over 13 α from 10⁻² to 10⁴) is fitted on the training pairs
of all four units pooled, target ``log1p(|v_a − v_b|)``. On the held-out items every test item is an
anchor once (itself excluded) and the other test items are ranked by the probe and, on exactly
the same items, by cosine.

The split is item-level and seeded (``default_rng(12345 + s)``):

>>> probe_split(21, 0)[0].tolist()
[0, 6, 11, 12, 15, 17, 19]
>>> [len(t) for t in probe_split(25, 0)]
[9, 16]

PACC here uses the protocol's asymmetric tie rule: for a candidate pair i < j, if d_i < d_j the
pair is right iff score_i > score_j, otherwise (ties included) iff score_i < score_j:

>>> import numpy as np
>>> pacc_tie_rule(np.array([10.0, 10.0, 20.0]), np.array([0.9, 0.5, 0.1]))
0.6666666666666666
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ..rows import unit_rows
from .protocol import RANGES, UNITS, Cell, kendall_tau_b

TEST_FRACTION = 0.35
MIN_TEST = 4
N_SPLITS = 5
BASE_SEED = 12345
#: 13 log-spaced ridge penalties, 0.01 … 10000
ALPHAS: np.ndarray = np.logspace(-2, 4, 13)


def n_test_items(n: int) -> int:
    """max(4, round(0.35·n)), capped at n − 3: 7 for n = 21, 9 for n = 25."""
    return int(min(max(MIN_TEST, round(TEST_FRACTION * n)), n - 3))


def probe_split(n: int, split: int, base_seed: int = BASE_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(sorted test indices, sorted train indices) of split ``split`` for a range of n items."""
    perm = np.random.default_rng(base_seed + split).permutation(n)
    k = n_test_items(n)
    return np.sort(perm[:k]), np.sort(perm[k:])


def pair_features(E: np.ndarray, values: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Features |e_i − e_j| and targets log1p(|v_i − v_j|) for all i < j among ``idx``."""
    a, b = np.triu_indices(len(idx), 1)
    ia, ib = idx[a], idx[b]
    X = np.abs(E[ia] - E[ib])
    y = np.log1p(np.abs(np.asarray(values, dtype=np.float64)[ia] - np.asarray(values, dtype=np.float64)[ib]))
    return X, y


def pacc_tie_rule(dist: np.ndarray, score: np.ndarray) -> float:
    """Pairwise accuracy of candidates in their given order with the protocol's tie rule."""
    d = np.asarray(dist, dtype=np.float64)
    s = np.asarray(score, dtype=np.float64)
    i, j = np.triu_indices(len(d), 1)
    if len(i) == 0:
        return float("nan")
    right = np.where(d[i] < d[j], s[i] > s[j], s[i] < s[j])
    return float(np.mean(right))


def anchor_metrics(values: np.ndarray, score: np.ndarray) -> tuple[float, float]:
    """Mean over anchors of τ-b(distance, −score) (nan-mean) and of tie-rule PACC.

    ``values`` are the test items' true values (sorted index order); ``score`` is the m×m matrix
    of "higher = closer" scores, ``score[a, c]`` for anchor a and candidate c.
    """
    v = np.asarray(values, dtype=np.float64)
    m = len(v)
    taus, paccs = [], []
    for a in range(m):
        cand = np.array([c for c in range(m) if c != a])
        dist = np.abs(v[cand] - v[a])
        sc = score[a, cand]
        taus.append(kendall_tau_b(dist, -sc))
        paccs.append(pacc_tie_rule(dist, sc))
    t = np.asarray(taus)
    return (float(np.nanmean(t)) if np.isfinite(t).any() else float("nan")), float(np.mean(paccs))


def _sd(x: Sequence[float]) -> float:
    a = np.asarray(x, dtype=np.float64)
    return float(np.std(a, ddof=1)) if len(a) > 1 else float("nan")


def recalibration_probe(cell_embeddings: Mapping[tuple[str, str], np.ndarray], cells: Sequence[Cell],
                        *, n_splits: int = N_SPLITS, alphas: np.ndarray = ALPHAS,
                        on_step: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    """Table 3: probe vs cosine ranking on held-out items, per cell and for the model (×100).

    ``cell_embeddings[(unit, range)]`` holds the cell's rows in ascending value order. One probe per
    (range, split), trained on the four units' training pairs stacked; evaluated per unit.
    Returns the model row (``cosine_tau``, ``cosine_pacc``, ``probe_tau``, ``probe_pacc``,
    ``delta_tau`` ×100, plus the SDs over cells), ``cells`` (per-cell fractions with the SD over
    splits) and ``alphas`` (the α RidgeCV chose per range and split).
    """
    from threadpoolctl import threadpool_limits

    # Small dense problems (≤ 480 × 480 eigendecompositions): one BLAS thread is fastest, and
    # multi-threaded OpenBLAS slows down ~15x when the cores are shared with other work.
    with threadpool_limits(limits=1):
        return _recalibration_probe(cell_embeddings, cells, n_splits=n_splits, alphas=alphas, on_step=on_step)


def _recalibration_probe(cell_embeddings: Mapping[tuple[str, str], np.ndarray], cells: Sequence[Cell],
                         *, n_splits: int, alphas: np.ndarray,
                         on_step: Optional[Callable[[str], None]]) -> dict[str, Any]:
    from sklearn.linear_model import RidgeCV

    by_range: dict[str, list[Cell]] = {}
    for c in cells:
        by_range.setdefault(c.range, []).append(c)
    E = {(c.unit, c.range): unit_rows(cell_embeddings[(c.unit, c.range)], dtype=np.float32) for c in cells}
    per_cell: dict[tuple[str, str], dict[str, list[float]]] = {
        (c.unit, c.range): {"probe_tau": [], "probe_pacc": [], "cosine_tau": [], "cosine_pacc": []} for c in cells}
    chosen: dict[str, list[float]] = {}
    for rng_key, rcells in by_range.items():
        n = rcells[0].n
        for s in range(n_splits):
            test, train = probe_split(n, s)
            feats = [pair_features(E[(c.unit, c.range)], c.values, train) for c in rcells]
            X = np.concatenate([f[0] for f in feats])
            y = np.concatenate([f[1] for f in feats])
            ridge = RidgeCV(alphas=alphas).fit(X, y)
            chosen.setdefault(rng_key, []).append(float(ridge.alpha_))
            a, b = np.triu_indices(len(test), 1)
            for c in rcells:
                Et = E[(c.unit, c.range)][test]
                pred = ridge.predict(np.abs(Et[a] - Et[b])).astype(np.float64)
                probe = np.zeros((len(test), len(test)))
                probe[a, b] = probe[b, a] = -pred
                cos = (Et @ Et.T).astype(np.float64)
                vt = np.asarray(c.values, dtype=np.float64)[test]
                rec = per_cell[(c.unit, c.range)]
                for name, score in (("probe", probe), ("cosine", cos)):
                    t, p = anchor_metrics(vt, score)
                    rec[f"{name}_tau"].append(t)
                    rec[f"{name}_pacc"].append(p)
            if on_step is not None:
                on_step(f"{rng_key} split {s}")
    rows = []
    for c in cells:
        rec = per_cell[(c.unit, c.range)]
        row: dict[str, Any] = {"unit": c.unit, "range": c.range}
        for k in ("probe_tau", "probe_pacc", "cosine_tau", "cosine_pacc"):
            row[k] = float(np.mean(rec[k]))
            row[f"{k}_sd"] = _sd(rec[k])
        rows.append(row)
    col = {k: [r[k] for r in rows] for k in ("probe_tau", "probe_pacc", "cosine_tau", "cosine_pacc")}
    out: dict[str, Any] = {
        "cosine_tau": 100 * float(np.mean(col["cosine_tau"])),
        "cosine_pacc": 100 * float(np.mean(col["cosine_pacc"])),
        "probe_tau": 100 * float(np.mean(col["probe_tau"])),
        "probe_pacc": 100 * float(np.mean(col["probe_pacc"])),
    }
    out["delta_tau"] = out["probe_tau"] - out["cosine_tau"]
    out.update({f"{k}_std": 100 * _sd(v) for k, v in col.items()})
    out["cells"] = rows
    out["alphas"] = {r: chosen[r] for r in RANGES if r in chosen}
    out["settings"] = {"test_fraction": TEST_FRACTION, "splits": n_splits, "base_seed": BASE_SEED,
                       "alpha_grid": [float(a) for a in alphas], "units_pooled": [u for u in UNITS]}
    return out
