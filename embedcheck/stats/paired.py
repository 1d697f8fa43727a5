"""Paired comparison of two embeddings of the same rows: Δ = B − A with one set of resamples.

Two embeddings A and B of the same rows give, per item (a query's AP, a row's correctness, a
pair's cosine, a cell's τ ...), two statistics that are strongly correlated. Treating the two
figures as independent runs (``compare``'s quadrature rule) throws that correlation away; here
every bootstrap resample draws the **same** items (or item groups) for A and B, so the interval
of the difference is as narrow as the pairing allows.

Per figure (:class:`PairedFigure`):

* ``difference`` — ``b − a``, signed so that positive is better (``better="lower"``: ``a − b``);
* ``difference_ci95`` — BCa bootstrap interval (bias-corrected and accelerated, the acceleration
  from the delete-one-unit jackknife; :func:`bca_interval`) over the shared resamples;
* ``p_value`` — two-sided paired permutation test: each unit's A and B values are swapped with
  probability ½ (for a mean, a sign flip of the per-item differences); where a swap is not
  defined (figures built from group sums of spaces of different dimension), a bootstrap test
  (the resampled differences centred on the observed one) — ``p_method`` says which;
* ``min_detectable_effect`` — ``(z₀.₉₇₅ + z₀.₈₀) · se`` with ``se`` the bootstrap standard error
  of the paired difference: the smallest true Δ the test finds with 80 % power at α 0.05;
* ``verdict`` (:func:`verdict`) — ``better`` / ``worse`` when the interval excludes 0;
  ``equivalent`` when it lies inside ±margin (two one-sided tests, each at α 0.025: the same
  95 % interval), ``non-inferior`` when only its worse end is inside −margin, otherwise
  ``inconclusive`` — reported as ``underpowered`` when the minimum detectable effect exceeds the
  margin (the comparison could not have told; not a refutation).

Resamples: ``np.random.default_rng(seed)`` draws the unit weights (multinomial counts, one row
per resample); permutations use ``np.random.default_rng([seed, 1])``. Same seed, same bytes.

>>> rng = np.random.default_rng(0)
>>> a = rng.normal(0.5, 0.2, 400); b = a + 0.05 + rng.normal(0, 0.02, 400)
>>> f = paired_items(a, b, resamples=500, permutations=500, margin=0.02)
>>> f.verdict, round(f.difference, 3), f.p_value < 0.01
('better', 0.05, True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any, Callable, Iterator, Optional

import numpy as np

from ..errors import InputError
from ..report.paired_section import Paired, PairedFigure  # noqa: F401  (importable from here as before)
from ..report.result import Figure

#: resamples and permutations by default
RESAMPLES = 1000
#: cells of one batch of weight rows (``b x n`` float64)
BATCH_CELLS = 2_000_000
#: at most this many delete-one units in the jackknife (more units: delete-a-block)
JACK_MAX = 2000
#: z quantiles: two-sided 95 % and one-sided 80 % power
Z95 = 1.959963984540054
Z80 = 0.8416212335729143
VERDICTS = ("better", "worse", "equivalent", "non-inferior", "inconclusive", "underpowered")

_N = NormalDist()

#: ``statistic(x, w) -> (r,)``: the figure of per-item data ``x`` (n, ...) under each row of item
#: weights ``w`` (r, n) (bootstrap counts; all ones = the sample itself)
Statistic = Callable[[np.ndarray, np.ndarray], np.ndarray]


def weighted_mean(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The default statistic: the weighted mean of 1-D per-item values.

    >>> weighted_mean(np.array([1.0, 3.0]), np.array([[1.0, 1.0], [2.0, 0.0]])).tolist()
    [2.0, 1.0]
    """
    return (w @ np.asarray(x, dtype=np.float64)) / w.sum(axis=1)


