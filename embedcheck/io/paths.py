"""Input file checks shared by every reader: exists, is a file, is not empty."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError


def missing(p: Path) -> str:
    """Why ``p`` (which does not exist) is not there, in a user's words: a symbolic link loop, a
    link to nothing, or plainly absent.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); os.symlink("b", f"{d}/a"); os.symlink("a", f"{d}/b")
    >>> missing(Path(d, "a")), missing(Path(d, "c"))
    ('is a symbolic link loop', 'does not exist')
    """
    if p.is_symlink():
        try:
            p.resolve(strict=True)
        except RuntimeError:
            return "is a symbolic link loop"
        except OSError as exc:
            if exc.errno == 40:  # ELOOP
                return "is a symbolic link loop"
        return f"is a symbolic link to {os.readlink(p)}, which does not exist"
    return "does not exist"


def check_file(path: str | os.PathLike, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} {p} {missing(p)}")
    if p.is_dir():
        raise InputError(f"{what} {p} is a folder, not a file")
    if p.stat().st_size == 0:
        raise InputError(f"{what} {p} is empty")
    return p
