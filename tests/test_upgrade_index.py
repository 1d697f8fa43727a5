"""``upgrade --index``: the ANN index's recall@k on the old queries, the bridged queries and the
migrated documents, each equal to the index's own search (FAISS IVF, pgvector IVFFlat queried here
through their libraries) scored against brute force computed here; ``REINDEX needed`` for a
rotation of clustered vectors (stale IVF centroids), not for an identity map; ``--label-field``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import save_with_ids as _save
from scipy.linalg import orthogonal_procrustes

import embedcheck
from embedcheck.geometry import upgrade as U

DIM, N, NQ, CLUSTERS, K = 32, 1500, 120, 30, 10


def _unit(X: np.ndarray) -> np.ndarray:
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def space():
    """Clustered unit vectors (an IVF's centroids fit them) and a known rotation."""
    rng = np.random.default_rng(3)
    C = rng.normal(size=(CLUSTERS, DIM))
    X = _unit(C[rng.integers(0, CLUSTERS, N)] + 0.35 * rng.normal(size=(N, DIM)))
    Q = _unit(C[rng.integers(0, CLUSTERS, NQ)] + 0.35 * rng.normal(size=(NQ, DIM)))
    R = np.linalg.qr(rng.normal(size=(DIM, DIM)))[0]
    return X, Q, R


def _files(tmp_path: Path, X, Q, Xn, Qn) -> dict[str, str]:
    dids, qids = [f"d{i}" for i in range(len(X))], [f"q{i}" for i in range(len(Q))]
    return {"old": _save(tmp_path / "old.npy", X, dids), "new": _save(tmp_path / "new.npy", Xn, dids),
            "qo": _save(tmp_path / "qo.npy", Q, qids), "qn": _save(tmp_path / "qn.npy", Qn, qids)}


def _maps(f: dict[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """The bridge (new -> old) and migrate (old -> new) rotations, fitted here by scipy on upgrade's
    train split (seed 0, holdout 0.2)."""
    Xo, Xn = U.unit(np.load(f["old"]).astype(np.float64)), U.unit(np.load(f["new"]).astype(np.float64))
    tr, _ = U.split(len(Xo), 0.2, 0)
    return orthogonal_procrustes(Xn[tr], Xo[tr])[0], orthogonal_procrustes(Xo[tr], Xn[tr])[0]


def _brute(Q: np.ndarray, X: np.ndarray, k: int) -> np.ndarray:
    """Exact top k by inner product (unit rows: cosine), float64 over the float32 vectors."""
    S = Q.astype(np.float32).astype(np.float64) @ X.astype(np.float32).astype(np.float64).T
    return np.argsort(-S, axis=1, kind="stable")[:, :k]


def _recall(returned: np.ndarray, exact: np.ndarray, k: int) -> float:
    return float(np.mean([len(set(a.tolist()) & set(b.tolist())) / k for a, b in zip(returned, exact)]))


def _upgrade(f: dict[str, str], **kw):
    return embedcheck.upgrade(f["old"], f["new"], queries_old=f["qo"], queries_new=f["qn"], method="procrustes",
                              resamples=100, **kw).to_dict()


# ---- FAISS IVF -------------------------------------------------------------------------------------

def _faiss_ivf(path: Path, X: np.ndarray, nprobe: int = 2) -> str:
    faiss = pytest.importorskip("faiss")
    ix = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, CLUSTERS, faiss.METRIC_INNER_PRODUCT)
    X32 = np.ascontiguousarray(X, dtype=np.float32)
    ix.train(X32)
    ix.add(X32)
    ix.nprobe = nprobe
    faiss.write_index(ix, str(path))
    return str(path)


def _faiss_search(path: str, Q: np.ndarray, replace: np.ndarray | None = None) -> np.ndarray:
    """FAISS's own answers; ``replace``: the stored vectors replaced first (lists emptied, the trained
    centroids kept, the new vectors added)."""
    import faiss

    ix = faiss.read_index(path)
    if replace is not None:
        ix.reset()
        ix.add(np.ascontiguousarray(replace, dtype=np.float32))
    _, got = ix.search(np.ascontiguousarray(Q, dtype=np.float32), K)
    return got


@pytest.mark.parametrize("case", ["rotation", "identity"])
def test_faiss_ivf_recall_of_each_arm_equals_faiss_against_brute_force(tmp_path, space, case):
    X, Q, R = space
    noise = 0.1 * np.random.default_rng(9).normal(size=Q.shape)  # the new model's queries: not the old ones rotated
    Xn, Qn = (X @ R, _unit(Q @ R + noise)) if case == "rotation" else (X, Q)
    f = _files(tmp_path, X, Q, Xn, Qn)
    index = _faiss_ivf(tmp_path / "old.faiss", X)
    rep = _upgrade(f, index=index)
    got = rep["index"]
    assert got["kind"] == "faiss-ivf" and got["metric"] == "ip" and got["settings"] == {"nprobe": 2}
    bridge_w, migrate_w = _maps(f)
    X32 = X.astype(np.float32)
    # built for: the old queries over the vectors the index was built on
    base = _recall(_faiss_search(index, Q), _brute(Q, X32, K), K)
    assert got["built_for"]["recall"] == pytest.approx(base, abs=1e-12)
    # bridge: the new queries rotated back, in the unchanged index, against exact search over the old documents
    QB = _unit(U.unit(Qn.astype(np.float32).astype(np.float64)) @ bridge_w)
    assert got["bridge"]["recall"] == pytest.approx(_recall(_faiss_search(index, QB), _brute(QB, X32, K), K), abs=1e-12)
    # migrate: the old documents rotated into the new space, stored in the index without retraining
    V = _unit(U.unit(X32.astype(np.float64)) @ migrate_w).astype(np.float32)
    QN = U.unit(Qn.astype(np.float32).astype(np.float64))
    mig = _recall(_faiss_search(index, QN, replace=V), _brute(QN, V, K), K)
    assert got["migrate"]["measured"] is True
    assert got["migrate"]["recall"] == pytest.approx(mig, abs=1e-12)
    assert got["migrate"]["drop"] == pytest.approx(base - mig, abs=1e-12)
    assert got["bridge"]["drop"] == pytest.approx(base - got["bridge"]["recall"], abs=1e-12)
    if case == "identity":
        assert got["bridge"]["recall"] == pytest.approx(base, abs=1e-12)
    if case == "rotation":  # stale centroids: the rotated clusters are cut by the old cells
        assert base > 0.9 and mig < base - 0.1, (base, mig)
        assert got["migrate"]["reindex_needed"] is True and got["reindex_needed"] == 1.0
        assert any(w.startswith("REINDEX needed") for w in got["warnings"])
    else:
        assert mig == pytest.approx(base, abs=1e-12)
        assert got["migrate"]["reindex_needed"] is False and got["reindex_needed"] == 0.0
        assert "warnings" not in got
    assert Path(index).stat().st_size > 0 and _faiss_search(index, Q).shape == (NQ, K)  # the file is untouched


def test_gate_and_table_and_settings_from_the_cli(cli, tmp_path, space):
    X, Q, R = space
    f = _files(tmp_path, X, Q, X @ R, Q @ R)
    index = _faiss_ivf(tmp_path / "old.faiss", X)
    args = ["upgrade", f["old"], f["new"], "--queries-old", f["qo"], "--queries-new", f["qn"], "--method",
            "procrustes", "--resamples", "50", "--index", index, "--index-set", "nprobe=30"]
    res = cli(args)  # every list probed: exact, whatever the centroids
    assert res.exit_code == 0, res.stderr
    got = res.json()["index"]
    assert got["settings"] == {"nprobe": 30} and got["migrate"]["recall"] == 1.0 and got["reindex_needed"] == 0.0
    res = cli([*args[:-1], "nprobe=1", "--fail-above", "index.reindex_needed=0.5"])
    assert res.exit_code == 1, res.stderr
    assert res.json()["index"]["reindex_needed"] == 1.0
    res = cli([*args[:-1], "nprobe=1", "--format", "table"])
    assert res.exit_code == 0 and "index.migrate" in res.stdout and "REINDEX needed" in res.stdout


def test_faiss_hnsw_and_hnswlib_keep_their_graph_with_the_vectors_replaced(tmp_path, space):
    """FAISS HNSW: the graph kept, the stored vectors replaced; hnswlib: each point updated under its
    label (its own update) — each equal to the library's answers on a copy rewritten here."""
    faiss = pytest.importorskip("faiss")
    hnswlib = pytest.importorskip("hnswlib")
    X, Q, R = space
    f = _files(tmp_path, X, Q, X @ R, Q @ R)
    _, migrate_w = _maps(f)
    X32 = X.astype(np.float32)
    V = _unit(U.unit(X32.astype(np.float64)) @ migrate_w).astype(np.float32)
    QN = U.unit(np.load(f["qn"]).astype(np.float64)).astype(np.float32)
    fx = faiss.IndexHNSWFlat(DIM, 4, faiss.METRIC_INNER_PRODUCT)
    fx.hnsw.efConstruction = 8
    fx.add(X32)
    fx.hnsw.efSearch = 10
    faiss.write_index(fx, str(tmp_path / "h.faiss"))
    hx = hnswlib.Index(space="ip", dim=DIM)
    hx.init_index(max_elements=N, M=4, ef_construction=8, random_seed=1)
    hx.add_items(X32, np.arange(N))
    hx.set_ef(10)
    hx.save_index(str(tmp_path / "h.hnsw"))
    (tmp_path / "h.hnsw.json").write_text(json.dumps({"space": "ip", "dim": DIM}))
    exact = _brute(QN, V, K)
    for path in ("h.faiss", "h.hnsw"):
        got = _upgrade(f, index=str(tmp_path / path))["index"]["migrate"]
        if path == "h.faiss":
            ix = faiss.read_index(str(tmp_path / path))
            st = faiss.downcast_index(ix.storage)
            st.reset()
            st.add(V)
            returned = np.vstack([ix.search(q[None, :], K)[1] for q in QN])
        else:
            ix = hnswlib.Index(space="ip", dim=DIM)
            ix.load_index(str(tmp_path / path), max_elements=N)
            ix.add_items(V, np.arange(N), num_threads=1)
            ix.set_ef(10)
            returned = np.vstack([ix.knn_query(q[None, :], k=K)[0] for q in QN])
        assert got["measured"] is True, path
        assert got["recall"] == pytest.approx(_recall(returned, exact, K), abs=1e-12), path


def test_a_new_dimension_needs_a_new_index(tmp_path, space):
    X, Q, R = space
    W = np.linalg.qr(np.random.default_rng(5).normal(size=(48, 48)))[0][:DIM]  # 32 -> 48, orthonormal rows
    f = _files(tmp_path, X, Q, X @ W, Q @ W)
    got = _upgrade(f, index=_faiss_ivf(tmp_path / "old.faiss", X))["index"]
    assert got["migrate"] == {"measured": False, "reindex_needed": True, "reading": got["migrate"]["reading"]}
    assert "dimension 48" in got["migrate"]["reading"] and got["reindex_needed"] == 1.0
    assert "recall" in got["bridge"]  # the bridge still searches the old index


def test_bad_index_options_are_one_line(cli, tmp_path, space):
    X, Q, R = space
    f = _files(tmp_path, X, Q, X @ R, Q @ R)
    base = ["upgrade", f["old"], f["new"], "--queries-old", f["qo"], "--queries-new", f["qn"], "--method", "procrustes"]
    wrong = _faiss_ivf(tmp_path / "wrong.faiss", np.random.default_rng(0).normal(size=(200, DIM))[:, :DIM])
    other = tmp_path / "other.faiss"
    import faiss

    flat = faiss.IndexFlatIP(8)
    flat.add(np.eye(8, dtype=np.float32))
    faiss.write_index(flat, str(other))
    for extra, words in ((["--migrated-index", wrong], "--migrated-index needs --index"),
                         (["--index", str(other)], "dimension 8 but OLD has 32"),
                         (["--index", wrong, "--index-set", "nprobe"], "expected NAME=VALUE"),
                         (["--index", wrong, "--index-set", "efSearch=4"], "no search setting 'efSearch'"),
                         (["--index", str(tmp_path / "none.faiss")], "no index file"),
                         (["--index", wrong, "--reindex-margin", "2"], "--reindex-margin")):
        res = cli([*base, *extra])
        assert res.exit_code == 2, (extra, res.stdout)
        assert res.stderr.startswith("error: ") and words in res.stderr and "Traceback" not in res.stderr, res.stderr


# ---- pgvector IVFFlat --------------------------------------------------------------------------------

def _db(uri: str, name: str) -> str:
    """``uri`` naming database ``name`` instead."""
    base, _, query = uri.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


def _pg(uri: str, name: str, X: np.ndarray, rewrite: np.ndarray | None = None) -> tuple[str, str]:
    """Database ``name`` with table ``docs`` of ``X`` and an IVFFlat cosine index built on it; with
    ``rewrite``, a file copy of it (``CREATE DATABASE ... TEMPLATE``: the same index, its centroids
    included) whose vectors are then replaced in place by UPDATE, no REINDEX. The URI of each."""
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql

    with psycopg.connect(uri, autocommit=True) as conn:
        for db in (f"{name}_rw", name):
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(db)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(_db(uri, name), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute(sql.SQL("CREATE TABLE docs (id bigint PRIMARY KEY, embedding vector({}))").format(sql.Literal(DIM)))
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO docs (id, embedding) VALUES (%s, %s)", [(i, v.astype(np.float32)) for i, v in enumerate(X)])
        conn.execute(sql.SQL("CREATE INDEX ON docs USING ivfflat (embedding vector_cosine_ops) WITH (lists = {})").format(
            sql.Literal(CLUSTERS)))
    out = [_db(uri, name)]
    if rewrite is not None:
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(f"{name}_rw"), sql.Identifier(name)))
        with psycopg.connect(_db(uri, f"{name}_rw"), autocommit=True) as conn:
            register_vector(conn)
            with conn.cursor() as cur:
                cur.executemany("UPDATE docs SET embedding = %s WHERE id = %s", [(v.astype(np.float32), i) for i, v in enumerate(rewrite)])
        out.append(_db(uri, f"{name}_rw"))
    return tuple(out)  # type: ignore[return-value]


def _loc(uri: str) -> str:
    return f"{uri}{'&' if '?' in uri else '?'}table=docs&column=embedding&id=id"


def _pg_search(uri: str, Q: np.ndarray, probes: int) -> np.ndarray:
    """pgvector's own answers through its IVFFlat index (probes set, sequential scans off)."""
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql

    out = []
    with psycopg.connect(uri) as conn:
        register_vector(conn)
        conn.execute("SET enable_seqscan = off")
        conn.execute(sql.SQL("SET ivfflat.probes = {}").format(sql.Literal(probes)))
        for q in Q.astype(np.float32):
            row = [r[0] for r in conn.execute("SELECT id FROM docs ORDER BY embedding <=> %s LIMIT %s", (q, K))]
            out.append(row + [-1] * (K - len(row)))
    return np.array(out)


@pytest.mark.parametrize("case", ["rotation", "identity"])
def test_pgvector_ivfflat_rewritten_in_place_against_brute_force(pg_uri, tmp_path, space, case):
    X, Q, R = space
    Xn, Qn = (X @ R, Q @ R) if case == "rotation" else (X, Q)
    f = _files(tmp_path, X, Q, Xn, Qn)
    bridge_w, migrate_w = _maps(f)
    X32 = X.astype(np.float32)
    V = _unit(U.unit(X32.astype(np.float64)) @ migrate_w).astype(np.float32)  # the migrate map, as project applies it
    src, rw = _pg(pg_uri, f"upg_{case}", X, rewrite=V)
    got = _upgrade(f, index=_loc(src), migrated_index=_loc(rw), index_set=["ivfflat.probes=2"])["index"]
    assert got["kind"] == "pgvector-ivfflat" and got["metric"] == "cosine" and got["settings"] == {"ivfflat.probes": 2}
    base = _recall(_pg_search(src, Q, 2), _brute(U.unit(Q), X32, K), K)
    assert got["built_for"]["recall"] == pytest.approx(base, abs=1e-12)
    QB = _unit(U.unit(Qn.astype(np.float32).astype(np.float64)) @ bridge_w)
    assert got["bridge"]["recall"] == pytest.approx(_recall(_pg_search(src, QB, 2), _brute(QB, X32, K), K), abs=1e-12)
    QN = U.unit(Qn.astype(np.float32).astype(np.float64))
    mig = _recall(_pg_search(rw, QN, 2), _brute(QN, V, K), K)
    m = got["migrate"]
    assert m["measured"] is True and m["how"].startswith("--migrated-index")
    assert m["recall"] == pytest.approx(mig, abs=1e-12)
    assert m["mean_cosine_to_map"] == pytest.approx(1.0, abs=1e-6)
    if case == "rotation":
        assert base > 0.85 and mig < base - 0.1, (base, mig)
        assert m["reindex_needed"] is True and got["reindex_needed"] == 1.0
    else:
        assert mig == pytest.approx(base, abs=1e-12)  # the same index, the same vectors rewritten: nothing lost
        assert m["reindex_needed"] is False and got["reindex_needed"] == 0.0


def test_pgvector_without_a_rewritten_copy_is_not_written(pg_uri, tmp_path, space):
    X, Q, R = space
    f = _files(tmp_path, X, Q, X @ R, Q @ R)
    got = _upgrade(f, index=_loc(_pg(pg_uri, "upg_only", X)[0]))["index"]
    assert got["migrate"]["measured"] is False and "--migrated-index" in got["migrate"]["reading"]
    assert "reindex_needed" not in got and "recall" in got["bridge"]


# ---- --label-field -----------------------------------------------------------------------------------

def test_label_field_reads_the_named_column(tmp_path, space):
    X, Q, R = space
    f = _files(tmp_path, X, Q, X @ R, Q @ R)
    y = (np.arange(N) % 3).tolist()
    lab = tmp_path / "labels.jsonl"
    lab.write_text("".join(json.dumps({"id": f"d{i}", "topic": f"t{v}", "label": "same"}) + "\n" for i, v in enumerate(y)))
    by_topic = _upgrade(f, old_labels=str(lab), label_field="topic")["labels"]
    assert by_topic["classes"] == 3
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({"id": f"d{i}", "label": f"t{v}"}) + "\n" for i, v in enumerate(y)))
    assert _upgrade(f, old_labels=str(plain))["labels"]["aag"] == by_topic["aag"]
    with pytest.raises(embedcheck.errors.InputError, match="nope"):
        _upgrade(f, old_labels=str(lab), label_field="nope")
    with pytest.raises(embedcheck.errors.InputError, match="one class"):  # 'label' is the same for every row
        _upgrade(f, old_labels=str(lab))


