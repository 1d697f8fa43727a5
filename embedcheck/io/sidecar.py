"""The one reader of a ``.jsonl`` sidecar: the records of an embedding artifact's rows (``X.jsonl``
beside ``X.npy``; a shard's ``.jsonl`` beside it in a shard set), one JSON object per row.

One policy, for every command and every output option: a sidecar that is present must hold
exactly one JSON object per row of its matrix. A record count other than the row count, a line
that is not a JSON object, bytes that are not UTF-8 or (for a shard whose manifest lists it) a
hash other than the manifest's are one :class:`~embedcheck.errors.InputError` naming the sidecar —
never silently dropped, never shifted against the rows. A sidecar that is absent is no sidecar
(the rows have no ids). Blank lines are skipped (the reader of ``embed``'s own output).

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "x.jsonl"
>>> _ = p.write_text('{"id": "a"}\\n{"id": "b"}\\n')
>>> [r["id"] for r in read_sidecar(p, 2)]
['a', 'b']
>>> read_sidecar(p, 3, of="x.npy")
Traceback (most recent call last):
...
embedcheck.errors.InputError: sidecar ...x.jsonl has 2 records but x.npy has 3 rows; a sidecar holds one JSON object per row, in row order
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from ..errors import InputError
from .jsonio import parse_jsonl


def sidecar_of(path: str | os.PathLike) -> Optional[Path]:
    """``X.npy`` → ``X.jsonl`` when that file exists (the rows ``embed`` writes beside it), else None."""
    p = Path(os.path.abspath(path))
    side = p.with_suffix(".jsonl")
    return side if side != p and side.is_file() else None


Check = Optional[Callable[[bytes], None]]


def _read(path: str | os.PathLike, rows: int, *, of: str, check: Check) -> tuple[list[dict], list[str]]:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read sidecar {p}: {exc.strerror or exc}") from None
    if check is not None:
        check(data)  # a shard set's sidecar: its sha256 against the manifest's
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"sidecar {p} is not valid UTF-8 (byte {exc.start})") from None
    lines = text.split("\n")  # not splitlines(): U+2028 may sit inside a string
    records = parse_jsonl(lines, f"sidecar {p}")  # a line cut short, corrupt or not an object is refused
    if len(records) != rows:
        raise InputError(f"sidecar {p} has {len(records)} records but {of or 'its matrix'} has {rows} rows; "
                         "a sidecar holds one JSON object per row, in row order")
    return records, [ln for ln in lines if ln.strip()]


def read_sidecar(path: str | os.PathLike, rows: int, *, of: str = "", check: Check = None) -> list[dict]:
    """The records of the sidecar ``path`` of a matrix of ``rows`` rows (``of`` names the matrix in the
    message), checked by the one policy above; ``check``: a further check of its bytes (a shard set's
    hash against its manifest)."""
    return _read(path, rows, of=of, check=check)[0]


def sidecar_lines(path: str | os.PathLike, rows: int, *, of: str = "", check: Check = None) -> list[str]:
    """The sidecar's lines (without newline, blank ones left out), as they are, after the same checks
    as :func:`read_sidecar`: what an output of the same rows carries over byte for byte."""
    return _read(path, rows, of=of, check=check)[1]


def check_sidecar(path: str | os.PathLike, rows: int, *, of: str = "") -> None:
    """Refuse a sidecar that breaks the policy, without keeping its records (an input's open: the
    check is made once, before any work, whatever the command needs of the rows later)."""
    _read(path, rows, of=of, check=None)
