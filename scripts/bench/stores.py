"""Stores: embedcheck's batched, checked read of a vector column against the store's own bulk read
of the same column, same data, same run (parquet: pyarrow reading the column; Lance: ``to_batches``;
PostgreSQL + pgvector: ``COPY ... TO STDOUT (FORMAT BINARY)`` without parsing), as ratios; and the
peak resident memory of ``embedcheck aag`` over a 1,000,000 × 384 parquet file."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from scripts.bench.sizes import pick

RSS_SCRIPT = """
import resource, subprocess, sys
p = subprocess.run([sys.executable, "-m", "embedcheck", *sys.argv[1:]], capture_output=True, text=True)
print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.stdout[-4000:].replace(chr(10), " "),
      p.stderr[-300:].replace(chr(10), " "), sep="\\t")
"""


def _alternating(*fns, repeats: int = 7, clock=time.process_time) -> list[float]:
    """Medians of ``repeats`` alternations of ``fns`` (one of each, in turn), in CPU seconds of
    this process (all its threads; a shared machine disturbs CPU time far less than wall time),
    or with ``clock`` another clock. One untimed call of each first: the first read of a process
    pays its imports and its new memory."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, times):
            t0 = clock()
            fn()
            out.append(clock() - t0)
    return [float(np.median(t)) for t in times]


def _ours(locator: str) -> None:
    """The read every command makes: the store opened afresh, then its rows in the task ranges of
    the drivers (131,072 rows), each read in batches and checked (no NULL, one dimension, finite)."""
    from embedcheck.io.source import open_source, ranges, read_range
    from embedcheck.io.stores import open_store

    open_store(locator, fresh=True)
    src = open_source(locator)
    for a, b in ranges(src.n, 131_072):
        read_range(src.parts, a, b)


def _table(X: np.ndarray):
    import pyarrow as pa

    return pa.table({"id": pa.array(np.arange(len(X)), pa.int64()),
                     "emb": pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), X.shape[1])})


def _row(name: str, times: list[float], mb: float, what: str, clock: str = "CPU") -> dict:
    ours, base = times
    ratio = base / ours
    return {"name": name, "measure": f"{mb / ours:.0f} MB per {clock} s vs {mb / base:.0f}", "baseline": base,
            "ratio": ratio, "goal": ">= 0.8x", "met": bool(ratio >= 0.8),
            "notes": f"{ratio:.2f}x {what} ({clock} {ours:.3f} s vs {base:.3f} s, medians of 7 alternations)"}


def parquet_and_lance(n: int, d: int, tmp: Path) -> list[dict]:
    import lance
    import pyarrow.parquet as pq

    X = np.random.default_rng(0).normal(size=(n, d)).astype(np.float32)
    mb = X.nbytes / 1e6
    t = _table(X)
    pq.write_table(t, tmp / "v.parquet")
    lance.write_dataset(t, str(tmp / "v.lance"))
    del X, t

    def pa_bulk() -> None:
        col = pq.read_table(tmp / "v.parquet", columns=["emb"]).column(0)
        for c in col.chunks:
            c.flatten().to_numpy().reshape(-1, d)

    def lance_bulk() -> None:
        for b in lance.dataset(str(tmp / "v.lance")).to_batches(columns=["emb"]):
            b.column(0).flatten().to_numpy().reshape(-1, d)

    rows = [_row(f"parquet read, {n:,} x {d} float32", _alternating(lambda: _ours(str(tmp / "v.parquet")), pa_bulk),
                 mb, "pyarrow's read_table of the column (to numpy)"),
            _row(f"lance read, {n:,} x {d} float32", _alternating(lambda: _ours(str(tmp / "v.lance")), lance_bulk),
                 mb, "Lance to_batches of the column (to numpy)")]
    return rows


