"""Shared ``Annotated`` option types and small helpers reused by every command.

Data goes to stdout (the report), hints and progress to stderr, silenced by ``--quiet``.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from .. import report as _report


class OutputFormat(str, Enum):
    json = "json"
    table = "table"


# ---- reporting options (every measuring command) -------------------------------------------
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON (the default when stdout is not a terminal).")]
FormatOpt = Annotated[Optional[OutputFormat], typer.Option("--format", help="Force the report format: json or table.", case_sensitive=False)]
ReportOpt = Annotated[Optional[Path], typer.Option("--report", help="Also write the JSON report to this file (atomically).", dir_okay=False)]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress, hints or warnings on stderr.")]

# ---- inputs and randomness ------------------------------------------------------------------
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for every random choice (same seed, same output).")]
LabelFieldOpt = Annotated[str, typer.Option("--label-field", help="Field holding the label in a .jsonl labels file.")]
EmbArg = Annotated[Path, typer.Argument(help="Embeddings: a 2-D float .npy (rows x dims).", show_default=False)]
LabelsArg = Annotated[Path, typer.Argument(help="Labels: 1-D .npy, .jsonl (--label-field) or .txt (one per line); ints or strings.", show_default=False)]
OutOpt = Annotated[Path, typer.Option("--output", "-o", help="Output file (written atomically).", dir_okay=False, show_default=False)]

_state = {"quiet": False}


def set_quiet(quiet: bool) -> None:
    _state["quiet"] = bool(quiet)


def is_quiet() -> bool:
    return _state["quiet"]


def hint(msg: str) -> None:
    """A line for humans on stderr (never on stdout), unless ``--quiet``."""
    if not _state["quiet"]:
        sys.stderr.write(msg.rstrip("\n") + "\n")
        sys.stderr.flush()


def warn(msg: str) -> None:
    hint(f"warning: {msg}")


def stderr_is_terminal() -> bool:
    return (not _state["quiet"]) and sys.stderr.isatty()


def progress() -> Any:
    """A rich progress bar on stderr when it is a terminal; a no-op otherwise."""
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    console = Console(stderr=True)
    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=console, transient=True,
                    disable=not stderr_is_terminal())


def finish(report: dict[str, Any], *, title: str, as_json: bool, fmt: Optional[OutputFormat],
           report_file: Optional[Path], renderer: Optional[Callable[[dict[str, Any]], None]] = None) -> None:
    """Print the report, write ``--report``, exit 1 if a gate failed (else return → exit 0)."""
    code = _report.emit(report, title=title, fmt=fmt.value if fmt else None, as_json=as_json,
                        report_file=str(report_file) if report_file else None, renderer=renderer)
    if code:
        failed = [g["name"] for g in report.get("gates", []) if not g["passed"]]
        hint(f"gate failed: {', '.join(failed)}")
        raise typer.Exit(code)
