"""``embedcheck report DIR -o report.html``: one self-contained HTML page of a pipeline's reports
and plots (API :func:`embedcheck.api.report.html_report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..api.report import html_report
from ._app import app
from .common import FormatOpt, JsonOpt, QuietOpt, finish, hint, start_command
from .generic import declared


@app.command("report")
@declared(html_report)
def report_cmd(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A pipeline's output folder (searched recursively).", show_default=False)],
    *,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
    quiet: QuietOpt = False,
    **options: Any,
) -> None:
    """One HTML page of every embedcheck report and plot in a folder.

    Headline figures with their 95% intervals, gates passed and failed,
    paired verdicts, warnings and provenance (model, input hashes, versions)
    of every *.json report with an embedcheck schema; every *.png inline.
    No external reference: it opens from disk.

    Example: embedcheck report out/sst2 -o out/sst2/report.html
    """
    start_command(quiet)
    output = options["output"]
    res = html_report(folder, output)
    hint(f"wrote {output}: {res.reports} report{'' if res.reports == 1 else 's'}, {res.plots} plot{'' if res.plots == 1 else 's'}")
    finish(res.to_dict(), title="report", as_json=as_json, fmt=fmt, report_file=None)
