"""``embedcheck.sts``: Spearman and Pearson x100 of cos(a_i, b_i) against gold scores — the report
of ``embedcheck sts``.

>>> import numpy as np, embedcheck
>>> rng = np.random.default_rng(0)
>>> A = rng.normal(size=(50, 8)); B = A + rng.normal(size=(50, 8)) * np.linspace(0.1, 3, 50)[:, None]
>>> r = embedcheck.sts(A, B, np.linspace(5, 0, 50), resamples=100)
>>> r["spearman"] > 50, len(r["spearman_ci95"])
(True, 2)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..result import Figure, Report
from ._common import label_of, matrix


class StsReport(Report):
    """The ``sts`` report; ``results["sts"]`` holds the per-pair cosines for paired comparisons."""

    command = "sts"
    figures = {
        "spearman": Figure("higher", interval="spearman_ci95"),
        "pearson": Figure("higher", interval="pearson_ci95"),
    }


def sts(a: Any, b: Any, scores: Any, *, score_field: str = "score", resamples: int = 1000, seed: int = 0) -> StsReport:
    """Spearman x100 (and Pearson x100) of the cosine of row i of ``a`` and row i of ``b`` against
    gold ``scores`` (array or scores file), each with a 95 % interval (bootstrap over pairs)."""
    from pathlib import Path

    from ..geometry.sts import sts_correlation
    from ..io.labels import load_scores

    A = matrix(a, "A")
    B = matrix(b, "B")
    if A.shape != B.shape:
        raise ValueError(f"{label_of(a, 'A')} has shape {A.shape} but {label_of(b, 'B')} has {B.shape}")
    if isinstance(scores, (str, Path)):
        gold = load_scores(scores, A.shape[0], field=score_field)
    else:
        gold = np.asarray(scores, dtype=np.float64)
        if gold.shape != (A.shape[0],):
            raise ValueError(f"scores have shape {gold.shape} but A has {A.shape[0]} rows")
    res = sts_correlation(A, B, gold, resamples=resamples, seed=seed)
    return StsReport(body=res.to_dict(), results={"sts": res})