def pgvector(n: int, d: int, tmp: Path) -> list[dict]:
    import pgserver
    import psycopg

    from embedcheck.io.stores import write_store

    srv = pgserver.get_server(tempfile.mkdtemp(prefix="embedcheck-bench-pg-"), cleanup_mode="stop")
    try:
        uri = srv.get_uri()
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("DROP TABLE IF EXISTS bench")
        X = np.random.default_rng(0).normal(size=(n, d)).astype(np.float32)
        mb = X.nbytes / 1e6
        loc = f"{uri}&table=bench&column=emb"
        write_store(loc, (X[s:s + 8192] for s in range(0, n, 8192)), dim=d, columns={"id": list(range(n))})
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("ALTER TABLE bench ADD PRIMARY KEY (id)")
            conn.execute("VACUUM ANALYZE bench")
        del X

        def copy_bulk(index_plan: bool) -> None:
            with psycopg.connect(uri) as conn, conn.cursor() as cur:
                if index_plan:  # the plan embedcheck's reads get: rows in id order from the primary key's index
                    cur.execute("SET enable_sort = off")
                with cur.copy("COPY (SELECT emb FROM bench ORDER BY id) TO STDOUT (FORMAT BINARY)") as cp:
                    for _ in cp:
                        pass

        # wall time: the server does most of the work, which this process's CPU time does not see
        wall = time.perf_counter
        ours, default_plan, index_plan = _alternating(lambda: _ours(loc), lambda: copy_bulk(False), lambda: copy_bulk(True),
                                                      clock=wall)
        return [_row(f"pgvector read, {n:,} x {d} vector", [ours, default_plan], mb,
                     "psycopg COPY BINARY of the ordered column, bytes only, the server's own plan", "wall"),
                _row(f"pgvector read, {n:,} x {d} vector, index plan", [ours, index_plan], mb,
                     "the same COPY with enable_sort off (an index scan on the primary key, embedcheck's plan)", "wall")]
    finally:
        srv.cleanup()


def aag_rss(n: int, d: int, tmp: Path) -> list[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)
    path = tmp / "big.parquet"
    labels = rng.integers(0, 4, n)
    centres = rng.normal(size=(4, d)).astype(np.float32)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("label", pa.int64()),
                        pa.field("emb", pa.list_(pa.float32(), d))])
    with pq.ParquetWriter(str(path), schema) as w:  # pyarrow's default row groups (up to 1Mi rows)
        for s in range(0, n, 65536):
            e = min(n, s + 65536)
            X = (rng.normal(size=(e - s, d)).astype(np.float32) + 0.5 * centres[labels[s:e]])
            w.write_table(pa.table({"id": pa.array(np.arange(s, e)), "label": pa.array(labels[s:e]),
                                    "emb": pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), d)}, schema=schema))
    gb = path.stat().st_size / 1e9
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", RSS_SCRIPT, "aag", str(path), str(path), "--no-map", "--json", "-q"],
                       capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    code, rss_kb, out, err = (p.stdout.rstrip("\n").split("\t") + ["", "", "", ""])[:4]
    rss_mb = int(rss_kb) / 1024 if rss_kb.strip().isdigit() else float("nan")
    try:
        aag = json.loads(out)["aag"]
    except ValueError:
        aag = None
    return [{"name": f"aag over a {n:,} x {d} parquet file ({gb:.2f} GB)", "measure": f"peak RSS {rss_mb:.0f} MB",
             "baseline": 1024.0, "ratio": 1024.0 / rss_mb if rss_mb == rss_mb else None, "goal": "<= 1024 MB",
             "met": bool(code == "0" and rss_mb <= 1024), "notes": f"exit {code}, {seconds:.0f} s wall, AAG {aag} {err}"}]


def run(quick: bool = False, parts: tuple[str, ...] = ("files", "pg", "rss")) -> list[dict]:
    n, n_pg, n_big = pick(quick, full=(200_000, 200_000, 1_000_000), quick=(50_000, 10_000, 100_000), tiny=(2000, 500, 4000))
    d = 384
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        rows = parquet_and_lance(n, d, tmp) if "files" in parts else []
        rows += pgvector(n_pg, d, tmp) if "pg" in parts else []
        rows += aag_rss(n_big, d, tmp) if "rss" in parts else []
    return rows
