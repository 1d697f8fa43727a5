"""``embedcheck neighbors A.npy B.npy``: how much a change of embedding moves each row's nearest
neighbours (overlap@k, top-1 changes, label agreement); exact and blocked."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..api.neighbors import neighbors as api_neighbors
from ._app import app
from .common import (
    LabelFieldOpt,
    OptLabelsArg,
    SeedOpt,
    progress,
)
from .generic import declared
from .reporting import Output, reporting


@app.command("neighbors")
@reporting(paired=(2, "A and B"), engine=True)
@declared(api_neighbors)
def neighbors_cmd(
    a: Annotated[str, typer.Argument(metavar="A.npy", help="The rows embedded one way (n x d float .npy): original, model v1 ...", show_default=False)],
    b: Annotated[str, typer.Argument(metavar="B.npy", help="The same rows embedded another way (n x d' float .npy): projected, fused, model v2 ...", show_default=False)],
    labels: OptLabelsArg = None,
    label_field: LabelFieldOpt = "label",
    seed: SeedOpt = 0,
    *,
    out: Output,
    **options: Any,
) -> None:
    """Overlap@k of each row's k nearest neighbours in A and in B, with a 95% interval.

    Also the share of rows whose top-1 neighbour changed and, with LABELS, how many
    neighbours share the query's label in A and in B (and among those that enter and leave).
    Exact: the k rows with the largest float64 cosine, equal cosines by the smaller row index;
    computed in float32 blocks (never an n x n matrix) with a float64 re-check.

    With --against A2 --against B2 (a second pair of embeddings of the same rows), 'paired'
    compares the two comparisons on the same resampled query rows.

    Example: embedcheck neighbors test.npy test.fused.npy test.jsonl --k 10 --fail-below 0.5
    """
    out.start()
    with progress() as bar:
        task = bar.add_task("neighbours", total=None, info="")
        rep = api_neighbors(a, b, labels=labels, label_field=label_field, seed=seed, against=out.pair,
                            margins=out.margins or None, engine=out.engine.value, address=out.address,
                            progress=lambda done, total: bar.update(task, completed=done, total=total), **options)
    from .common import shown_name

    out.finish(rep, title=f"neighbors — {shown_name(a)} vs {shown_name(b)} (k = {options['k']})", paired=rep.results.get("paired"))
