"""Approximate-nearest-neighbour indexes behind one interface, each queried through its own library.

:func:`open_index` opens a locator and returns an :class:`AnnIndex` (the locator parsed by the parser
stores use, :func:`embedcheck.io.locators.parse`: every libpq spelling docs/stores.md gives, the
URI passed on as written less ``table``, ``column`` and ``id``):

* ``PATH.faiss`` / ``PATH.index`` — a FAISS index file (``faiss.read_index``): HNSW (setting
  ``efSearch``), IVF (``nprobe``), Flat (none); PQ / SQ encodings are quantised (their vectors are
  approximations: the exact side needs the original vectors, ``vectors=``).
* ``PATH.bin`` / ``PATH.hnsw`` (or any other file with ``space=``/``dim=`` or a sidecar
  ``PATH.json`` ``{"space": "cosine|ip|l2", "dim": D}``) — an hnswlib index (``ef``).
* ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB?table=T&column=C[&id=I]`` — a pgvector column with
  an HNSW (``hnsw.ef_search``) or IVFFlat (``ivfflat.probes``) index; the metric comes from the
  index's operator class (``vector_cosine_ops``, ``vector_ip_ops``, ``vector_l2_ops`` and their
  ``halfvec`` twins). Settings are applied with ``set_config(..., true)`` (``SET LOCAL``) inside a
  read-only transaction; table, column and id are quoted identifiers (``psycopg.sql.Identifier``),
  never formatted into SQL; the password never appears in a message.
* ``lancedb://DBDIR/TABLE[?column=C&id=I]`` — a LanceDB table with an IVF_PQ or IVF_HNSW_SQ
  index (``nprobes``, ``refine_factor``; ``ef`` for HNSW), metric from the index's config.

Every index gives: ``kind``, ``metric``, ``dim``, ``n``, the names and current values of its search
settings, ``search(queries, k, **settings) -> (ids, seconds per query)`` (one query per call, as a
service queries it), and :func:`index_vectors` — the index's own ids and vectors, the ground truth
(read minimally here; the generic store readers can replace it).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from .locators import SCHEMES, Locator, mask_secrets, parse_pg
from .locators import parse as parse_locator

STORES_HINT = "pip install 'embedcheck[stores]'"
CONNECT_TIMEOUT = 10
STATEMENT_TIMEOUT_MS = 600_000


def _need(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"reading this index needs {module}, which is not installed: {STORES_HINT}") from None


def norm_key(name: str) -> str:
    """Setting names compared loosely: ``hnsw.ef_search`` ~ ``ef_search`` ~ ``efSearch``."""
    key = name.strip().lower()
    for pre in ("hnsw.", "ivfflat."):
        key = key.removeprefix(pre)
    return key.replace("_", "").replace("-", "")


@dataclass
class AnnIndex:
    """An opened index. Subclasses implement :meth:`_search_one` and :meth:`_vectors`."""

    locator: str  #: how the index is named in reports (password masked)
    kind: str  #: e.g. ``faiss-hnsw``, ``pgvector-ivfflat``
    library: str  #: the library and its version
    metric: str  #: ``cosine``, ``ip`` or ``l2``
    dim: int
    n: int
    settings: dict[str, Optional[int]] = field(default_factory=dict)  #: name → current value (None: library default)
    quantised: bool = False  #: the index stores approximations of the vectors (PQ / SQ)
    notes: list[str] = field(default_factory=list)
    #: rows the index does not cover yet (LanceDB searches them by a flat scan, exactly)
    unindexed: int = 0

    # ---- settings ----
    def setting_name(self, name: str) -> str:
        """The index's own spelling of a setting; an InputError naming the kind's settings."""
        for own in self.settings:
            if norm_key(own) == norm_key(name):
                return own
        have = ", ".join(self.settings) or "none"
        raise InputError(f"{self.kind} index {self.locator} has no search setting {name!r} (its settings: {have})")

    def resolve(self, settings: Optional[dict[str, Any]]) -> dict[str, Optional[int]]:
        """The current settings with ``settings`` (any spelling) applied; values are integers ≥ 1."""
        out = dict(self.settings)
        for name, v in (settings or {}).items():
            own = self.setting_name(name)
            if v is None:  # the library's default
                continue
            try:
                iv = int(v)
                if isinstance(v, float) and not v.is_integer():
                    raise ValueError
            except (TypeError, ValueError):
                raise InputError(f"setting {own}={v!r}: expected an integer") from None
            if iv < 1:
                raise InputError(f"setting {own}={v!r}: expected an integer >= 1")
            out[own] = iv
        return out

    # ---- search ----
    def search(self, queries: np.ndarray, k: int, **settings: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(ids (m, k) as the index returns them — missing answers are None / −1, seconds per
        query (m,))``, one query per call through the index's own library."""
        use = self.resolve(settings)
        Q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        if Q.ndim != 2 or Q.shape[1] != self.dim:
            raise InputError(f"queries have dimension {Q.shape[-1]} but index {self.locator} has {self.dim}")
        self._prepare(use)
        ids: list[list[Any]] = []
        secs = np.empty(Q.shape[0], dtype=np.float64)
        for i in range(Q.shape[0]):
            t0 = time.perf_counter()
            got = self._search_one(Q[i], k, use)
            secs[i] = time.perf_counter() - t0
            ids.append(list(got)[:k])
        return _id_matrix(ids, k), secs

    def _prepare(self, settings: dict[str, Optional[int]]) -> None:
        pass

    def _search_one(self, q: np.ndarray, k: int, settings: dict[str, Optional[int]]) -> list[Any]:
        raise NotImplementedError

    # ---- the vectors ----
    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def reconstructed(self) -> Optional[np.ndarray]:
        """What a quantised index holds instead of the vectors (its decoded codes), when the library
        exposes it; None otherwise."""
        return None

    def close(self) -> None:
        pass