def test_label_field_from_the_cli(cli, tmp_path, space):
    X, Q, R = space
    f = _files(tmp_path, X, Q, X @ R, Q @ R)
    lab = tmp_path / "labels.csv"
    lab.write_text("id,topic\n" + "".join(f"d{i},t{i % 4}\n" for i in range(N)))
    base = ["upgrade", f["old"], f["new"], "--queries-old", f["qo"], "--queries-new", f["qn"], "--method", "procrustes",
            "--resamples", "20", "--old-labels", str(lab)]
    res = cli([*base, "--label-field", "topic"])
    assert res.exit_code == 0, res.stderr
    assert res.json()["labels"]["classes"] == 4
    res = cli(base)  # no 'label' column: one line naming it
    assert res.exit_code == 2 and res.stderr.startswith("error: ") and "label" in res.stderr, res.stderr


# ---- LanceDB -------------------------------------------------------------------------------------

def _lance(folder: Path, X: np.ndarray) -> str:
    """A LanceDB table ``docs`` of ``X`` (ids 0..n-1) with an IVF_FLAT cosine index of CLUSTERS lists."""
    lancedb = pytest.importorskip("lancedb")
    import pyarrow as pa

    db = lancedb.connect(str(folder))
    X32 = np.ascontiguousarray(X, dtype=np.float32)
    tbl = db.create_table("docs", pa.table({"id": pa.array(np.arange(len(X), dtype=np.int64)),
                                            "vector": pa.FixedSizeListArray.from_arrays(pa.array(X32.ravel()), DIM)}))
    tbl.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_FLAT", num_partitions=CLUSTERS)
    return f"lancedb://{folder}/docs"


