"""Tables of records: CSV (RFC 4180), TSV (no quoting), Parquet, and where a field is missing.

One reader for ``embed``'s inputs (:mod:`embedcheck.io.texts`) and for label files that are tables
(:mod:`embedcheck.io.labels`), and one wording for "field not found": it names the fields that
exist and the file they came from.

>>> missing_field("label", ["text", "sentiment"], "my.csv row 0 (line 2)", option="--label-field")
"my.csv row 0 (line 2) has no field 'label' (--label-field); its fields are: text, sentiment"
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Sequence

from ..errors import InputError
from .jsonio import read_jsonl
from .records import Rows, line_where, row_where  # noqa: F401  (importable from here as before)

#: suffixes read as a table of records with named fields
TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".jsonl", ".ndjson")


def looks_headerless(header: Sequence[Any], rows: Sequence[dict]) -> bool:
    """Is the first line of a CSV/TSV data rather than column names? Yes when one of its cells is
    a number, is longer than a column name would be (more than 3 words or 40 characters), or
    occurs again as a value of its own column (``positive`` over a column of sentiments).

    >>> looks_headerless(["great movie", "positive"], [{"great movie": "bad", "positive": "negative"},
    ...                                                 {"great movie": "fine", "positive": "positive"}])
    True
    >>> looks_headerless(["review", "sentiment"], [{"review": "bad", "sentiment": "negative"}])
    False
    """
    def data_like(c: Any) -> bool:
        s = str(c).strip()
        try:
            float(s)
            return True
        except ValueError:
            return len(s) > 40 or len(s.split()) > 3

    if any(data_like(c) for c in header):
        return True
    for c in header:
        if any(str(r.get(c, "")).strip() == str(c).strip() for r in rows[:10_000]):
            return True
    return False


def missing_field(name: str, fields: Sequence[Any], where: str, *, option: str | None = None,
                  headerless: bool = False) -> str:
    """The one wording of "field not found": which field, by which option, the fields that exist
    (or, when the first line of a CSV/TSV looks like data, whether the file has a header)."""
    by = f" ({option})" if option else ""
    shown = ", ".join(str(f) for f in fields) if fields else "(none)"
    if headerless:
        return (f"{where} has no field {name!r}{by}: does the file have a header line? Its first line "
                f"({shown}) reads as data; the first line of a .csv/.tsv names the columns (e.g. text,label)")
    return f"{where} has no field {name!r}{by}; its fields are: {shown}"


def rows_delimited(text: str, where: str, tsv: bool) -> list[dict]:
    if tsv:  # IANA text/tab-separated-values: no quoting at all (GLUE / STS-B files contain bare ")
        reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    else:  # RFC 4180 CSV
        reader = csv.reader(io.StringIO(text, newline=""))
    table: list[tuple[int, list[str]]] = []
    try:
        start = 1
        for r in reader:
            if r and any(c != "" for c in r):
                table.append((start, r))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(f"{where}: malformed {'TSV' if tsv else 'CSV'} ({exc})") from None
    if not table:
        raise InputError(f"{where} has no header row")
    header = table[0][1]
    if len(set(header)) != len(header):
        raise InputError(f"{where}: duplicate column names in the header {header}"
                         + ("; does the file have a header line?" if looks_headerless(header, []) else ""))
    rows = Rows()
    rows.lines, rows.header = [], True
    for line, r in table[1:]:
        if len(r) != len(header):
            raise InputError(f"{where}:{line}: {len(r)} columns but the header has {len(header)}")
        rows.append(dict(zip(header, r)))
        rows.lines.append(line)
    return rows


def rows_parquet(data: bytes, where: str) -> list[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        raise InputError(f"{where}: reading .parquet needs pyarrow (pip install pyarrow)") from None
    from .integrity import parquet_bytes_problem

    problem = parquet_bytes_problem(data[:4], data[-8:], len(data), where)
    if problem:
        raise InputError(problem)
    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception:  # noqa: BLE001 - any arrow error is a bad file (pyarrow's words are its internals)
        raise InputError(f"{where}: is corrupt (not a readable parquet file)") from None
    return table.to_pylist()



def read_table(path: str | os.PathLike, what: str) -> list[dict[str, Any]]:
    """The records of a ``.csv``, ``.tsv``, ``.parquet`` or ``.jsonl`` file (CSV/TSV cells are strings)."""
    p = Path(path)
    suffix = p.suffix.lower()
    where = f"{what} {p}"
    if suffix in (".jsonl", ".ndjson"):
        return read_jsonl(p, what)
    if suffix == ".parquet":
        return rows_parquet(p.read_bytes(), where)
    if suffix in (".csv", ".tsv"):
        try:
            text = p.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(f"{where} is not valid UTF-8 (byte {exc.start})") from None
        return rows_delimited(text, where, tsv=suffix == ".tsv")
    raise InputError(f"{where}: not a table ({', '.join(TABLE_SUFFIXES)})")