def _id_matrix(ids: list[list[Any]], k: int) -> np.ndarray:
    if all(isinstance(x, (int, np.integer)) for r in ids for x in r):
        out = np.full((len(ids), k), -1, dtype=np.int64)
        for i, r in enumerate(ids):
            out[i, :len(r)] = r
        return out
    obj = np.full((len(ids), k), None, dtype=object)
    for i, r in enumerate(ids):
        obj[i, :len(r)] = r
    return obj


def index_vectors(index: AnnIndex) -> tuple[np.ndarray, np.ndarray]:
    """``(ids (n,), vectors (n, dim) float32)`` of the index's rows: the ground truth's corpus.
    An index that stores approximations only (PQ / SQ) cannot give them: an InputError."""
    if index.quantised:
        raise InputError(f"{index.kind} index {index.locator} stores quantised codes, not the vectors; give the "
                         "original vectors (vectors=, CLI: --vectors SOURCE) for the exact side")
    return index._vectors()


def rows_of(ids: np.ndarray, returned: np.ndarray) -> np.ndarray:
    """Row positions (in ``ids`` order) of the returned ids; −1 for a missing answer or an unknown id."""
    ids = np.asarray(ids)
    R = np.asarray(returned)
    if R.dtype.kind in "iu" and ids.dtype.kind in "iu":
        order = np.argsort(ids, kind="stable")
        s = ids[order]
        pos = np.clip(np.searchsorted(s, R), 0, max(len(s) - 1, 0))
        found = (s[pos] == R) & (R >= 0) if len(s) else np.zeros(R.shape, bool)
        return np.where(found, order[pos], -1).astype(np.int64)
    lookup = {(x.item() if hasattr(x, "item") else x): i for i, x in enumerate(ids)}
    out = np.full(R.shape, -1, dtype=np.int64)
    for idx, x in np.ndenumerate(R):
        if x is not None:
            out[idx] = lookup.get(x.item() if hasattr(x, "item") else x, -1)
    return out


# ---- FAISS ---------------------------------------------------------------------------------------

