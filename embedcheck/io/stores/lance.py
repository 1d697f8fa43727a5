"""Lance datasets and LanceDB tables (lancedb, pylance)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np

from ...errors import InputError
from .. import locators as _locators
from ..locators import Locator
from .arrow import _np_dtype, _vector_column, arrow_vectors
from .base import BATCH_ROWS, Store, _default_id, _lance_files, _meta_of, _need, contained_files, range_buffer
from .index import AnnIndex


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

# ---- the ANN index ------------------------------------------------------------------------------

LANCE_KINDS = {"IVF_PQ": "lancedb-ivf_pq", "IVF_HNSW_SQ": "lancedb-ivf_hnsw_sq", "IVF_HNSW_PQ": "lancedb-ivf_hnsw_pq",
               "IVF_FLAT": "lancedb-ivf_flat", "IVF_SQ": "lancedb-ivf_sq"}
LANCE_METRICS = {"cosine": "cosine", "dot": "ip", "l2": "l2"}


class LanceIndex(AnnIndex):
    def __init__(self, locator: Any) -> None:
        loc = _locators.parse(locator)
        assert loc is not None and loc.kind == "lancedb" and loc.table
        lancedb = _need("lancedb", loc.name)
        locator = loc.name
        opts = {k: v for k, v in (("column", loc.column), ("id", loc.id)) if v}
        folder = Path(loc.path)
        if not folder.is_dir():
            raise InputError(f"{locator}: no LanceDB folder {folder}")
        db = lancedb.connect(str(folder))
        try:
            tbl = db.open_table(loc.table)
        except (ValueError, FileNotFoundError, RuntimeError) as exc:
            raise InputError(f"{locator}: no table {loc.table!r} in {folder} ({str(exc)[:100]})") from None
        from ..integrity import lance_problem

        try:
            dataset = tbl.to_lance()
        except Exception:  # noqa: BLE001 - not a local dataset: nothing of its files to check
            dataset = None
        problem = lance_problem(dataset, locator) if dataset is not None else None
        if problem:  # a data file removed or cut: Lance would fail mid-search with its own words
            raise InputError(problem)
        schema = tbl.schema
        vec_cols = [f.name for f in schema if _is_vector_field(f)]
        column = opts.get("column") or (vec_cols[0] if len(vec_cols) == 1 else None)
        if column is None:
            raise InputError(f"{locator}: name the vector column with ?column=NAME (vector columns: "
                             f"{', '.join(vec_cols) or 'none'})")
        if column not in schema.names:
            raise InputError(f"{locator}: no column {column!r}")
        id_col = opts.get("id") or ("id" if "id" in schema.names else None)
        if id_col is not None and id_col not in schema.names:
            raise InputError(f"{locator}: no id column {id_col!r}")
        idx = [ix for ix in tbl.list_indices() if column in ix.columns and _lance_type(ix) in LANCE_KINDS]
        if not idx:
            raise InputError(f"{locator}: column {column!r} has no vector index (IVF_PQ, IVF_HNSW_SQ ...), so there is "
                             "no approximate search to measure")
        stats = tbl.index_stats(idx[0].name)
        itype = str(stats.index_type).upper()
        metric = LANCE_METRICS.get(str(stats.distance_type).lower())
        if metric is None:
            raise InputError(f"{locator}: index distance {stats.distance_type!r} is not supported (cosine, dot, l2)")
        settings: dict[str, Optional[int]] = {"nprobes": None, "refine_factor": None}
        if "HNSW" in itype:
            settings["ef"] = None
        self._tbl, self._column, self._id, self._lance_metric = tbl, column, id_col, str(stats.distance_type).lower()
        dim = schema.field(column).type.list_size
        notes = [f"index {idx[0].name} ({itype}); settings left at None use LanceDB's defaults"]
        if stats.num_unindexed_rows:
            notes.append(f"{stats.num_unindexed_rows} rows are not in the index yet (searched exactly by LanceDB)")
        super().__init__(locator=locator, kind=LANCE_KINDS[itype], library=f"lancedb {lancedb.__version__}",
                         metric=metric, dim=int(dim), n=int(tbl.count_rows()), settings=settings,
                         quantised=False, notes=notes, unindexed=int(stats.num_unindexed_rows or 0))

    def _search_one(self, q: np.ndarray, k: int, settings: dict[str, Optional[int]]) -> list[Any]:
        s = self._tbl.search(q, vector_column_name=self._column).distance_type(self._lance_metric)
        if settings.get("nprobes") is not None:
            s = s.nprobes(int(settings["nprobes"]))  # type: ignore[arg-type]
        if settings.get("refine_factor") is not None:
            s = s.refine_factor(int(settings["refine_factor"]))  # type: ignore[arg-type]
        if settings.get("ef") is not None:
            s = s.ef(int(settings["ef"]))  # type: ignore[arg-type]
        s = s.limit(k)
        # ``_distance`` named in the selection: without it Lance (0.40) logs a deprecation warning on
        # stderr for every query
        if self._id is None:
            tab = s.with_row_id(True).select(["_distance"]).to_arrow()
            return [int(x) for x in tab.column("_rowid").to_pylist()]
        tab = s.select([self._id, "_distance"]).to_arrow()
        return tab.column(self._id).to_pylist()

    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        ds = self._tbl.to_lance()
        cols = [self._column] + ([self._id] if self._id else [])
        tab = ds.to_table(columns=cols, with_row_id=self._id is None)
        vec = tab.column(self._column).combine_chunks()
        X = np.asarray(vec.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(len(tab), self.dim)
        if vec.null_count:
            raise InputError(f"{self.locator}: {vec.null_count} rows have a NULL vector")
        idc = tab.column(self._id if self._id else "_rowid").to_pylist()
        arr = np.asarray(idc)
        if arr.dtype.kind not in "iu":
            arr = np.array(idc, dtype=object)
        return arr, X


def _lance_type(ix: Any) -> str:
    t = str(getattr(ix, "index_type", "")).upper()
    return {"IVFPQ": "IVF_PQ", "IVFHNSWSQ": "IVF_HNSW_SQ", "IVFHNSWPQ": "IVF_HNSW_PQ", "IVFFLAT": "IVF_FLAT",
            "IVFSQ": "IVF_SQ"}.get(t.replace("_", ""), t)


def _is_vector_field(f: Any) -> bool:
    import pyarrow as pa

    t = f.type
    return pa.types.is_fixed_size_list(t) and pa.types.is_floating(t.value_type)
