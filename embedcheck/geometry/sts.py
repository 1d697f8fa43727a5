"""STS cost of a head: Spearman (and Pearson) between row-wise cosine and gold similarity scores.

The SISE paper reports STS-B Spearman x100 for the original vectors, the compact head and the
fused vectors (compact costs 38-41 points, fused 2.4-12).

>>> import numpy as np
>>> A = np.array([[1.0, 0], [1, 0], [1, 0]]); B = np.array([[1.0, 0], [1, 1], [0, 1]])
>>> sts_correlation(A, B, np.array([5.0, 2.5, 0.0]))["spearman"]
100.0
"""

from __future__ import annotations

from typing import Any

import numpy as np


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


def sts_correlation(A: np.ndarray, B: np.ndarray, gold: np.ndarray) -> dict[str, Any]:
    """STS evaluation: Spearman x100 and Pearson x100 between row-wise cosine and gold scores."""
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
    return {"n": int(len(gold)), "spearman": float(100 * spearmanr(cos, gold).statistic),
            "pearson": float(100 * pearsonr(cos, gold).statistic), "mean_cosine": float(cos.mean())}