class FaissIndex(AnnIndex):
    def __init__(self, path: Path) -> None:
        faiss = _need("faiss")
        try:
            idx = faiss.read_index(str(path))
        except (RuntimeError, MemoryError):  # FAISS's own message names its C++ internals: ours says what is wrong
            from .integrity import faiss_problem

            raise InputError(faiss_problem(path)) from None
        self._faiss, self._index = faiss, idx
        self._idmap = isinstance(idx, (faiss.IndexIDMap, faiss.IndexIDMap2))
        base = faiss.downcast_index(idx.index) if self._idmap else idx
        self._base = base
        if idx.metric_type == faiss.METRIC_INNER_PRODUCT:
            metric = "ip"
        elif idx.metric_type == faiss.METRIC_L2:
            metric = "l2"
        else:
            raise InputError(f"{path}: FAISS metric type {idx.metric_type} is not supported (inner product or L2)")
        name = type(base).__name__
        settings: dict[str, Optional[int]] = {}
        quant = False
        if hasattr(base, "hnsw"):
            kind = "faiss-hnsw"
            settings["efSearch"] = int(base.hnsw.efSearch)
            storage = faiss.downcast_index(base.storage)
            quant = not isinstance(storage, faiss.IndexFlat)
        elif hasattr(base, "nprobe"):
            kind = "faiss-ivf"
            settings["nprobe"] = int(base.nprobe)
            quant = not isinstance(base, faiss.IndexIVFFlat)
        elif isinstance(base, faiss.IndexFlat):
            kind = "faiss-flat"
        else:
            kind = "faiss-" + name.lower().removeprefix("index")
            quant = True
        super().__init__(locator=str(path), kind=kind, library=f"faiss {faiss.__version__}", metric=metric,
                         dim=int(idx.d), n=int(idx.ntotal), settings=settings, quantised=quant,
                         notes=[f"FAISS {name}" + (" (ids from its IndexIDMap)" if self._idmap else "")])
        if self.n == 0:
            raise InputError(f"FAISS index {path} is empty")

    def _prepare(self, settings: dict[str, Optional[int]]) -> None:
        ps = self._faiss.ParameterSpace()
        for k, v in settings.items():
            if v is not None:
                ps.set_index_parameter(self._index, k, int(v))

    def _search_one(self, q: np.ndarray, k: int, settings: dict[str, Optional[int]]) -> list[Any]:
        _, ids = self._index.search(q[None, :], k)
        return [int(x) for x in ids[0]]

    def search(self, queries: np.ndarray, k: int, **settings: Any) -> tuple[np.ndarray, np.ndarray]:
        ids, secs = super().search(queries, k, **settings)
        return ids, secs

    def _ids(self) -> np.ndarray:
        if self._idmap:
            return self._faiss.vector_to_array(self._index.id_map).astype(np.int64)
        return np.arange(self.n, dtype=np.int64)

    def _decode(self) -> np.ndarray:
        base = self._base
        if hasattr(base, "make_direct_map") and not hasattr(base, "hnsw"):
            base.make_direct_map()
        return np.asarray(base.reconstruct_n(0, self.n), dtype=np.float32)

    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        return self._ids(), self._decode()

    def reconstructed(self) -> Optional[np.ndarray]:
        try:
            return self._decode()
        except RuntimeError:
            return None

    def row_ids(self) -> np.ndarray:
        return self._ids()


# ---- hnswlib -------------------------------------------------------------------------------------

HNSWLIB_SPACES = {"cosine": "cosine", "ip": "ip", "l2": "l2"}


