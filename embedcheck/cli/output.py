"""Reports, gates and exit codes — shared by every measuring command.

A report is a plain JSON-able dict. :func:`emit` prints it as JSON when stdout is not a
terminal (or with ``--json`` / ``--format json``), as a rich table otherwise, optionally
writes it to ``--report FILE``, and returns the exit code: 0, or 1 when a gate failed.

>>> r = {"aag": 0.02}
>>> add_gates(r, [min_gate("aag", 0.02, 0.05)])
>>> r["gates"][0]["passed"], exit_code(r)
(False, 1)
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

from ..io.atomic import save_json
from ..io.jsonio import dumps
from ..io.locators import mask_secrets
from ..report.gates import EXIT_GATE, EXIT_OK, add_gates, comparison_gates, exit_code, max_gate, min_gate  # noqa: F401  (re-exported)
from .views import _fmt, fmt_p, print_gates, render_paired, render_report, wrap_name  # noqa: F401  (re-exported)


def printable(text: str) -> str:
    """Text from an input (a label, a model name, a file name) as it may reach a terminal: a database
    password masked, control characters (escape sequences, carriage returns) shown as ``\\xNN``.

    >>> printable("a\\x1b[2Jb postgresql://u:pw@h/db")
    'a\\\\x1b[2Jb postgresql://u:***@h/db'
    """
    text = mask_secrets(text)
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text):
        text = "".join(c if not (ord(c) < 32 or 127 <= ord(c) < 160) else f"\\x{ord(c):02x}" for c in text)
    return text


def _strings(obj: Any, f: Callable[[str], str]) -> Any:
    """``obj`` with ``f`` applied to every string and string key (numbers untouched)."""
    if isinstance(obj, str):
        return f(obj)
    if isinstance(obj, dict):
        return {(f(k) if isinstance(k, str) else k): _strings(v, f) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) and any(isinstance(v, (str, dict, list, tuple)) for v in obj):
        return [_strings(v, f) for v in obj]
    return obj


def displayable(obj: Any) -> Any:
    """A report as the table view shows it: every string and key :func:`printable` and escaped for
    rich's markup (a label ``[/x]`` is text, never a tag that breaks the table)."""
    from rich.markup import escape

    return _strings(obj, lambda s: escape(printable(s)))


def _masked(obj: Any) -> Any:
    """``obj`` with every database password masked (strings only; numbers untouched)."""
    return _strings(obj, mask_secrets)


def flatten(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested dict → (dotted key, formatted value) rows for the table view.

    >>> flatten({"raw": {"floor": 0.5}, "n": 3})
    [('raw.floor', '0.5000'), ('n', '3')]
    """
    rows: list[tuple[str, str]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) or (isinstance(v, list) and v and isinstance(v[0], dict)):
                rows.extend(flatten(v, key))
            else:
                rows.append((key, _fmt(v)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            rows.extend(flatten(v, f"{prefix}[{i}]"))
    else:
        rows.append((prefix, _fmt(obj)))
    return rows


def render_table(report: dict[str, Any], title: str, console: Any = None) -> None:
    """Default terminal view (:mod:`embedcheck.cli.views`): the declared headline figures with their
    intervals and verdicts, the other short facts, each list of records as its own table, the gates."""
    render_report(report, title, console=console)


def render_comparison(comparison: dict[str, Any], console: Any = None, title: Optional[str] = None) -> None:
    """Side-by-side table of a comparison dict: baseline, current, difference, its interval, noise."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    t = Table(title=title or f"compare: {comparison['command']} ({comparison['compared_schema']})", header_style="bold")
    t.add_column("figure", style="cyan", overflow="fold")
    for col, just in (("baseline", "right"), ("current", "right"), ("difference", "right"),
                      ("95% CI of difference", "right"), ("beyond noise", "center")):
        t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for f in comparison["figures"]:
        ci = f["difference_ci95"]
        mark = "yes" if f["beyond_noise"] else ("no interval" if f["noise"] == "no interval" else "no")
        if f["beyond_noise"] and f["drop"] > 0:
            mark = "[red]worse[/red]" if f["headline"] else "worse"
        elif f["beyond_noise"]:
            mark = "[green]better[/green]" if f["headline"] else "better"
        name = f"[bold]{f['figure']}[/bold]" if f["headline"] else f["figure"]
        t.add_row(name, _fmt(f["baseline"]), _fmt(f["current"]), _fmt(f["difference"]),
                  f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else (
                      f"tol {_fmt(comparison['tolerance'])}" if f["noise"] == "tolerance" else "-"), mark)
    console.print(t)
    for key in ("only_in_baseline", "only_in_current"):
        if comparison.get(key):
            console.print(f"{key.replace('_', ' ')}: {', '.join(comparison[key][:20])}")
    if comparison.get("pairing"):
        console.print(f"[yellow]pairing:[/yellow] {comparison['pairing']}")
    if comparison.get("significant_drops"):
        console.print(f"[red]significant drops (headline figures):[/red] {', '.join(comparison['significant_drops'])}")


def emit(
    report: dict[str, Any],
    *,
    title: str,
    fmt: Optional[str] = None,
    as_json: bool = False,
    report_file: Optional[str] = None,
    renderer: Optional[Callable[[dict[str, Any]], None]] = None,
) -> int:
    """Print ``report`` (JSON on a pipe, table on a terminal), save ``--report``; return exit code."""
    code = exit_code(report)
    report = _masked(report)  # a password read from an input (a store's metadata, a report) is never shown
    if report_file:
        save_json(report_file, report)
    use_json = as_json or fmt == "json" or (fmt is None and not sys.stdout.isatty())
    if use_json:
        sys.stdout.write(dumps(report) + "\n")
        sys.stdout.flush()
    elif renderer is not None:
        renderer(displayable(report))
    else:
        render_table(displayable(report), printable(title))
    return code
