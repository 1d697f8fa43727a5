"""The terminal view of a report, read from its figure declarations: the headline figures first
(value, interval, p, minimum detectable effect, verdict), then the report's other short facts packed
into a few lines, then every list of records (drift's clusters, recall's sweep, worst queries ...) as
its own compact table. Nothing is a flattened key path such as ``clusters.items[6].example.row``;
prose (methods, decision rules) is left to ``--json``; every number is printed in full. Every view
ends alike (:func:`print_gates`): the paired tables of ``--against``, then one line per gate.

>>> facts, tables, prose, notes = split_report({"n": 3, "m": {"a": 1.5}, "rows": [{"x": 1}, {"x": 2}],
...                                             "ci_method": "percentile bootstrap over rows, 100 resamples"})
>>> facts, [(t.name, t.columns) for t in tables], prose
([('n', 3), ('m.a', 1.5)], [('rows', ['x'])], ['ci_method'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

#: a string longer than this with a space in it is prose (a method, a rule): left to ``--json``
PROSE = 44
#: a text cell of a list table longer than this is cropped (the JSON has it in full)
TEXT_CELL = 28
#: report keys the view never shows as facts (the gates, comparison and paired sections have views of their own)
OWN_VIEWS = ("gates", "comparison", "paired", "schema")


@dataclass
class ListTable:
    """One list of records of a report: its dotted name, the columns (dotted keys inside a record)
    and the rows (one per record; a ``from`` column when lists of one parent are merged)."""

    name: str
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)


def _is_prose(v: Any) -> bool:
    return isinstance(v, str) and len(v) > PROSE and " " in v


def _is_records(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


@dataclass(frozen=True)
class Joined:
    """A record's nested record (drift's ``example: {side, row, id, text}``) shown as one cell: its
    values in order, the column named ``key (field, field ...)``."""

    fields: tuple[str, ...]
    values: tuple[Any, ...]


def _record_cells(rec: dict[str, Any]) -> dict[str, Any]:
    """A record's cells by key: scalars as they are, a nested record as one :class:`Joined` cell,
    nested lists of records dropped (they have no place in one row)."""
    out: dict[str, Any] = {}
    for k, v in rec.items():
        if isinstance(v, dict):
            flat = {kk: vv for kk, vv in v.items() if not isinstance(vv, (dict, list))}
            out[str(k)] = Joined(tuple(flat), tuple(flat.values()))
        elif _is_records(v) or _is_prose(v):  # no place in one row (the JSON has them)
            continue
        else:
            out[str(k)] = v
    return out


def split_report(report: dict[str, Any]) -> tuple[list[tuple[str, Any]], list[ListTable], list[str], list[str]]:
    """A report → (facts: (dotted key, value) of its short scalars, tables: its lists of records,
    prose: the keys of the long texts left out, notes: the ``notes``/``warnings`` lines)."""
    facts: list[tuple[str, Any]] = []
    tables: list[ListTable] = []
    prose: list[str] = []
    notes: list[str] = []

    def walk(obj: dict[str, Any], prefix: str) -> None:
        lists = [(k, v) for k, v in obj.items() if _is_records(v)]
        merged = len(lists) > 1 and len({tuple(_record_cells(v[0])) for _k, v in lists}) == 1
        if merged:  # lists of one parent with the same columns (drift's typical.cur / typical.ref): one table
            cols = list(_record_cells(lists[0][1][0]))
            # a column that only repeats its list's name (drift's side) says nothing beside the list's name
            named = [c for c in cols if all(str(_record_cells(r).get(c)) == k for k, v in lists for r in v)]
            if len({len(v) for _k, v in lists}) == 1:  # lists of one length: side by side, a row per position
                rest = [c for c in cols if c not in named]
                side_cols = [f"{k} {c}" for k, _v in lists for c in rest]
                rows = [{f"{k} {c}": _record_cells(v[i]).get(c) for k, v in lists for c in rest}
                        for i in range(len(lists[0][1]))]
                tables.append(ListTable(prefix or "rows", side_cols, rows))
            else:
                rows = [{"from": k, **_record_cells(r)} for k, v in lists for r in v]
                tables.append(ListTable(prefix or "rows", cols if named else ["from", *cols], rows))
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if not prefix and k in OWN_VIEWS:
                continue
            if k in ("notes", "warnings") and isinstance(v, list) and all(isinstance(x, str) for x in v):
                notes.extend(v)
            elif isinstance(v, dict):
                walk(v, key)
            elif _is_records(v):
                if not merged:
                    columns: list[str] = []
                    records = [_record_cells(r) for r in v]
                    for r in records:
                        columns.extend(c for c in r if c not in columns)
                    tables.append(ListTable(key, columns, records))
            elif _is_prose(v):
                prose.append(key)
            else:
                facts.append((key, v))

    walk(report, "")
    return facts, tables, prose, notes


def _get(report: dict[str, Any], dotted: str) -> Any:
    cur: Any = report
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _command(report: dict[str, Any]) -> Optional[str]:
    from ..report.schemas import parse_schema_id

    parsed = parse_schema_id(report.get("schema"))
    return parsed[0] if parsed else None


def headline_rows(report: dict[str, Any], command: Optional[str] = None) -> tuple[list[dict[str, Any]], set[str]]:
    """The declared headline figures present in ``report``, each with its interval and, from the
    same section, its p-value, minimum detectable effect, margin and verdict; and the keys they use."""
    from ..report.schemas import figures_of

    command = command or _command(report)
    if command is None:
        return [], set()
    try:
        figures = figures_of(command)
    except Exception:  # an unknown command (a report from elsewhere): no headline table
        return [], set()
    rows: list[dict[str, Any]] = []
    used: set[str] = set()
    for name, fig in figures.items():
        if not fig.headline or "[]" in name:
            continue
        value = _get(report, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        parent = name.rsplit(".", 1)[0] + "." if "." in name else ""
        row: dict[str, Any] = {"figure": name, "value": value, "better": fig.better}
        used.add(name)
        if fig.interval and isinstance(_get(report, fig.interval), list):
            row["ci"] = _get(report, fig.interval)
            used.add(fig.interval)
        for col, key in (("p", "p_value"), ("mde", "min_detectable_effect"), ("margin", "margin"), ("verdict", "verdict")):
            full = parent + key
            if full != name and parent and _get(report, full) is not None and not isinstance(_get(report, full), dict):
                row[col] = _get(report, full)
                used.add(full)
        rows.append(row)
    return rows, used


def _interval(v: Any, fmt: Callable[[Any], str]) -> str:
    return f"[{fmt(v[0])}, {fmt(v[1])}]" if isinstance(v, list) and len(v) == 2 else fmt(v)


def _cell(key: str, v: Any, fmt: Callable[[Any], str]) -> str:
    if isinstance(v, Joined):
        return " ".join(fmt(x) for x in v.values)
    if isinstance(v, list) and len(v) == 2 and key.endswith("ci95"):
        return _interval(v, fmt)
    return fmt(v)


def pack(items: list[str], width: int, sep: str = "   ") -> list[str]:
    """``items`` packed greedily into lines of at most ``width`` characters (an item longer than a
    line gets a line of its own, folded by the console).

    >>> pack(["a 1", "b 2", "c 3"], 9)
    ['a 1   b 2', 'c 3']
    """
    lines: list[str] = []
    for it in items:
        if lines and len(lines[-1]) + len(sep) + len(it) <= width:
            lines[-1] += sep + it
        else:
            lines.append(it)
    return lines


def _split_columns(widths: list[int], room: int) -> list[list[int]]:
    """Column indices in groups whose widths fit ``room``; the first column repeated in each group."""
    groups: list[list[int]] = [[0]]
    used = widths[0]
    for i in range(1, len(widths)):
        if used + widths[i] + 1 > room and len(groups[-1]) > 1:
            groups.append([0])
            used = widths[0]
        groups[-1].append(i)
        used += widths[i] + 1
    return groups


def render_report(report: dict[str, Any], title: str, console: Any = None, fmt: Optional[Callable[[Any], str]] = None,
                  command: Optional[str] = None) -> None:
    """Print the view of ``report`` (already :func:`displayable`) on ``console``."""
    from rich.console import Console
    from rich.table import Table

    fmt = fmt or _fmt
    console = console or Console()
    width = int(getattr(console, "width", 80) or 80)
    verdict = report.get("verdict")
    console.print(f"[bold]{title}[/bold]" + (f": [bold]{verdict}[/bold]" if isinstance(verdict, str) else ""),
                  overflow="fold")
    heads, used = headline_rows(report, command)
    if heads:
        cols = [("figure", "figure"), ("value", "value"), ("ci", "95% CI"), ("p", "p"), ("mde", "min. det."),
                ("margin", "margin"), ("verdict", "verdict")]
        cols = [(k, h) for k, h in cols if any(k in r for r in heads)]
        t = Table(box=None, padding=(0, 1), collapse_padding=True, pad_edge=False, header_style="bold underline")
        for k, h in cols:
            t.add_column(h, style="cyan" if k == "figure" else None, justify="left" if k in ("figure", "verdict") else "right",
                         overflow="fold", no_wrap=k != "figure")
        for r in heads:
            cells = []
            for k, _h in cols:
                if k == "figure":
                    cells.append(r["figure"])
                elif k == "ci":
                    cells.append(_interval(r.get("ci"), fmt) if "ci" in r else "—")
                else:
                    cells.append(fmt(r.get(k)))
            t.add_row(*cells)
        console.print(t)
    facts, tables, prose, notes = split_report(report)
    kept = [(k, v) for k, v in facts if k not in used and k != "verdict" and v is not None]
    for marked in fact_lines(kept, fmt, width):
        console.print(marked, overflow="fold", highlight=False)
    for tab in tables:
        _render_list(console, tab, fmt, width)
    for n in notes:
        console.print(f"[yellow]note:[/yellow] {n}", overflow="fold", highlight=False)
    if prose:
        leaves = list(dict.fromkeys(k.rsplit(".", 1)[-1] for k in prose))
        console.print(f"[dim]methods ({', '.join(leaves[:4])}{f' and {len(leaves) - 4} more' if len(leaves) > 4 else ''}): see --json[/dim]",
                      overflow="fold")
    print_gates(console, report, fmt)


def fact_lines(facts: list[tuple[str, Any]], fmt: Callable[[Any], str], width: int) -> list[str]:
    """The facts as lines of at most ``width`` characters: the top-level ones packed together, then
    one block per section, its name once (``latency.index: median_ms 0.0138   p95_ms 0.0289``).

    >>> fact_lines([("n", 3), ("mmd.p_value", 0.5), ("mmd.null_sd", 0.25)], str, 80)
    ['[cyan]n[/cyan] 3   [cyan]mmd: [/cyan][cyan]p_value[/cyan] 0.5   [cyan]null_sd[/cyan] 0.25']
    """
    sections: dict[str, list[tuple[str, str]]] = {}
    for k, v in facts:
        parent, _, leaf = k.rpartition(".")
        sections.setdefault(parent, []).append((leaf, _cell(k, v, fmt)))
    blocks: list[list[tuple[str, str]]] = []  # each block: its lines as (plain, marked)
    for parent, items in sections.items():
        head = f"{parent}: " if parent else ""
        lines: list[tuple[str, str]] = []
        for leaf, val in items:
            p, m = f"{leaf} {val}", f"[cyan]{leaf}[/cyan] {val}"
            if lines and len(lines[-1][0]) + 3 + len(p) <= width:
                lines[-1] = (lines[-1][0] + "   " + p, lines[-1][1] + "   " + m)
            elif not lines:
                lines.append((head + p, (f"[cyan]{head}[/cyan]" if head else "") + m))
            else:
                lines.append(("  " + p, "  " + m))
        blocks.append(lines)
    out: list[tuple[str, str]] = []
    for i, lines in enumerate(blocks):  # one-line sections share a line where they fit
        if i and len(lines) == 1 and len(blocks[i - 1]) == 1 and len(out[-1][0]) + 3 + len(lines[0][0]) <= width:
            out[-1] = (out[-1][0] + "   " + lines[0][0], out[-1][1] + "   " + lines[0][1])
            blocks[i] = [out[-1]]
        else:
            out.extend(lines)
    return [m for _p, m in out]


def header(name: str, width: int) -> str:
    """A column name broken after ``_``, ``.`` or a space into lines of at most ``width`` characters where
    it can be (never inside a word).

    >>> header("difference_ci95", 10).splitlines()
    ['difference_', 'ci95']
    """
    lines: list[str] = []
    for part in name.replace("_", "_\0").replace(".", ".\0").replace(" ", " \0").split("\0"):
        if lines and len(lines[-1].rstrip()) + len(part.rstrip()) <= width:
            lines[-1] += part
        else:
            lines.append(part)
    return "\n".join(x.rstrip() for x in lines if x.strip())


def _render_list(console: Any, tab: ListTable, fmt: Callable[[Any], str], width: int) -> None:
    from rich.table import Table

    texts = {c for c in tab.columns if any(isinstance(r.get(c), (str, Joined)) and len(_cell(c, r.get(c), fmt)) > TEXT_CELL
                                          for r in tab.rows)}
    cells = [[_cell(c, r.get(c), fmt) for c in tab.columns] for r in tab.rows]
    names = []
    for c in tab.columns:
        j = next((r[c] for r in tab.rows if isinstance(r.get(c), Joined)), None)
        names.append(c if j is None else j.fields[0] if len(j.fields) == 1 else f"{c} ({', '.join(j.fields)})")
    content = [max(min(len(row[i]), TEXT_CELL) if c in texts else len(row[i]) for row in cells)
               for i, c in enumerate(tab.columns)]
    heads = [header(n, max(w, 5)) for n, w in zip(names, content)]
    widths = [max(w, *(len(x) for x in h.splitlines())) for w, h in zip(content, heads)]
    if texts:  # the room the other columns leave goes to the text columns (never below TEXT_CELL)
        rest = width - sum(w + 1 for c, w in zip(tab.columns, widths) if c not in texts)
        share = max(TEXT_CELL, rest // len(texts) - 1)
        full = {c: max(len(row[i]) for row in cells) for i, c in enumerate(tab.columns) if c in texts}
        widths = [min(full[c], share) if c in texts else w for c, w in zip(tab.columns, widths)]
    else:
        share = TEXT_CELL
    for g, group in enumerate(_split_columns(widths, width)):
        if g and len(group) <= 3:  # one or two columns left over: packed "key: value" lines, not a table
            key, cols = group[0], group[1:]
            items = [f"{row[key]}: " + ", ".join(row[c] for c in cols) for row in cells]
            console.print(f"[bold]{tab.name}[/bold] {', '.join(names[c] for c in cols)} by {names[key]}:",
                          overflow="fold", highlight=False)
            for line in pack(items, width - 2, sep="   "):
                console.print("  " + line, overflow="fold", highlight=False)
            continue
        t = Table(title=f"{tab.name} ({len(tab.rows)})", title_justify="left", box=None, padding=(0, 1),
                  collapse_padding=True, pad_edge=False, header_style="bold underline", title_style="bold")
        for i in group:
            c = tab.columns[i]
            if c in texts:
                t.add_column(heads[i], overflow="crop", no_wrap=True, max_width=widths[i])
            else:
                t.add_column(heads[i], justify="right" if all(_numeric(r.get(c)) for r in tab.rows) else "left",
                             no_wrap=True, overflow="fold")
        for row in cells:
            t.add_row(*(row[i] for i in group))
        console.print(t)


def _numeric(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _fmt(v: Any) -> str:
    """The terminal's number format (:func:`embedcheck.report.result.fmt_value`: a measurement's own view uses it too)."""
    from ..report.result import fmt_value

    return fmt_value(v)


def render_paired(console: Any, paired: dict[str, Any], fmt: Callable[[Any], str] = _fmt) -> None:
    """The ``paired`` section (``--against``) as two tables that fit 80 columns, one row per
    compared figure: the values and the difference with its interval, then p, the minimum
    detectable effect, the margin and the verdict. Numbers are never wrapped (only figure names fold)."""
    from rich.table import Table

    items = [(k, f) for k, f in paired.items() if isinstance(f, dict)]
    cells = [[fmt(f.get("a")), fmt(f.get("b")), fmt(f.get("difference")),
              f"[{fmt(f['difference_ci95'][0])}, {fmt(f['difference_ci95'][1])}]" if f.get("difference_ci95") else "—"]
             for _k, f in items]
    used = sum(max([len(h), *(len(c[i]) for c in cells)]) + 3 for i, h in enumerate(("A", "B", "B - A", "95% CI of B - A")))
    room = max(12, int(getattr(console, "width", 80)) - used - 4)
    t = Table(title=f"paired: A against {paired.get('against', 'B')}", header_style="bold",
              caption="B - A is signed so that positive means B is better", caption_justify="left")
    t.add_column("figure", style="cyan", overflow="fold", min_width=6)
    for col in ("A", "B", "B - A", "95% CI of B - A"):
        t.add_column(col, justify="right", no_wrap=True)
    for (key, _f), row in zip(items, cells):
        t.add_row(wrap_name(key, room), *row)
    console.print(t)
    colour = {"better": "green", "worse": "red", "equivalent": "green", "non-inferior": "green"}
    v2 = Table(header_style="bold")
    v2.add_column("figure", style="cyan", overflow="fold", min_width=6)
    for col in ("p", "min. detectable", "margin", "verdict"):
        v2.add_column(col, justify="right", no_wrap=True)
    for key, f in items:
        v = f.get("verdict", "")
        v2.add_row(wrap_name(key, room), fmt_p(f.get("p_value")), fmt(f.get("min_detectable_effect")), fmt(f.get("margin")),
                   f"[{colour[v]}]{v}[/{colour[v]}]" if v in colour else v)
    console.print(v2)
    console.print(paired.get("ci_method", ""), style="dim")


def wrap_name(name: str, width: int) -> str:
    """A dotted figure name broken after its dots (never inside a word) into lines of at most
    ``width`` characters where it can be.

    >>> wrap_name("centred.partner_ranked_first", 16)
    'centred.\\npartner_ranked_first'
    """
    lines: list[str] = []
    for part in name.replace(".", ".\0").split("\0"):
        if lines and len(lines[-1]) + len(part) <= width:
            lines[-1] += part
        else:
            lines.append(part)
    return "\n".join(x for x in lines if x)


def fmt_p(p: Any) -> str:
    """A p-value for people: ``p < 0.001`` below it, else three decimals; ``—`` when there is none.

    >>> fmt_p(0.000999), fmt_p(0.0123), fmt_p(None)
    ('< 0.001', '0.012', '—')
    """
    if p is None or isinstance(p, bool) or not isinstance(p, (int, float)):
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def print_gates(console: Any, report: dict[str, Any], fmt: Callable[[Any], str] = _fmt) -> None:
    """The paired table (when the report has one), then one ``PASS``/``FAIL`` line per gate: the
    end of every terminal view."""
    if isinstance(report.get("paired"), dict):
        render_paired(console, report["paired"], fmt)
    from ..report.gates import verdict_line

    for g in report.get("gates", []):
        word, rest = verdict_line(g, fmt).split(" ", 1)
        console.print(f"[green]{word}[/green] {rest}" if g["passed"] else f"[red]{word}[/red] {rest}", markup=True)