class HnswlibIndex(AnnIndex):
    def __init__(self, path: Path, space: Optional[str], dim: Optional[int]) -> None:
        hnswlib = _need("hnswlib")
        side = path.with_name(path.name + ".json")
        if (space is None or dim is None) and side.is_file():
            try:
                meta = json.loads(side.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise InputError(f"{side}: not a JSON object with space and dim ({exc})") from None
            if not isinstance(meta, dict):
                raise InputError(f"{side}: not a JSON object with space and dim")
            space = space or meta.get("space")
            dim = dim or meta.get("dim")
        if space is None or dim is None:
            raise InputError(f"hnswlib index {path} needs its space and dimension: --space and --dim, or a sidecar "
                             f"{side.name} {{\"space\": \"cosine\", \"dim\": 384}}")
        if space not in HNSWLIB_SPACES:
            raise InputError(f"hnswlib space must be cosine, ip or l2, got {space!r}")
        try:
            dim = int(dim)
        except (TypeError, ValueError):
            raise InputError(f"hnswlib dim must be an integer, got {dim!r}") from None
        from .integrity import hnswlib_problem

        problem = hnswlib_problem(path, dim, walk=False)  # before hnswlib: a corrupt header can make it allocate without bound
        if problem:
            raise InputError(problem)
        idx = hnswlib.Index(space=space, dim=dim)
        try:
            idx.load_index(str(path))
        except (RuntimeError, MemoryError):
            raise InputError(hnswlib_problem(path, dim) or f"{path}: is cut short or corrupt (hnswlib could not "
                             f"read it as an index of dimension {dim})") from None
        self._index = idx
        super().__init__(locator=str(path), kind="hnswlib", library=f"hnswlib {getattr(hnswlib, '__version__', '')}".strip(),
                         metric=HNSWLIB_SPACES[space], dim=dim, n=int(idx.get_current_count()),
                         settings={"ef": int(idx.ef)},
                         notes=["hnswlib 'cosine' stores unit vectors"] if space == "cosine" else [])
        if self.n == 0:
            raise InputError(f"hnswlib index {path} is empty")

    def _prepare(self, settings: dict[str, Optional[int]]) -> None:
        if settings.get("ef") is not None:
            self._index.set_ef(int(settings["ef"]))  # type: ignore[arg-type]

    def _search_one(self, q: np.ndarray, k: int, settings: dict[str, Optional[int]]) -> list[Any]:
        try:
            labels, _ = self._index.knn_query(q[None, :], k=k)
        except RuntimeError:  # fewer than k found (ef too small): hnswlib refuses a ragged answer
            for kk in range(k - 1, 0, -1):
                try:
                    labels, _ = self._index.knn_query(q[None, :], k=kk)
                    break
                except RuntimeError:
                    continue
            else:
                return []
        return [int(x) for x in labels[0]]

    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(self._index.get_ids_list(), dtype=np.int64)
        ids.sort()
        X = np.asarray(self._index.get_items(ids, return_type="numpy"), dtype=np.float32)
        return ids, X


# ---- pgvector ------------------------------------------------------------------------------------

PG_OPS = {"vector_cosine_ops": "cosine", "vector_ip_ops": "ip", "vector_l2_ops": "l2",
          "halfvec_cosine_ops": "cosine", "halfvec_ip_ops": "ip", "halfvec_l2_ops": "l2"}
PG_OPERATOR = {"cosine": "<=>", "ip": "<#>", "l2": "<->"}
PG_DEFAULTS = {"hnsw.ef_search": 40, "ivfflat.probes": 1}


def split_pg(locator: str) -> tuple[str, dict[str, str], str]:
    """``(libpq URI without table/column/id, {table, column, id}, the locator with its password
    masked)`` — from the one parser, :func:`embedcheck.io.locators.parse_pg`."""
    loc = parse_pg(locator)
    ours = {k: v for k, v in (("table", loc.table), ("column", loc.column), ("id", loc.id)) if v}
    return loc.conninfo, ours, loc.name


def mask(locator: str) -> str:
    """The locator with its password (and a ``password=`` parameter) replaced by ``***``."""
    return mask_secrets(locator)


class PgvectorIndex(AnnIndex):
    def __init__(self, locator: Any) -> None:
        psycopg = _need("psycopg")
        _need("pgvector.psycopg")
        from psycopg import sql

        loc = parse_locator(locator)
        assert loc is not None and loc.kind == "postgres"
        uri, shown = loc.conninfo, loc.name
        ours = {k: v for k, v in (("table", loc.table), ("column", loc.column), ("id", loc.id)) if v}
        self._loc = loc
        self._sql = sql
        try:
            conn = psycopg.connect(uri, connect_timeout=CONNECT_TIMEOUT, autocommit=False,
                                   options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}")
        except psycopg.Error as exc:
            raise InputError(f"cannot connect to {shown}: {_pg_message(exc, loc)}") from None
        conn.read_only = True
        from pgvector.psycopg import register_vector

        self._conn = conn
        try:
            register_vector(conn)
        except psycopg.Error as exc:
            conn.close()
            raise InputError(f"{shown}: the vector extension is not installed ({_pg_message(exc, loc)})") from None
        table, column = ours["table"], ours["column"]
        self._table, self._column = sql.Identifier(*table.split(".")), sql.Identifier(column)
        try:
            with conn.transaction():
                reg = conn.execute("SELECT to_regclass(%s)", (sql.Identifier(*table.split(".")).as_string(conn),)
                                   ).fetchone()
                if reg is None or reg[0] is None:
                    raise InputError(f"{shown}: no table {table!r}")
                cols = {r[0] for r in conn.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
                    "AND NOT attisdropped", (self._table.as_string(conn),))}
                if column not in cols:
                    raise InputError(f"{shown}: table {table!r} has no column {column!r}")
                id_col = ours.get("id") or ("id" if "id" in cols else None)
                if id_col is None or id_col not in cols:
                    raise InputError(f"{shown}: name the id column with &id=NAME (the ids the index returns)")
                self._id = sql.Identifier(id_col)
                rows = conn.execute(
                    "SELECT i.relname, am.amname, opc.opcname FROM pg_index x "
                    "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am am ON am.oid = i.relam "
                    "JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = x.indkey[0] "
                    "JOIN pg_opclass opc ON opc.oid = x.indclass[0] "
                    "WHERE x.indrelid = to_regclass(%s) AND a.attname = %s AND am.amname IN ('hnsw', 'ivfflat') "
                    "ORDER BY i.relname", (self._table.as_string(conn), column)).fetchall()
                if not rows:
                    raise InputError(f"{shown}: column {column!r} has no HNSW or IVFFlat index, so there is no "
                                     "approximate search to measure")
                name, am, opc = rows[0]
                if opc not in PG_OPS:
                    raise InputError(f"{shown}: index {name} uses operator class {opc}; supported: {', '.join(PG_OPS)}")
                n = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(self._table)).fetchone()[0]
                dim_row = conn.execute(sql.SQL("SELECT vector_dims({}) FROM {} LIMIT 1").format(
                    self._column, self._table)).fetchone()
        except psycopg.Error as exc:
            conn.close()
            raise InputError(f"{shown}: {_pg_message(exc, loc)}") from None
        except InputError:
            conn.close()
            raise
        if not n or dim_row is None:
            conn.close()
            raise InputError(f"{shown}: table {table!r} is empty")
        setting = "hnsw.ef_search" if am == "hnsw" else "ivfflat.probes"
        self._op = sql.SQL(PG_OPERATOR[PG_OPS[opc]])
        self._setting_name = setting
        super().__init__(locator=shown, kind=f"pgvector-{am}", library=f"pgvector ({psycopg.__name__} {psycopg.__version__})",
                         metric=PG_OPS[opc], dim=int(dim_row[0]), n=int(n),
                         settings={setting: PG_DEFAULTS[setting]},
                         notes=[f"index {name} ({opc}); queried with enable_seqscan off so the index is used"])
        self._uri = uri
        self._query = sql.SQL("SELECT {} FROM {} ORDER BY {} {} %s LIMIT %s").format(
            self._id, self._table, self._column, self._op)

    def search(self, queries: np.ndarray, k: int, **settings: Any) -> tuple[np.ndarray, np.ndarray]:
        import psycopg

        use = self.resolve(settings)
        Q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        if Q.ndim != 2 or Q.shape[1] != self.dim:
            raise InputError(f"queries have dimension {Q.shape[-1]} but index {self.locator} has {self.dim}")
        ids: list[list[Any]] = []
        secs = np.empty(Q.shape[0], dtype=np.float64)
        conn = self._conn
        try:
            with conn.transaction():
                conn.execute("SELECT set_config('enable_seqscan', 'off', true)")
                conn.execute("SELECT set_config(%s, %s, true)", (self._setting_name, str(use[self._setting_name])))
                self._check_plan(Q[0], k)
                with conn.cursor() as cur:
                    for i in range(Q.shape[0]):
                        t0 = time.perf_counter()
                        cur.execute(self._query, (Q[i], k), prepare=True)
                        got = [r[0] for r in cur.fetchall()]
                        secs[i] = time.perf_counter() - t0
                        ids.append(got)
        except psycopg.Error as exc:
            raise InputError(f"{self.locator}: {_pg_message(exc, self._loc)}") from None
        return _id_matrix(ids, k), secs

    def _check_plan(self, q: np.ndarray, k: int) -> None:
        plan = "\n".join(r[0] for r in self._conn.execute(self._sql.SQL("EXPLAIN ") + self._query, (q, k)))
        if "Index Scan" not in plan:
            raise InputError(f"{self.locator}: PostgreSQL does not use the vector index for this search, so it "
                             "would measure exact search")

    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        import psycopg

        sql = self._sql
        ids: list[Any] = []
        X = np.empty((self.n, self.dim), dtype=np.float32)
        i = 0
        try:
            with self._conn.transaction():
                with self._conn.cursor(name="embedcheck_vectors") as cur:
                    cur.execute(sql.SQL("SELECT {}, {} FROM {} ORDER BY {}").format(
                        self._id, self._column, self._table, self._id))
                    while True:
                        rows = cur.fetchmany(4096)
                        if not rows:
                            break
                        for rid, v in rows:
                            if v is None:
                                raise InputError(f"{self.locator}: row {rid!r} has a NULL vector")
                            if i >= self.n:
                                raise InputError(f"{self.locator}: the table changed while it was read")
                            ids.append(rid)
                            X[i] = v.to_numpy() if hasattr(v, "to_numpy") else np.asarray(v, dtype=np.float32)
                            i += 1
        except psycopg.Error as exc:
            raise InputError(f"{self.locator}: {_pg_message(exc, self._loc)}") from None
        if i != self.n:
            raise InputError(f"{self.locator}: the table changed while it was read")
        arr = np.asarray(ids)
        if arr.dtype.kind not in "iu":
            arr = np.array(ids, dtype=object)
        return arr, X

    def close(self) -> None:
        self._conn.close()