def weighted_pearson(x: np.ndarray, y: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Pearson correlation of ``x`` and ``y`` (n, or b x n) under row weights ``c`` (b x n).

    >>> x = np.arange(5.0)
    >>> bool(np.isclose(weighted_pearson(x, x ** 2, np.ones((1, 5)))[0], np.corrcoef(x, x ** 2)[0, 1]))
    True
    """
    x = np.broadcast_to(x, c.shape)
    y = np.broadcast_to(y, c.shape)
    N = c.sum(axis=1, keepdims=True)
    xm = x - (c * x).sum(axis=1, keepdims=True) / N
    ym = y - (c * y).sum(axis=1, keepdims=True) / N
    sxy = (c * xm * ym).sum(axis=1)
    den = np.sqrt((c * xm * xm).sum(axis=1) * (c * ym * ym).sum(axis=1))
    return np.divide(sxy, den, out=np.full(len(c), np.nan), where=den > 1e-300)


def weighted_ranks(v: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Average ranks (ties averaged, as ``scipy.stats.rankdata``) each item takes in a resample
    holding ``c[b, i]`` copies of item ``i`` (a zero weight: the item is absent)."""
    order = np.argsort(v, kind="stable")
    vs = v[order]
    new = np.r_[True, vs[1:] != vs[:-1]]
    starts = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    gsum = np.add.reduceat(c[:, order], starts, axis=1)
    rank = np.cumsum(gsum, axis=1) - gsum + (gsum + 1) / 2
    out = np.empty(c.shape, dtype=np.float64)
    out[:, order] = rank[:, group]
    return out


def weighted_spearman(x: np.ndarray, y: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Spearman correlation under count weights ``c`` (b x n): what ``scipy.stats.spearmanr``
    gives on the expanded resample."""
    return weighted_pearson(weighted_ranks(x, c), weighted_ranks(y, c), c)


# ---- intervals -----------------------------------------------------------------------------------


def percentile_interval(boot: np.ndarray, level: float = 0.95) -> Optional[list[float]]:
    v = np.asarray(boot, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return None
    lo, hi = np.quantile(v, [(1 - level) / 2, 1 - (1 - level) / 2])
    return [float(lo), float(hi)]


def acceleration(jack: np.ndarray) -> float:
    """BCa acceleration from jackknife (delete-one-unit) values:
    ``Σ (m − θᵢ)³ / (6 (Σ (m − θᵢ)²)^1.5)``."""
    j = np.asarray(jack, dtype=np.float64)
    j = j[np.isfinite(j)]
    if j.size < 3:
        return 0.0
    d = j.mean() - j
    den = 6.0 * float((d * d).sum()) ** 1.5
    return float((d ** 3).sum() / den) if den > 0 else 0.0


def bca_interval(theta: float, boot: np.ndarray, jack: Optional[np.ndarray],
                 level: float = 0.95) -> Optional[list[float]]:
    """The BCa interval (Efron 1987) of ``theta`` from its bootstrap values ``boot`` and jackknife
    values ``jack`` (None: acceleration 0, the bias-corrected percentile interval). Falls back to
    the percentile interval when every resample lies on one side of ``theta``.

    The same conventions as ``scipy.stats.bootstrap(method="BCa")``: the bias ``z₀`` from
    ``(#{θ* < θ} + #{θ* ≤ θ}) / 2B``, linear interpolation between order statistics.
    """
    b = np.asarray(boot, dtype=np.float64)
    b = b[np.isfinite(b)]
    if b.size == 0 or not math.isfinite(theta):
        return None
    p = (np.count_nonzero(b < theta) + np.count_nonzero(b <= theta)) / (2.0 * b.size)
    if not 0.0 < p < 1.0:
        return percentile_interval(b, level)
    z0 = _N.inv_cdf(p)
    a = acceleration(jack) if jack is not None else 0.0
    qs = []
    for alpha in ((1 - level) / 2, 1 - (1 - level) / 2):
        z = z0 + _N.inv_cdf(alpha)
        den = 1.0 - a * z
        qs.append(_N.cdf(z0 + z / den) if den > 0 else (0.0 if alpha < 0.5 else 1.0))
    lo, hi = np.quantile(b, qs)
    return [float(lo), float(hi)]


# ---- resampling units ----------------------------------------------------------------------------


def units_of(n: int, groups: Optional[np.ndarray]) -> tuple[np.ndarray, int]:
    """(unit index of each item, number of units): every item its own unit, or one per group."""
    if groups is None:
        return np.arange(n), n
    g = np.asarray(groups)
    if g.shape != (n,):
        raise InputError(f"groups has shape {g.shape} but there are {n} items")
    _, codes = np.unique(g, return_inverse=True)
    return codes.ravel(), int(codes.max()) + 1 if n else 0


def unit_weights(units: int, resamples: int, seed: int) -> np.ndarray:
    """Bootstrap weights of ``units`` units (multinomial counts, ``resamples x units``), drawn from
    ``default_rng(seed)`` — the same draws for A and B, and for every figure of one report."""
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, units), dtype=np.float64)
    per = max(1, BATCH_CELLS // max(units, 1))
    for s in range(0, resamples, per):
        b = min(per, resamples - s)
        draws = rng.integers(0, units, size=(b, units)) + (np.arange(b) * units)[:, None]
        out[s:s + b] = np.bincount(draws.ravel(), minlength=b * units).reshape(b, units)
    return out


def jackknife_weights(units: int) -> Iterator[np.ndarray]:
    """Batches of delete-one-unit weights (a row of ones with one unit's weight 0); with more than
    :data:`JACK_MAX` units, delete-one-block (units split in JACK_MAX contiguous blocks)."""
    blocks = min(units, JACK_MAX)
    block_of = (np.arange(units) * blocks) // max(units, 1)
    per = max(1, BATCH_CELLS // max(units, 1))
    for s in range(0, blocks, per):
        rows = np.arange(s, min(blocks, s + per))
        yield (block_of[None, :] != rows[:, None]).astype(np.float64)


def _batched(statistic: Statistic, x: np.ndarray, W: np.ndarray, unit_of: np.ndarray) -> np.ndarray:
    per = max(1, BATCH_CELLS // max(len(unit_of), 1))
    return np.concatenate([np.asarray(statistic(x, W[s:s + per][:, unit_of]), dtype=np.float64)
                           for s in range(0, len(W), per)]) if len(W) else np.empty(0)


def method_text(unit: str, resamples: int, permutations: int, seed: int) -> str:
    """The ``ci_method`` of a paired section.

    >>> method_text("pairs", 1000, 1000, 0)[:60]
    'paired BCa bootstrap over pairs (the same resamples for A an'
    """
    return (f"paired BCa bootstrap over {unit} (the same resamples for A and B, jackknife acceleration), "
            f"{resamples} resamples; paired permutation p-value (A and B swapped per unit), "
            f"{permutations} permutations; seed {seed}; minimum detectable effect at 80% power, alpha 0.05")


# ---- verdicts ------------------------------------------------------------------------------------


def verdict(ci: Optional[list[float]], margin: Optional[float], mde: Optional[float]) -> tuple[str, Optional[bool]]:
    """(verdict, underpowered) from the interval of the signed difference (positive = better).

    >>> verdict([0.1, 0.3], None, 0.1)[0], verdict([-0.3, -0.1], 0.5, 0.1)[0]
    ('better', 'worse')
    >>> verdict([-0.1, 0.1], 0.2, 0.1), verdict([-0.1, 0.3], 0.2, 0.1)
    (('equivalent', False), ('non-inferior', False))
    >>> verdict([-0.3, 0.3], 0.2, 0.1), verdict([-0.3, 0.3], 0.2, 0.4)
    (('inconclusive', False), ('underpowered', True))
    """
    under = None if margin is None or mde is None else bool(mde > margin)
    if ci is None or not all(math.isfinite(v) for v in ci):
        return ("underpowered" if under else "inconclusive"), under
    lo, hi = ci
    if lo > 0:
        return "better", under
    if hi < 0:
        return "worse", under
    if margin is not None:
        if -margin < lo and hi < margin:
            return "equivalent", under
        if lo > -margin:
            return "non-inferior", under
    return ("underpowered" if under else "inconclusive"), under


def check_margin(margin: Optional[float], name: str = "margin") -> Optional[float]:
    if margin is None:
        return None
    if not (math.isfinite(margin) and margin > 0):
        raise InputError(f"{name} must be a finite number > 0, got {margin}")
    return float(margin)


def margin_settings(items: Any, name: str = "margins") -> dict[str, float]:
    """Margins as the command line gives them (``["auc=0.55"]``, ``FIGURE=X`` texts) or as a mapping
    (``{"auc": 0.55}``) → ``{"auc": 0.55}``: each finite and > 0 (``name`` names them in messages).

    >>> margin_settings(["spearman=1.0", "auc = 0.55"]), margin_settings({"mmd2": 0.002})
    ({'spearman': 1.0, 'auc': 0.55}, {'mmd2': 0.002})
    """
    pairs: list[tuple[str, Any, str]] = []
    if not isinstance(items, (str, Mapping, list, tuple)) and items is not None:
        raise InputError(f"{name} must be FIGURE=X texts or a mapping of figure to margin, got {items!r}")
    if isinstance(items, Mapping):
        pairs = [(str(k), v, f"{k}={v}") for k, v in items.items()]
    else:
        for item in [items] if isinstance(items, str) else list(items or []):
            key, sep, val = str(item).rpartition("=")
            if not sep or not key.strip():
                raise InputError(f"{name} {item!r}: expected FIGURE=X, e.g. {name + ' ' if name.startswith('--') else ''}spearman=1.0")
            try:
                pairs.append((key.strip(), float(val), str(item)))
            except ValueError:
                raise InputError(f"{name} {item!r}: {val!r} is not a number") from None
    out: dict[str, float] = {}
    for key, x, item in pairs:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not (math.isfinite(x) and x > 0):
            raise InputError(f"{name} {item!r}: the margin must be a finite number > 0")
        out[key] = float(x)
    return out


def paired_figure(a: float, b: float, boot_a: np.ndarray, boot_b: np.ndarray, *,
                  jack_a: Optional[np.ndarray] = None, jack_b: Optional[np.ndarray] = None,
                  null: Optional[np.ndarray] = None, better: str = "higher", margin: Optional[float] = None,
                  level: float = 0.95) -> PairedFigure:
    """Everything from values already computed: the figure of A and B, their values on the same
    resamples (``boot_a[i]`` and ``boot_b[i]`` from resample ``i``), optionally on the same
    jackknife deletions and a permutation null of ``B − A`` (unsigned)."""
    Figure(better)  # validates
    margin = check_margin(margin)
    sign = 1.0 if better == "higher" else -1.0
    d = sign * (float(b) - float(a))
    boot = sign * (np.asarray(boot_b, dtype=np.float64) - np.asarray(boot_a, dtype=np.float64))
    jack = None if jack_a is None or jack_b is None else sign * (np.asarray(jack_b) - np.asarray(jack_a))
    ci = bca_interval(d, boot, jack, level) if math.isfinite(d) else None
    fin = boot[np.isfinite(boot)]
    se = float(fin.std(ddof=1)) if fin.size > 1 else None
    mde = None if se is None else (Z95 + Z80) * se
    if null is not None:
        nl = sign * np.asarray(null, dtype=np.float64)
        nl = nl[np.isfinite(nl)]
        tol = 1e-12 * max(1.0, abs(d))
        p = float((1 + np.count_nonzero(np.abs(nl) >= abs(d) - tol)) / (1 + nl.size)) if math.isfinite(d) else None
        p_method = "permutation"
    else:  # bootstrap test: the resampled differences, centred on the observed one, as the null
        nl = None
        tol = 1e-12 * max(1.0, abs(d))
        p = (float((1 + np.count_nonzero(np.abs(fin - d) >= abs(d) - tol)) / (1 + fin.size))
             if fin.size and math.isfinite(d) else None)
        p_method = "bootstrap"
    v, under = verdict(ci, margin, mde)
    return PairedFigure(a=_num(a), b=_num(b), difference=_num(d), difference_ci95=ci, p_value=p,
                        min_detectable_effect=mde, margin=margin, verdict=v, underpowered=under,
                        better=better, p_method=p_method, boot=boot, null=nl)


def _num(v: float) -> Optional[float]:
    v = float(v)
    return v if math.isfinite(v) else None


def paired_items(a: np.ndarray, b: np.ndarray, statistic: Optional[Statistic] = None, *,
                 groups: Optional[np.ndarray] = None, better: str = "higher", margin: Optional[float] = None,
                 resamples: int = RESAMPLES, permutations: int = RESAMPLES, seed: int = 0,
                 level: float = 0.95, swappable: bool = True) -> PairedFigure:
    """Paired comparison of a figure built from per-item data of A and B.

    ``a`` and ``b``: per-item data of the same items (n, ...), row ``i`` of each from the same
    input row(s). ``statistic(x, w)`` gives the figure under each row of item weights ``w``
    (default: the weighted mean of 1-D values). ``groups`` (n,): resample whole groups (e.g. the
    rows of one query, the phrases of one cell). ``swappable``: A's and B's per-item data are
    exchangeable (same kind and shape), so the permutation test swaps them per unit; else the
    bootstrap test gives the p-value.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape[0] != b.shape[0]:
        raise InputError(f"a has {a.shape[0]} items but b has {b.shape[0]}; a paired comparison needs the same items")
    n = a.shape[0]
    if n < 2:
        raise InputError(f"a paired comparison needs at least 2 items, got {n}")
    if resamples < 2:
        raise InputError(f"resamples must be >= 2, got {resamples}")
    stat = statistic or weighted_mean
    unit_of, G = units_of(n, groups)
    ones = np.ones((1, n))
    ta, tb = float(stat(a, ones)[0]), float(stat(b, ones)[0])
    W = unit_weights(G, resamples, seed)
    boot_a, boot_b = _batched(stat, a, W, unit_of), _batched(stat, b, W, unit_of)
    jack_a = np.concatenate([np.asarray(stat(a, J[:, unit_of])) for J in jackknife_weights(G)])
    jack_b = np.concatenate([np.asarray(stat(b, J[:, unit_of])) for J in jackknife_weights(G)])
    null = None
    if swappable and permutations > 0 and a.shape == b.shape:
        null = permutation_null(a, b, stat, unit_of, G, permutations, seed, mean=statistic is None)
    return paired_figure(ta, tb, boot_a, boot_b, jack_a=jack_a, jack_b=jack_b, null=null, better=better,
                         margin=margin, level=level)


def permutation_null(a: np.ndarray, b: np.ndarray, statistic: Statistic, unit_of: np.ndarray, units: int,
                     permutations: int, seed: int, *, mean: bool = False) -> np.ndarray:
    """``stat(B') − stat(A')`` where each unit's A and B data are swapped with probability ½
    (``default_rng([seed, 1])``); for a mean, a vectorised sign flip of the differences."""
    rng = np.random.default_rng([seed, 1])
    n = len(unit_of)
    if mean and a.ndim == 1:
        d = b - a
        parts: list[np.ndarray] = []
        per = max(1, BATCH_CELLS // max(n, 1))
        for s in range(0, permutations, per):
            flips = rng.integers(0, 2, size=(min(per, permutations - s), units))
            signs = (1.0 - 2.0 * flips)[:, unit_of]
            parts.append(signs @ d / n)
        return np.concatenate(parts)
    ones = np.ones((1, n))
    null = np.empty(permutations)
    for p in range(permutations):
        swap = rng.integers(0, 2, size=units).astype(bool)[unit_of]
        m = swap.reshape((n,) + (1,) * (a.ndim - 1))
        xa = np.where(m, b, a)
        xb = np.where(m, a, b)
        null[p] = float(statistic(xb, ones)[0]) - float(statistic(xa, ones)[0])
    return null


def check_same_rows(ids_a: Optional[list[Any]], ids_b: Optional[list[Any]], n_a: int, n_b: int,
                    names: tuple[str, str] = ("A", "B")) -> Any:
    """A and B describe the same rows: the same row count and, when both sidecars carry ids, the
    same set of ids (:func:`embedcheck.io.rowids.match_rows`, the one rule: another order is
    matched by id); else an InputError naming both. Returns the match (``.order``: B's rows in A's order)."""
    from ..io.rowids import match_rows

    if n_a != n_b:
        raise InputError(f"{names[0]} has {n_a} rows but {names[1]} has {n_b}; a paired comparison needs "
                         "embeddings of the same rows")
    return match_rows(ids_a, ids_b, names=names, tags=("A", "B"))


__all__ = ["JACK_MAX", "RESAMPLES", "VERDICTS", "Paired", "PairedFigure", "acceleration", "bca_interval",
           "check_margin", "check_same_rows", "jackknife_weights", "method_text", "paired_figure", "paired_items",
           "percentile_interval", "permutation_null", "unit_weights", "units_of", "verdict", "weighted_mean",
           "weighted_pearson", "weighted_ranks", "weighted_spearman"]
