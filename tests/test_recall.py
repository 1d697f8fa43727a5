"""``recall``: an ANN index's recall@k against exact search, on the four index kinds.

Every figure is checked against a brute-force count over the index's own answers (the index queried
directly through its library) and an exact top-k by a full numpy sort in float64; against faiss's
own evaluation helper; and on a Flat index (recall 1.0). Real files, a real PostgreSQL + pgvector
server, real LanceDB tables; small n so the file runs in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error

import embedcheck
from embedcheck.report.schemas import json_schema

faiss = pytest.importorskip("faiss")

N, D = 1200, 24


def _data(seed: int = 0, n: int = N, d: int = D, unit: bool = True) -> np.ndarray:
    X = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    if unit:
        X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X


def _brute(Q: np.ndarray, X: np.ndarray, metric: str, k: int, exclude: np.ndarray | None = None):
    """Exact top k (float64 full sort, ties by row) and the k-th distance, ann-benchmarks' distances."""
    Q64, X64 = Q.astype(np.float64), X.astype(np.float64)
    if metric == "cosine":
        dist = 1 - (Q64 / np.linalg.norm(Q64, axis=1, keepdims=True)) @ (X64 / np.linalg.norm(X64, axis=1, keepdims=True)).T
    elif metric == "ip":
        dist = -(Q64 @ X64.T)
    else:
        dist = np.sqrt(np.maximum(((Q64[:, None, :] - X64[None, :, :]) ** 2).sum(-1), 0))
    if exclude is not None:
        dist[np.arange(len(Q)), exclude] = np.inf
    order = np.argsort(dist, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(dist, order, axis=1)[:, -1], dist


def _by_hand(returned_rows: np.ndarray, exact_rows: np.ndarray, kth: np.ndarray, dist: np.ndarray, k: int):
    """Both recall definitions counted one query at a time."""
    idr, knn = [], []
    for i in range(len(returned_rows)):
        got = [r for r in returned_rows[i][:k] if r >= 0]
        idr.append(len(set(got) & set(exact_rows[i][:k].tolist())) / k)
        knn.append(sum(1 for r in got if dist[i, r] <= kth[i] + 1e-3) / k)
    return np.array(idr), np.array(knn)


def _hnsw(path: Path, X: np.ndarray, metric: int, M: int = 8, ef_construction: int = 20) -> Path:
    ix = faiss.IndexHNSWFlat(X.shape[1], M, metric)
    ix.hnsw.efConstruction = ef_construction
    ix.add(X)
    faiss.write_index(ix, str(path))
    return path


# ---- FAISS -----------------------------------------------------------------------------------------

def test_both_definitions_equal_a_brute_force_count_over_faiss_own_answers(tmp_path):
    X = _data(unit=False)
    path = _hnsw(tmp_path / "h.faiss", X, faiss.METRIC_L2, M=4, ef_construction=8)
    rep = embedcheck.recall(path, k=10, n_queries=200, settings={"efSearch": 10}, resamples=200, seed=3)
    from embedcheck.geometry.recall import sample_queries

    rows = sample_queries(N, 200, 3)
    # the index asked directly (k + 1: the query's own row is dropped from its answer)
    ix = faiss.read_index(str(path))
    ix.hnsw.efSearch = 10
    _, I = ix.search(X[rows], 11)
    returned = np.array([[r for r in I[i] if r != rows[i]][:10] for i in range(len(rows))])
    exact, kth, dist = _brute(X[rows], X, "l2", 10, exclude=rows)
    idr, knn = _by_hand(returned, exact, kth, dist, 10)
    assert np.array_equal(rep.results["returned"], returned)
    assert np.allclose(rep.results["per_query"]["recall"], idr, atol=0)
    assert np.allclose(rep.results["per_query"]["knn_recall"], knn, atol=0)
    assert rep["recall"]["mean"] == pytest.approx(idr.mean(), abs=1e-12)
    assert rep["recall"]["p5"] == pytest.approx(np.percentile(idr, 5))
    assert rep["recall"]["worst"] == idr.min() and rep["recall"]["worst_query"] == str(rows[np.argmin(idr)])
    assert rep["recall"]["share_below"] == pytest.approx((idr < 0.9).mean())
    assert 0.3 < idr.mean() < 0.99  # a lossy setting: the test is not trivially 1.0
    lo, hi = rep["recall"]["mean_ci95"]
    assert lo < idr.mean() < hi
    assert rep["in_corpus"] is True and any("over-state" in n for n in rep["notes"])
    assert rep["metric"] == "l2" and rep["kind"] == "faiss-hnsw" and rep["settings"] == {"efSearch": 10}


def test_recall_agrees_with_faiss_contrib_knn_intersection_measure(tmp_path):
    from faiss.contrib.evaluation import knn_intersection_measure

    X, Q = _data(1), _data(2, n=150)
    path = _hnsw(tmp_path / "ip.faiss", X, faiss.METRIC_INNER_PRODUCT, M=4, ef_construction=10)
    np.save(tmp_path / "q.npy", Q)
    rep = embedcheck.recall(path, queries=tmp_path / "q.npy", k=10, settings={"efSearch": 12}, resamples=0)
    ix = faiss.read_index(str(path))
    ix.hnsw.efSearch = 12
    _, I = ix.search(Q, 10)
    flat = faiss.IndexFlatIP(D)
    flat.add(X)
    _, gt = flat.search(Q, 10)
    assert rep["recall"]["mean"] == pytest.approx(knn_intersection_measure(I, gt), abs=1e-12)
    assert rep["in_corpus"] is False and rep["queries"] == 150
    assert rep["recall"]["mean"] < 1.0


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_flat_index_has_recall_one(tmp_path, metric):
    X = _data(4, n=500)
    ix = faiss.IndexFlatIP(D) if metric == "ip" else faiss.IndexFlatL2(D)
    ix.add(X)
    faiss.write_index(ix, str(tmp_path / "flat.index"))
    rep = embedcheck.recall(tmp_path / "flat.index", k=10, n_queries=100, resamples=50)
    assert rep["kind"] == "faiss-flat" and rep["metric"] == metric
    assert rep["recall"]["mean"] == 1.0 and rep["knn_recall"]["mean"] == 1.0 and rep["recall"]["worst"] == 1.0
    rep2 = embedcheck.recall(tmp_path / "flat.index", queries=_data(5, n=40), k=5, resamples=0)
    assert rep2["recall"]["mean"] == 1.0


def test_pq_index_needs_the_vectors_and_splits_the_loss(tmp_path):
    X = _data(6, n=1000, unit=False)
    q = faiss.IndexIVFPQ(faiss.IndexFlatL2(D), D, 8, 4, 6)
    q.cp.min_points_per_centroid = 1
    q.pq.cp.min_points_per_centroid = 1
    q.train(X)
    q.add(X)
    faiss.write_index(q, str(tmp_path / "pq.faiss"))
    with pytest.raises(embedcheck.errors.InputError, match="quantised"):
        embedcheck.recall(tmp_path / "pq.faiss", n_queries=50)
    rep = embedcheck.recall(tmp_path / "pq.faiss", vectors=X, n_queries=100, settings={"nprobe": 8}, resamples=0)
    quant = rep["diagnostics"]["quantisation"]
    # all 8 lists probed: the partition loses nothing, the index returns what exact search over its
    # decoded vectors returns (up to ties in the decoded distances)
    assert quant["available"] and quant["exact_over_decoded_recall"] == pytest.approx(rep["recall"]["mean"], abs=0.02)
    assert quant["quantisation_loss"] > 0.1
    # brute force: exact search over faiss's own decoded vectors, scored against the true exact lists
    from embedcheck.geometry.recall import sample_queries

    rows = sample_queries(1000, 100, 0)
    q.make_direct_map()
    R = q.reconstruct_n(0, 1000)
    dec, _, _ = _brute(X[rows], R, "l2", 10, exclude=rows)
    exact, kth, dist = _brute(X[rows], X, "l2", 10, exclude=rows)
    idr, _ = _by_hand(dec, exact, kth, dist, 10)
    assert quant["exact_over_decoded_recall"] == pytest.approx(idr.mean(), abs=0.011)


# ---- hnswlib ---------------------------------------------------------------------------------------

def test_hnswlib_index_with_sidecar_and_options(tmp_path):
    hnswlib = pytest.importorskip("hnswlib")
    X = _data(7)
    ids = np.arange(N) * 7 + 3
    ix = hnswlib.Index(space="ip", dim=D)
    ix.init_index(max_elements=N, M=4, ef_construction=10, random_seed=1)
    ix.add_items(X, ids, num_threads=1)
    ix.save_index(str(tmp_path / "items.bin"))
    with pytest.raises(embedcheck.errors.InputError, match="space and dimension"):
        embedcheck.recall(tmp_path / "items.bin")
    (tmp_path / "items.bin.json").write_text(json.dumps({"space": "ip", "dim": D}))
    rep = embedcheck.recall(tmp_path / "items.bin", k=10, n_queries=150, settings={"ef": 10}, resamples=0, seed=1)
    assert rep["kind"] == "hnswlib" and rep["metric"] == "ip" and rep["settings"] == {"ef": 10}
    from embedcheck.geometry.recall import sample_queries

    rows = sample_queries(N, 150, 1)
    ix.set_ef(10)
    labels, _ = ix.knn_query(X[rows], k=11, num_threads=1)
    pos = (labels - 3) // 7
    returned = np.array([[r for r in pos[i] if r != rows[i]][:10] for i in range(len(rows))])
    exact, kth, dist = _brute(X[rows], X, "ip", 10, exclude=rows)
    idr, knn = _by_hand(returned, exact, kth, dist, 10)
    assert np.allclose(rep.results["per_query"]["recall"], idr, atol=0)
    assert np.allclose(rep.results["per_query"]["knn_recall"], knn, atol=0)
    assert idr.mean() < 1.0
    rep2 = embedcheck.recall(tmp_path / "items.bin", space="ip", dim=D, k=10, n_queries=150, settings={"ef": 10},
                             resamples=0, seed=1)
    assert rep2["recall"] == rep["recall"]


# ---- pgvector --------------------------------------------------------------------------------------

def _pg_table(uri: str, table: str, X: np.ndarray, index_sql: str) -> None:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql

    with psycopg.connect(uri, autocommit=True) as conn:
        register_vector(conn)
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, embedding vector({}))").format(
            sql.Identifier(table), sql.Literal(X.shape[1])))
        with conn.cursor().copy(sql.SQL("COPY {} (id, embedding) FROM STDIN WITH (FORMAT BINARY)").format(
                sql.Identifier(table))) as cp:
            cp.set_types(["bigint", "vector"])
            for i, v in enumerate(X):
                cp.write_row([i * 10, v])
        conn.execute(index_sql)
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))


