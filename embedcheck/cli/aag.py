"""``embedcheck aag EMB.npy LABELS``: Attribute Alignment Gap, variance share, label MAP."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ._app import app
from .common import (
    EmbArg,
    LabelFieldOpt,
    LabelsArg,
    PlotOpt,
    SeedOpt,
    check_plot,
    hint,
    shown_name,
)
from .reporting import Output, reporting


@app.command("aag")
@reporting(engine=True, paired=(1, "EMB"))
def aag_cmd(
    embeddings: EmbArg,
    labels: LabelsArg,
    label_field: LabelFieldOpt = "label",
    label_map: Annotated[bool, typer.Option("--map/--no-map", help="Compute label-retrieval MAP (O(n²) cosines, blocked).")] = True,
    map_queries: Annotated[Optional[int], typer.Option("--queries", "--map-queries", min=1, help="Sample this many MAP queries (seeded) instead of all n.")] = None,
    permutations: Annotated[int, typer.Option("--permutations", min=0, help="Label-shuffle null with this many permutations (p-value, null mean, null sd).")] = 0,
    resamples: Annotated[int, typer.Option("--resamples", min=0, help="Resamples of the 95% intervals (aag_ci95 over row groups, label_map.map_ci95 over queries); 0: none.")] = 1000,
    ci: Annotated[bool, typer.Option("--ci", help="Also the intervals that cost more than 20% of the command: variance_share_ci95 (same resamples as aag_ci95).")] = False,
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=0, help="Also the row bootstrap of AAG (report section 'bootstrap', level --ci-level) with this many resamples; O(n·d) each.")] = 0,
    ci_level: Annotated[float, typer.Option("--ci-level", min=0.5, max=0.999, help="Confidence level of the --bootstrap section.")] = 0.95,
    seed: SeedOpt = 0,
    plot: PlotOpt = None,
    plot_pairs: Annotated[int, typer.Option("--plot-pairs", min=1, help="--plot: sampled pairs per class and kind (within, between), seeded by --seed.")] = 2000,
    fail_map_below: Annotated[Optional[float], typer.Option("--fail-map-below", hidden=True, help="Gate (old spelling of --fail-below label_map.map=X): exit 1 when label MAP (x100) is below this.")] = None,
    map_at: Annotated[Optional[int], typer.Option("--map-at", min=1, help="MAP@K: average precision over each query's top K only (per-shard top-K lists merge exactly).")] = None,
    *,
    out: Output,
) -> None:
    """Attribute Alignment Gap: mean cosine of same-label pairs minus different-label pairs.

    Exact in O(n·d) from per-class sums (no n×n matrix), plus per-class within means, the
    variance share of the class-mean direction(s), label-retrieval MAP x100 with its chance
    level, 95% intervals (aag_ci95 by default, variance_share_ci95 with --ci; ci_method names the
    method), optional permutation p-value and row-bootstrap CI, and with --plot a figure of the
    within- and between-class cosine distributions (seeded sampled pairs), per class. Labels may be ints or strings,
    two or more classes; a class with one row adds no same-label pairs (its within mean is null).

    Gates: --fail-below X (AAG, in cosine units), --fail-below label_map.map=X (MAP x100).

    Example: embedcheck aag val.npy val.jsonl --fail-below 0.05
    """
    out.gate("label_map.map", fail_map_below, option="--fail-map-below")
    out.start()
    check_plot(plot, [embeddings, labels])
    from ..api.aag import aag

    rep = aag(embeddings, labels, label_field=label_field, label_map=label_map, map_queries=map_queries,
              map_at=map_at, permutations=permutations, resamples=resamples, ci=ci, bootstrap=bootstrap,
              ci_level=ci_level, seed=seed, plot=plot, plot_pairs=plot_pairs, engine=out.engine.value,
              address=out.address, against=out.pair[0] if out.pair else None, margins=out.margins or None, hint=hint)
    out.finish(rep, title=f"AAG — {shown_name(embeddings)}", paired=rep.results.get("paired"))
