"""Parquet files and Arrow IPC: the store and its writer (pyarrow)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np

from ...errors import InputError
from ..locators import Locator
from .base import BATCH_ROWS, META_KEY, Store, _default_id, _meta_of, _need, _remember, codes_record, contained_files


def _is_vector_type(pa: Any, t: Any, codes: bool = False) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)) \
        and (pa.types.is_floating(t.value_type) or (codes and pa.types.is_integer(t.value_type)))


def _vector_column(pa: Any, schema: Any, loc: Locator, shown: str) -> str:
    names = list(schema.names)
    meta = _meta_of(schema.metadata)
    codes = codes_record(meta) is not None  # a compressed store: lists of integer codes
    if not loc.column and codes and meta.get("column") in names:
        return str(meta["column"])
    if loc.column:
        if loc.column not in names:
            raise InputError(f"{shown} has no column {loc.column!r}; its columns are: {', '.join(names)}")
        if not _is_vector_type(pa, schema.field(loc.column).type, codes):
            raise InputError(f"{shown}: column {loc.column!r} is {schema.field(loc.column).type}, not a vector column "
                             "(a list of floats)")
        return loc.column
    vec = [f.name for f in schema if _is_vector_type(pa, f.type, codes)]
    if len(vec) == 1:
        return vec[0]
    if not vec:
        raise InputError(f"{shown} has no vector column (a list of floats); its columns are: {', '.join(names)}")
    raise InputError(f"{shown} has several vector columns ({', '.join(vec)}); name one with ?column=NAME")


def _np_dtype(pa: Any, t: Any) -> np.dtype:
    vt = t.value_type
    if pa.types.is_integer(vt):  # the codes of a compressed store
        return np.dtype(vt.to_pandas_dtype())
    return np.dtype(np.float64) if pa.types.is_float64(vt) else np.dtype(np.float32)


def arrow_vectors(arr: Any, dim: int, dtype: np.dtype, shown: str, col: str, start: int) -> np.ndarray:
    """A (fixed-size) list array of float vectors as an ``(n, dim)`` array; a NULL vector, a NULL
    element or another dimension is one error naming the row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count:
        i = int(np.flatnonzero(np.asarray(arr.is_null()))[0])
        raise InputError(f"{shown}: row {start + i} of column {col!r} is NULL")
    if not pa.types.is_fixed_size_list(arr.type):
        lens = np.asarray(pc.list_value_length(arr))
        bad = np.flatnonzero(lens != dim)
        if bad.size:
            i = int(bad[0])
            raise InputError(f"{shown}: row {start + i} of column {col!r} has dimension {int(lens[i])}, "
                             f"row 0 has {dim}; every vector must have the same dimension")
    elif arr.type.list_size != dim:
        raise InputError(f"{shown}: column {col!r} has dimension {arr.type.list_size}, expected {dim}")
    values = arr.flatten()
    if values.null_count:
        i = int(np.flatnonzero(np.asarray(values.is_null()))[0]) // max(dim, 1)
        raise InputError(f"{shown}: row {start + i} of column {col!r} holds a NULL element")
    X = values.to_numpy(zero_copy_only=False)
    return X.astype(dtype, copy=False).reshape(len(arr), dim)


