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

from ..gates import EXIT_GATE, EXIT_OK, add_gates, comparison_gates, exit_code, max_gate, min_gate  # noqa: F401  (re-exported)
from ..io.atomic import save_json
from ..io.jsonio import dumps


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:.4f}"
    if isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v):
        return ", ".join(_fmt(x) for x in v) if len(v) <= 12 else f"[{len(v)} values]"
    return str(v)


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
    """Default terminal view: one row per (flattened) key, gates highlighted."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("figure", style="cyan", overflow="fold")  # fold, never "…": no digit is ever hidden
    table.add_column("value", overflow="fold")
    body = {k: v for k, v in report.items() if k not in ("gates", "comparison", "paired")}
    for key, val in flatten(body):
        table.add_row(key, val)
    console.print(table)
    print_gates(console, report)


def render_paired(console: Any, paired: dict[str, Any], fmt: Callable[[Any], str] = _fmt) -> None:
    """The ``paired`` section (``--against``) as a table: one row per compared figure."""
    from rich.table import Table

    t = Table(title=f"paired: A against {paired.get('against', 'B')}", header_style="bold")
    t.add_column("figure", style="cyan", overflow="fold")
    for col in ("A", "B", "B - A (+ better)", "95% CI", "p", "min. detectable", "margin", "verdict"):
        t.add_column(col, justify="right", overflow="fold")
    colour = {"better": "green", "worse": "red", "equivalent": "green", "non-inferior": "green"}
    for key, f in paired.items():
        if not isinstance(f, dict):
            continue
        ci = f.get("difference_ci95")
        v = f.get("verdict", "")
        t.add_row(key, fmt(f.get("a")), fmt(f.get("b")), fmt(f.get("difference")),
                  f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "—", fmt(f.get("p_value")),
                  fmt(f.get("min_detectable_effect")), fmt(f.get("margin")),
                  f"[{colour[v]}]{v}[/{colour[v]}]" if v in colour else v)
    console.print(t)
    console.print(paired.get("ci_method", ""), style="dim")


def print_gates(console: Any, report: dict[str, Any], fmt: Callable[[Any], str] = _fmt) -> None:
    """The paired table (when the report has one), then one ``PASS``/``FAIL`` line per gate: the
    end of every terminal view."""
    if isinstance(report.get("paired"), dict):
        render_paired(console, report["paired"], fmt)
    from ..gates import verdict_line

    for g in report.get("gates", []):
        word, rest = verdict_line(g, fmt).split(" ", 1)
        console.print(f"[green]{word}[/green] {rest}" if g["passed"] else f"[red]{word}[/red] {rest}", markup=True)


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
    if report_file:
        save_json(report_file, report)
    use_json = as_json or fmt == "json" or (fmt is None and not sys.stdout.isatty())
    if use_json:
        sys.stdout.write(dumps(report) + "\n")
        sys.stdout.flush()
    elif renderer is not None:
        renderer(report)
    else:
        render_table(report, title)
    return exit_code(report)
