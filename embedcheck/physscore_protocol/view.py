"""The PhysScore terminal view: the paper's tables as rich tables that fit 80 columns.

No table may elide a digit. Every table is laid out so that its numbers fit an 80-column
terminal, and every column folds (``overflow="fold"``) rather than cutting with ``…`` on a
narrower one:

- the per-cell table keeps units down and ranges across, with the Kendall τ and the PACC of a
  cell on two rows (one ``τ / PACC`` cell per range would need 92 columns);
- Table 3 is transposed (rows K's τ and PACC, columns cosine, probe and Δ), and its per-cell
  detail is one row per (unit, range);
- Table 4 is transposed: one row per reference (character, tokenizer, numeric), columns All, F×F,
  F×I, I×I; its sign subsets are one row per subset;
- the model name goes into the titles (which wrap) and the model column of Table 1 folds.

Numbers are plain (``7.33``, ``-0.06``, ``8.5``); the reference notebook's zero-padded text
(``07.33``, ``-00.06``, ``08.5``) stays available as :func:`notebook_number` and
``render(..., notebook=True)``, for a reproduction that compares that text.

>>> number(7.333), number(-0.06), number(8.54, 1), number(-0.001), number(None)
('7.33', '-0.06', '8.5', '0.00', '—')
>>> notebook_number(7.333), notebook_number(-7.333), notebook_number(-0.06), notebook_number(8.54, 4, 1)
('07.33', '-07.33', '-00.06', '08.5')
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from . import protocol

#: Table 4's references and sign subsets, in the paper's order
REFERENCES = (("char", "Character"), ("token", "Tokenizer"), ("numeric", "Numeric"))
LEXICAL_SUBSETS = (("all", "All"), ("ff", "F×F"), ("fi", "F×I"), ("ii", "I×I"))
SIGN_SUBSETS = ("same_sign", "cross_sign", "neg_neg", "neg_pos", "pos_neg", "pos_pos")


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


#: a number formatter of the tables: ``(value, width, decimals) -> text``
Formatter = Callable[..., str]


def number(x: float | None, dec: int = 2) -> str:
    """A plain number with ``dec`` decimals (``7.33``, ``-0.06``); a negative that rounds to zero
    prints ``0.00``; ``—`` for a missing or non-finite value."""
    if x is None or not _finite(x):
        return "—"
    s = f"{abs(x):.{dec}f}"
    return ("-" + s) if x < 0 and float(s) != 0 else s


def notebook_number(x: float | None, width: int = 5, dec: int = 2) -> str:
    """The reference notebook's text format, zero-padded: ``07.33``, ``-07.33`` (``width`` counts
    the magnitude only; Table 4 uses width 4 with 1 decimal, ``08.5``)."""
    if x is None or not _finite(x):
        return "—"
    s = f"{abs(x):0{width}.{dec}f}"
    return ("-" + s) if x < 0 and float(s) != 0 else s


def _plain(x: float | None, width: int = 5, dec: int = 2) -> str:
    return number(x, dec)


def _fmt(notebook: bool) -> Formatter:
    return notebook_number if notebook else _plain


def _f3(x: float | None) -> str:
    return f"{x:.3f}" if x is not None and _finite(x) else "—"


def _signed(x: float | None, fmt: Formatter = _plain) -> str:
    text = fmt(x)
    return ("+" if _finite(x) and not text.startswith("-") else "") + text


def _table(title: str, first: str, *cols: str) -> Any:
    """A table whose every column folds (never ``…``); numbers right-aligned."""
    from rich.table import Table

    t = Table(title=title, header_style="bold")
    t.add_column(first, style="cyan", overflow="fold")
    for c in cols:
        t.add_column(c, justify="right", overflow="fold")
    return t


def cells_table(model: str, cells: list[dict[str, Any]]) -> Any:
    """Table 1's 20 cells: units down, ranges across, τ and PACC on two rows per unit."""
    t = _table(f"PhysScore cells — {model} (Kendall τ and PACC, anchor = smallest value)", "unit",
               "", *[protocol.RANGE_TITLES[r] for r in protocol.RANGES])
    for u in protocol.UNITS:
        row = {c["range"]: c for c in cells if c["unit"] == u}
        for key, label in (("kendall_tau", "τ"), ("pacc", "PACC")):
            vals = [_f3(row[r][key]) if r in row else "—" for r in protocol.RANGES]
            t.add_row(u if key == "kendall_tau" else "", label, *vals, end_section=key == "pacc")
    return t


