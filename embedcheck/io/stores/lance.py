"""Lance datasets and LanceDB tables (lancedb, pylance)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputError
from ..locators import Locator
from .arrow import _np_dtype, _vector_column, arrow_vectors
from .base import BATCH_ROWS, Store, _default_id, _lance_files, _meta_of, _need, contained_files, range_buffer


class LanceStore(Store):
    """A Lance dataset folder, or the table ``TABLE`` of the LanceDB database folder ``DBDIR``
    (whose data is the dataset ``DBDIR/TABLE.lance``)."""

    def __init__(self, loc: Locator):
        super().__init__(loc)
        lance = _need("lance", f"{self.name}")
        import pyarrow as pa

        self.kind = loc.kind
        if loc.kind == "lancedb":
            db = Path(loc.path)
            if not db.is_dir():
                raise InputError(f"{self.name}: database folder {loc.path} does not exist")
            path = db / f"{loc.table}.lance"
            if not path.is_dir():
                tables = sorted(p.name[:-6] for p in db.glob("*.lance"))
                raise InputError(f"{self.name}: no table {loc.table!r} in {loc.path} (tables: "
                                 f"{', '.join(tables) or 'none'})")
        else:
            path = Path(loc.path)
            if not path.is_dir():
                raise InputError(f"{self.name} does not exist")
        contained_files(path, _lance_files(path), self.name)
        try:
            self.ds = lance.dataset(str(path))
            schema = self.ds.schema
        except Exception:  # noqa: BLE001 - any lance error is an unreadable dataset (its words name Rust internals)
            raise InputError(f"{self.name}: is corrupt (not a readable Lance dataset)") from None
        from ..integrity import lance_problem

        problem = lance_problem(self.ds, self.name)  # a data file removed or cut: Lance would fail mid-read
        if problem:
            raise InputError(problem)
        self.schema = schema
        self.column_name = _vector_column(pa, schema, loc, self.name)
        self.id_column = _default_id(list(schema.names), loc, self.name)
        self.dtype = _np_dtype(pa, schema.field(self.column_name).type)
        self.n = int(self.ds.count_rows())
        t = schema.field(self.column_name).type
        if pa.types.is_fixed_size_list(t):
            self.dim = int(t.list_size)
        elif self.n:
            first = self.ds.to_table(columns=[self.column_name], limit=1).column(0)
            if first.null_count:
                raise InputError(f"{self.name}: row 0 of column {self.column_name!r} is NULL")
            self.dim = len(first[0].as_py())
        self._set_codes(self.metadata())
        self._check_opened()

    def _read(self, start: int, stop: int) -> np.ndarray:
        # Lance's own range scan (its batch size: larger batches scan slower), each batch decoded
        # straight into its rows of the result
        out = range_buffer((stop - start, self.cols), self.raw_dtype)
        pos = 0
        try:
            for b in self.ds.to_batches(columns=[self.column_name], offset=start, limit=stop - start,
                                        batch_size=BATCH_ROWS):
                m = min(b.num_rows, stop - start - pos)
                if m <= 0:
                    break
                out[pos:pos + m] = arrow_vectors(b.column(0).slice(0, m), self.cols, self.raw_dtype, self.name,
                                                 self.column_name, start + pos)
                pos += m
        except InputError:
            raise
        except Exception:  # noqa: BLE001 - Lance's words name its Rust internals
            raise InputError(f"{self.name}: is corrupt (Lance could not read rows {start}-{stop - 1})") from None
        return out if pos == stop - start else out[:pos]

    def columns(self) -> list[str]:
        return list(self.schema.names)

    def column(self, name: str) -> list[Any]:
        self._need_column(name)
        with self.lock:
            return list(self.ds.to_table(columns=[name]).column(0).to_pylist())

    def metadata(self) -> dict[str, Any]:
        return _meta_of(self.schema.metadata)
