"""``embedcheck aag EMB.npy LABELS``: Attribute Alignment Gap, variance share, label MAP."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..geometry import aag as aag_mod
from ..geometry import label_map as map_mod
from ..io.labels import load_labels
from ..io.npy import load_matrix
from ._app import app
from .common import (  # --baseline: compared in finish()
    AddressOpt,
    BaselineOpt,
    EmbArg,
    EngineName,
    EngineOpt,
    FormatOpt,
    JsonOpt,
    LabelFieldOpt,
    LabelsArg,
    MaxDropOpt,
    PlotOpt,
    QuietOpt,
    ReportOpt,
    SeedOpt,
    ToleranceOpt,
    check_engine,
    check_plot,
    finish,
    hint,
    in_range,
    start_command,
    write_plot,
)
from .output import add_gates, min_gate


@app.command("aag")
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
    fail_below: Annotated[Optional[float], typer.Option("--fail-below", callback=in_range(-2, 2), help="Gate: exit 1 when AAG is below this (AAG lies in [-2, 2]).")] = None,
    plot: PlotOpt = None,
    plot_pairs: Annotated[int, typer.Option("--plot-pairs", min=1, help="--plot: sampled pairs per class and kind (within, between), seeded by --seed.")] = 2000,
    fail_map_below: Annotated[Optional[float], typer.Option("--fail-map-below", callback=in_range(0, 100), help="Gate: exit 1 when label MAP (x100, 0 to 100) is below this.")] = None,
    map_at: Annotated[Optional[int], typer.Option("--map-at", min=1, help="MAP@K: average precision over each query's top K only (per-shard top-K lists merge exactly).")] = None,
    engine: EngineOpt = EngineName.local,
    address: AddressOpt = None,
    baseline: BaselineOpt = None,
    max_drop: MaxDropOpt = None,
    tolerance: ToleranceOpt = 0.0,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Attribute Alignment Gap: mean cosine of same-label pairs minus different-label pairs.

    Exact in O(n·d) from per-class sums (no n×n matrix), plus per-class within means, the
    variance share of the class-mean direction(s), label-retrieval MAP x100 with its chance
    level, 95% intervals (aag_ci95 by default, variance_share_ci95 with --ci; ci_method names the
    method), optional permutation p-value and row-bootstrap CI, and with --plot a figure of the
    within- and between-class cosine distributions (seeded sampled pairs), per class. Labels may be ints or strings,
    two or more classes; a class with one row adds no same-label pairs (its within mean is null).

    Example: embedcheck aag val.npy val.jsonl --fail-below 0.05
    """
    start_command(quiet)
    check_plot(plot, [embeddings, labels])
    check_engine(engine, address)
    if engine is EngineName.ray or map_at is not None:  # per-chunk partials on the engine (local or Ray)
        from ._engine import aag_sharded

        rep = aag_sharded(embeddings, labels, label_field=label_field, engine=engine.value, address=address,
                          label_map=label_map, map_queries=map_queries, map_at=map_at,
                          permutations=permutations, bootstrap=bootstrap, ci_level=ci_level, seed=seed,
                          resamples=resamples, ci=ci, plot=plot, plot_pairs=plot_pairs)
        add_gates(rep, [
            min_gate("aag", rep["aag"], fail_below) if fail_below is not None else None,
            min_gate("label_map", rep.get("label_map", {}).get("map"), fail_map_below) if fail_map_below is not None else None,
        ])
        finish(rep, title=f"AAG — {Path(embeddings).name}", as_json=as_json, fmt=fmt, report_file=report_file)
        return
    X = load_matrix(embeddings)
    y = load_labels(labels, X.shape[0], field=label_field)
    n, d = X.shape
    res = aag_mod.aag(X, y, resamples=resamples, seed=seed)
    vs = aag_mod.variance_share(X, y, boot=res.boot if ci else None)
    report: dict[str, Any] = {**res.to_dict(), **vs.to_dict()}
    if label_map:
        if map_queries is None and n > 50_000:
            hint(f"label MAP over all {n} queries is O(n²); --map-queries N samples queries")
        m = map_mod.label_map(X, y, queries=map_queries, seed=seed)
        report["label_map"] = map_mod.with_interval(m, resamples, seed).to_dict()
    if permutations:
        report["permutation"] = aag_mod.aag_permutation_null(X, y, permutations, seed, observed=res.aag)
    if bootstrap:
        report["bootstrap"] = aag_mod.aag_bootstrap(X, y, bootstrap, seed, level=ci_level)
    if res.ci_method:
        report["ci_method"] = res.ci_method + ("; variance_share_ci95: the same resamples" if ci else "")
        if not ci:
            report["ci_on_request"] = ["variance_share"]
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
