"""``embedcheck aag EMB.npy LABELS``: Attribute Alignment Gap, variance share, label MAP."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..geometry import aag as aag_mod
from ..geometry import label_map as map_mod
from ..io.labels import load_labels
from ..io.npy import load_matrix
from .output import add_gates, min_gate
from ._app import app
from .common import (EmbArg, FormatOpt, JsonOpt, LabelFieldOpt, LabelsArg, QuietOpt, ReportOpt,
                     PlotOpt, SeedOpt, check_plot, finish, hint, in_range, start_command,
                     write_plot)


@app.command("aag")
def aag_cmd(
    embeddings: EmbArg,
    labels: LabelsArg,
    label_field: LabelFieldOpt = "label",
    label_map: Annotated[bool, typer.Option("--map/--no-map", help="Compute label-retrieval MAP (O(n²) cosines, blocked).")] = True,
    map_queries: Annotated[Optional[int], typer.Option("--map-queries", min=1, help="Sample this many MAP queries (seeded) instead of all n.")] = None,
    permutations: Annotated[int, typer.Option("--permutations", min=0, help="Label-shuffle null with this many permutations (p-value, null mean, null sd).")] = 0,
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=0, help="Percentile bootstrap CI of AAG with this many resamples.")] = 0,
    ci: Annotated[float, typer.Option("--ci", min=0.5, max=0.999, help="Bootstrap confidence level.")] = 0.95,
    seed: SeedOpt = 0,
    fail_below: Annotated[Optional[float], typer.Option("--fail-below", callback=in_range(-2, 2), help="Gate: exit 1 when AAG is below this (AAG lies in [-2, 2]).")] = None,
    plot: PlotOpt = None,
    plot_pairs: Annotated[int, typer.Option("--plot-pairs", min=1, help="--plot: sampled pairs per class and kind (within, between), seeded by --seed.")] = 2000,
    fail_map_below: Annotated[Optional[float], typer.Option("--fail-map-below", callback=in_range(0, 100), help="Gate: exit 1 when label MAP (x100, 0 to 100) is below this.")] = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Attribute Alignment Gap: mean cosine of same-label pairs minus different-label pairs.

    Exact in O(n·d) from per-class sums (no n×n matrix), plus per-class within means, the
    variance share of the class-mean direction(s), label-retrieval MAP x100 with its chance
    level, optional permutation p-value and bootstrap CI, and with --plot a figure of the
    within- and between-class cosine distributions (seeded sampled pairs), per class. Labels may be ints or strings,
    two or more classes; a class with one row adds no same-label pairs (its within mean is null).

    Example: embedcheck aag val.npy val.jsonl --fail-below 0.05
    """
    start_command(quiet)
    check_plot(plot, [embeddings, labels])
    X = load_matrix(embeddings)
    y = load_labels(labels, X.shape[0], field=label_field)
    n, d = X.shape
    res = aag_mod.aag(X, y)
    vs = aag_mod.variance_share(X, y)
    report = {
        "n": n, "dim": d, "classes": len(res.class_counts), "class_counts": res.class_counts,
        "aag": res.aag, "mean_same": res.mean_same, "mean_diff": res.mean_diff,
        "n_same_pairs": res.n_same_pairs, "n_diff_pairs": res.n_diff_pairs,
        "within": res.within,
        "variance_share": vs["variance_share"], "variance_share_dims": vs["dims"],
    }
    if label_map:
        if map_queries is None and n > 50_000:
            hint(f"label MAP over all {n} queries is O(n²); --map-queries N samples queries")
        m = map_mod.label_map(X, y, queries=map_queries, seed=seed)
        report["label_map"] = m.to_dict()
    if permutations:
        report["permutation"] = aag_mod.aag_permutation_null(X, y, permutations, seed, observed=res.aag)
    if bootstrap:
        report["bootstrap"] = aag_mod.aag_bootstrap(X, y, bootstrap, seed, level=ci)
    if plot is not None:
        from ..geometry import plots

        samples = aag_mod.sample_pair_cosines(X, y, pairs=plot_pairs, seed=seed)
        report["plot"] = write_plot(plot, plots.aag_png(
            samples, res.class_counts, res.aag,
            title=f"{Path(embeddings).name}: within- vs between-class cosine ({plot_pairs:,} sampled pairs each)"))
    add_gates(report, [
        min_gate("aag", res.aag, fail_below) if fail_below is not None else None,
        min_gate("label_map", report.get("label_map", {}).get("map"), fail_map_below) if fail_map_below is not None else None,
    ])
    finish(report, title=f"AAG — {Path(embeddings).name}", as_json=as_json, fmt=fmt, report_file=report_file)
