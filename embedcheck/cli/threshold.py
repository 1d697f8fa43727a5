"""``embedcheck threshold A.npy B.npy [LABELS]``: calibrate a match / duplicate similarity threshold
(logic in :mod:`embedcheck.geometry.threshold`, API :func:`embedcheck.api.threshold.threshold`)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from ..api.threshold import threshold
from ._app import app
from .common import (
    LABEL_FORMATS,
    AddressOpt,
    EngineName,
    EngineOpt,
    LabelFieldOpt,
    SeedOpt,
    check_engine,
    option_errors,
)
from .generic import declared
from .reporting import Output, reporting


@app.command("threshold")
@reporting(gated=False, gates=True)
@declared(threshold)
def threshold_cmd(
    a: Annotated[str, typer.Argument(help="Embeddings of the first item of each pair (.npy).", show_default=False)],
    b: Annotated[str, typer.Argument(help="Embeddings of the second item, row i paired with row i of A.", show_default=False)],
    labels: Annotated[Optional[str], typer.Argument(help=f"0/1 per pair, one per row: {LABEL_FORMATS}; or scores with --match-at. None: matched pairs vs unrelated pairs.", show_default=False)] = None,
    label_field: LabelFieldOpt = "label",
    seed: SeedOpt = 0,
    engine: EngineOpt = EngineName.local,
    address: AddressOpt = None,
    *,
    out: Output,
    **options: Any,
) -> None:
    """Calibrate a similarity threshold for "match" or "duplicate".

    Pairs are row i of A and row i of B, scored by cosine. Reports the
    precision-recall curve, the threshold at --precision and at best F1 (95%
    bootstrap intervals), each threshold's percentile among the unrelated
    pairs (a_i, b_j), i != j, and with --corpus the exact count of corpus
    pairs at or above it.

    Example: embedcheck threshold s1.npy s2.npy s1.jsonl --label-field score
    --match-at 4 --check 0.82 --fail-below check.floor_percentile=99
    """
    curve = options.pop("curve")
    out.start()
    check_engine(engine, address)
    for g in out.gates:
        if g.figure and g.figure.startswith("check.") and options["check"] is None:
            from ..errors import InputError

            raise InputError(f"{g.text} needs --check T (the threshold to judge)")
    with option_errors({"precision": "--precision", "check": "--check", "match_at": "--match-at"}):
        res = threshold(a, b, labels, label_field=label_field, seed=seed, engine=engine.value, address=address, **options)
    report = res.to_dict()
    out.finish(report, title="threshold", renderer=lambda r: render(r, curve=curve))


def _ci(v: Any, ci: Any) -> str:
    from .output import _fmt

    return _fmt(v) + (f"\n[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "")


def render(report: dict[str, Any], *, curve: bool = False, console: Any = None) -> None:
    """Terminal view, summary first: the chosen thresholds (columns) with their precision, recall
    and 95 % intervals, where each sits among unrelated pairs, the floor and the corpus counts;
    the curve only with ``--curve`` (the JSON always has it). Fits 80 columns."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from .output import _fmt, print_gates

    console = console or Console()
    points = [(k, report[k]) for k in ("at_precision", "best_f1", "check") if isinstance(report.get(k), dict)]
    names = {"at_precision": f"at precision {report['at_precision'].get('target_precision', 0):g}",
             "best_f1": "at best F1", "check": "--check"}
    console.print(f"threshold: {report['n']} pairs ({report['mode']}: {report['positives']:,} matches, "
                  f"{report['negatives']:,} non-matches), dim {report['dim']}; average precision "
                  f"{_fmt(report['average_precision'])}")
    t = Table(title="chosen thresholds (95% intervals below each value)", box=box.SIMPLE_HEAD, header_style="bold")
    t.add_column("", style="cyan", no_wrap=True)
    for k, _pt in points:
        t.add_column(names[k], justify="right", no_wrap=True)
    rows = [("threshold", lambda p: _ci(p.get("threshold"), p.get("threshold_ci95"))),
            ("precision", lambda p: _ci(p.get("precision"), p.get("precision_ci95"))),
            ("recall", lambda p: _ci(p.get("recall"), p.get("recall_ci95"))),
            ("F1", lambda p: _fmt(p.get("f1"))),
            ("floor percentile", lambda p: _fmt(p.get("floor_percentile"))),
            ("unrelated flagged", lambda p: _fmt(p.get("unrelated_flagged")))]
    if any("corpus_pairs_above" in p for _k, p in points):
        rows.append(("corpus pairs >= t", lambda p: _fmt(p.get("corpus_pairs_above"))))
    for label, cell in rows:
        t.add_row(label, *[cell(p) for _k, p in points])
    console.print(t)
    fl = report.get("floor", {})
    if fl:
        console.print(f"floor: {fl['pairs']:,} unrelated pairs (a_i, b_j), i != j: mean {_fmt(fl['mean'])}, "
                      f"sd {_fmt(fl['sd'])}; matched pairs' mean {_fmt(fl['matched_mean'])}")
    if report.get("corpus"):
        c = report["corpus"]
        console.print(f"corpus: {c['rows']:,} rows, {c['pairs']:,} pairs")
    if report.get("ci_method"):
        console.print(f"intervals: {report['ci_method']}", style="dim")
    pts = report.get("curve", [])
    if curve and pts:
        ct = Table(title=f"precision-recall curve ({len(pts)} points)", box=box.SIMPLE_HEAD, header_style="bold")
        for col in ("threshold", "precision", "recall"):
            ct.add_column(col, justify="right", no_wrap=True)
        for p in pts:
            ct.add_row(_fmt(p["threshold"]), _fmt(p["precision"]), _fmt(p["recall"]))
        console.print(ct)
    elif pts:
        console.print(f"curve: {len(pts)} points in the JSON report (--curve prints them here)", style="dim")
    print_gates(console, report)