class ArrowStore(Store):
    """A parquet file, a folder of them, or an Arrow IPC file: read by row groups / record
    batches, only the columns asked for; sequential reads continue where the last one stopped."""

    def __init__(self, loc: Locator):
        super().__init__(loc)
        import pyarrow as pa

        self.kind = loc.kind
        p = Path(loc.path)
        if not p.exists():
            from ..paths import missing as why_missing

            raise InputError(f"{self.name} {why_missing(p)}")
        self._pa = pa
        self._files: list[Any] = []
        self._ipc: Any = None
        try:
            if loc.kind == "parquet":
                import pyarrow.parquet as pq

                paths = sorted(p.glob("*.parquet")) if p.is_dir() else [p]
                if not paths:
                    raise InputError(f"{self.name} is a folder without .parquet files")
                if p.is_dir():
                    contained_files(p, paths, self.name)
                from ..integrity import parquet_problem

                for f in paths:  # a file cut short or not parquet, in words (pyarrow's words are its own)
                    problem = parquet_problem(f, self.name if f == p else f"{self.name}: {f.name}")
                    if problem:
                        raise InputError(problem)
                # buffered page reads: a row group is streamed, never held whole (one row group of
                # a million rows is 1.5 GB of vectors)
                self._files = [pq.ParquetFile(str(f), buffer_size=1 << 22, pre_buffer=False) for f in paths]
                schema = self._files[0].schema_arrow
                for f, fp in zip(self._files[1:], paths[1:]):
                    if not f.schema_arrow.remove_metadata().equals(schema.remove_metadata()):
                        raise InputError(f"{self.name}: {fp.name} has another schema than {paths[0].name}")
                counts = [(k, rg, f.metadata.row_group(rg).num_rows)
                          for k, f in enumerate(self._files) for rg in range(f.num_row_groups)]
            else:
                import pyarrow.ipc as ipc

                from ..integrity import arrow_problem

                problem = arrow_problem(p, self.name)
                if problem:
                    raise InputError(problem)
                try:
                    self._ipc = ipc.open_file(pa.memory_map(str(p), "r"))
                    counts = [(0, b, self._ipc.get_batch(b).num_rows) for b in range(self._ipc.num_record_batches)]
                except pa.ArrowInvalid:  # the IPC stream format: read once into memory
                    with pa.memory_map(str(p), "r") as src:
                        table = ipc.open_stream(src).read_all()
                    self._ipc = table
                    counts = [(0, b, len(rb)) for b, rb in enumerate(table.to_batches())]
                schema = self._ipc.schema
        except InputError:
            raise
        except Exception:  # noqa: BLE001 - any arrow error is an unreadable file (pyarrow's words are its internals)
            raise InputError(f"{self.name}: is corrupt (not a readable {loc.kind} file)") from None
        self.schema = schema
        self.column_name = _vector_column(pa, schema, loc, self.name)
        self.id_column = _default_id(list(schema.names), loc, self.name)
        self.dtype = _np_dtype(pa, schema.field(self.column_name).type)
        self._units = [(k, u, r) for k, u, r in counts if r > 0]
        self._starts = np.cumsum([0] + [r for _, _, r in self._units])
        self.n = int(self._starts[-1])
        self._cursor: Optional[tuple[int, Iterator[Any], Any, int]] = None  # (next row, batches, pending, pending row)
        t = schema.field(self.column_name).type
        if pa.types.is_fixed_size_list(t):
            self.dim = int(t.list_size)
        elif self.n:
            first = self._unit_table(0, [self.column_name], rows=1).column(0)
            if first.null_count:
                raise InputError(f"{self.name}: row 0 of column {self.column_name!r} is NULL")
            self.dim = len(first[0].as_py() if hasattr(first[0], "as_py") else first[0])
        self._set_codes(self.metadata())
        self._check_opened()

    def _unit_table(self, u: int, columns: list[str], rows: Optional[int] = None) -> Any:
        k, g, _ = self._units[u]
        if self._files:
            if rows is not None:
                return self._pa.Table.from_batches([next(self._files[k].iter_batches(batch_size=rows, row_groups=[g],
                                                                                   columns=columns))])
            return self._files[k].read_row_group(g, columns=columns)
        rb = self._ipc.get_batch(g) if hasattr(self._ipc, "get_batch") else self._ipc.to_batches()[g]
        t = self._pa.Table.from_batches([rb]).select(columns)
        return t.slice(0, rows) if rows is not None else t

    def _iter_from(self, row: int, columns: list[str]) -> Iterator[tuple[int, Any]]:
        """(first row, record batch) from the unit holding ``row`` on, streamed."""
        u = int(np.searchsorted(self._starts, row, side="right")) - 1
        for j in range(u, len(self._units)):
            k, g, _ = self._units[j]
            s = int(self._starts[j])
            if self._files:
                for rb in self._files[k].iter_batches(batch_size=BATCH_ROWS, row_groups=[g], columns=columns,
                                                      use_threads=True):
                    yield s, rb
                    s += rb.num_rows
            else:
                for rb in self._unit_table(j, columns).to_batches():
                    yield s, rb
                    s += rb.num_rows

    def _range_table(self, start: int, stop: int, columns: list[str]) -> Any:
        pieces = []
        cur = self._cursor if columns == [self.column_name] else None
        if cur is not None and cur[0] == start:
            it, pending, prow = cur[1], cur[2], cur[3]
        else:
            it, pending, prow = self._iter_from(start, columns), None, 0
        row = start
        while row < stop:
            if pending is None:
                try:
                    prow, pending = next(it)
                except StopIteration:
                    break
            end = prow + pending.num_rows
            if end <= row:
                pending = None
                continue
            lo, hi = row - prow, min(stop, end) - prow
            pieces.append(pending.slice(lo, hi - lo))
            row = prow + hi
            if hi == pending.num_rows:
                pending = None
        if columns == [self.column_name]:
            self._cursor = (row, it, pending, prow)
        return self._pa.Table.from_batches(pieces) if pieces else None

    def _read(self, start: int, stop: int) -> np.ndarray:
        try:
            t = self._range_table(start, stop, [self.column_name])
        except InputError:
            raise
        except Exception:  # noqa: BLE001 - a page that does not decode; pyarrow's words are its internals
            raise InputError(f"{self.name}: is corrupt (rows {start}-{stop - 1} could not be read)") from None
        if t is None:
            return np.empty((0, self.cols), dtype=self.raw_dtype)
        return arrow_vectors(t.column(0), self.cols, self.raw_dtype, self.name, self.column_name, start)

    def columns(self) -> list[str]:
        return list(self.schema.names)

    def column(self, name: str) -> list[Any]:
        self._need_column(name)
        with self.lock:
            if self._files:
                vals: list[Any] = []
                for f in self._files:
                    vals += f.read(columns=[name]).column(0).to_pylist()
                return vals
            t = self._ipc.read_all() if hasattr(self._ipc, "read_all") else self._ipc
            return list(t.column(name).to_pylist())

    def metadata(self) -> dict[str, Any]:
        return _meta_of(self.schema.metadata)


