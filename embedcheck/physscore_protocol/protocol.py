"""PhysScore: does cosine similarity follow physical measurement distances?

Pure computation for ``embedcheck physscore`` (protocol: ``../shared/specs/physscore.md``,
restating the PhysScore paper). This module is the ground floor of
:mod:`embedcheck.physscore`: the phrase sets, Kendall τ-b and PACC, and the benchmark (paper
Table 1). Nothing here reads files or prints.

Phrases follow the exact templates: ``g`` format with the singular unit iff ``|v| == 1``
for the four plain ranges, ``.0e`` format with an always-singular unit for ``scientific``.

>>> phrase(1, "meter"), phrase(0.5, "meter"), phrase(-100, "liter"), phrase(3.1623e-06, "meter", scientific=True)
('1 meter', '0.5 meters', '-100 liters', '3e-06 meter')
>>> len(benchmark_cells()), sum(len(c.texts) for c in benchmark_cells())
(20, 452)

A cell is scored from its first (smallest) phrase as the anchor, self pair included:

>>> import numpy as np
>>> E = np.array([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8]])   # cosine to anchor falls: perfect order
>>> r = score_cell(E, np.array([0.0, 1.0, 2.0]))
>>> round(r.kendall_tau, 6), round(r.pacc, 6)
(1.0, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ..rows import unit_rows

#: the four benchmark units, in the paper's order
UNITS: tuple[str, ...] = ("meter", "kilogram", "liter", "second")


#: the five number ranges, in the paper's column order
RANGES: tuple[str, ...] = ("local_0_10", "medium_0_1000", "log_1_100k", "sign_split", "scientific")


#: column titles of the paper's tables and figures
RANGE_TITLES: dict[str, str] = {"local_0_10": "Local", "medium_0_1000": "Medium", "log_1_100k": "Log",
                                "sign_split": "Sign", "scientific": "Scientific"}


#: every set ``physscore phrases`` can write; ``benchmark`` feeds Tables 1 and 3, ``lexical`` Table 4,
#: ``digits_words`` and ``conversion`` only the figures
PHRASE_SETS: tuple[str, ...] = ("benchmark", "lexical", "digits_words", "conversion")


DIGITS: tuple[str, ...] = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "100")


WORDS: tuple[str, ...] = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                          "nine", "ten", "one-hundred")


#: litre → gallon factor: the physically correct one, and the paper's (inverted) one
GALLONS_PER_LITER = 0.264172


PAPER_GALLON_FACTOR = 3.785


def range_values(key: str) -> np.ndarray:
    """The exact ascending values of a number range (spec §1.2).

    >>> range_values("log_1_100k")[:6].tolist(), len(range_values("scientific"))
    ([1, 2, 3, 4, 7, 11], 25)
    """
    if key == "local_0_10":
        return np.arange(0, 10.5, 0.5, dtype=np.float64)
    if key == "medium_0_1000":
        return np.arange(0, 1001, 50, dtype=np.int64)
    if key == "log_1_100k":
        return np.unique(np.round(np.logspace(0, 5, 25))).astype(np.int64)
    if key == "sign_split":
        return np.arange(-100, 101, 10, dtype=np.int64)
    if key == "scientific":
        return np.logspace(-6, 6, 25, dtype=np.float64)
    raise ValueError(f"unknown PhysScore range {key!r} (known: {', '.join(RANGES)})")


def _plain(v: Any) -> float | int:
    """numpy scalar → Python int/float (``format`` then behaves exactly like Python's)."""
    return int(v) if isinstance(v, (int, np.integer)) else float(v)


def phrase(value: Any, unit: str, *, scientific: bool = False) -> str:
    """One measurement phrase: ``g`` number + unit, plural unless |v| == 1; or ``.0e`` + singular unit.

    >>> phrase(0, "meter"), phrase(14678, "meter"), phrase(1e-05, "kilometer"), phrase(1e-06, "second", scientific=True)
    ('0 meters', '14678 meters', '1e-05 kilometers', '1e-06 second')
    """
    v = _plain(value)
    if scientific:
        return f"{v:.0e} {unit}"
    return f"{v:g} {unit if abs(v) == 1 else unit + 's'}"


@dataclass(frozen=True)
class Cell:
    """One (unit, range) combination: ascending true values and their phrases."""

    unit: str
    range: str
    values: np.ndarray
    texts: tuple[str, ...]

    @property
    def n(self) -> int:
        return len(self.texts)


def make_cell(unit: str, range_key: str) -> Cell:
    vals = range_values(range_key)
    sci = range_key == "scientific"
    return Cell(unit, range_key, vals, tuple(phrase(v, unit, scientific=sci) for v in vals))


def benchmark_cells(units: Sequence[str] = UNITS, ranges: Sequence[str] = RANGES) -> list[Cell]:
    """The 20 benchmark cells, unit-major (meter/local, meter/medium, …, second/scientific)."""
    return [make_cell(u, r) for u in units for r in ranges]


def digits_words(unit: str) -> tuple[list[str], list[str]]:
    """(word phrases, digit phrases) for the Digits ↔ Words panel, singular unit, no plural rule.

    >>> w, d = digits_words("meter"); w[5], d[5], w[-1], d[-1]
    ('five meter', '5 meter', 'one-hundred meter', '100 meter')
    """
    return [f"{w} {unit}" for w in WORDS], [f"{d} {unit}" for d in DIGITS]


@dataclass(frozen=True)
class ConversionPair:
    """``source`` X paired with ``target`` X·factor (or X/divisor) over 40 log-spaced X."""

    panel: str
    source: str
    target: str
    factor: float
    divide: bool = False  # ``÷ factor`` instead of ``× factor`` (exact floats as in the protocol)

    @property
    def label(self) -> str:
        return f"{self.source} ↔ {self.target}"

    def values(self) -> np.ndarray:
        return conversion_values()

    def converted(self) -> np.ndarray:
        v = self.values()
        return v / self.factor if self.divide else v * self.factor

    def source_texts(self) -> list[str]:
        return [phrase(v, self.source) for v in self.values()]

    def target_texts(self) -> list[str]:
        return [phrase(v, self.target) for v in self.converted()]


CONVERSION_PANELS: tuple[str, ...] = ("Length", "Mass", "Volume", "Time")


def conversion_values() -> np.ndarray:
    """40 log-spaced source values from 0.01 to 1000."""
    return np.logspace(-2, 3, 40, dtype=np.float64)


def conversion_pairs(paper: bool = False) -> list[ConversionPair]:
    """The 11 conversion pairs in 4 panels. ``paper=True`` keeps the paper's litre → gallon ×3.785
    (physically inverted: 1 L ≈ 0.264 gal); the default uses the correct ×0.264172.

    >>> [p.target_texts()[0] for p in conversion_pairs() if p.target == "gallon"]
    ['0.00264172 gallons']
    >>> [p.target_texts()[0] for p in conversion_pairs(paper=True) if p.target == "gallon"]
    ['0.03785 gallons']
    """
    gallon = PAPER_GALLON_FACTOR if paper else GALLONS_PER_LITER
    P = ConversionPair
    return [
        P("Length", "meter", "centimeter", 100), P("Length", "meter", "millimeter", 1000),
        P("Length", "meter", "kilometer", 1000, divide=True),
        P("Mass", "kilogram", "gram", 1000), P("Mass", "gram", "milligram", 1000),
        P("Mass", "kilogram", "ton", 1000, divide=True),
        P("Volume", "liter", "milliliter", 1000), P("Volume", "liter", "gallon", gallon),
        P("Time", "second", "millisecond", 1000), P("Time", "minute", "second", 60),
        P("Time", "hour", "minute", 60),
    ]


def kendall_tau_b(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Kendall's τ-b (scipy's default variant), statistic only; nan when undefined."""
    from scipy.stats import kendalltau

    return float(kendalltau(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)).statistic)


def pacc_ordered(scores: np.ndarray) -> float:
    """Table 1 pairwise accuracy: items in ascending true value; pair i < j correct iff s_i > s_j.

    Ties in ``s`` count as wrong. With no ties PACC = (1 + τ)/2.

    >>> pacc_ordered(np.array([1.0, 0.5, 0.7, 0.1]))
    0.8333333333333334
    """
    s = np.asarray(scores, dtype=np.float64)
    n = len(s)
    i, j = np.triu_indices(n, 1)
    return float(np.mean(s[i] > s[j])) if n > 1 else float("nan")


@dataclass
class CellScore:
    unit: str
    range: str
    n: int
    kendall_tau: float
    pacc: float
    cosines: np.ndarray = field(repr=False)  # cos(anchor, item k) for every k, anchor included
    values: Optional[np.ndarray] = field(default=None, repr=False)  # the cell's ascending values

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "range": self.range, "n": self.n,
                "kendall_tau": self.kendall_tau, "pacc": self.pacc}


def score_cell(E: np.ndarray, values: np.ndarray, unit: str = "", range_key: str = "") -> CellScore:
    """Score one cell: anchor = row 0 (smallest value), s_k = cos(e_0, e_k) for all k (self pair
    included), τ-b(values, −s) and PACC over the ascending order."""
    from sklearn.metrics.pairwise import cosine_similarity

    X = np.asarray(E, dtype=np.float32)
    v = np.asarray(values, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != len(v) or len(v) < 2:
        raise ValueError(f"cell {unit}/{range_key}: need one embedding per value (got {X.shape} for {len(v)} values)")
    if np.any(np.diff(v) <= 0):
        raise ValueError(f"cell {unit}/{range_key}: values must be strictly ascending")
    s = cosine_similarity(X[:1], X)[0].astype(np.float64)
    return CellScore(unit, range_key, len(v), kendall_tau_b(v, -s), pacc_ordered(s), s, v)


def _resampled_cell(v: np.ndarray, s: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """τ-b(values, −s) and PACC of each resample of one cell's items, ``c`` (b x n) copies of item k.

    Exactly what :func:`kendall_tau_b` and the pairwise rule give on the expanded resample: with
    K_ij = sgn(v_i − v_j)·sgn(s_j − s_i), C − D = cᵀKc / 2; copies of one item tie in both
    variables (the value ties n1 = Σ c_k(c_k − 1)/2), equal cosines tie in s; PACC counts the
    pairs of different values (v_i < v_j), correct iff s_i > s_j, weighted by c_i·c_j.
    """
    x = -s
    K = np.sign(v[:, None] - v[None, :]) * np.sign(x[:, None] - x[None, :])
    m = c.sum(axis=1)
    n0 = m * (m - 1) / 2
    n1 = (c * (c - 1)).sum(axis=1) / 2
    _, grp = np.unique(x, return_inverse=True)
    gx = np.zeros((c.shape[0], grp.max() + 1))
    np.add.at(gx.T, grp, c.T)
    n2 = (gx * (gx - 1)).sum(axis=1) / 2
    num = np.einsum("bi,ij,bj->b", c, K, c) / 2
    den = np.sqrt((n0 - n1) * (n0 - n2))
    tau = np.divide(num, den, out=np.full(len(c), np.nan), where=den > 0)
    less = (v[:, None] < v[None, :]).astype(np.float64)
    right = less * (s[:, None] > s[None, :])
    pairs = np.einsum("bi,ij,bj->b", c, less, c)
    pacc = np.divide(np.einsum("bi,ij,bj->b", c, right, c), pairs, out=np.full(len(c), np.nan), where=pairs > 0)
    return tau, pacc


def table1_intervals(scores: Sequence[CellScore], resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """95 % intervals of Table 1's τ, PACC and AVG (×100): each resample draws every cell's items
    with replacement (the anchor's cosines are kept), scores each cell, then averages the cells
    as Table 1 does. ``{"kendall_tau_ci95", "pacc_ci95", "avg_ci95", "ci_method"}``.
    """
    from ..geometry.intervals import method, percentile_ci

    tau, pacc = table1_resamples(scores, resamples, seed)
    return {"kendall_tau_ci95": percentile_ci(tau), "pacc_ci95": percentile_ci(pacc),
            "avg_ci95": percentile_ci((tau + pacc) / 2),
            "ci_method": method("items within each cell, then the cell average", resamples, seed)}


def table1_resamples(scores: Sequence[CellScore], resamples: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Table 1's τ and PACC ×100 under each resample (every cell's items drawn with replacement;
    the draws depend only on the cells' sizes and ``seed``, so two models' resamples are the same
    draws — what a paired comparison needs)."""
    rng = np.random.default_rng(seed)
    taus, paccs = [], []
    for sc in scores:
        if sc.values is None:
            raise ValueError(f"cell {sc.unit}/{sc.range} carries no values; score it with score_cell")
        c = rng.multinomial(sc.n, np.full(sc.n, 1.0 / sc.n), size=resamples).astype(np.float64)
        t, p = _resampled_cell(np.asarray(sc.values, dtype=np.float64), sc.cosines, c)
        taus.append(t)
        paccs.append(p)
    return 100 * np.mean(taus, axis=0), 100 * np.mean(paccs, axis=0)


def table1_paired(scores_a: Sequence[CellScore], scores_b: Sequence[CellScore], *, resamples: int = 1000,
                  seed: int = 0, margins: Optional[dict[str, float]] = None, against: Optional[str] = None) -> Any:
    """Table 1's τ, PACC and AVG ×100 of two models on the same resampled items of every cell: the
    :class:`~embedcheck.report.paired_section.Paired` section: the bias-corrected percentile interval (no
    acceleration term: the resamples are stratified by cell) and the bootstrap p-value (a
    cosine belongs to its own model's anchor, so A's and B's items are not swapped)."""
    from ..stats import paired as P

    ra, rb = table1_row(scores_a), table1_row(scores_b)
    ta, pa = table1_resamples(scores_a, resamples, seed)
    tb, pb = table1_resamples(scores_b, resamples, seed)
    boots = {"kendall_tau": (ta, tb), "pacc": (pa, pb), "avg": ((ta + pa) / 2, (tb + pb) / 2)}
    items = {f"table1.{k}": P.paired_figure(ra[k], rb[k], a, b, margin=(margins or {}).get(f"table1.{k}"))
             for k, (a, b) in boots.items()}
    method = (f"paired bias-corrected percentile bootstrap over the items within each cell (the same draws for "
              f"A and B), {resamples} resamples, seed {seed}; bootstrap p-value; minimum detectable effect at "
              f"80% power, alpha 0.05")
    return P.Paired(against=against, ci_method=method, items=items)


def table1_row(scores: Sequence[CellScore]) -> dict[str, float]:
    """Model row of Table 1 (×100): unweighted means over the cells; AVG = (τ + PACC)/2.

    >>> c = [CellScore("m", "r", 3, 0.2, 0.6, np.zeros(3)), CellScore("m", "s", 3, 0.4, 0.7, np.zeros(3))]
    >>> {k: round(v, 6) for k, v in table1_row(c).items()}
    {'kendall_tau': 30.0, 'pacc': 65.0, 'avg': 47.5}
    """
    tau = 100.0 * float(np.mean([c.kendall_tau for c in scores]))
    pacc = 100.0 * float(np.mean([c.pacc for c in scores]))
    return {"kendall_tau": tau, "pacc": pacc, "avg": (tau + pacc) / 2.0}


def benchmark(cell_embeddings: Mapping[tuple[str, str], np.ndarray],
              cells: Optional[Sequence[Cell]] = None, *, resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Table 1 from per-cell embeddings keyed by (unit, range), rows in the cell's ascending order.

    Returns ``{"cells": [...], "table1": {...}, "scores": [CellScore]}``; with ``resamples`` > 0
    ``table1`` also holds the intervals of :func:`table1_intervals` (τ, PACC and AVG ×100).
    """
    cells = list(cells) if cells is not None else benchmark_cells()
    scores = [score_cell(cell_embeddings[(c.unit, c.range)], c.values, c.unit, c.range) for c in cells]
    row: dict[str, Any] = dict(table1_row(scores))
    if resamples > 0:
        iv = table1_intervals(scores, resamples, seed)
        row = {"kendall_tau": row["kendall_tau"], "kendall_tau_ci95": iv["kendall_tau_ci95"],
               "pacc": row["pacc"], "pacc_ci95": iv["pacc_ci95"], "avg": row["avg"], "avg_ci95": iv["avg_ci95"],
               "ci_method": iv["ci_method"]}
    return {"cells": [s.to_dict() for s in scores], "table1": row, "scores": scores}


def cosine_matrix(E: np.ndarray) -> np.ndarray:
    X = unit_rows(E, dtype=np.float32)
    return (X @ X.T).astype(np.float64)


def conversion_curves(lookup: Callable[[Sequence[str]], np.ndarray], paper: bool = False,
                      sigma: float = 0.8) -> list[dict[str, Any]]:
    """Row-wise cosine of each conversion pair's 40 aligned phrases, raw and smoothed
    (``gaussian_filter1d``, σ = 0.8, mode reflect). Qualitative: used only by the figure."""
    from scipy.ndimage import gaussian_filter1d

    out = []
    for p in conversion_pairs(paper):
        A, B = unit_rows(lookup(p.source_texts()), dtype=np.float32), unit_rows(lookup(p.target_texts()), dtype=np.float32)
        cos = np.sum(A * B, axis=1).astype(np.float64)
        out.append({"panel": p.panel, "label": p.label, "x": p.values(), "cosine": cos,
                    "smoothed": gaussian_filter1d(cos, sigma)})
    return out