def _pg_message(exc: Exception, loc: Locator) -> str:
    return loc.redact(" ".join(str(exc).split()))[:300]


# ---- LanceDB -------------------------------------------------------------------------------------

LANCE_KINDS = {"IVF_PQ": "lancedb-ivf_pq", "IVF_HNSW_SQ": "lancedb-ivf_hnsw_sq", "IVF_HNSW_PQ": "lancedb-ivf_hnsw_pq",
               "IVF_FLAT": "lancedb-ivf_flat", "IVF_SQ": "lancedb-ivf_sq"}
LANCE_METRICS = {"cosine": "cosine", "dot": "ip", "l2": "l2"}


class LanceIndex(AnnIndex):
    def __init__(self, locator: Any) -> None:
        lancedb = _need("lancedb")
        loc = parse_locator(locator)
        assert loc is not None and loc.kind == "lancedb" and loc.table
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
        from .integrity import lance_problem

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


# ---- opening -------------------------------------------------------------------------------------

def is_index_locator(x: Any) -> bool:
    """Whether ``x`` names an index (a postgres or lancedb locator, a FAISS or hnswlib file)."""
    s = str(x)
    return s.lower().startswith(SCHEMES) or Path(s.partition("?")[0]).suffix.lower() in (
        ".faiss", ".index", ".bin", ".hnsw", ".hnswlib")


