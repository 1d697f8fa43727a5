"""Labels and scores: one parser for label files, one for score files.

A label file is a 1-D ``.npy``, a ``.txt`` (one label per line), or a table — ``.jsonl``,
``.csv``, ``.tsv`` (header row) or ``.parquet`` — whose field ``field`` (``--label-field``) holds
the labels. A field that is missing is reported with the fields that exist and the file and row
they came from; an ``embed`` sidecar written without labels says so.

**One kind per label column.** Labels are integers (ints, integral floats, or strings of digits
such as ``"1"``) or names (any other string). A column that mixes the two kinds (``0, 1, "pos"``)
is refused with one line naming a row of each kind: read as strings, it would silently count
``"1"`` and ``"pos"`` as extra classes. The rule is the same for ``.jsonl`` fields, ``.txt``
lines, string ``.npy`` arrays and ``embed``'s ``--label-field``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import InputError
from .jsonio import read_jsonl
from .npy import open_npy
from .paths import check_file
from .shards import is_shard_set, sidecar_field
from .tables import TABLE_SUFFIXES, line_where, looks_headerless, missing_field, read_table, row_where


def _is_integer_label(v: Any) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and _is_int_string(v))


def check_label_kinds(values: Sequence[Any], source: str,
                      where: Callable[[int], str] = lambda i: f"row {i}") -> None:
    """Refuse a label column that mixes integers and names, naming the first row of each kind.

    ``where(i)`` words position ``i`` (0-based: ``row 3``, ``row 3 (line 4)``).

    >>> check_label_kinds([0, "1", 2], "y.jsonl")
    >>> check_label_kinds([0, 1, "pos"], "y.jsonl")
    Traceback (most recent call last):
    ...
    embedcheck.errors.InputError: y.jsonl: labels mix integers (row 0: 0) and names (row 2: 'pos'); use one kind for the whole column
    """
    first: dict[bool, int] = {}
    for i, v in enumerate(values):
        kind = _is_integer_label(v)
        if kind not in first:
            first[kind] = i
            if len(first) == 2:
                a, b = first[True], first[False]
                raise InputError(f"{source}: labels mix integers ({where(a)}: {values[a]!r}) and names "
                                 f"({where(b)}: {values[b]!r}); use one kind for the whole column")


def _normalise_label_values(values: Sequence[Any], source: str,
                            where: Callable[[int], str] = lambda i: f"row {i}") -> np.ndarray:
    """Ints stay ints, strings of integers become ints, other strings stay strings; a mix of
    integers and names is refused (:func:`check_label_kinds`)."""
    out: list[Any] = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or v is None or isinstance(v, (list, dict)):
            raise InputError(f"{source} {where(i)}: the label is {v!r}; labels must be ints or strings")
        if isinstance(v, float):
            if not v.is_integer():
                raise InputError(f"{source} {where(i)}: the label is {v!r}; labels must be ints or strings")
            v = int(v)
        out.append(v)
    check_label_kinds(out, source, where)
    strs = [str(v) for v in out]
    if all(_is_int_string(v) for v in strs):
        ints = [int(v) for v in strs]
        if all(_I64.min <= v <= _I64.max for v in ints):
            return np.asarray(ints, dtype=np.int64)
        return np.asarray([str(v) for v in ints], dtype=str)  # beyond int64: keep them exact, as names
    return np.asarray(strs, dtype=str)


_I64 = np.iinfo(np.int64)


def _is_int_string(s: str) -> bool:
    s = s.strip()
    if s.startswith(("-", "+")):
        s = s[1:]
    return s.isascii() and s.isdigit()  # not "²" (isdigit, but int() refuses it)


def _text_lines(p: Path) -> list[str]:
    """Lines of a UTF-8 text file (a BOM is dropped), without trailing blank lines."""
    try:
        lines = p.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"{p} is not valid UTF-8 (byte {exc.start})") from None
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def load_labels(path: str | os.PathLike, n_rows: int | None = None, *, field: str = "label",
                what: str = "labels") -> np.ndarray:
    """Labels from a 1-D ``.npy``, a ``.txt`` (one per line), or the ``field`` column of a table
    (``.jsonl``, ``.csv``, ``.tsv``, ``.parquet``).

    Returns an int64 array when every label is an integer (or an integer string), else a
    str array. ``n_rows`` checks the count against the embeddings. A shard set (folder or
    manifest) gives ``field`` of its sidecar records, in manifest order.
    """
    if is_shard_set(path):
        labels = _normalise_label_values(sidecar_field(path, field, what=what), str(path))
        if n_rows is not None and len(labels) != n_rows:
            raise InputError(f"{what} {path} has {len(labels)} labels but the embeddings have {n_rows} rows")
        return labels
    store_values = _store_column(path, field, what)
    if store_values is not None:
        from .stores import display_name

        shown = display_name(path)
        labels = _normalise_label_values(store_values, shown)
        if n_rows is not None and len(labels) != n_rows:
            raise InputError(f"{what} {shown} has {len(labels)} labels but the embeddings have {n_rows} rows")
        return labels
    p = check_file(path, what)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        arr = open_npy(p, what)
        if arr.ndim != 1:
            raise InputError(f"{what} {p} must be 1-D, got shape {arr.shape}")
        if arr.dtype.kind == "u" and arr.size and int(np.asarray(arr).max()) > _I64.max:
            labels = np.asarray([str(int(v)) for v in np.asarray(arr)], dtype=str)
        elif arr.dtype.kind in "iub":
            labels = np.asarray(arr, dtype=np.int64)
        elif arr.dtype.kind in "US":
            labels = _normalise_label_values([str(v) for v in np.asarray(arr).astype(str)], str(p),
                                             lambda i: f"row {i}")
        elif arr.dtype.kind == "f":
            a = np.asarray(arr)
            if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
                raise InputError(f"{what} {p} holds non-integer floats; labels must be ints or strings")
            labels = a.astype(np.int64)
        else:
            raise InputError(f"{what} {p} has dtype {arr.dtype}; expected ints or strings")
    elif suffix in TABLE_SUFFIXES:
        rows = read_table(p, what)
        if not rows:
            raise InputError(f"{what} {p} has no rows")
        missing = next((i for i, r in enumerate(rows) if field not in r), None)
        if missing is not None:
            headerless = getattr(rows, "header", False) and looks_headerless(list(rows[missing]), rows)
            raise InputError(missing_field(field, list(rows[missing]), f"{what} {p} {row_where(rows, missing)}",
                                           option="--label-field", headerless=headerless) + _unlabelled_sidecar(p))
        values = [r[field] for r in rows]
        if suffix in (".csv", ".tsv"):
            blank = next((i for i, v in enumerate(values) if not str(v).strip()), None)
            if blank is not None:
                raise InputError(f"{what} {p} {row_where(rows, blank)}: the {field!r} cell is empty")
            values = [v.strip() for v in values]
        labels = _normalise_label_values(values, str(p), lambda i: row_where(rows, i))
    elif suffix in (".txt", ""):
        lines = _text_lines(p)
        empty = [i for i, s in enumerate(lines) if not s.strip()]
        if empty:
            raise InputError(f"{what} {p} {line_where(empty[0])} is empty; one label per line expected")
        if not lines:
            raise InputError(f"{what} {p} has no labels")
        labels = _normalise_label_values([s.strip() for s in lines], str(p), line_where)
    else:
        raise InputError(f"{what} {p}: unsupported format {suffix!r} (use .npy, .txt, .jsonl, .csv, .tsv or .parquet)")
    if n_rows is not None and len(labels) != n_rows:
        raise InputError(f"{what} {p} has {len(labels)} labels but the embeddings have {n_rows} rows")
    return labels


def _store_column(path: Any, field: str, what: str) -> list[Any] | None:
    """The ``field`` column of a store (a table beside the vectors: parquet, arrow, lance,
    pgvector), or of a plain ``.parquet`` file that has it (read alone); None otherwise."""
    from .stores import is_store, open_store, parse_locator

    if not is_store(path):
        return None
    loc = parse_locator(path)
    assert loc is not None
    if loc.kind == "parquet" and "?" not in str(path) and Path(loc.path).is_file():
        try:  # a labels table without vectors is a plain table: read the one column when it is there
            import pyarrow.parquet as pq

            if field not in pq.read_schema(loc.path).names:
                return None
            return list(pq.read_table(loc.path, columns=[field]).column(0).to_pylist())
        except Exception:  # noqa: BLE001 - read_table's own error follows
            return None
    st = open_store(path)
    if field not in st.columns():
        raise InputError(missing_field(field, st.columns(), f"{what} {st.name}", option="--label-field"))
    return st.column(field)


def _unlabelled_sidecar(p: Path) -> str:
    """When ``p`` is an ``embed`` sidecar written without labels, where the labels went."""
    import json

    from .provenance import meta_path

    if p.suffix.lower() != ".jsonl":  # embed writes OUT.jsonl beside OUT.npy and OUT.meta.json
        return ""
    try:
        meta = json.loads(meta_path(p).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    if not isinstance(meta, dict) or meta.get("command") != "embed" or meta.get("labels") is not False:
        return ""
    src = meta.get("inputs", {}).get("input", {})
    name = src.get("path") or src.get("name") if isinstance(src, dict) else None
    return (f" ({p} was written by embed, which found no label field in its input{f' {name}' if name else ''}; "
            "re-run embed with --label-field NAME)")


def load_scores(path: str | os.PathLike, n_rows: int | None = None, *, field: str = "score") -> np.ndarray:
    """Gold similarity scores from a 1-D ``.npy``, a ``.jsonl`` field, a ``.txt``, or the sidecars of a
    shard set (``field`` of each record, in manifest order)."""
    p = Path(path)
    suffix = "shards" if is_shard_set(path) else check_file(path, "scores").suffix.lower()
    if suffix == "shards":
        vals = []
        for i, v in enumerate(sidecar_field(path, field, what="scores")):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InputError(f"scores {p}: record {i} has no numeric field {field!r} (use --score-field)")
            try:
                vals.append(float(v))
            except OverflowError:
                raise InputError(f"scores {p}: record {i}: score {field!r} is too large for a float") from None
        scores = np.asarray(vals, dtype=np.float64)
    elif suffix == ".npy":
        arr = open_npy(p, "scores")
        if arr.ndim != 1 or arr.dtype.kind not in "iuf":
            raise InputError(f"scores {p} must be a 1-D numeric array, got {arr.dtype} {arr.shape}")
        scores = np.asarray(arr, dtype=np.float64)
    elif suffix in (".jsonl", ".ndjson"):
        rows = read_jsonl(p, "scores")
        vals = []
        for i, r in enumerate(rows):
            v = r.get(field)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InputError(f"scores {p} {row_where(rows, i)} has no numeric field {field!r} (use --score-field)")
            try:
                vals.append(float(v))
            except OverflowError:
                raise InputError(f"scores {p} {row_where(rows, i)}: score {field!r} is too large for a float") from None
        scores = np.asarray(vals, dtype=np.float64)
    elif suffix == ".txt":
        lines = _text_lines(p)
        vals = []
        for i, line in enumerate(lines):
            try:
                vals.append(float(line.strip()))
            except ValueError:
                raise InputError(f"scores {p} {line_where(i)}: {line.strip()[:40]!r} is not one number; "
                                 "one score per line expected") from None
        scores = np.asarray(vals, dtype=np.float64)
    else:
        raise InputError(f"scores {p}: unsupported format {suffix!r} (use .npy, .jsonl or .txt)")
    if not np.all(np.isfinite(scores)):
        raise InputError(f"scores {p} contain NaN or inf")
    if n_rows is not None and len(scores) != n_rows:
        raise InputError(f"scores {p} has {len(scores)} values but the embeddings have {n_rows} rows")
    return scores


#: suffixes of a labels or text table (what a labels input may be; never an embeddings matrix)
LABEL_TABLE_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".txt", ".parquet")


def check_not_swapped(embeddings: Any, labels: Any, emb_name: str = "EMB", labels_name: str = "LABELS") -> None:
    """Refuse, before anything is read, embeddings and labels given the wrong way round: a labels
    table where the embeddings go and a ``.npy`` (or a 2-D float ``.npy``) where the labels go."""
    if not isinstance(embeddings, (str, Path)) or not isinstance(labels, (str, Path)):
        return
    e, lab = Path(embeddings), Path(labels)
    why = None
    if e.suffix.lower() in LABEL_TABLE_SUFFIXES and (lab.suffix.lower() == ".npy" or lab.is_dir()):
        why = f"{emb_name} {e} is a table and {labels_name} {lab} a .npy"
    elif e.suffix.lower() == ".npy" and lab.suffix.lower() == ".npy" and e.is_file() and lab.is_file():
        from .npyfile import npy_header

        try:
            se, sl = npy_header(e)[0], npy_header(lab)
        except InputError:
            return
        if len(se) == 1 and len(sl[0]) == 2 and sl[2].kind == "f":
            why = f"{emb_name} {e} is 1-D and {labels_name} {lab} a 2-D float matrix"
    if why:
        raise InputError(f"{why}: looks like the embeddings and labels are swapped; give the embeddings first "
                         f"({emb_name} {labels_name})")


def labels_for(labels: Any, n: int, field: str = "label", what: str = "labels", *, rows: Any = None,
               matched: Optional[dict[str, str]] = None, key: str = "labels", loader: Any = None) -> np.ndarray:
    """Labels given as an array/list (``n`` of them) or as a labels file / shard set, in the row
    order of the embeddings ``rows`` (a path): when both carry ids (the file's ``id`` column, the
    embeddings' sidecar) they are matched by id (:func:`embedcheck.io.rowids.match_rows`: the same
    set required, reordered when the order differs), else by position. ``matched`` (the report's
    ``inputs.rows_matched_by``) gets ``key`` → ``"id"`` or ``"position"``. ``loader``: the file
    reader (default :func:`load_labels`; scores: ``load_scores``)."""
    from ..rows import encode_labels
    from .rowids import Matched, match_input

    if isinstance(labels, (str, Path)):
        read = loader or (lambda p, k: load_labels(p, k, field=field, what=what))
        y = read(labels, n)
        m = match_input(rows, labels, names=(f"embeddings {rows}" if isinstance(rows, (str, Path)) else "the embeddings",
                                             f"{what} {labels}"), tags=("the embeddings", f"the {what}"))
        y = m.apply(y)
    else:
        y = np.asarray(labels)
        if loader is None:
            encode_labels(y, n)  # checks the count and the kinds
        m = Matched("position")
    if matched is not None:
        matched[key] = m.by
    return y
