"""Records read from a file, and where each sits in it: the one wording of "row 3 (line 5)" in
messages about tables (:mod:`embedcheck.io.tables`), JSON lines (:mod:`embedcheck.io.jsonio`) and
one-value-per-line files.
"""

from __future__ import annotations

from typing import Any


class Rows(list):  # type: ignore[type-arg]
    """Records of a table, with the file line of each (``lines[i]``, 1-based) and whether the
    first line was read as a header (CSV/TSV)."""

    lines: list[int]
    header: bool = False


def row_where(rows: Any, i: int) -> str:
    """Row ``i`` (0-based, as every message counts rows) of ``rows``, with its line in the file when
    the rows came from a text file (``row 300 (line 302)`` for a CSV with a header line, ``row 3
    (line 4)`` for JSON lines); ``row 300`` otherwise (parquet).

    >>> r = Rows([{"a": 1}]); r.lines, r.header = [2], True
    >>> row_where(r, 0), row_where([{"a": 1}], 0)
    ('row 0 (line 2)', 'row 0')
    """
    lines = getattr(rows, "lines", None)
    if lines is not None and i < len(lines):
        return f"row {i} (line {lines[i]})"
    return f"row {i}"


def line_where(i: int) -> str:
    """Row ``i`` (0-based) of a file of one value per line: ``row 10 (line 11)``."""
    return f"row {i} (line {i + 1})"
