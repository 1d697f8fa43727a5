"""95 % intervals for headline figures: percentile bootstrap, normal and Wilson intervals.

Every interval is reported as ``<figure>_ci95: [low, high]`` beside its figure, with the method
named in ``ci_method``. The bootstrap draws its resamples from ``np.random.default_rng(seed)``:
same seed, same bytes.

>>> x = np.arange(100, dtype=float)
>>> lo, hi = percentile_ci(bootstrap_means(x, 1000, seed=0))
>>> bool(lo < x.mean() < hi), round(hi - lo)   # ~ 2 · 1.96 · 28.9 / 10
(True, 11)
>>> wilson_ci(0, 10)[0]
0.0
"""

from __future__ import annotations

import math
from typing import Iterator, Optional

import numpy as np

#: resamples of every default bootstrap interval
RESAMPLES = 1000
#: the two-sided 95 % normal quantile
Z95 = 1.959963984540054
#: index rows drawn per batch (a batch of ``b x n`` int64 indices)
BATCH_CELLS = 4_000_000


def method(over: str, resamples: int, seed: int) -> str:
    """The ``ci_method`` text of a percentile bootstrap.

    >>> method("rows", 1000, 0)
    'percentile bootstrap over rows, 1000 resamples, seed 0'
    """
    return f"percentile bootstrap over {over}, {resamples} resamples, seed {seed}"


def percentile_ci(values: np.ndarray, level: float = 0.95) -> Optional[list[float]]:
    """``[low, high]`` percentiles of the finite resampled values (None when there are none; see
    :func:`embedcheck.stats.paired.percentile_interval`)."""
    from ..stats.paired import percentile_interval

    return percentile_interval(values, level)


def bca_ci(theta: float, values: np.ndarray, jackknife: Optional[np.ndarray] = None,
           level: float = 0.95) -> Optional[list[float]]:
    """``[low, high]`` BCa interval (bias-corrected and accelerated; acceleration from the
    delete-one-unit ``jackknife`` values, 0 without them) of ``theta`` from its resampled
    ``values`` (see :func:`embedcheck.stats.paired.bca_interval`)."""
    from ..stats.paired import bca_interval

    return bca_interval(theta, values, jackknife, level)


def resample_indices(n: int, resamples: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Batches of bootstrap index rows (``b x n``, drawn with replacement), ``resamples`` in all."""
    per = max(1, BATCH_CELLS // max(n, 1))
    done = 0
    while done < resamples:
        b = min(per, resamples - done)
        yield rng.integers(0, n, size=(b, n))
        done += b


def bootstrap_means(x: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """Means of ``x`` over ``resamples`` bootstrap resamples of its entries."""
    x = np.asarray(x, dtype=np.float64)
    rng = np.random.default_rng(seed)
    return np.concatenate([x[idx].mean(axis=1) for idx in resample_indices(len(x), resamples, rng)])


def normal_mean_ci(x: np.ndarray) -> Optional[list[float]]:
    """mean ± 1.96 · sd/√n (rows as the independent units; None below two values).

    >>> [round(v, 4) for v in normal_mean_ci(np.array([1.0, 3.0]))]
    [0.04, 3.96]
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size < 2:
        return None
    m, se = float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))
    return [m - Z95 * se, m + Z95 * se]


def wilson_ci(k: int, n: int) -> Optional[list[float]]:
    """Wilson score 95 % interval of a proportion ``k / n`` (good near 0 and 1).

    >>> [round(v, 4) for v in wilson_ci(5, 10)]
    [0.2366, 0.7634]
    """
    if n <= 0:
        return None
    p, z2 = k / n, Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]
