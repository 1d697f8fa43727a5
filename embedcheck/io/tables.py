"""Tables of records: CSV (RFC 4180), TSV (no quoting), Parquet, and where a field is missing.

One reader for ``embed``'s inputs (:mod:`embedcheck.io.texts`) and for label files that are tables
(:mod:`embedcheck.io.labels`), and one wording for "field not found": it names the fields that
exist and the file they came from.

>>> missing_field("label", ["text", "sentiment"], "my.csv row 0", option="--label-field")
"my.csv row 0 has no field 'label' (--label-field); its fields are: text, sentiment"
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Sequence

from ..errors import InputError

#: suffixes read as a table of records with named fields
TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".jsonl", ".ndjson")


def missing_field(name: str, fields: Sequence[Any], where: str, *, option: str | None = None) -> str:
    """The one wording of "field not found": which field, by which option, the fields that exist."""
    by = f" ({option})" if option else ""
    shown = ", ".join(str(f) for f in fields) if fields else "(none)"
    return f"{where} has no field {name!r}{by}; its fields are: {shown}"


def rows_delimited(text: str, where: str, tsv: bool) -> list[dict]:
    if tsv:  # IANA text/tab-separated-values: no quoting at all (GLUE / STS-B files contain bare ")
        reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    else:  # RFC 4180 CSV
        reader = csv.reader(io.StringIO(text, newline=""))
    try:
        table = [r for r in reader]
    except csv.Error as exc:
        raise InputError(f"{where}: malformed {'TSV' if tsv else 'CSV'} ({exc})") from None
    table = [r for r in table if r and any(c != "" for c in r)] if table else []
    if not table:
        raise InputError(f"{where} has no header row")
    header = table[0]
    if len(set(header)) != len(header):
        raise InputError(f"{where}: duplicate column names in the header {header}")
    rows = []
    for i, r in enumerate(table[1:], 2):
        if len(r) != len(header):
            raise InputError(f"{where}:{i}: {len(r)} columns but the header has {len(header)}")
        rows.append(dict(zip(header, r)))
    return rows


def rows_parquet(data: bytes, where: str) -> list[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        raise InputError(f"{where}: reading .parquet needs pyarrow (pip install pyarrow)") from None
    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - any arrow error is a bad file
        raise InputError(f"{where}: not a readable parquet file ({' '.join(str(exc).split())[:200]})") from None
    return table.to_pylist()



def read_table(path: str | os.PathLike, what: str) -> list[dict[str, Any]]:
    """The records of a ``.csv``, ``.tsv``, ``.parquet`` or ``.jsonl`` file (CSV/TSV cells are strings)."""
    from .jsonio import read_jsonl

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