def table1(model: str, t1: dict[str, Any], fmt: Formatter = _plain) -> Any:
    t = _table("Table 1 — PhysScore (×100)", "model", "K's τ", "PACC", "AVG")
    t.add_row(model, fmt(t1["kendall_tau"]), fmt(t1["pacc"]), fmt(t1["avg"]))
    t.add_row("random-baseline", fmt(0.0), fmt(50.0), fmt(25.0), style="dim")
    return t


def table3(model: str, t3: dict[str, Any], fmt: Formatter = _plain) -> Any:
    t = _table(f"Table 3 — recalibration probe (×100), {model}", "figure", "cosine", "probe", "Δ (probe − cosine)")
    t.add_row("K's τ", fmt(t3["cosine_tau"]), fmt(t3["probe_tau"]), _signed(t3["delta_tau"], fmt))
    t.add_row("PACC", fmt(t3["cosine_pacc"]), fmt(t3["probe_pacc"]), "")
    return t


def table3_cells(cells: list[dict[str, Any]]) -> Any:
    t = _table("Table 3 cells — Kendall τ, mean (± SD) over the splits", "unit", "range", "probe τ", "± SD",
               "cosine τ", "± SD")
    t.columns[1].justify = "left"
    for u in protocol.UNITS:
        row = {c["range"]: c for c in cells if c["unit"] == u}
        for i, r in enumerate(protocol.RANGES):
            c = row.get(r)
            if c is None:
                continue
            t.add_row(u if i == 0 else "", protocol.RANGE_TITLES[r], _f3(c["probe_tau"]), _f3(c["probe_tau_sd"]),
                      _f3(c["cosine_tau"]), _f3(c["cosine_tau_sd"]), end_section=i == len(protocol.RANGES) - 1)
    return t


def table4(model: str, t4: dict[str, Any], fmt: Formatter = _plain) -> Any:
    t = _table(f"Table 4 — Kendall τ (×100) of similarity with each reference, {model}", "reference",
               *[title for _, title in LEXICAL_SUBSETS])
    for ref, title in REFERENCES:
        if t4.get(ref):
            t.add_row(title, *[fmt(t4[ref][sub], 4, 1) for sub, _ in LEXICAL_SUBSETS])
    t.add_row("pairs", *[str(t4["n_pairs"][sub]) for sub, _ in LEXICAL_SUBSETS], style="dim")
    return t


def table4_signs(t4: dict[str, Any], fmt: Formatter = _plain) -> Any:
    refs = [(ref, title) for ref, title in REFERENCES if t4.get(ref)]
    t = _table("Table 4 sign subsets — Kendall τ (×100)", "subset", "pairs", *[title for _, title in refs])
    for sub in SIGN_SUBSETS:
        t.add_row(sub, str(t4["n_pairs"][sub]), *[fmt(t4[ref][sub], 4, 1) for ref, _ in refs])
    return t


def renderables(report: dict[str, Any], *, notebook: bool = False) -> list[Any]:
    """A PhysScore report (``physscore run`` / ``score``) as the paper's tables (rich tables, and
    folding lines), in plain numbers (``notebook=True``: the reference notebook's zero-padded
    text, :func:`notebook_number`) — what :func:`render` prints and the command's view returns."""
    from rich.text import Text

    out: list[Any] = []
    fmt = _fmt(notebook)
    model = report.get("model") or "embeddings"
    if "cells" in report:
        out.append(cells_table(model, report["cells"]))
    if "table1" in report:
        t1 = report["table1"]
        out.append(table1(model, t1, fmt))
        if t1.get("kendall_tau_ci95") and t1.get("pacc_ci95"):
            (tl, th), (pl, ph) = t1["kendall_tau_ci95"], t1["pacc_ci95"]
            out.append(Text(f"95% intervals: K's τ {fmt(tl)} to {fmt(th)}, PACC {fmt(pl)} to {fmt(ph)} "
                            f"({t1['ci_method']})", overflow="fold"))
    if "table3" in report:
        out.append(table3(model, report["table3"], fmt))
        out.append(table3_cells(report["table3"]["cells"]))
    if "table4" in report:
        out.append(table4(model, report["table4"], fmt))
        out.append(table4_signs(report["table4"], fmt))
    for p in report.get("plots", []):
        out.append(Text(f"plot: {p}", overflow="fold"))
    return out


def render(report: dict[str, Any], console: Any = None, *, notebook: bool = False) -> None:
    """Print a PhysScore report (``physscore run`` / ``score``) as the paper's tables, in plain
    numbers (``notebook=True``: the reference notebook's zero-padded text, :func:`notebook_number`).
    The CLI adds the gate lines, formatted with :func:`paper_number`."""
    from rich.console import Console

    console = console or Console()
    for r in renderables(report, notebook=notebook):
        console.print(r)


#: the number format of the gate lines (plain, like the tables)
paper_number: Callable[[float | None], str] = number
