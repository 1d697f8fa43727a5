"""JSON Lines reading and strict JSON writing (NaN → null, numpy scalars → Python).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..errors import InputError
from .locators import mask_secrets
from .paths import check_file
from .records import Rows


def loads(text: str | bytes, where: str) -> Any:
    """``json.loads`` whose every failure is one :class:`InputError` naming ``where`` (a file, or
    ``file:line``): a decoder error, nesting deep enough for a ``RecursionError``, an integer past
    Python's digit limit (``ValueError: Exceeds the limit``), an ``OverflowError`` and bytes that
    are not UTF-8. Every JSON or JSONL reader of the package parses user files through here.

    >>> loads('{"a": [1, 2]}', "x.json")
    {'a': [1, 2]}
    >>> try:
    ...     loads("[" * 100000, "deep.json")
    ... except InputError as exc:
    ...     print(exc)
    deep.json: not valid JSON (nested too deeply)
    """
    try:
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8-sig")
        return json.loads(text)
    except json.JSONDecodeError as exc:
        rest = exc.doc[exc.pos:].strip()
        if exc.doc.strip() and (exc.msg.startswith("Unterminated string") or (len(rest) <= 16 and "\n" not in rest)):
            # the text stops inside its last value (at most a partial token after the error): a file cut short
            raise InputError(f"{where}: not valid JSON: it ends before the value is complete (cut short at "
                             f"character {len(exc.doc.rstrip())}?)") from None
        raise InputError(f"{where}: not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not valid UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise InputError(f"{where}: not valid JSON (nested too deeply)") from None
    except (ValueError, OverflowError) as exc:  # int digit limit; out-of-range numbers
        raise InputError(f"{where}: not valid JSON (a number is out of range: {' '.join(str(exc).split())[:80]})") from None


def parse_jsonl(lines: Iterable[str], where: str) -> list[dict]:
    """JSON objects from JSON-lines text (blank lines skipped), with ``where:line`` in errors.

    >>> parse_jsonl(['{"a": 1}', '', '{"a": 2}'], "x.jsonl")
    [{'a': 1}, {'a': 2}]
    """
    rows = Rows()
    rows.lines = []  # the file line of each row (1-based), for messages: row 3 (line 5)
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        obj = loads(line, f"{where}:{lineno}")
        if not isinstance(obj, dict):
            raise InputError(f"{where}:{lineno}: expected one JSON object per line")
        rows.append(obj)
        rows.lines.append(lineno)
    return rows


def utf8_error_at(p: Path) -> int:
    """The file offset of the first byte of ``p`` that is not UTF-8 (a text-mode reader's error
    counts from its buffer, not from the start of the file)."""
    data = p.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return -1  # pragma: no cover - decoded after all


def read_jsonl(path: str | os.PathLike, what: str = "file") -> list[dict]:
    """Read a UTF-8 JSON-lines file into a list of dicts, with one-line errors."""
    p = check_file(path, what)
    try:
        with open(p, "r", encoding="utf-8-sig") as f:  # -sig: a leading BOM is not part of the data
            rows = parse_jsonl(f, str(p))
    except UnicodeDecodeError:
        raise InputError(f"{p}: not valid UTF-8 (byte {utf8_error_at(p)}); re-encode it as UTF-8") from None
    if not rows:
        raise InputError(f"{what} {p} has no rows")
    return rows


def load_report(path: str | os.PathLike, what: str = "report") -> dict:
    """A JSON report file (one object), with one-line errors naming the file."""
    p = check_file(path, what)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    obj = loads(raw, f"{what} {p}")
    if not isinstance(obj, dict):
        raise InputError(f"{what} {p} is not a report (expected one JSON object)")
    return obj


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if not np.isfinite(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _clean(obj: Any) -> Any:
    """Replace float NaN/inf by None so the output is strict JSON."""
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def dumps(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON (NaN → null, numpy scalars → Python) with stable key order; a database
    password that found its way into a value is masked (``postgresql://user:***@host``)."""
    return mask_secrets(json.dumps(_clean(json.loads(json.dumps(obj, default=_json_default, allow_nan=True))),
                                   indent=indent, ensure_ascii=False, allow_nan=False))
