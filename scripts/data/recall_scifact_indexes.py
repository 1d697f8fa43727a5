#!/usr/bin/env python3
"""Build the two indexes of docs/recall.md from an embedded corpus (``embedcheck embed`` output).

* ``OUT/scifact_hnsw32.faiss``: a FAISS ``IndexHNSWFlat`` (M = 32, faiss's default efConstruction 40,
  inner product over the unit rows: cosine), one row per corpus row, in corpus order;
* with ``--pg URI``: a pgvector table ``scifact(id bigint, embedding vector(D))`` (id = the corpus
  row) with an HNSW index at pgvector's defaults (m = 16, ef_construction = 64, vector_cosine_ops).

    python -m scripts.data.recall_scifact_indexes corpus.npy -o out/recall [--pg postgresql://...]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--pg", help="libpq URI of a database with the vector extension")
    args = ap.parse_args()
    X = np.ascontiguousarray(np.load(args.corpus, allow_pickle=False), dtype=np.float32)
    args.out.mkdir(parents=True, exist_ok=True)
    import faiss

    ix = faiss.IndexHNSWFlat(X.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    ix.add(X)
    faiss.write_index(ix, str(args.out / "scifact_hnsw32.faiss"))
    print(f"wrote {args.out / 'scifact_hnsw32.faiss'}: {ix.ntotal} x {ix.d}, M = 32, "
          f"efConstruction {ix.hnsw.efConstruction}")
    if args.pg:
        import psycopg
        from pgvector.psycopg import register_vector
        from psycopg import sql

        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            conn.execute("DROP TABLE IF EXISTS scifact")
            conn.execute(sql.SQL("CREATE TABLE scifact (id bigint PRIMARY KEY, embedding vector({}))").format(
                sql.Literal(X.shape[1])))
            with conn.cursor().copy("COPY scifact (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as cp:
                cp.set_types(["bigint", "vector"])
                for i, v in enumerate(X):
                    cp.write_row([i, v])
            conn.execute("CREATE INDEX ON scifact USING hnsw (embedding vector_cosine_ops)")
            conn.execute("ANALYZE scifact")
        print(f"wrote table scifact: {len(X)} rows, HNSW (vector_cosine_ops, pgvector defaults)")


if __name__ == "__main__":
    main()
