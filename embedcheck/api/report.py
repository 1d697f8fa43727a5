"""``embedcheck.html_report``: one self-contained HTML page of every embedcheck report and plot in
a pipeline's output folder — the report of ``embedcheck report`` (page built by
:mod:`embedcheck.report.html`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Optional

from ..errors import InputError
from ..report.result import Figure, Result, hidden
from ..report.schemas import INT, STR, obj
from ..spec import Option, takes


@dataclass(kw_only=True)
class HtmlReport(Result):
    """What the page holds; ``html`` is the page itself (not written into the JSON)."""

    command: ClassVar[str] = "report"
    report_schema = obj({"output": STR, "folder": STR, "reports": INT, "plots": INT})
    figures: ClassVar[dict[str, Figure]] = {}

    output: str
    folder: str
    reports: int
    plots: int
    commands: list[str] = field(default_factory=list)
    gates_failed: list[str] = field(default_factory=list)
    verdicts: dict[str, Any] = field(default_factory=dict)
    html: str = hidden("")


@takes(Option("output", str, None, "The .html page to write (atomically).", aliases=("-o",), required=True,
              metavar="PATH", show_default=False))
def html_report(folder: Any, output: Optional[Any] = None, *, title: Optional[str] = None) -> HtmlReport:
    """Gather every report (``*.json`` with an embedcheck schema), plot (``*.png``) and provenance
    sidecar (``*.meta.json``) under ``folder`` into one HTML page with no external reference;
    write it atomically to ``output`` when given."""
    from ..report.html import build_report
    from ._params import path_arg

    folder = path_arg(folder, "folder")
    if output is not None:
        out = path_arg(output, "output")
        if out.is_dir():
            raise InputError(f"output {out} is a folder; give the .html file to write")
        parent = out.parent if str(out.parent) else Path(".")
        if not parent.is_dir():
            raise InputError(f"output {out}: folder {parent} does not exist")
        if out.suffix.lower() in (".json", ".png", ".npy"):
            raise InputError(f"output {out} must be an .html file (a {out.suffix} would be read as an input)")
    page, s = build_report(folder, title=title)
    if output is not None:
        from ..io.atomic import atomic_writer

        with atomic_writer(output, "w") as f:
            f.write(page)
    return HtmlReport(output=str(output) if output is not None else "", folder=s["folder"], reports=s["reports"],
                      plots=s["plots"], commands=s["commands"], gates_failed=s["gates_failed"], verdicts=s["verdicts"],
                      html=page)


__all__ = ["HtmlReport", "html_report"]
