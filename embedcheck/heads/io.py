"""Reading a head file (or an upgrade adapter, the same format): size-capped, validated by
:func:`embedcheck.heads.format.head_from_bytes`, never unpickled."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from .base import ADAPTER, Head
from .format import head_from_bytes

#: a head file larger than this is not a projection head
MAX_HEAD_BYTES = 4 << 30


def read_head(path: str | os.PathLike, *, what: str = "head") -> Head:
    """Read and validate a head file (size-capped, never unpickled); ``what`` names it in messages."""
    p = Path(path)
    if not p.exists():
        from ..io.paths import missing as why_missing

        raise InputError(f"{what} {p} {why_missing(p)}")
    if p.is_dir():
        raise InputError(f"{what} {p} is a folder, not a file")
    size = p.stat().st_size
    if size > MAX_HEAD_BYTES:
        raise InputError(f"{what} {p} is {size} bytes; too large for a projection head")
    return head_from_bytes(p.read_bytes(), source=f"{what} {p}")


#: how ``project`` applies a file: a projection head, an upgrade adapter as written, or its inverse
USES = ("head", "adapter", "adapter-inverse")


def read_map(path: str | os.PathLike, use: str = "head") -> Head:
    """The file at ``path`` ready to apply as ``use`` (:data:`USES`): a head file must hold a
    projection head, an adapter file an upgrade adapter (inverted by its transpose for
    ``adapter-inverse``, which only an orthogonal one allows); else one line saying which it is."""
    what = "head" if use == "head" else "adapter"
    hd = read_head(path, what=what)
    if use == "head" and hd.kind == ADAPTER:
        raise InputError(f"head {path} is an upgrade adapter (embedcheck upgrade -o), not a projection head: "
                         "pass it as --adapter")
    if use != "head" and hd.kind != ADAPTER:
        raise InputError(f"adapter {path} is a projection head (kind {hd.kind}), not an upgrade adapter: "
                         "pass it as --head")
    if use == "adapter-inverse":
        from .adapter import inverse

        return inverse(hd, f"adapter {path}")
    return hd