def _arrow_column(pa: Any, name: str, values: list[Any]) -> Any:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed kinds: kept as JSON text
        return pa.array([v if isinstance(v, str) or v is None else json.dumps(v) for v in values], pa.string())


def _write_arrow(loc: Locator, batches: Iterator[np.ndarray], dim: int, cols: dict[str, list[Any]], vec: str,
                 record: str, overwrite: bool, codes: str = "float32") -> None:
    import pyarrow as pa

    arrays = {k: _arrow_column(pa, k, v) for k, v in cols.items()}
    np_type = np.dtype(np.uint8 if codes == "bits" else codes)
    width = (dim + 7) // 8 if codes == "bits" else dim
    fields = [pa.field(k, a.type) for k, a in arrays.items()] + [pa.field(vec, pa.list_(pa.from_numpy_dtype(np_type), width))]
    schema = pa.schema(fields, metadata={META_KEY: record})

    failed: list[BaseException] = []

    def record_batches() -> Iterator[Any]:
        row = 0
        for X in _remember(batches, failed):
            X = np.ascontiguousarray(X, dtype=np_type)
            m = X.shape[0]
            data = [a.slice(row, m) for a in arrays.values()]
            data.append(pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), width))
            yield pa.RecordBatch.from_arrays(data, schema=schema)
            row += m

    if loc.kind == "parquet":
        import pyarrow.parquet as pq

        out = Path(loc.path)
        if not out.parent.is_dir():
            raise InputError(f"output {loc.name}: folder {out.parent} does not exist")
        if out.exists() and not overwrite:
            raise InputError(f"output {loc.name} exists; pass --overwrite to replace it")
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        try:
            with pq.ParquetWriter(str(tmp), schema) as w:
                for rb in record_batches():
                    w.write_batch(rb)
            os.replace(tmp, out)
        finally:
            if tmp.exists():
                tmp.unlink()
        return
    lance = _need("lance", loc.name)
    if loc.kind == "lancedb":
        if not Path(loc.path).is_dir():
            Path(loc.path).mkdir(parents=True)
        path = Path(loc.path) / f"{loc.table}.lance"
    else:
        path = Path(loc.path)
        if not path.parent.is_dir():
            raise InputError(f"output {loc.name}: folder {path.parent} does not exist")
    exists = path.exists()
    if exists and not overwrite:
        raise InputError(f"output {loc.name} exists; pass --overwrite to replace it")
    reader = pa.RecordBatchReader.from_batches(schema, record_batches())
    try:
        lance.write_dataset(reader, str(path), schema=schema, mode="overwrite" if exists else "create")
    except Exception as exc:  # noqa: BLE001 - nothing was committed: the old version stays current
        if failed:  # the rows failed (a bad row, an unreadable input): that error, not lance's wrapping of it
            raise failed[0] from None
        raise InputError(f"output {loc.name}: {' '.join(str(exc).split())[:200]}") from None
