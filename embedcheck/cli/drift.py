"""``embedcheck drift REF CUR``: has a population of embeddings drifted? (maths in
:mod:`embedcheck.geometry.drift`, API :func:`embedcheck.api.drift.drift`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..api.drift import drift
from ._app import app
from .common import SeedOpt, hint
from .generic import declared
from .reporting import Output, reporting


@app.command("drift")
@reporting(engine=True)
@declared(drift)
def drift_cmd(
    ref: Annotated[str, typer.Argument(metavar="REF", help="Reference embeddings (.npy or shard set).", show_default=False)],
    cur: Annotated[str, typer.Argument(metavar="CUR", help="Current embeddings, other rows of the same model.", show_default=False)],
    seed: SeedOpt = 0,
    *,
    out: Output,
    **options: Any,
) -> None:
    """Has it drifted? A calibrated two-sample test of two populations of embeddings.

    MMD² (unbiased, Gaussian kernel at the median-heuristic bandwidth, p-value from a pooled
    permutation null) and a cross-fitted classifier test (AUC with its DeLong 95% interval), a
    verdict (drift, no-drift within --margin, inconclusive, underpowered), the k-means clusters
    whose share moved (Fisher's exact test per cluster, Holm-adjusted over the clusters) and the
    rows most typical of each side (ids and texts from .jsonl sidecars or a store's columns).

    Example: embedcheck drift ref.npy cur.npy --margin auc=0.55 --fail-on drift
    """
    fail_on = options.pop("fail_on")
    out.start()
    rep = drift(ref, cur, seed=seed, engine=out.engine.value, address=out.address, hint=hint, **options)
    if fail_on is not None:
        rep.gate(fail_on=fail_on)  # the gate Python's Report.gate(fail_on=) makes: one code path
    out.finish(rep.to_dict(), title=f"drift — {ref} → {cur}")