def _pg_answers(uri: str, table: str, op: str, setting: str, value: int, Q: np.ndarray, k: int) -> np.ndarray:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql

    out = []
    with psycopg.connect(uri) as conn:
        register_vector(conn)
        conn.execute("SET enable_seqscan = off")
        conn.execute(sql.SQL("SET {} = {}").format(sql.Identifier(*setting.split(".")), sql.Literal(value)))
        for q in Q:
            out.append([r[0] // 10 for r in conn.execute(
                sql.SQL("SELECT id FROM {} ORDER BY embedding {} %s LIMIT %s").format(sql.Identifier(table), sql.SQL(op)),
                (q, k))])
    # an IVFFlat probe of a small list may return fewer than k rows: padded with -1 (a miss)
    return np.array([row + [-1] * (k - len(row)) for row in out])


def test_pgvector_hnsw_cosine_against_its_own_answers(pg_uri, tmp_path):
    X = _data(8, n=800, unit=False)
    _pg_table(pg_uri, "items_hnsw", X, "CREATE INDEX ON items_hnsw USING hnsw (embedding vector_cosine_ops) "
              "WITH (m = 4, ef_construction = 8)")
    loc = f"{pg_uri}{'&' if '?' in pg_uri else '?'}table=items_hnsw&column=embedding"
    Q = _data(9, n=60, unit=False)
    np.save(tmp_path / "q.npy", Q)
    rep = embedcheck.recall(loc, queries=tmp_path / "q.npy", k=10, settings={"ef_search": 10}, resamples=0,
                            sweep={"hnsw.ef_search": [10, 80]})
    assert rep["kind"] == "pgvector-hnsw" and rep["metric"] == "cosine" and rep["settings"] == {"hnsw.ef_search": 10}
    returned = _pg_answers(pg_uri, "items_hnsw", "<=>", "hnsw.ef_search", 10, Q, 10)
    exact, kth, dist = _brute(Q, X, "cosine", 10)
    idr, knn = _by_hand(returned, exact, kth, dist, 10)
    assert np.array_equal(rep.results["returned"], returned)
    assert np.allclose(rep.results["per_query"]["recall"], idr, atol=0)
    assert np.allclose(rep.results["per_query"]["knn_recall"], knn, atol=0)
    rows = rep["sweep"]["rows"]
    assert rows[0]["recall"] == pytest.approx(idr.mean()) and rows[1]["recall"] >= rows[0]["recall"]
    assert rows[0]["recall"] < 1.0