def _lance_rewritten(src: Path, dst: Path, V: np.ndarray) -> str:
    """A file copy of the database (the same index build) whose vectors are then replaced by ``V``
    (LanceDB's own ``merge_insert`` on the ids), not re-indexed."""
    import shutil

    import lancedb
    import pyarrow as pa

    shutil.copytree(src, dst)
    tbl = lancedb.connect(str(dst)).open_table("docs")
    V32 = np.ascontiguousarray(V, dtype=np.float32)
    tbl.merge_insert("id").when_matched_update_all().execute(
        pa.table({"id": pa.array(np.arange(len(V), dtype=np.int64)),
                  "vector": pa.FixedSizeListArray.from_arrays(pa.array(V32.ravel()), DIM)}))
    return f"lancedb://{dst}/docs"


def _lance_search(loc: str, Q: np.ndarray, nprobes: int) -> np.ndarray:
    """LanceDB's own answers (cosine, ``nprobes`` lists)."""
    import lancedb

    db, name = loc.removeprefix("lancedb://").rsplit("/", 1)
    tbl = lancedb.connect(db).open_table(name)
    out = []
    for q in Q.astype(np.float32):
        got = (tbl.search(q, vector_column_name="vector").distance_type("cosine").nprobes(nprobes).limit(K)
               .select(["id", "_distance"]).to_arrow().column("id").to_pylist())
        out.append(got + [-1] * (K - len(got)))
    return np.array(out)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_lancedb_ivf_flat_arms_equal_lancedb_against_brute_force(tmp_path, space):
    """A LanceDB IVF_FLAT table: built-for and bridge recall equal LanceDB's own answers scored against
    brute force; without a rewritten copy the migrate arm is not measured (a database is not written);
    with one (a file copy whose vectors LanceDB's merge_insert replaced) it equals LanceDB's answers
    on that copy, and since those rows left the index (LanceDB scans them exactly: recall 1), the arm
    says REINDEX needed from the index's own count of rows it does not cover."""
    X, Q, R = space
    Xn, Qn = X @ R, Q @ R
    f = _files(tmp_path, X, Q, Xn, Qn)
    bridge_w, migrate_w = _maps(f)
    X32 = X.astype(np.float32)
    V = _unit(U.unit(X32.astype(np.float64)) @ migrate_w).astype(np.float32)
    src = _lance(tmp_path / "db", X)
    only = _upgrade(f, index=src, index_set=["nprobes=2"])["index"]
    assert only["kind"] == "lancedb-ivf_flat" and only["metric"] == "cosine" and only["settings"]["nprobes"] == 2
    base = _recall(_lance_search(src, Q, 2), _brute(U.unit(Q), X32, K), K)
    assert only["built_for"]["recall"] == pytest.approx(base, abs=1e-12) and base > 0.85
    QB = _unit(U.unit(Qn.astype(np.float32).astype(np.float64)) @ bridge_w)
    assert only["bridge"]["recall"] == pytest.approx(_recall(_lance_search(src, QB, 2), _brute(QB, X32, K), K), abs=1e-12)
    assert only["migrate"]["measured"] is False and "--migrated-index" in only["migrate"]["reading"]
    rw = _lance_rewritten(tmp_path / "db", tmp_path / "db_rw", V)
    got = _upgrade(f, index=src, migrated_index=rw, index_set=["nprobes=2"])["index"]
    QN = U.unit(Qn.astype(np.float32).astype(np.float64))
    m = got["migrate"]
    assert m["measured"] is True and m["how"].startswith("--migrated-index")
    assert m["recall"] == pytest.approx(_recall(_lance_search(rw, QN, 2), _brute(QN, V, K), K), abs=1e-12)
    assert m["mean_cosine_to_map"] == pytest.approx(1.0, abs=1e-6)
    assert got["built_for"] == only["built_for"]
    # merge_insert rewrote every row out of the index: LanceDB scans them all, exactly, until re-indexed
    import lancedb

    tbl = lancedb.connect(str(tmp_path / "db_rw")).open_table("docs")
    stats = tbl.index_stats(tbl.list_indices()[0].name)
    assert m["unindexed_rows"] == stats.num_unindexed_rows == N and m["recall"] == 1.0
    assert m["reindex_needed"] is True and got["reindex_needed"] == 1.0 and "flat scan" in m["reading"]
