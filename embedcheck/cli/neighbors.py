"""``embedcheck neighbors A.npy B.npy``: how much a change of embedding moves each row's nearest
neighbours (overlap@k, top-1 changes, label agreement); exact and blocked."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ._app import app
from .common import (
    LabelFieldOpt,
    OptLabelsArg,
    SeedOpt,
    progress,
)
from .reporting import Output, reporting


@app.command("neighbors")
@reporting(paired=(2, "A and B"), engine=True)
def neighbors_cmd(
    a: Annotated[str, typer.Argument(metavar="A.npy", help="The rows embedded one way (n x d float .npy): original, model v1 ...", show_default=False)],
    b: Annotated[str, typer.Argument(metavar="B.npy", help="The same rows embedded another way (n x d' float .npy): projected, fused, model v2 ...", show_default=False)],
    k: Annotated[int, typer.Option("--k", min=1, help="Neighbours per row (cosine, self excluded).")] = 10,
    queries: Annotated[Optional[int], typer.Option("--queries", min=1, help="Sample this many query rows (seeded, without replacement); neighbours are still searched among all rows.", show_default=False)] = None,
    labels: OptLabelsArg = None,
    label_field: LabelFieldOpt = "label",
    resamples: Annotated[int, typer.Option("--resamples", min=1, help="Bootstrap resamples (over query rows) of the 95% intervals.")] = 1000,
    block_mb: Annotated[int, typer.Option("--block-mb", min=1, help="Work memory of one block of query rows against a 4,096-row column tile, in MB (plus one float32 copy of a matrix).")] = 128,
    seed: SeedOpt = 0,
    min_overlap: Annotated[Optional[float], typer.Option("--min-overlap", hidden=True, help="Gate (old spelling of --fail-below overlap=X): exit 1 when the mean overlap@k is below this (0 to 1).", show_default=False)] = None,
    *,
    out: Output,
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
    from ..api.neighbors import neighbors

    out.gate("overlap", min_overlap, option="--min-overlap")
    out.start()
    with progress() as bar:
        task = bar.add_task("neighbours", total=None, info="")
        rep = neighbors(a, b, k=k, queries=queries, labels=labels, label_field=label_field, resamples=resamples,
                        block_mb=block_mb, seed=seed, against=out.pair, margins=out.margins or None,
                        engine=out.engine.value, address=out.address,
                        progress=lambda done, total: bar.update(task, completed=done, total=total))
    from .common import shown_name

    out.finish(rep, title=f"neighbors — {shown_name(a)} vs {shown_name(b)} (k = {k})", paired=rep.results.get("paired"))