def test_pgvector_ivfflat_l2_metric_from_opclass_and_bad_setting(pg_uri):
    X = _data(10, n=600, unit=False)
    _pg_table(pg_uri, "items_ivf", X, "CREATE INDEX ON items_ivf USING ivfflat (embedding vector_l2_ops) WITH (lists = 20)")
    loc = f"{pg_uri}{'&' if '?' in pg_uri else '?'}table=items_ivf&column=embedding&id=id"
    rep = embedcheck.recall(loc, k=5, n_queries=80, resamples=0)
    assert rep["kind"] == "pgvector-ivfflat" and rep["metric"] == "l2" and rep["settings"] == {"ivfflat.probes": 1}
    from embedcheck.geometry.recall import sample_queries

    rows = sample_queries(600, 80, 0)
    got = _pg_answers(pg_uri, "items_ivf", "<->", "ivfflat.probes", 1, X[rows], 6)
    returned = np.array([list([r for r in got[i] if r != rows[i]][:5]) + [-1] * (5 - len([r for r in got[i] if r != rows[i]][:5]))
                         for i in range(len(rows))])
    exact, kth, dist = _brute(X[rows], X, "l2", 5, exclude=rows)
    idr, _ = _by_hand(returned, exact, kth, dist, 5)
    assert np.allclose(rep.results["per_query"]["recall"], idr, atol=0)
    full = embedcheck.recall(loc, k=5, n_queries=80, resamples=0, settings={"probes": 20})
    assert full["recall"]["mean"] == 1.0  # every list probed: exact
    with pytest.raises(embedcheck.errors.InputError, match="no search setting 'ef_search'"):
        embedcheck.recall(loc, k=5, n_queries=10, sweep={"ef_search": [10]})


