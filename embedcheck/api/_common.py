"""What every API function shares: opening inputs, running on an engine, reporting hints."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from ..io.labels import check_not_swapped, labels_for  # noqa: F401  (read by every command that takes labels)
from ..io.source import Source, open_source

#: where hints go (the CLI routes them to its stderr, silenced by --quiet); None: nowhere
Hint = Optional[Callable[[str], None]]


def running(engine: Any = "local", address: Optional[str] = None) -> Any:
    """An engine for the duration of a call: :func:`embedcheck.engine.running`, the one way every
    API function gets one (``"local"``, ``"ray"`` with ``address``, or an Engine already made)."""
    from ..engine import running as run

    return run(engine, address)


def source(x: Any, what: str = "embeddings") -> Source:
    """An opened input: an array, a memmap, a ``.npy`` path, a shard set or a Source."""
    return open_source(x, what=what)



def matrix(x: Any, what: str = "embeddings", *, need_direction: bool = True) -> Any:
    """A validated in-process matrix (2-D float, finite rows; non-zero rows with ``need_direction``):
    a path is opened as a memmap (or a shard set's Source), an array is checked as it is."""
    from ..io.npy import load_matrix
    from ..io.npyfile import check_matrix_shape, check_rows
    from ..rows import iter_chunks

    if isinstance(x, (str, Path)):
        return load_matrix(x, what=what, need_direction=need_direction)
    if isinstance(x, Source):
        return x
    X = np.asarray(x)
    p = Path(f"<{what} array>")
    check_matrix_shape(X, p, what=what)
    work = "float64" if X.dtype.itemsize == 8 else "float32"
    for sl in iter_chunks(X.shape[0]):
        check_rows(X[sl], sl.start, p, what=what, need_direction=need_direction, work=work)
    return X


def label_of(x: Any, default: str) -> str:
    """How an input is named in a message: its path as given, else ``default``."""
    from ..io.stores import display_name

    return display_name(x) if isinstance(x, (str, Path)) else default


def role_name(x: Any, role: str) -> str:
    """An input as a message names it: its role and, for a file or store, its name (``B b.npy``)."""
    return f"{role} {label_of(x, '')}".rstrip() if isinstance(x, (str, Path)) else role


def check_same_rows(a: Any, b: Any, n_a: int, n_b: int, roles: tuple[str, str] = ("A", "B")) -> Any:
    """A and B hold the same rows: the same row count and, when both are files whose sidecars
    carry ids, the same ids (:func:`embedcheck.io.rowids.match_rows`). ``roles``: what the two
    inputs are called in messages (``("B", "against B2")``: the right side is named whichever
    pair is checked). Returns the :class:`~embedcheck.io.rowids.Matched` (``.apply(B)``: B's rows in A's order)."""
    from ..io.rowids import match_input
    from ..stats.paired import check_same_rows as same

    names = (role_name(a, roles[0]), role_name(b, roles[1]))
    m = match_input(a, b, names=names, other_is_table=False, tags=roles)
    same(None, None, n_a, n_b, names=names)  # the counts, also when by position
    return m



def in_order(x: Any, matched: Any, what: str) -> Any:
    """An opened input (array, memmap or Source) with its rows in the order ``matched`` gives
    (unchanged when already in order): the rows are read into memory."""
    if matched.order is None:
        return x
    if isinstance(x, Source):
        return open_source(np.asarray(x)[matched.order], what=what)
    return np.asarray(x)[matched.order]


def pair_sides(a: Any, b: Any) -> Any:
    """How B's rows pair with A's (row ``i`` with row ``i``): by position, or by id when both
    sidecars hold the same ids in another order (:func:`embedcheck.io.rowids.match_pair_sides`)."""
    from ..io.rowids import match_pair_sides

    return match_pair_sides(a, b, names=(role_name(a, "A"), role_name(b, "B")))


def store_models(**inputs: Any) -> Optional[dict[str, str]]:
    """The model each store input says it holds (its metadata), by role; None when no input is a
    store that names one — so ``--against`` shows which models it sets side by side."""
    from ..io.stores import is_store, open_store

    out = {}
    for role, x in inputs.items():
        if isinstance(x, (str, Path)) and is_store(x):
            m = open_store(x).model()
            if m:
                out[role] = m
    return out or None
