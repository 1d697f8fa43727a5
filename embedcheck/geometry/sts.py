"""STS cost of a head: Spearman (and Pearson) between row-wise cosine and gold similarity scores.

The SISE paper reports STS-B Spearman x100 for the original vectors, the compact head and the
fused vectors (compact costs 38-41 points, fused 2.4-12).

>>> import numpy as np
>>> A = np.array([[1.0, 0], [1, 0], [1, 0]]); B = np.array([[1.0, 0], [1, 1], [0, 1]])
>>> sts_correlation(A, B, np.array([5.0, 2.5, 0.0])).spearman
100.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..report.result import Result, optional
from ..stats import paired as P
from ..stats.items import check_margins, margin_of
from ..stats.paired import weighted_pearson, weighted_ranks
from . import intervals


@dataclass(kw_only=True)
class StsResult(Result):
    n: int
    spearman: float  # x100
    spearman_ci95: Optional[list[float]] = optional()
    pearson: float  # x100
    pearson_ci95: Optional[list[float]] = optional()
    mean_cosine: float
    ci_method: Optional[str] = optional()


def sts_intervals(cos: np.ndarray, gold: np.ndarray, resamples: int = intervals.RESAMPLES,
                  seed: int = 0) -> tuple[Optional[list[float]], Optional[list[float]], str]:
    """(spearman_ci95, pearson_ci95) x100 by a percentile bootstrap over pairs, and the method.

    A resample is a multinomial count per pair; Pearson is the count-weighted correlation and
    Spearman the weighted correlation of the resample's average ranks (a pair drawn twice ties
    with itself), exactly what ``scipy.stats.spearmanr`` gives on the expanded resample. A
    resample with no spread is dropped.

    >>> x = np.arange(50.0); s, p, _ = sts_intervals(x, x + 9 * np.sin(x), 200)
    >>> bool(s[0] < s[1] <= 100), bool(p[0] < 100 * np.corrcoef(x, x + 9 * np.sin(x))[0, 1] < p[1])
    (True, True)
    """
    cos = np.asarray(cos, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    n = len(cos)
    rng = np.random.default_rng(seed)
    sp, pe = [], []
    per = max(1, intervals.BATCH_CELLS // max(n, 1) // 4)
    for s in range(0, resamples, per):
        c = rng.multinomial(n, np.full(n, 1.0 / n), size=min(per, resamples - s)).astype(np.float64)
        pe.append(weighted_pearson(np.broadcast_to(cos, c.shape), np.broadcast_to(gold, c.shape), c))
        sp.append(weighted_pearson(weighted_ranks(cos, c), weighted_ranks(gold, c), c))
    sp_ci = intervals.percentile_ci(100 * np.concatenate(sp))
    pe_ci = intervals.percentile_ci(100 * np.concatenate(pe))
    return sp_ci, pe_ci, intervals.method("pairs", resamples, seed)


def rowwise_cosine(A: np.ndarray, B: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """cos(a_i, b_i) for every row pair, streamed, float64.

    >>> rowwise_cosine(np.array([[1.0, 0]]), np.array([[1.0, 1]])).round(4).tolist()
    [0.7071]
    """
    n = A.shape[0]
    out = np.empty(n, dtype=np.float64)
    for s in range(0, n, chunk):
        a = np.asarray(A[s:s + chunk], dtype=np.float64)
        b = np.asarray(B[s:s + chunk], dtype=np.float64)
        out[s:s + chunk] = np.einsum("ij,ij->i", a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return out


def sts_correlation(A: np.ndarray, B: np.ndarray, gold: np.ndarray, *, resamples: int = 0,
                    seed: int = 0) -> StsResult:
    """STS evaluation: Spearman x100 and Pearson x100 between row-wise cosine and gold scores;
    ``resamples`` > 0 adds their intervals (:func:`sts_intervals`)."""
    from scipy.stats import pearsonr, spearmanr

    if A.shape != B.shape:
        raise ValueError(f"A has shape {A.shape} but B has {B.shape}")
    if len(gold) != A.shape[0]:
        raise ValueError(f"{len(gold)} gold scores for {A.shape[0]} pairs")
    if A.shape[0] < 3:
        raise ValueError("need at least 3 pairs for a correlation")
    cos = rowwise_cosine(A, B)
    if np.ptp(cos) <= 1e-9:
        raise ValueError("every row-wise cosine is the same (are A and B the same vectors?); correlation is undefined")
    if np.ptp(gold) == 0:
        raise ValueError("the gold scores are all equal; correlation is undefined")
    res = StsResult(n=int(len(gold)), spearman=float(100 * spearmanr(cos, gold).statistic),
                    pearson=float(100 * pearsonr(cos, gold).statistic), mean_cosine=float(cos.mean()))
    if resamples > 0:
        res.spearman_ci95, res.pearson_ci95, res.ci_method = sts_intervals(cos, gold, resamples, seed)
    return res


# ---- --against ------------------------------------------------------------------------------


def sts_paired(A1: Any, A2: Any, B1: Any, B2: Any, gold: np.ndarray, *, resamples: int = P.RESAMPLES,
               permutations: int = P.RESAMPLES, seed: int = 0, margins: Optional[dict[str, float]] = None,
               against: Optional[str] = None) -> P.Paired:
    """Spearman and Pearson ×100 of cos(A1_i, A2_i) and of cos(B1_i, B2_i) against the same gold
    scores, compared on the same resampled pairs. Margins are in the figure's units (×100)."""
    check_margins(margins, ["spearman", "pearson"])
    for X, name in ((A2, "A2"), (B1, "B1"), (B2, "B2")):
        if X.shape[0] != A1.shape[0]:
            raise InputError(f"{name} has {X.shape[0]} rows but A1 has {A1.shape[0]}; a paired comparison needs the same rows")
    if B1.shape != B2.shape:
        raise InputError(f"B1 has shape {B1.shape} but B2 has {B2.shape}")
    gold = np.asarray(gold, dtype=np.float64)
    xa = np.c_[rowwise_cosine(A1, A2), gold]
    xb = np.c_[rowwise_cosine(B1, B2), gold]

    def spearman(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return 100 * P.weighted_spearman(x[:, 0], x[:, 1], w)

    def pearson(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return 100 * P.weighted_pearson(x[:, 0], x[:, 1], w)

    figs = {k: P.paired_items(xa, xb, f, resamples=resamples, permutations=permutations, seed=seed,
                              margin=margin_of(margins, k))
            for k, f in (("spearman", spearman), ("pearson", pearson))}
    return P.Paired(against=against, ci_method=P.method_text("pairs", resamples, permutations, seed), items=figs)

