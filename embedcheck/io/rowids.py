"""Rows matched by id: the ids of an input's rows (an embedding's sidecar, a labels / scores
table's ``id`` column) and :func:`match_rows`, the one rule every command applies when two of
its inputs describe the same rows.

When both inputs carry ids they must be the same set: in the same order they are used as they
are (matched by ``"id"``); in another order the second is reordered to the first (and a notice
says so once, through :func:`set_notice_sink`); a different set is refused in one line with the
counts. When either input has no ids, rows are matched by position (``"position"``) and only the
counts are checked (by the caller's reader). Reports record which under
``inputs.rows_matched_by`` (input → ``"id"`` or ``"position"``).

>>> m = match_rows(["a", "b", "c"], ["c", "a", "b"], names=("EMB x.npy", "labels y.jsonl"))
>>> m.by, m.order.tolist()
('id', [1, 2, 0])
>>> match_rows(["a", "b"], None, names=("x", "y")).by
'position'
>>> match_rows(["a", "b"], ["a", "z"], names=("EMB x.npy", "labels y.jsonl"))
Traceback (most recent call last):
...
embedcheck.errors.InputError: EMB x.npy and labels y.jsonl hold different rows: 2 ids in EMB x.npy, 2 in labels y.jsonl, 1 shared (1 only in EMB x.npy, e.g. 'b'; 1 only in labels y.jsonl, e.g. 'z'); give files of the same rows
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import InputError

ID_FIELD = "id"

#: where the one-line "aligned by id" notice goes (the CLI routes it to stderr); None: nowhere
_sink: list[Optional[Callable[[str], None]]] = [None]
_said: set[str] = set()


def set_notice_sink(fn: Optional[Callable[[str], None]]) -> None:
    """Send the notices of :func:`match_rows` (an input reordered by id, or taken by position beside
    an input with ids) to ``fn`` (None: drop them); each is said once per sink."""
    _sink[0] = fn
    _said.clear()


def notice(msg: str) -> None:
    if _sink[0] is not None and msg not in _said:
        _said.add(msg)
        _sink[0](msg)


@dataclass(frozen=True)
class Matched:
    """How the rows of an input were matched to the reference input's rows."""

    by: str  #: ``"id"`` or ``"position"``
    order: Optional[np.ndarray] = None  #: row ``i`` of the reference is row ``order[i]`` of the input; None: same order

    def apply(self, values: Any) -> Any:
        """``values`` (an array of the input's rows) in the reference's row order."""
        return values if self.order is None else np.asarray(values)[self.order]