# ---- LanceDB ---------------------------------------------------------------------------------------

def _lance(tmp_path: Path, X: np.ndarray, **index) -> str:
    lancedb = pytest.importorskip("lancedb")
    import pyarrow as pa

    db = lancedb.connect(str(tmp_path / "db"))
    tbl = db.create_table("items", pa.table({"id": pa.array(np.arange(len(X)) + 1000),
                                             "vector": pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), X.shape[1])}))
    tbl.create_index(vector_column_name="vector", **index)
    return f"lancedb://{tmp_path / 'db'}/items"


def _lance_answers(loc: str, Q: np.ndarray, k: int, metric: str, **settings) -> np.ndarray:
    import lancedb

    db, name = loc.removeprefix("lancedb://").rsplit("/", 1)
    tbl = lancedb.connect(db).open_table(name)
    out = []
    for q in Q:
        s = tbl.search(q, vector_column_name="vector").distance_type(metric)
        for key, v in settings.items():
            s = getattr(s, key)(v)
        out.append([i - 1000 for i in s.limit(k).select(["id", "_distance"]).to_arrow().column("id").to_pylist()])
    return np.array(out)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_lancedb_ivf_pq_against_its_own_answers(tmp_path):
    X = _data(11, n=1000)
    loc = _lance(tmp_path, X, metric="cosine", index_type="IVF_PQ", num_partitions=8, num_sub_vectors=4)
    Q = _data(12, n=40)
    rep = embedcheck.recall(loc, queries=Q, k=10, settings={"nprobes": 2}, resamples=0)
    assert rep["kind"] == "lancedb-ivf_pq" and rep["metric"] == "cosine"
    assert rep["diagnostics"]["quantisation"]["available"] is False
    returned = _lance_answers(loc, Q, 10, "cosine", nprobes=2)
    exact, kth, dist = _brute(Q, X, "cosine", 10)
    idr, knn = _by_hand(returned, exact, kth, dist, 10)
    assert np.allclose(rep.results["per_query"]["recall"], idr, atol=0)
    assert np.allclose(rep.results["per_query"]["knn_recall"], knn, atol=0)
    assert idr.mean() < 1.0
    refined = embedcheck.recall(loc, queries=Q, k=10, settings={"nprobes": 8, "refine_factor": 20}, resamples=0)
    assert refined["recall"]["mean"] > rep["recall"]["mean"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_lancedb_rows_added_after_the_index_are_named_as_a_scan(tmp_path):
    """Rows added after the index was built are outside it (LanceDB's own count) and searched by a
    flat scan: the report says how many, in a warning, and its recall still equals LanceDB's answers
    scored against brute force."""
    import pyarrow as pa

    X = _data(21, n=600)
    loc = _lance(tmp_path, X[:500], metric="cosine", index_type="IVF_PQ", num_partitions=4, num_sub_vectors=4)
    import lancedb

    tbl = lancedb.connect(str(tmp_path / "db")).open_table("items")
    tbl.add(pa.table({"id": pa.array(np.arange(500, 600) + 1000),
                      "vector": pa.FixedSizeListArray.from_arrays(pa.array(X[500:].ravel()), X.shape[1])}))
    assert tbl.index_stats(tbl.list_indices()[0].name).num_unindexed_rows == 100
    Q = _data(22, n=30)
    rep = embedcheck.recall(loc, queries=Q, k=10, settings={"nprobes": 1}, resamples=0)
    assert rep["diagnostics"]["unindexed_rows"] == 100
    assert any(w.startswith("100 of the 600 rows are not in the index") for w in rep["warnings"])
    exact, kth, dist = _brute(Q, X, "cosine", 10)
    idr, _ = _by_hand(_lance_answers(loc, Q, 10, "cosine", nprobes=1), exact, kth, dist, 10)
    assert np.allclose(rep.results["per_query"]["recall"], idr, atol=0)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_lancedb_recall_with_quiet_prints_nothing_on_stderr(tmp_path, cli_subprocess):
    """Lance logs from its native code straight to the process's stderr (a deprecation warning per
    query unless the search names ``_distance``): the CLI as a subprocess, with --quiet, prints nothing."""
    X = _data(23, n=300)
    loc = _lance(tmp_path, X, metric="cosine", index_type="IVF_FLAT", num_partitions=4)
    np.save(tmp_path / "q.npy", _data(24, n=20))
    res = cli_subprocess(["recall", loc, "--queries", tmp_path / "q.npy", "--k", "5", "--resamples", "0", "--quiet",
                          "--json"])
    assert res.exit_code == 0, res.stderr[-2000:]
    assert res.stderr == "" and json.loads(res.stdout)["kind"] == "lancedb-ivf_flat"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_lancedb_ivf_hnsw_sq_l2(tmp_path):
    X = _data(13, n=800, unit=False)
    loc = _lance(tmp_path, X, metric="l2", index_type="IVF_HNSW_SQ", num_partitions=2)
    Q = _data(14, n=30, unit=False)
    rep = embedcheck.recall(loc, queries=Q, k=10, settings={"nprobes": 1}, resamples=0)
    assert rep["kind"] == "lancedb-ivf_hnsw_sq" and rep["metric"] == "l2" and "ef" in rep["settings"]
    returned = _lance_answers(loc, Q, 10, "l2", nprobes=1)
    exact, kth, dist = _brute(Q, X, "l2", 10)
    idr, _ = _by_hand(returned, exact, kth, dist, 10)
    assert np.allclose(rep.results["per_query"]["recall"], idr, atol=0)


# ---- sweep, target, diagnostics, pairing ----------------------------------------------------------

def test_sweep_frontier_and_cheapest_setting_meeting_the_target(tmp_path):
    X = _data(15, unit=False)
    path = _hnsw(tmp_path / "h.faiss", X, faiss.METRIC_L2, M=4, ef_construction=8)
    rep = embedcheck.recall(path, k=10, n_queries=150, sweep={"efSearch": [2, 8, 64, 256]}, resamples=200,
                            target="recall@10=0.85", plot=tmp_path / "sweep.png")
    sw = rep["sweep"]
    rec = [r["recall"] for r in sw["rows"]]
    assert rec == sorted(rec) and rec[0] < 0.85 <= rec[-1]
    t = sw["target"]
    meets = [i for i, r in enumerate(sw["rows"]) if r["recall"] >= 0.85]
    assert t["met"] and t["row"] in meets
    assert sw["rows"][t["row"]]["latency_median_ms"] == min(sw["rows"][i]["latency_median_ms"] for i in meets)
    assert t["value_ci95"] == sw["rows"][t["row"]]["recall_ci95"]
    for i, r in enumerate(sw["rows"]):  # the frontier: no other row is at least as good on both
        dominated = any(o["recall"] >= r["recall"] and o["latency_median_ms"] <= r["latency_median_ms"]
                        and (o["recall"] > r["recall"] or o["latency_median_ms"] < r["latency_median_ms"])
                        for j, o in enumerate(sw["rows"]) if j != i)
        assert r["pareto"] is (not dominated) and (i in sw["frontier"]) is (not dominated)
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lower = embedcheck.recall(path, k=10, n_queries=150, sweep={"efSearch": [2, 8, 64, 256]}, resamples=200,
                              target="recall@10=0.9", gate_on="lower")
    tl = lower["sweep"]["target"]
    assert tl["on"].startswith("lower") and (not tl["met"] or lower["sweep"]["rows"][tl["row"]]["recall_ci95"][0] >= 0.9)


def test_diagnostics_unnormalised_inner_product_duplicates_and_ties(tmp_path):
    X = _data(16, n=400, unit=False) * 3
    X[10] = X[11]  # one duplicate pair
    ix = faiss.IndexFlatIP(D)
    ix.add(X)
    faiss.write_index(ix, str(tmp_path / "ip.faiss"))
    rep = embedcheck.recall(tmp_path / "ip.faiss", k=5, n_queries=400, resamples=0)
    norms = np.linalg.norm(X.astype(np.float64), axis=1)
    d = rep["diagnostics"]
    assert d["norms"]["min"] == pytest.approx(norms.min()) and d["norms"]["max"] == pytest.approx(norms.max())
    assert d["duplicates"] == {"rows": 2, "groups": 1}
    assert any("not unit length" in w for w in rep["warnings"]) and any("share their vector" in w for w in rep["warnings"])
    # ties at the k-th place: a corpus of one vector repeated has every score tied
    Y = np.repeat(_data(17, n=1), 30, axis=0)
    flat = faiss.IndexFlatL2(D)
    flat.add(Y)
    faiss.write_index(flat, str(tmp_path / "same.faiss"))
    tied = embedcheck.recall(tmp_path / "same.faiss", queries=_data(18, n=5), k=3, resamples=0)
    assert tied["diagnostics"]["ties_at_k"] == 5 and tied["knn_recall"]["mean"] == 1.0


def test_against_a_second_index_gives_a_paired_verdict(tmp_path):
    X = _data(19, unit=False)
    a = _hnsw(tmp_path / "a.faiss", X, faiss.METRIC_L2, M=4, ef_construction=8)
    rep = embedcheck.recall(a, k=10, n_queries=300, settings={"efSearch": 4}, against=a,
                            against_settings={"efSearch": 128}, resamples=300)
    p = rep["paired"]["recall.mean"]
    b = embedcheck.recall(a, k=10, n_queries=300, settings={"efSearch": 128}, resamples=0)
    assert p["a"] == pytest.approx(rep["recall"]["mean"]) and p["b"] == pytest.approx(b["recall"]["mean"])
    assert p["difference"] == pytest.approx(b["recall"]["mean"] - rep["recall"]["mean"])
    assert p["verdict"] == "better" and p["difference_ci95"][0] > 0
    assert set(rep["paired"]) >= {"recall.mean", "knn_recall.mean", "ci_method", "against"}
    import jsonschema

    jsonschema.validate(rep.to_dict(), json_schema("recall"))


# ---- the CLI: gates, bad input, compare ------------------------------------------------------------

@pytest.fixture
def hnsw_file(tmp_path) -> Path:
    X = _data(20, n=600, unit=False)
    np.save(tmp_path / "X.npy", X)
    return _hnsw(tmp_path / "h.faiss", X, faiss.METRIC_L2, M=4, ef_construction=8)


def test_gate_exit_codes_on_mean_and_lower_end(cli, hnsw_file):
    base = ["recall", hnsw_file, "--n-queries", "100", "--resamples", "200", "--set", "efSearch=8", "--json"]
    ok = cli([*base, "--fail-below", "recall@10=0.2"])
    assert ok.exit_code == 0, ok
    r = ok.json()
    assert r["gates"][0] == {"name": "recall.mean", "op": ">=", "threshold": 0.2, "value": r["recall"]["mean"],
                             "passed": True}
    assert r["gate_on"] == "mean"
    mean = r["recall"]["mean"]
    lo = r["recall"]["mean_ci95"][0]
    between = round((lo + mean) / 2, 6)
    assert cli([*base, "--fail-below", f"recall@10={between}"]).exit_code == 0
    bare = cli([*base, "--fail-below", str(between)])  # a bare number gates the primary figure
    assert bare.exit_code == 0 and bare.json()["gates"][0]["name"] == "recall.mean"
    low = cli([*base, "--fail-below", f"recall@10.lower={between}"])
    assert low.exit_code == 1 and low.json()["gates"][0]["name"] == "recall.mean_ci95_low"
    assert low.json()["gates"][0]["value"] == lo
    old = cli([*base, "--fail-below", f"recall@10={between}", "--gate-on", "lower"])  # the hidden old spelling
    assert old.exit_code == 1 and old.json()["gates"] == low.json()["gates"]
    both = cli([*base, "--fail-below", f"recall@10.lower={between}", "--fail-below", f"recall@10.mean={between}"])
    assert both.exit_code == 1 and [g["passed"] for g in both.json()["gates"]] == [False, True]
    assert cli([*base, "--fail-below", "knn-recall@10=0.999"]).exit_code == 1
    assert_one_line_error(cli([*base, "--fail-below", "recall@5=0.5"]))


def test_a_gate_may_name_the_declared_figure_without_k(cli, hnsw_file):
    """``--fail-below recall.mean=X`` (the report's key, as every command's FIGURE=X) gates recall@k
    of the run's k, as recall@10=X does; knn_recall.mean and recall.lower likewise; an unknown
    figure is one line naming --fail-below."""
    base = ["recall", hnsw_file, "--n-queries", "100", "--resamples", "200", "--set", "efSearch=8", "--json"]
    r = cli(base).json()
    mean, knn, lo = r["recall"]["mean"], r["knn_recall"]["mean"], r["recall"]["mean_ci95"][0]
    res = cli([*base, "--fail-below", f"recall.mean={mean}", "--fail-below", f"knn_recall.mean={knn + 1e-6}",
               "--fail-below", f"recall.lower={lo}"])
    assert res.exit_code == 1, res
    assert [(g["name"], g["value"], g["passed"]) for g in res.json()["gates"]] == [
        ("recall.mean", mean, True), ("knn_recall.mean", knn, False), ("recall.mean_ci95_low", lo, True)]
    bad = cli([*base, "--fail-below", "precision.mean=0.5"])
    assert_one_line_error(bad)
    assert "--fail-below 'precision.mean=0.5'" in bad.stderr, bad.stderr


def test_bad_input_is_one_line_exit_2(cli, cli_subprocess, hnsw_file, tmp_path):
    d = hnsw_file.parent
    np.save(d / "q7.npy", np.ones((3, 7), np.float32))
    cases = [
        (["--sweep", "nprobe=1,2"], "no search setting"),
        (["--k", "700"], "larger than the corpus"),
        (["--queries", d / "q7.npy"], "dimension 7"),
        (["--set", "efSearch=0"], ">= 1"),
    ]
    for extra, msg in cases:
        res = cli(["recall", hnsw_file, *extra, "--n-queries", "20"])
        assert_one_line_error(res)
        assert msg in res.stderr, res
    X = np.load(d / "X.npy")
    q = faiss.IndexIVFPQ(faiss.IndexFlatL2(D), D, 4, 4, 4)
    q.cp.min_points_per_centroid = 1
    q.pq.cp.min_points_per_centroid = 1
    q.train(X)
    q.add(X)
    faiss.write_index(q, str(d / "pq.faiss"))
    res = cli_subprocess(["recall", d / "pq.faiss", "--n-queries", "20", "--report", tmp_path / "r.json"])
    assert_one_line_error(res)
    assert "--vectors" in res.stderr and not (tmp_path / "r.json").exists()


def test_compare_against_a_stored_report(cli, hnsw_file, tmp_path):
    base = ["recall", hnsw_file, "--n-queries", "200", "--resamples", "200", "--json"]
    assert cli([*base, "--set", "efSearch=64", "--report", tmp_path / "good.json"]).exit_code == 0
    res = cli([*base, "--set", "efSearch=2", "--report", tmp_path / "bad.json"])
    assert res.exit_code == 0
    cmp = cli(["compare", tmp_path / "good.json", tmp_path / "bad.json", "--fail-on-significant-drop", "--json"])
    assert cmp.exit_code == 1, cmp
    figs = {f["figure"]: f for f in cmp.json()["figures"]}
    assert figs["recall.mean"]["direction"] == "higher" and figs["recall.mean"]["beyond_noise"] is True
    assert figs["latency.index.median_ms"]["direction"] == "lower"
    assert figs["recall.share_below"]["direction"] == "lower"
    import jsonschema

    jsonschema.validate(json.loads((tmp_path / "good.json").read_text()), json_schema("recall"))


def test_against_on_the_command_line_gates_a_worse_setting(cli, hnsw_file):
    base = ["recall", hnsw_file, "--n-queries", "200", "--resamples", "200", "--json", "--set", "efSearch=64"]
    res = cli([*base, "--against", hnsw_file, "--against-set", "efSearch=2", "--fail-on", "worse"])
    assert res.exit_code == 1, res
    r = res.json()
    assert r["paired"]["recall.mean"]["verdict"] == "worse"
    gates = {g["name"]: g["passed"] for g in r["gates"]}
    assert gates == {"paired.recall.mean.difference_ci95_high": False, "paired.knn_recall.mean.difference_ci95_high": False}
    assert_one_line_error(cli([*base, "--against-set", "efSearch=2"]))  # --against-set needs --against


def test_a_password_never_appears_in_an_error(cli):
    pytest.importorskip("psycopg")
    res = cli(["recall", "postgresql://user:hunter2@127.0.0.1:1/db?table=items&column=embedding"])
    assert_one_line_error(res)
    assert "hunter2" not in res.stderr and "user:***@127.0.0.1:1" in res.stderr
