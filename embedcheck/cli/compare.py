"""``embedcheck compare BASELINE.json CURRENT.json``: every shared figure of two reports of the same
command, its change and whether the change is beyond noise (logic in :mod:`embedcheck.compare`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..api.compare import compare
from ._app import app
from .common import FormatOpt, JsonOpt, JunitOpt, MaxDropOpt, QuietOpt, ReportOpt, ToleranceOpt, finish, start_command
from .generic import declared

_ReportArg = typer.Argument


@app.command("compare")
@declared(compare)
def compare_cmd(
    baseline_report: Annotated[Path, _ReportArg(metavar="BASELINE.json", help="The stored report (written with --report).", show_default=False)],
    current_report: Annotated[Path, _ReportArg(metavar="CURRENT.json", help="The new report of the same command.", show_default=False)],
    tolerance: ToleranceOpt = 0.0,
    max_drop: MaxDropOpt = None,
    *,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    report_file: ReportOpt = None,
    quiet: QuietOpt = False,
    junit: JunitOpt = None,
    **options: Any,
) -> None:
    """Compare two reports of the same command: baseline, current, difference, beyond noise?

    Every shared numeric figure (dotted keys such as centred.gap_over_floor_sd). A change is
    beyond noise when the 95% interval of the difference excludes 0; that interval comes from
    the figures' own intervals (<figure>_ci95), the runs taken as independent and the two
    half-widths combined in quadrature (per side); a figure without intervals is beyond noise
    when |difference| > --tolerance. Exit 2 when the reports come from different commands,
    schema versions or inputs of another shape.

    Example: embedcheck compare base.json aag.json --fail-on significant-drop --max-drop aag=0.01
    """
    from ..report.comparison import parse_max_drops
    from .output import render_comparison

    fail_on = options.pop("fail_on")
    start_command(quiet)
    report: dict[str, Any] = compare(baseline_report, current_report, tolerance=tolerance,
                                     max_drop=parse_max_drops(list(max_drop or [])),
                                     fail_on_significant_drop=fail_on is not None,
                                     **options).to_dict()

    def view(r: dict[str, Any]) -> None:
        from rich.console import Console

        from .output import print_gates

        console = Console()
        models = r.get("models") or {}
        roles = sorted(set(models.get("baseline") or {}) | set(models.get("current") or {}))
        if roles:  # which models the two runs measured, side by side
            from rich.table import Table

            t = Table(title="models", header_style="bold")
            for col in ("input", "baseline", "current"):
                t.add_column(col, overflow="fold")
            for role in roles:
                t.add_row(role, (models.get("baseline") or {}).get(role, "-"), (models.get("current") or {}).get(role, "-"))
            console.print(t)
        render_comparison(r, console)
        print_gates(console, r)

    finish(report, title="compare", as_json=as_json, fmt=fmt, report_file=report_file, renderer=view, junit=junit)