def open_index(locator: Any, *, space: Optional[str] = None, dim: Optional[int] = None) -> AnnIndex:
    """Open an index from its locator (module docstring). ``space`` / ``dim``: an hnswlib index's
    space and dimension (else its ``.json`` sidecar)."""
    if isinstance(locator, AnnIndex):
        return locator
    s = str(locator)
    loc = parse_locator(s) if s.lower().startswith(SCHEMES) else None  # the one parser of stores and indexes
    if loc is not None and loc.kind == "postgres":
        return PgvectorIndex(loc)
    if loc is not None and loc.kind == "lancedb":
        return LanceIndex(loc)
    path = Path(s)
    if not path.exists():
        raise InputError(f"no index file {path}")
    if path.is_dir():
        raise InputError(f"{path} is a folder; an index is a .faiss/.index file, an hnswlib file, "
                         "postgresql://...?table=T&column=C or lancedb://DBDIR/TABLE")
    if path.suffix in (".faiss", ".index") and space is None:
        return FaissIndex(path)
    return HnswlibIndex(path, space, dim)


__all__ = ["AnnIndex", "FaissIndex", "HnswlibIndex", "LanceIndex", "PgvectorIndex", "index_vectors",
           "is_index_locator", "mask", "norm_key", "open_index", "rows_of", "split_pg"]
