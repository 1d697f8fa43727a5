"""PostgreSQL with pgvector: the store, its connection and the binary COPY writer (psycopg 3)."""

from __future__ import annotations

import json
import re
import time
from typing import Any, Iterator, Optional

import numpy as np

from ...errors import InputError
from .. import locators as _locators
from ..locators import Locator, mask_secrets, parse_pg
from .base import META_KEY, Store, _default_id, _need, codes_record, range_buffer, timeout_s
from .index import AnnIndex, _id_matrix

_PG_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_PG_TYPES: dict[str, tuple[str, np.dtype]] = {"vector": ("vector", np.dtype(np.float32)), "halfvec": ("halfvec", np.dtype(np.float32)),
             "real[]": ("float4[]", np.dtype(np.float32)), "double precision[]": ("float8[]", np.dtype(np.float64)),
             # the codes of a compressed store (compress -o): int8 / uint8 codes, packed bits
             "smallint[]": ("int2[]", np.dtype(np.int16)), "bit": ("bit", np.dtype(np.uint8))}
#: big-endian element code and size of each array type
_PG_ARRAY = {"float4[]": (">f4", 4), "float8[]": (">f8", 8), "int2[]": (">i2", 2)}


def pg_error(exc: Exception, shown: str, secret: Any = "") -> InputError:
    """One line for a database error: the first line of its message, password masked."""
    first = " ".join(str(exc).strip().splitlines()[0].split()) if str(exc).strip() else type(exc).__name__
    for s in sorted([secret] if isinstance(secret, str) else list(secret), key=len, reverse=True):
        if s:  # the password as written and decoded (the locator's secrets)
            first = first.replace(s, "***")
    first = mask_secrets(first)
    name = type(exc).__name__
    if name == "QueryCanceled" or "statement timeout" in first:
        return InputError(f"{shown}: the statement timeout ({timeout_s():g} s) fired: {first} "
                          "(EMBEDCHECK_STORE_TIMEOUT=SECONDS sets it)")
    if "timeout expired" in first:
        return InputError(f"{shown}: the connect timeout ({timeout_s():g} s) fired: {first} "
                          "(EMBEDCHECK_STORE_TIMEOUT=SECONDS sets it)")
    return InputError(f"{shown}: {first}")


def pg_connect(conninfo: str, shown: str, *, read_only: bool = True, secret: Any = ()) -> Any:
    """A psycopg connection with the connect timeout, the statement timeout and (for reads) a
    read-only transaction; every failure is one InputError naming ``shown``."""
    psycopg = _need("psycopg", shown)
    t = timeout_s()
    try:
        conn = psycopg.connect(conninfo, connect_timeout=max(1, int(round(t))), autocommit=False)
    except Exception as exc:  # noqa: BLE001 - OperationalError and friends
        raise pg_error(exc, shown, secret) from None
    try:
        conn.read_only = read_only
        # reads: every statement is bounded; a write streams for as long as its rows come, and
        # waits at most the timeout for a lock
        conn.execute("SELECT set_config(%s, %s, false)",
                     ["statement_timeout" if read_only else "lock_timeout", f"{int(t * 1000)}"])
        if read_only:  # every statement its own read-only transaction: no lock is held between reads
            conn.execute("SELECT set_config('default_transaction_read_only', 'on', false)")
            # rows in id order come from the id column's index when there is one: a range read
            # (keyset, LIMIT) then streams its rows instead of sorting the whole table each time
            conn.execute("SELECT set_config('enable_sort', 'off', false)")
        conn.commit()
        conn.autocommit = read_only
    except Exception as exc:  # noqa: BLE001
        conn.close()
        raise pg_error(exc, shown, secret) from None
    return conn


