"""Input file checks shared by every reader: exists, is a file, is not empty."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError


def check_file(path: str | os.PathLike, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} {p} does not exist")
    if p.is_dir():
        raise InputError(f"{what} {p} is a folder, not a file")
    if p.stat().st_size == 0:
        raise InputError(f"{what} {p} is empty")
    return p
