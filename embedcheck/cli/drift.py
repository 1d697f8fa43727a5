"""``embedcheck drift REF CUR``: has a population of embeddings drifted? (maths in
:mod:`embedcheck.geometry.drift`, API :func:`embedcheck.api.drift.drift`)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from ..gates import add_gates, verdict_gate
from ._app import app
from .common import SeedOpt, hint, in_range
from .paired_opts import parse_margins
from .reporting import Output, reporting


class DriftFailOn(str, Enum):
    drift = "drift"
    not_no_drift = "not-no-drift"


@app.command("drift")
@reporting(engine=True)
def drift_cmd(
    ref: Annotated[str, typer.Argument(metavar="REF", help="Reference embeddings (.npy or shard set).", show_default=False)],
    cur: Annotated[str, typer.Argument(metavar="CUR", help="Current embeddings, other rows of the same model.", show_default=False)],
    permutations: Annotated[int, typer.Option("--permutations", min=1, help="Permutations of the pooled MMD² null.")] = 1000,
    estimator: Annotated[str, typer.Option("--estimator", help="MMD² estimator: exact (blocked kernel), rff (random Fourier features, bounded memory) or auto (exact up to 20,000 pooled rows).")] = "auto",
    features: Annotated[int, typer.Option("--features", min=2, max=65536, help="Random Fourier features of --estimator rff.")] = 1024,
    folds: Annotated[int, typer.Option("--folds", min=2, max=100, help="Cross-fitting folds of the classifier test.")] = 5,
    clusters: Annotated[int, typer.Option("--clusters", min=1, max=1000, help="k-means clusters of the attribution.")] = 8,
    top: Annotated[int, typer.Option("--top", min=0, max=1000, help="Rows most typical of each side to list.")] = 5,
    margin: Annotated[Optional[list[str]], typer.Option("--margin", metavar="FIGURE=X", help="Materiality: auc=0.55 (AUC in (0.5, 1)) or mmd2=X (in (0, 2)); no-drift when the 95% interval lies below it. Repeatable.", show_default=False)] = None,
    alpha: Annotated[float, typer.Option("--alpha", callback=in_range(0, 1, lo_open=True, hi_open=True), help="Level of the drift decision, split over the deciding tests.")] = 0.05,
    fail_on: Annotated[Optional[DriftFailOn], typer.Option("--fail-on", help="Gate: exit 1 when the verdict is drift (drift), or anything but no-drift (not-no-drift).", case_sensitive=False, show_default=False)] = None,
    classifier_rows: Annotated[int, typer.Option("--classifier-rows", min=20, help="Pooled rows the classifier and k-means see at most (a seeded stratified sample beyond).")] = 20_000,
    seed: SeedOpt = 0,
    *,
    out: Output,
) -> None:
    """Has it drifted? A calibrated two-sample test of two populations of embeddings.

    MMD² (unbiased, Gaussian kernel at the median-heuristic bandwidth, p-value from a pooled
    permutation null) and a cross-fitted classifier test (AUC with its DeLong 95% interval), a
    verdict (drift, no-drift within --margin, inconclusive, underpowered), the k-means clusters
    whose share moved (Fisher's exact test per cluster, Holm-adjusted over the clusters) and the
    rows most typical of each side (ids and texts from .jsonl sidecars or a store's columns).

    Example: embedcheck drift ref.npy cur.npy --margin auc=0.55 --fail-on drift
    """
    from ..api.drift import drift

    out.start()
    margins = parse_margins(margin)
    rep = drift(ref, cur, permutations=permutations, estimator=estimator.lower(), features=features, folds=folds,
                clusters=clusters, top=top, margins=margins, alpha=alpha, seed=seed, classifier_rows=classifier_rows,
                engine=out.engine.value, address=out.address, hint=hint)
    report = rep.to_dict()
    if fail_on is not None:
        v = rep["verdict"]
        bad = v == "drift" if fail_on is DriftFailOn.drift else v != "no-drift"
        needs = "not drift" if fail_on is DriftFailOn.drift else "no-drift"
        add_gates(report, [verdict_gate(f"verdict_{fail_on.value.replace('-', '_')}", v, needs, not bad,
                                        shown="drift verdict")])
    out.finish(report, title=f"drift — {ref} → {cur}")