def id_key(v: Any) -> str:
    """Ids compare as text: ``5`` (a JSON int) and ``"5"`` (a CSV cell) are one id."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def match_rows(ref_ids: Optional[Sequence[Any]], ids: Optional[Sequence[Any]], *,
               names: tuple[str, str], tags: Optional[tuple[str, str]] = None) -> Matched:
    """Match the rows of an input (``ids``) to a reference input's rows (``ref_ids``); ``names``
    word the two inputs in messages (``("EMB x.npy", "labels y.jsonl")``), ``tags`` are their short
    forms for the counts (default: the names).

    Both ids given: the same set is required (else one :class:`InputError` with the counts); a
    different order gives :attr:`Matched.order` and one notice. Either None: by position (and, when
    the other has ids, one notice that its rows are taken by position)."""
    if ref_ids is None or ids is None:
        if (ref_ids is None) != (ids is None):
            with_ids, without = (names[0], names[1]) if ids is None else (names[1], names[0])
            notice(f"{without} has no ids but {with_ids} has: rows taken by position (row i with row i)")
        return Matched("position")
    ref = [id_key(v) for v in ref_ids]
    own = [id_key(v) for v in ids]
    if ref == own:
        return Matched("id")
    ref_name, name = names
    ref_tag, tag = tags or names
    sa, sb = set(ref), set(own)
    if sa != sb:
        only_a, only_b = [v for v in ref if v not in sb], [v for v in own if v not in sa]
        parts = [f"{len(set(only_a))} only in {ref_tag}" + (f", e.g. {only_a[0]!r:.40}" if only_a else ""),
                 f"{len(set(only_b))} only in {tag}" + (f", e.g. {only_b[0]!r:.40}" if only_b else "")]
        raise InputError(f"{ref_name} and {name} hold different rows: {len(ref)} ids in {ref_tag}, {len(own)} in "
                         f"{tag}, {len(sa & sb)} shared ({'; '.join(parts)}); give files of the same rows")
    for side, vals in ((ref_name, ref), (name, own)):
        if len(set(vals)) != len(vals):
            seen: set[str] = set()
            dup = next(v for v in vals if v in seen or seen.add(v))  # type: ignore[func-returns-value]
            raise InputError(f"{ref_name} and {name} hold the same ids in another order, but {side} repeats id "
                             f"{dup!r:.40}, so its rows cannot be matched by id; give unique ids or the same order")
    where = {v: i for i, v in enumerate(own)}
    order = np.fromiter((where[v] for v in ref), dtype=np.int64, count=len(ref))
    notice(f"{name}: rows in another order than {ref_name}; matched by id")
    return Matched("id", order)


def refuse_repeated_ids(ids: Optional[Sequence[Any]], where: str, why: str = "this command names rows by id") -> None:
    """Refuse ids that repeat, for an input whose rows a command names by id (in its report or in
    what it writes) or pairs by id: one :class:`InputError` naming the input and the first repeated id
    with its two rows. A row without an id (None) repeats nothing.

    >>> refuse_repeated_ids(["a", "b", "a"], "embeddings x.npy")
    Traceback (most recent call last):
    ...
    embedcheck.errors.InputError: embeddings x.npy: id 'a' repeats (rows 0 and 2); this command names rows by id, so they must be unique
    """
    if ids is None:
        return
    first: dict[str, int] = {}
    for i, v in enumerate(ids):
        if v is None:
            continue
        k = id_key(v)
        if k in first:
            shown = v.item() if isinstance(v, np.generic) else v
            raise InputError(f"{where}: id {shown!r:.40} repeats (rows {first[k]} and {i}); {why}, so they must be unique")
        first[k] = i


def row_ids(path: Any) -> Optional[list[Any]]:
    """The ``id`` of every row from the sidecar (``X.jsonl`` beside ``X.npy``, or a shard set's
    sidecars); None when ``path`` is not a file path, there is no sidecar or a row has no id."""
    from .shards import is_shard_set, sidecar_field
    from .stores import is_store, open_store

    if is_store(path):
        return open_store(path).ids()

    if not isinstance(path, (str, os.PathLike)):
        return None
    path = str(path)
    try:
        if is_shard_set(path):
            return sidecar_field(path, ID_FIELD)
    except InputError:
        return None
    if Path(path).suffix.lower() != ".npy":
        return None
    side = Path(path).with_suffix(".jsonl")
    if not side.is_file():
        return None
    from .sidecar import read_sidecar

    # the one sidecar reader: a bad or miscounted sidecar is refused, naming it
    recs = read_sidecar(side, _npy_rows(Path(path)), of=f"embeddings {path}")
    ids = [r.get(ID_FIELD) for r in recs]
    return None if any(v is None for v in ids) else ids


def _jsonl_ids(path: Path) -> Optional[list[Any]]:
    from .jsonio import loads, utf8_error_at

    ids = []
    try:
        with open(path, encoding="utf-8-sig") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                r = loads(line, f"sidecar {path}:{lineno}")  # a sidecar cut short or corrupt is refused
                if not isinstance(r, dict) or ID_FIELD not in r:
                    return None
                ids.append(r[ID_FIELD])
    except UnicodeDecodeError:
        raise InputError(f"sidecar {path}: not valid UTF-8 (byte {utf8_error_at(path)})") from None
    except OSError:
        return None
    return ids


def table_ids(path: Any) -> Optional[list[Any]]:
    """The ``id`` column of a labels / scores file (``.jsonl``, ``.csv``, ``.tsv``, ``.parquet``) or
    the sidecar ids of a shard set or the ids of a store; None for other inputs (arrays, ``.npy``, ``.txt``) or when a
    row has no id."""
    from .shards import is_shard_set
    from .stores import is_store
    from .tables import TABLE_SUFFIXES, read_table

    if is_store(path):  # labels from a store: its ids column
        return row_ids(path)
    if not isinstance(path, (str, os.PathLike)):
        return None
    if is_shard_set(path):
        return row_ids(path)
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in TABLE_SUFFIXES or not p.is_file():
        return None
    if suffix in (".jsonl", ".ndjson"):
        return _jsonl_ids(p)
    try:
        rows = read_table(p, "labels")
    except InputError:
        return None
    if not rows or any(ID_FIELD not in r for r in rows):
        return None
    return [str(r[ID_FIELD]).strip() for r in rows]


def match_input(ref: Any, other: Any, *, names: tuple[str, str], other_is_table: bool = True,
                tags: Optional[tuple[str, str]] = None) -> Matched:
    """:func:`match_rows` of two inputs by their ids: ``ref`` an embedding (its sidecar ids),
    ``other`` a labels / scores table (its ``id`` column; ``other_is_table=False``: another
    embedding, its sidecar ids)."""
    if other_is_table and _is_sidecar_of(other, ref):  # the embeddings' own sidecar (``aag X.npy X.jsonl``)
        return Matched("id") if table_ids(other) is not None else Matched("position")
    ids = table_ids(other) if other_is_table else row_ids(other)
    return match_rows(row_ids(ref), ids, names=names, tags=tags)


def _is_sidecar_of(table: Any, emb: Any) -> bool:
    """``table`` is the ``.jsonl`` sidecar of the ``.npy`` ``emb`` (the same rows by construction)."""
    if not isinstance(table, (str, os.PathLike)) or not isinstance(emb, (str, os.PathLike)):
        return False
    e = Path(emb)
    try:
        return e.suffix.lower() == ".npy" and Path(table).resolve() == e.with_suffix(".jsonl").resolve()
    except (OSError, RuntimeError):
        return False


def match_pair_sides(a: Any, b: Any, *, names: tuple[str, str]) -> Matched:
    """The two sides of pairs (row ``i`` of A with row ``i`` of B; sts, threshold, anisotropy): their
    items may differ (queries and documents), so ids of different sets mean "paired by position";
    the same ids in another order mean the same items shuffled, and B is matched to A by id."""
    ids_a, ids_b = row_ids(a), row_ids(b)
    if ids_a is None or ids_b is None or {id_key(v) for v in ids_a} != {id_key(v) for v in ids_b}:
        return Matched("position")
    return match_rows(ids_a, ids_b, names=names, tags=("A", "B"))


def row_lines(src: str | os.PathLike[str]) -> Optional[list[str]]:
    """The ``.jsonl`` rows of an embedding artifact (single file: its same-stem sidecar; shard set:
    its shards' sidecars in manifest order; a store: its id and other columns, :func:`store_lines`),
    as lines without their newline; None when there are none. What an output of the same rows
    (``compress``, ``project``) carries over."""
    from .shards import is_shard_set, open_shard_set
    from .stores import is_store

    if is_store(src):
        return store_lines(src)
    src = Path(src)
    if is_shard_set(src):
        ss = open_shard_set(src, verify=False)
        lines = []
        for i in range(len(ss.shards)):
            lines += [json.dumps(r, ensure_ascii=False) for r in ss.read_sidecar(i)]
        return lines
    side = src.with_suffix(".jsonl")
    if not side.is_file():
        return None
    from .sidecar import sidecar_lines

    return sidecar_lines(side, _npy_rows(src), of=f"embeddings {src}")


def _npy_rows(path: Path) -> int:
    """The row count of a ``.npy`` from its header (an array that is not a matrix is refused where it
    is opened as one; here it counts as its first axis, or one row)."""
    from .npyfile import npy_header

    shape = npy_header(path)[0]
    return int(shape[0]) if shape else 1  # carried over as they are, after the one reader's checks


def _plain(v: Any) -> Any:
    """A store cell as JSON: numpy scalars as Python numbers, anything else JSON lacks as text."""
    if isinstance(v, np.generic):
        return v.item()
    if v is None or isinstance(v, (str, int, float, bool, list, dict)):
        return v
    return str(v)


def store_lines(x: Any) -> Optional[list[str]]:
    """The rows of a store as ``.jsonl`` lines: its id (as ``id``, whatever the column is called)
    and its other scalar columns — what a ``.npy`` written from it carries, so the output is
    matched by id like the store; None when the store has neither ids nor other columns."""
    from .stores import carried_columns, open_store

    st = open_store(x)
    cols = carried_columns(x, st.n)
    ids = st.ids()
    if ids is not None and st.id_column != "id":
        cols = {"id": ids, **{k: v for k, v in cols.items() if k != "id"}}
    if not cols:
        return None
    names = list(cols)
    return [json.dumps({k: _plain(cols[k][i]) for k in names}, ensure_ascii=False) for i in range(st.n)]