class PgStore(Store):
    """A pgvector column (``vector``, ``halfvec``, ``real[]``, ``double precision[]``) of a table,
    rows in the order of the id column (or the table's physical order without one); read with
    ``COPY (SELECT ...) TO STDOUT (FORMAT BINARY)`` in a read-only transaction, one snapshot."""

    kind = "postgres"

    def __init__(self, loc: Locator):
        super().__init__(loc)
        _need("psycopg", self.name)
        from psycopg import sql

        self._sql = sql
        self._secret = loc.secrets
        self.conn = pg_connect(loc.conninfo, self.name, secret=loc.secrets)
        try:
            self._open(loc)
        except InputError:
            self.close()
            raise
        except Exception as exc:  # noqa: BLE001
            self.close()
            raise pg_error(exc, self.name, self._secret) from None

    def _q(self, query: Any, params: Any = None) -> list[tuple]:
        return self.conn.execute(query, params).fetchall()

    def _open(self, loc: Locator) -> None:
        sql = self._sql
        assert loc.table is not None
        schema, _, table = loc.table.rpartition(".")
        self.table = sql.Identifier(schema, table) if schema else sql.Identifier(table)
        quoted = self.table.as_string(self.conn)
        oid = self._q("SELECT to_regclass(%s)::oid", [quoted])[0][0]
        if oid is None:
            raise InputError(f"{self.name}: no table {loc.table!r}")
        cols = self._q("SELECT attname, format_type(atttypid, atttypmod), attnum FROM pg_attribute "
                       "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum", [oid])
        types = {c: t for c, t, _ in cols}
        attnums = {c: int(a) for c, _, a in cols}
        names = [c for c, _, _ in cols]
        col = loc.column or ""
        if col not in types:
            raise InputError(f"{self.name}: table {loc.table!r} has no column {col!r}; its columns are: {', '.join(names)}")
        base = re.sub(r"\(\d+\)$", "", types[col])
        if base not in _PG_TYPES:
            raise InputError(f"{self.name}: column {col!r} is {types[col]}, not a vector column "
                             "(pgvector vector or halfvec, real[] or double precision[])")
        self.pg_type, self.dtype = _PG_TYPES[base]
        self.column_name = col
        self.col = sql.Identifier(col)
        self.id_column = _default_id(names, loc, self.name)
        self.order = sql.Identifier(self.id_column) if self.id_column else sql.SQL("ctid")
        self._ids: Optional[list[Any]] = None
        self._id_type = types.get(self.id_column or "", "")
        self._bounds: dict[int, Any] = {}  # row -> its id: where a keyset read starts
        if self.id_column:  # a range is read by keyset on the ids (an index scan when the column has one)
            ident = sql.Identifier(self.id_column)
            n, valid = self._q(sql.SQL("SELECT count(*), count({}) FROM {}").format(ident, self.table))[0]
            if n != valid:
                raise InputError(f"{self.name}: the id column {self.id_column!r} holds NULL")
            self.n = int(n)
            unique = self._q("SELECT 1 FROM pg_index WHERE indrelid = %s AND indisunique AND indnkeyatts = 1 "
                             "AND indkey[0] = %s AND indpred IS NULL AND indexprs IS NULL LIMIT 1",
                             [oid, attnums[self.id_column]])
            if not unique:  # no unique index vouches for the ids: read them all and check (kept for reads)
                self._load_ids()
        else:
            self.n = int(self._q(sql.SQL("SELECT count(*) FROM {}").format(self.table))[0][0])
        m = re.search(r"\((\d+)\)$", types[col])
        if m:
            self.dim = int(m.group(1))
        elif self.n:
            dims = "vector_dims({})" if self.pg_type in ("vector", "halfvec") else "cardinality({})"
            first = self._q(sql.SQL("SELECT " + dims + " FROM {} ORDER BY {} LIMIT 1").format(
                self.col, self.table, self.order))[0][0]
            if first is None:
                raise InputError(f"{self.name}: row 0 of column {col!r} is NULL")
            self.dim = int(first)
        self._names = names
        self._bits = 0
        if self.pg_type == "bit":  # bit(n): n bits stored, 8 to a byte
            self._bits, self.dim = self.dim, (self.dim + 7) // 8
        meta = self.metadata()
        if self.pg_type in ("int2[]", "bit") and codes_record(meta) is None:
            raise InputError(f"{self.name}: column {col!r} is {types[col]}, not a vector column "
                             "(pgvector vector or halfvec, real[] or double precision[]; smallint[] and bit(n) "
                             "only with the compression record embedcheck compress writes)")
        self._set_codes(meta)
        if self._bits and self.codes is not None and self._bits != self.dim:
            raise InputError(f"{self.name}: column {col!r} is {types[col]} but its compression record says "
                             f"{self.dim} dimensions")
        self._check_opened()

    def _int_ids(self, typ: str) -> Optional[list[int]]:
        """An integer id column in id order as one bytea of big-endian int8 (``int8send``), decoded
        by numpy: a million ids in one message, not a million rows; None for another type or a
        NULL id (the row-by-row read then names it)."""
        if typ not in ("smallint", "integer", "bigint"):
            return None
        sql = self._sql
        ident = sql.Identifier(self.id_column)
        with self.conn.cursor(binary=True) as cur:
            n, valid, blob = cur.execute(sql.SQL("SELECT count(*), count({}), string_agg(int8send({}::bigint), ''::bytea "
                                                 "ORDER BY {}) FROM {}").format(ident, ident, ident, self.table)).fetchone()
        if n != valid:
            return None
        return np.frombuffer(blob or b"", dtype=">i8").astype(np.int64).tolist()

    def _load_ids(self) -> list[Any]:
        """Every id in row order (read once, when asked for or when no unique index vouches for
        them); NULL or duplicate ids are refused (keyset reads need unique ids)."""
        if self._ids is None:
            sql = self._sql
            with self.lock:
                ids = self._int_ids(self._id_type)
                if ids is None:
                    with self.conn.cursor(binary=True) as cur:
                        ids = [r[0] for r in cur.execute(sql.SQL("SELECT {} FROM {} ORDER BY {}").format(
                            sql.Identifier(self.id_column), self.table, self.order)).fetchall()]
            if any(v is None for v in ids):
                raise InputError(f"{self.name}: the id column {self.id_column!r} holds NULL")
            if len(set(ids)) != len(ids):
                raise InputError(f"{self.name}: the id column {self.id_column!r} holds duplicates; "
                                 "name a unique column with &id=NAME")
            if len(ids) != self.n:
                raise InputError(f"{self.name}: read {len(ids)} ids, expected {self.n} (did the table change?)")
            self._ids = ids
        return self._ids

    def _id_at(self, row: int) -> Any:
        """The id of row ``row``: from the ids when read, else one index-only scan to it."""
        if self._ids is not None:
            return self._ids[row]
        if row not in self._bounds:
            sql = self._sql
            with self.conn.cursor(binary=True) as cur:
                got = cur.execute(sql.SQL("SELECT {} FROM {} ORDER BY {} OFFSET {} LIMIT 1").format(
                    sql.Identifier(self.id_column), self.table, self.order, sql.Literal(row))).fetchone()
            if got is None:
                raise InputError(f"{self.name}: no row {row} (did the table change?)")
            if len(self._bounds) > 1024:
                self._bounds.clear()
            self._bounds[row] = got[0]
        return self._bounds[row]

    def _all_ids(self) -> Optional[list[Any]]:
        return list(self._load_ids()) if self.id_column else None

    def check_ids(self) -> None:
        """Nothing to read: a unique index vouches for the ids, or they were read (and repeats
        refused: keyset reads need unique ids) when the store was opened."""

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001  # pragma: no cover
            pass

    def _copy(self, query: Any) -> bytes:
        blocks: list[Any] = []
        try:
            with self.conn.cursor() as cur:
                with cur.copy(self._sql.SQL("COPY ({}) TO STDOUT (FORMAT BINARY)").format(query)) as copy:
                    blocks.extend(copy)
        except Exception as exc:  # noqa: BLE001
            self.conn.rollback()
            raise pg_error(exc, self.name, self._secret) from None
        return b"".join(blocks)

    def _read(self, start: int, stop: int) -> np.ndarray:
        sql = self._sql
        m = stop - start
        if self.id_column and start > 0:  # keyset: the rows after the id of row start-1 (an index scan)
            q = sql.SQL("SELECT {} FROM {} WHERE {} > {} ORDER BY {} LIMIT {}").format(
                self.col, self.table, self.order, sql.Literal(self._id_at(start - 1)), self.order, sql.Literal(m))
        elif start == 0:
            q = sql.SQL("SELECT {} FROM {} ORDER BY {} LIMIT {}").format(self.col, self.table, self.order, sql.Literal(m))
        else:
            q = sql.SQL("SELECT {} FROM {} ORDER BY {} OFFSET {} LIMIT {}").format(
                self.col, self.table, self.order, sql.Literal(start), sql.Literal(m))
        X = self._stream(q, m)
        # a row without row 0's layout (NULL, another dimension) or a row count that differs: the
        # whole answer parsed again row by row, so that the error names the row
        return X if X is not None else self._parse(self._copy(q), m, start)

    def _stream(self, query: Any, m: int) -> Optional[np.ndarray]:
        """The ``m`` rows of ``COPY (query) TO STDOUT (FORMAT BINARY)`` decoded while they arrive:
        each row message goes into a small scratch buffer (reused: no new memory per row) and every
        few thousand rows are decoded at once into the result, while the server sends the next;
        None when a row does not have the layout of a checked row (a NULL, another dimension) or
        the count differs. libpq's own ``PQgetCopyData`` (psycopg's ``pgconn``) hands out the rows."""
        import select

        from psycopg import pq

        d = self.cols
        vec, _ = self._layout(d)
        dt = np.dtype([("nf", ">i2"), ("len", ">i4")] + vec)
        rs = dt.itemsize
        k = max(1, min(m, (4 << 20) // rs))  # rows per decode step: a scratch of about 4 MB
        scratch = bytearray(k * rs)
        mv = memoryview(scratch)
        out = range_buffer((m, d), self.raw_dtype)
        done, fill, ok, first = 0, 0, True, True
        wait = timeout_s() + 5.0

        def decode(rows: int) -> bool:
            a = np.frombuffer(scratch, dtype=dt, count=rows)
            if not self._fast_ok(a, dt, d):
                return False
            out[done:done + rows] = self._values(a)
            return True

        try:
            with self.conn.cursor() as cur:
                with cur.copy(self._sql.SQL("COPY ({}) TO STDOUT (FORMAT BINARY)").format(query)) as cp:
                    pg = self.conn.pgconn
                    get = pg.get_copy_data
                    while True:
                        nb, data = get(1)
                        if nb == 0:  # nothing yet: wait for the socket, then take in what came
                            if not select.select([pg.socket], [], [], wait)[0]:
                                raise InputError(f"{self.name}: no answer from the server in {wait:g} s")
                            pg.consume_input()
                            continue
                        if nb < 0:  # the end without the trailer: the server's error is the result
                            while (res := pg.get_result()) is not None:
                                if res.status != pq.ExecStatus.COMMAND_OK:
                                    msg = (res.error_message or b"").decode("utf-8", "replace")
                                    raise InputError(pg_error(RuntimeError(msg), self.name, self._secret).args[0])
                            return None
                        if first:
                            first = False
                            if bytes(data[:11]) != _PG_SIGNATURE:
                                ok = False
                            else:
                                skip = 19 + int.from_bytes(data[15:19], "big")
                                data, nb = data[skip:], nb - skip
                                if nb == 0:
                                    continue
                        if nb == 2 and bytes(data) == b"\xff\xff":  # the trailer; psycopg reads the end
                            cp.read()
                            break
                        if not ok:
                            continue
                        if nb != rs or done + fill // rs >= m:
                            ok = False
                            continue
                        mv[fill:fill + rs] = data
                        fill += rs
                        if fill == len(scratch):
                            ok = decode(k)
                            done += k
                            fill = 0
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001
            self.conn.rollback()
            raise pg_error(exc, self.name, self._secret) from None
        if ok and fill:
            ok = decode(fill // rs)
            done += fill // rs
        return out if ok and done == m else None

    def _parse(self, data: bytes, m: int, start: int) -> np.ndarray:
        """Rows of COPY BINARY output: one vectorised view when every row has the layout of
        row 0 (no NULL, one dimension), else row by row to name the bad row."""
        if not data.startswith(_PG_SIGNATURE):
            raise InputError(f"{self.name}: unexpected COPY output")
        ext = int.from_bytes(data[15:19], "big")
        body = memoryview(data)[19 + ext:len(data) - 2]
        d = self.cols
        vec, el = self._layout(d)
        dt = np.dtype([("nf", ">i2"), ("len", ">i4")] + vec)
        if len(body) == m * dt.itemsize:
            a = np.frombuffer(body, dtype=dt, count=m)
            if self._fast_ok(a, dt, d):
                return self._values(a).astype(self.raw_dtype).reshape(m, d)
        return self._slow(body, m, start, el)

    def _values(self, a: np.ndarray) -> np.ndarray:
        return a["v"] if self.pg_type in ("vector", "halfvec", "bit") else a["v"]["x"]

    def _layout(self, d: int) -> tuple[list[tuple], tuple[str, int]]:
        if self.pg_type == "vector":
            return [("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (d,))], (">f4", 4)
        if self.pg_type == "halfvec":
            return [("dim", ">i2"), ("unused", ">i2"), ("v", ">f2", (d,))], (">f2", 2)
        if self.pg_type == "bit":
            return [("bits", ">i4"), ("v", "u1", (d,))], ("u1", 1)
        code, size = _PG_ARRAY[self.pg_type]
        return ([("ndim", ">i4"), ("hasnull", ">i4"), ("oid", ">i4"), ("size", ">i4"), ("lb", ">i4"),
                 ("v", [("l", ">i4"), ("x", code)], (d,))], (code, size))

    def _fast_ok(self, a: np.ndarray, dt: np.dtype, d: int) -> bool:
        if not (a["nf"] == 1).all() or not (a["len"] == dt.itemsize - 6).all():
            return False
        if self.pg_type in ("vector", "halfvec"):
            return bool((a["dim"] == d).all())
        if self.pg_type == "bit":
            return bool((a["bits"] == self._bits).all())
        return bool((a["ndim"] == 1).all() and (a["hasnull"] == 0).all() and (a["size"] == d).all()
                    and (a["v"]["l"] == np.dtype(self._layout(d)[1][0]).itemsize).all())

    def _slow(self, body: memoryview, m: int, start: int, el: tuple[str, int]) -> np.ndarray:
        import struct

        X = np.empty((m, self.cols), dtype=self.raw_dtype)
        pos, i = 0, 0
        code, _ = el
        while pos < len(body) and i < m:
            pos += 2  # the field count: one column is selected
            (ln,) = struct.unpack_from(">i", body, pos)
            pos += 4
            row = start + i
            if ln < 0:
                raise InputError(f"{self.name}: row {row} of column {self.column_name!r} is NULL")
            v = body[pos:pos + ln]
            pos += ln
            vals = None
            if self.pg_type in ("vector", "halfvec"):
                (dim,) = struct.unpack_from(">h", v, 0)
                if dim == self.cols:
                    vals = np.frombuffer(v, dtype=code, count=dim, offset=4)
            elif self.pg_type == "bit":
                (dim,) = struct.unpack_from(">i", v, 0)
                if dim == self._bits:
                    vals = np.frombuffer(v, dtype=code, count=self.cols, offset=4)
            else:
                ndim, hasnull = struct.unpack_from(">ii", v, 0)
                if hasnull:
                    raise InputError(f"{self.name}: row {row} of column {self.column_name!r} holds a NULL element")
                dim = struct.unpack_from(">i", v, 12)[0] if ndim == 1 else 0
                if ndim > 1:
                    raise InputError(f"{self.name}: row {row} of column {self.column_name!r} is a {ndim}-D array")
                if dim == self.cols:
                    vals = np.frombuffer(v, dtype=[("l", ">i4"), ("x", code)], count=dim, offset=20)["x"]
            if vals is None:
                want = self._bits or self.cols
                raise InputError(f"{self.name}: row {row} of column {self.column_name!r} has dimension {dim}, "
                                 f"row 0 has {want}; every vector must have the same dimension")
            X[i] = vals
            i += 1
        if i != m:
            raise InputError(f"{self.name}: read {i} rows at row {start}; expected {m} (did the table change?)")
        return X

    def columns(self) -> list[str]:
        return list(self._names)

    def column(self, name: str) -> list[Any]:
        sql = self._sql
        if name not in self._names:
            raise InputError(f"{self.name}: table {self.loc.table!r} has no column {name!r}; its columns are: "
                             f"{', '.join(self._names)}")
        with self.lock:
            try:
                rows = self._q(sql.SQL("SELECT {} FROM {} ORDER BY {}").format(sql.Identifier(name), self.table, self.order))
            except Exception as exc:  # noqa: BLE001
                self.conn.rollback()
                raise pg_error(exc, self.name, self._secret) from None
        return [r[0] for r in rows]

    def metadata(self) -> dict[str, Any]:
        try:
            rows = self._q("SELECT col_description(to_regclass(%s), attnum) FROM pg_attribute "
                           "WHERE attrelid = to_regclass(%s) AND attname = %s",
                           [self.table.as_string(self.conn)] * 2 + [self.column_name])
        except Exception:  # noqa: BLE001
            self.conn.rollback()
            return {}
        text = rows[0][0] if rows else None
        if not text:
            return {}
        try:
            rec = json.loads(text)
        except ValueError:
            return {}
        if isinstance(rec, dict) and isinstance(rec.get(META_KEY), dict):
            return dict(rec[META_KEY])
        return rec if isinstance(rec, dict) else {}


def _pg_type(values: list[Any]) -> tuple[str, Any]:
    vals = [v for v in values if v is not None]
    if vals and all(isinstance(v, bool) for v in vals):
        return "boolean", bool
    if vals and all(isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63) for v in vals):
        return "bigint", int
    if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return "double precision", float
    return "text", lambda v: v if isinstance(v, str) else json.dumps(v)


def _pg_field(value: Any, kind: str) -> bytes:
    """One field of a binary COPY row: its length, then its bytes (-1: NULL)."""
    import struct

    if value is None:
        return b"\xff\xff\xff\xff"
    if kind == "boolean":
        data = b"\x01" if value else b"\x00"
    elif kind == "bigint":
        data = struct.pack(">q", int(value))
    elif kind == "double precision":
        data = struct.pack(">d", float(value))
    else:
        data = (value if isinstance(value, str) else json.dumps(value)).encode("utf-8")
    return len(data).to_bytes(4, "big") + data


def _pg_vectors(X: np.ndarray, dim: int, codes: str, halfvec: bool = False) -> tuple[str, np.ndarray]:
    """The SQL type of the vector column and each row's binary COPY field (length included) as
    one structured array: ``vector`` (pgvector's binary form), ``halfvec`` (float16 rows, when the
    database's pgvector has it: 0.7 or later), ``smallint[]`` (PostgreSQL's array form, element
    type int2), ``bit(dim)``."""
    m = X.shape[0]
    if codes == "float16" and halfvec:
        dt = np.dtype([("len", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("v", ">f2", (dim,))])
        a = np.zeros(m, dtype=dt)
        a["len"], a["dim"], a["v"] = dt.itemsize - 4, dim, X
        return f"halfvec({int(dim)})", a
    if codes in ("float32", "float16"):
        dt = np.dtype([("len", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (dim,))])
        a = np.zeros(m, dtype=dt)
        a["len"], a["dim"], a["v"] = dt.itemsize - 4, dim, X
        return f"vector({int(dim)})", a
    if codes in ("int8", "uint8"):
        dt = np.dtype([("len", ">i4"), ("ndim", ">i4"), ("hasnull", ">i4"), ("oid", ">i4"), ("size", ">i4"),
                       ("lb", ">i4"), ("v", [("l", ">i4"), ("x", ">i2")], (dim,))])
        a = np.zeros(m, dtype=dt)
        a["len"], a["ndim"], a["oid"], a["size"], a["lb"] = dt.itemsize - 4, 1, 21, dim, 1  # 21: int2
        a["v"]["l"], a["v"]["x"] = 2, X
        return "smallint[]", a
    width = (dim + 7) // 8
    dt = np.dtype([("len", ">i4"), ("bits", ">i4"), ("v", "u1", (width,))])
    a = np.zeros(m, dtype=dt)
    a["len"], a["bits"], a["v"] = dt.itemsize - 4, dim, X
    return f"bit({int(dim)})", a


def _write_pg(loc: Locator, batches: Iterator[np.ndarray], dim: int, cols: dict[str, list[Any]], vec: str,
              record: str, overwrite: bool, codes: str = "float32") -> None:
    _need("psycopg", loc.name)
    from psycopg import sql

    shown = loc.name
    secret = loc.secrets
    assert loc.table is not None
    schema, _, table = loc.table.rpartition(".")
    ident = (lambda name: sql.Identifier(schema, name)) if schema else (lambda name: sql.Identifier(name))
    new = f"{table}__embedcheck_new"
    types = {k: _pg_type(v)[0] for k, v in cols.items()}
    conn = pg_connect(loc.conninfo, shown, read_only=False, secret=secret)
    try:
        with conn.transaction():
            if codes in ("float32", "float16") and conn.execute("SELECT to_regtype('vector')").fetchone()[0] is None:
                raise InputError(f"output {shown}: the database has no pgvector extension (CREATE EXTENSION vector)")
            # float16 rows as halfvec where pgvector has it (0.7+), else as vector (the same values, exact)
            half = codes == "float16" and conn.execute("SELECT to_regtype('halfvec')").fetchone()[0] is not None
            vec_type = _pg_vectors(np.zeros((0, (dim + 7) // 8 if codes == "bits" else dim)), dim, codes, half)[0]
            exists = conn.execute("SELECT to_regclass(%s)", [ident(table).as_string(conn)]).fetchone()[0] is not None
            if exists and not overwrite:
                raise InputError(f"output {shown}: table {loc.table!r} exists; pass --overwrite to replace it")
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident(new)))
            defs = [sql.SQL("{} " + t).format(sql.Identifier(k)) for k, t in types.items()]
            defs.append(sql.SQL("{} " + vec_type).format(sql.Identifier(vec)))
            conn.execute(sql.SQL("CREATE TABLE {} ({})").format(ident(new), sql.SQL(", ").join(defs)))
            names = sql.SQL(", ").join([sql.Identifier(k) for k in cols] + [sql.Identifier(vec)])
            values = list(cols.values())
            kinds = list(types.values())
            nf = (len(cols) + 1).to_bytes(2, "big")
            row = 0
            # binary COPY: the vector fields of a batch encoded at once, the other columns per row
            with conn.cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(ident(new), names)) as cp:
                cp.write(_PG_SIGNATURE + b"\x00\x00\x00\x00\x00\x00\x00\x00")
                for X in batches:
                    X = np.asarray(X)
                    m = X.shape[0]
                    raw = _pg_vectors(X, dim, codes, half)[1]
                    if not values:
                        body = np.zeros(m, dtype=[("nf", ">i2"), ("f", raw.dtype)])
                        body["nf"], body["f"] = len(cols) + 1, raw
                        cp.write(body.tobytes())
                    else:
                        flat, size = raw.tobytes(), raw.dtype.itemsize
                        cp.write(b"".join(
                            nf + b"".join(_pg_field(v[row + i], t) for v, t in zip(values, kinds))
                            + flat[i * size:(i + 1) * size] for i in range(m)))
                    row += m
                cp.write(b"\xff\xff")
            if exists:
                conn.execute(sql.SQL("DROP TABLE {}").format(ident(table)))
            conn.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(ident(new), sql.Identifier(table)))
            conn.execute(sql.SQL("COMMENT ON COLUMN {}.{} IS {}").format(
                ident(table), sql.Identifier(vec), sql.Literal(json.dumps({META_KEY: json.loads(record)}))))
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the transaction is rolled back: the old table stays
        if isinstance(exc, (ValueError, ArithmeticError)) and not type(exc).__module__.startswith("psycopg"):
            raise
        raise pg_error(exc, shown, secret) from None
    finally:
        conn.close()

# ---- the ANN index ------------------------------------------------------------------------------

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
        loc = _locators.parse(locator)
        assert loc is not None and loc.kind == "postgres"
        uri, shown = loc.conninfo, loc.name
        psycopg = _need("psycopg", shown)
        _need("pgvector.psycopg", shown)
        from psycopg import sql

        ours = {k: v for k, v in (("table", loc.table), ("column", loc.column), ("id", loc.id)) if v}
        self._loc = loc
        self._sql = sql
        # the store's one connection policy: connect and statement timeouts (EMBEDCHECK_STORE_TIMEOUT),
        # read-only; the search settings are SET LOCAL inside each search's transaction
        conn = pg_connect(uri, shown, secret=loc.secrets)
        from pgvector.psycopg import register_vector

        self._conn = conn
        try:
            register_vector(conn)
        except psycopg.Error as exc:
            conn.close()
            raise pg_error(exc, f"{shown}: the vector extension is not installed", loc.secrets) from None
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
            raise pg_error(exc, shown, loc.secrets) from None
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
            raise pg_error(exc, self.locator, self._loc.secrets) from None
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
            raise pg_error(exc, self.locator, self._loc.secrets) from None
        if i != self.n:
            raise InputError(f"{self.locator}: the table changed while it was read")
        arr = np.asarray(ids)
        if arr.dtype.kind not in "iu":
            arr = np.array(ids, dtype=object)
        return arr, X

    def close(self) -> None:
        self._conn.close()
