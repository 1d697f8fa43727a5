"""What every API function shares: opening inputs, running on an engine, reporting hints."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from ..errors import InputError
from ..io.source import Source, open_source

#: where hints go (the CLI routes them to its stderr, silenced by --quiet); None: nowhere
Hint = Optional[Callable[[str], None]]


def stderr_hint(msg: str) -> None:
    sys.stderr.write(f"hint: {msg}\n")


@contextlib.contextmanager
def running(engine: Any = "local", address: Optional[str] = None) -> Iterator[Any]:
    """An engine for the duration of a call: ``"local"`` (this process), ``"ray"`` (a local Ray or
    the cluster at ``address``), or an :class:`~embedcheck.engine.Engine` already made (kept open)."""
    from ..engine import Engine, make_engine

    if isinstance(engine, Engine):
        yield engine
        return
    name = getattr(engine, "value", engine)
    eng = make_engine(str(name), address)
    try:
        yield eng
    finally:
        eng.close()


def source(x: Any, what: str = "embeddings") -> Source:
    """An opened input: an array, a memmap, a ``.npy`` path, a shard set or a Source."""
    return open_source(x, what=what)


#: suffixes of a labels or text table (never an embeddings matrix)
TABLE_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".txt", ".parquet")


def check_not_swapped(embeddings: Any, labels: Any, emb_name: str = "EMB", labels_name: str = "LABELS") -> None:
    """Refuse, before anything is read, embeddings and labels given the wrong way round: a labels
    table where the embeddings go and a ``.npy`` (or a 2-D float ``.npy``) where the labels go."""
    if not isinstance(embeddings, (str, Path)) or not isinstance(labels, (str, Path)):
        return
    e, lab = Path(embeddings), Path(labels)
    why = None
    if e.suffix.lower() in TABLE_SUFFIXES and (lab.suffix.lower() == ".npy" or lab.is_dir()):
        why = f"{emb_name} {e} is a table and {labels_name} {lab} a .npy"
    elif e.suffix.lower() == ".npy" and lab.suffix.lower() == ".npy" and e.is_file() and lab.is_file():
        from ..io.npyfile import _npy_header

        try:
            se, sl = _npy_header(e)[0], _npy_header(lab)
        except InputError:
            return
        if len(se) == 1 and len(sl[0]) == 2 and sl[2].kind == "f":
            why = f"{emb_name} {e} is 1-D and {labels_name} {lab} a 2-D float matrix"
    if why:
        raise InputError(f"{why}: looks like the embeddings and labels are swapped; give the embeddings first "
                         f"({emb_name} {labels_name})")


def labels_for(labels: Any, n: int, field: str = "label", what: str = "labels") -> np.ndarray:
    """Labels given as an array/list (``n`` of them) or as a labels file / shard set."""
    from ..io.labels import load_labels
    from ..rows import encode_labels

    if isinstance(labels, (str, Path)):
        return load_labels(labels, n, field=field, what=what)
    y = np.asarray(labels)
    encode_labels(y, n)  # checks the count and the kinds
    return y


def name_of(x: Any) -> str:
    from ..io.stores import display_name, is_store

    if isinstance(x, (str, Path)) and is_store(x):
        return display_name(x)
    return Path(x).name if isinstance(x, (str, Path)) else getattr(x, "name", "array")


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


def check_same_rows(a: Any, b: Any, n_a: int, n_b: int) -> None:
    """A and B hold the same rows: the same row count, and the same ids when both are files whose
    sidecars carry them."""
    from ..io.rowids import row_ids
    from ..stats.paired import check_same_rows as same

    ids_a = row_ids(str(a)) if isinstance(a, (str, Path)) else None
    ids_b = row_ids(str(b)) if isinstance(b, (str, Path)) else None
    same(ids_a, ids_b, n_a, n_b, names=(label_of(a, "A"), label_of(b, "B")))


def paired_rows(a: Any, b: Any, n_a: int, b_rows: Any) -> Any:
    """B's rows in A's row order. When A or B is a store and both carry ids, B is paired with A by
    id (the same ids in any order; B's rows are then read into memory in A's order); ids missing
    from either side are refused with their counts. Otherwise :func:`check_same_rows` (the same
    row count, and the same ids in the same order when both sidecars carry them)."""
    from ..errors import InputError
    from ..io.rowids import row_ids
    from ..io.stores import is_store

    n_b = int(b_rows.shape[0])
    stores = any(isinstance(x, (str, Path)) and is_store(x) for x in (a, b))
    ids_a = row_ids(str(a)) if stores and isinstance(a, (str, Path)) else None
    ids_b = row_ids(str(b)) if stores and isinstance(b, (str, Path)) else None
    if ids_a is None or ids_b is None:
        check_same_rows(a, b, n_a, n_b)
        return b_rows
    ka, kb = [str(v) for v in ids_a], [str(v) for v in ids_b]
    if ka == kb:
        return b_rows
    name_a, name_b = label_of(a, "A"), label_of(b, "B")
    for keys, name in ((ka, name_a), (kb, name_b)):
        if len(set(keys)) != len(keys):
            raise InputError(f"{name} has duplicate ids; pairing by id needs unique ids")
    sa, sb = set(ka), set(kb)
    if sa != sb:
        only_a, only_b = [k for k in ka if k not in sb], [k for k in kb if k not in sa]
        parts = [f"{len(only_a)} of {name_a}'s ids are missing from {name_b} (first: {only_a[0]!r})" if only_a else "",
                 f"{len(only_b)} of {name_b}'s ids are missing from {name_a} (first: {only_b[0]!r})" if only_b else ""]
        raise InputError("; ".join(p for p in parts if p) + "; a paired comparison needs the same rows")
    pos = {k: i for i, k in enumerate(kb)}
    perm = np.fromiter((pos[k] for k in ka), dtype=np.int64, count=len(ka))
    X = np.asarray(b_rows)[perm]
    return open_source(X, what="--against B") if isinstance(b_rows, Source) else X


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
