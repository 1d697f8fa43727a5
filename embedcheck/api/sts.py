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

from typing import Any, Optional

import numpy as np

from ..report.result import Figure, Report
from ..report.schemas import INT, NUM, NUM_OR_NULL, X100, obj
from ..rows import content_sha256
from ..spec import Option, takes
from ._common import check_same_rows, in_order, label_of, labels_for, matrix, pair_sides


class StsReport(Report):
    """The ``sts`` report; ``results["sts"]`` holds the per-pair cosines for paired comparisons."""

    command = "sts"
    report_schema = obj({"n": INT, "spearman": NUM_OR_NULL, "pearson": NUM_OR_NULL, "mean_cosine": NUM})
    figures = {
        "spearman": Figure("higher", interval="spearman_ci95", help="Spearman x100 of the pair cosines against the gold similarity scores", unit=X100, range=(-100, 100)),
        "pearson": Figure("higher", interval="pearson_ci95", help="Pearson x100 of the pair cosines against the gold similarity scores", unit=X100, range=(-100, 100)),
    }


@takes(
    Option("score_field", str, "score", "Field of the gold score in a .jsonl file."),
    Option("resamples", int, 1000, "Resamples of the 95% intervals of Spearman and Pearson (bootstrap over pairs); "
           "0: none.", min=0),
)
def sts(a: Any, b: Any, scores: Any, *, score_field: str = "score", resamples: int = 1000, seed: int = 0,
        against: Optional[tuple[Any, Any]] = None, margins: Optional[dict[str, float]] = None) -> StsReport:
    """Spearman x100 (and Pearson x100) of the cosine of row i of ``a`` and row i of ``b`` against
    gold ``scores`` (array or scores file), each with a 95 % interval (bootstrap over pairs).

    ``against`` = (B1, B2): a second embedding of the same two sides (ids checked from the
    sidecars); the report gains ``paired`` (same resampled pairs for both, difference with its
    95 % interval, p-value, minimum detectable effect, verdict at ``margins``)."""
    from pathlib import Path

    from ..geometry.sts import sts_correlation
    from ..io.labels import load_scores

    A = matrix(a, "A")
    B = matrix(b, "B")
    if A.shape != B.shape:
        raise ValueError(f"{label_of(a, 'A')} has shape {A.shape} but {label_of(b, 'B')} has {B.shape}")
    pair = pair_sides(a, b)
    B = in_order(B, pair, "B")
    matched: dict[str, str] = {"B": pair.by}
    if isinstance(scores, (str, Path)):
        gold = labels_for(scores, A.shape[0], what="scores", rows=a, matched=matched, key="scores",
                          loader=lambda p, n: load_scores(p, n, field=score_field))
    else:
        gold = np.asarray(scores, dtype=np.float64)
        if gold.shape != (A.shape[0],):
            raise ValueError(f"scores have shape {gold.shape} but A has {A.shape[0]} rows")
        matched["scores"] = "position"
    paired = None
    if against is not None:
        from ..errors import InputError
        from ..geometry.sts import sts_paired
        from ..stats.items import check_margins

        if len(against) != 2:
            raise InputError(f"against must be two embeddings (B1, B2), once per side, got {len(against)}")
        check_margins(margins, ["spearman", "pearson"])
        B1 = matrix(against[0], "--against B1")
        B2 = matrix(against[1], "--against B2")
        B1 = in_order(B1, check_same_rows(a, against[0], A.shape[0], B1.shape[0], ("A", "--against B1")), "--against B1")
        B2 = in_order(in_order(B2, check_same_rows(b, against[1], B.shape[0], B2.shape[0], ("B", "--against B2")), "--against B2"), pair,
                      "--against B2")
        paired = sts_paired(A, B, B1, B2, gold, resamples=max(resamples, 2), permutations=resamples, seed=seed,
                            margins=margins, against=" ".join(label_of(x, "array") for x in against))
    res = sts_correlation(A, B, gold, resamples=resamples, seed=seed)
    body = res.to_dict()
    body["inputs"] = {"scores_sha256": content_sha256(gold), "rows_matched_by": matched}
    from ._common import store_models

    models = store_models(a=a, b=b, **({"against_a": against[0], "against_b": against[1]} if against else {}))
    if models:
        body["models"] = models
    if paired is not None:
        body["paired"] = paired.to_dict()
    return StsReport(body=body, results={"sts": res, "paired": paired})
