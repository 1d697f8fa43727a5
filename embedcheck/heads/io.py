"""Reading a head file: size-capped, validated by :func:`embedcheck.heads.format.head_from_bytes`,
never unpickled."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from .base import Head
from .format import head_from_bytes

#: a head file larger than this is not a projection head
MAX_HEAD_BYTES = 4 << 30


def read_head(path: str | os.PathLike) -> Head:
    """Read and validate a head file (size-capped, never unpickled)."""
    p = Path(path)
    if not p.exists():
        from ..io.paths import missing as why_missing

        raise InputError(f"head {p} {why_missing(p)}")
    if p.is_dir():
        raise InputError(f"head {p} is a folder, not a file")
    size = p.stat().st_size
    if size > MAX_HEAD_BYTES:
        raise InputError(f"head {p} is {size} bytes; too large for a projection head")
    return head_from_bytes(p.read_bytes(), source=f"head {p}")
