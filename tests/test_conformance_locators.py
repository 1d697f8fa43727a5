"""Every documented locator form (docs/stores.md, docs/recall.md), parsed by the one parser
(:mod:`embedcheck.io.locators`), through every command that takes an embedding argument: the
command opens it and gives the figures of the ``.npy`` of the same rows. Real stores: parquet
(file, folder), Arrow IPC, Lance / LanceDB, a real PostgreSQL + pgvector (the ``pg_uri`` fixture,
reached through each URI spelling libpq takes) and FAISS files. Also: the parser's round trips and
redaction, folder stores that link outside their folder, duplicate store ids, FAISS indexes whose
reconstruction is not the vectors.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from conftest import assert_one_line_error

from embedcheck.errors import InputError
from embedcheck.io.locators import Locator, mask_secrets, parse

N, D = 60, 8
RNG = np.random.default_rng(33)
T = RNG.standard_normal((N, D)).astype(np.float32)
T /= np.linalg.norm(T, axis=1, keepdims=True)  # unit rows: cosine and inner product rank alike
B = (T + 0.4 * RNG.standard_normal((N, D))).astype(np.float32)  # "another model" of the same rows
Q = (T[:20] + 0.3 * RNG.standard_normal((20, D))).astype(np.float32)
LABELS = [f"c{i % 3}" for i in range(N)]

# ---- the parser: every documented form, round trips, redaction --------------------------------------

PG_FORMS = [  # (locator, the libpq URI it must give, table, column, id)
    ("postgresql://postgres@/postgres?host=/run/pg&table=items&column=emb",
     "postgresql://postgres@/postgres?host=/run/pg", "items", "emb", None),
    ("postgresql:///postgres?host=/path/to/socket&user=postgres&table=scifact&column=embedding",
     "postgresql:///postgres?host=/path/to/socket&user=postgres", "scifact", "embedding", None),
    ("postgresql://reader:PASSWORD@db.internal:6543/app?table=documents&column=embedding&id=doc_id",
     "postgresql://reader:PASSWORD@db.internal:6543/app", "documents", "embedding", "doc_id"),
    ("postgres://u@h/db?password=pw&sslmode=disable&table=s.t&column=c",
     "postgres://u@h/db?password=pw&sslmode=disable", "s.t", "c", None),
    ("postgresql:///app?host=/var/run/postgresql&table=documents&column=embedding&id=doc_id",
     "postgresql:///app?host=/var/run/postgresql", "documents", "embedding", "doc_id"),
    ("postgresql://postgres:@/postgres?host=/tmp/x&table=t%20one&column=emb",
     "postgresql://postgres:@/postgres?host=/tmp/x", "t one", "emb", None),
]


@pytest.mark.parametrize("raw, conninfo, table, column, id_", PG_FORMS)
def test_pg_forms_keep_the_libpq_uri_as_written(raw, conninfo, table, column, id_):
    psycopg = pytest.importorskip("psycopg")
    from psycopg.conninfo import conninfo_to_dict

    loc = parse(raw)
    assert (loc.kind, loc.conninfo, loc.table, loc.column, loc.id) == ("postgres", conninfo, table, column, id_)
    # libpq reads the same parameters from the locator minus embedcheck's keys: no "invalid
    # connection option" (the // of an empty authority kept)
    want = conninfo_to_dict(conninfo)
    assert "postgresql:/" not in want and want.get("dbname") == conninfo.split("/")[3].split("?")[0]
    assert psycopg.conninfo.make_conninfo(conninfo)  # libpq's own parser takes it
    from embedcheck.io.stores import split_pg

    assert split_pg(raw)[0] == conninfo  # the ANN side gets the same URI (once rebuilt without its //)


def test_every_path_form_parses_to_its_kind(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "part-0.parquet").write_bytes(b"")
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "part-0.parquet").write_bytes(b"")
    (tmp_path / "set" / "manifest.json").write_text("{}")
    cases = {
        "x.parquet": ("parquet", "x.parquet", None, None, None),
        "x.parquet?column=emb&id=doc": ("parquet", "x.parquet", None, "emb", "doc"),
        str(tmp_path / "folder"): ("parquet", str(tmp_path / "folder"), None, None, None),
        str(tmp_path / "folder") + "?column=v": ("parquet", str(tmp_path / "folder"), None, "v", None),
        "x.arrow": ("arrow", "x.arrow", None, None, None), "x.feather?id=k": ("arrow", "x.feather", None, None, "k"),
        "d/x.lance": ("lance", "d/x.lance", None, None, None),
        "lancedb:///abs/db/items": ("lancedb", "/abs/db", "items", None, None),
        "lancedb://rel/db/items?column=vector&id=doc": ("lancedb", "rel/db", "items", "vector", "doc"),
        "lancedb://vectors.lancedb/model_a/": ("lancedb", "vectors.lancedb", "model_a", None, None),
        "i.faiss": ("faiss", "i.faiss", None, None, None), "i.index": ("faiss", "i.index", None, None, None),
        "h.bin": ("hnswlib", "h.bin", None, None, None), "h.hnsw": ("hnswlib", "h.hnsw", None, None, None),
    }
    for raw, want in cases.items():
        loc = parse(raw)
        assert (loc.kind, loc.path, loc.table, loc.column, loc.id) == want, raw
        assert loc.name == raw and parse(loc) is loc
    for plain in ("x.npy", str(tmp_path / "set"), "labels.jsonl", str(tmp_path)):
        assert parse(plain) is None, plain
    for bad, msg in (("x.parquet?col=emb", "unknown selector 'col'"), ("x.parquet?id=", "?id= is empty"),
                     ("lancedb://items", "needs a database folder and a table name"),
                     ("x.npy?column=emb", "follow a store"), ("h.bin?column=x", "takes no ?column="),
                     ("postgresql://u:pw@h/db?table=t", "needs ?table=TABLE&column=COLUMN")):
        with pytest.raises(InputError, match=re.escape(msg)) as e:
            parse(bad)
        assert "pw" not in str(e.value)
    # the stores see the same parse (an hnswlib file is an index, not a store)
    from embedcheck.io.stores import is_store, parse_locator

    assert parse_locator("x.parquet?column=emb") == parse("x.parquet?column=emb")
    assert parse_locator("h.bin") is None and not is_store("h.bin")


@pytest.mark.parametrize("raw", [
    "postgresql://ann:s3cret@db.example/prod?table=items&column=emb",
    "postgresql://ann:s3%40cret@db.example:5/prod?table=items&column=emb",
    "postgresql:///prod?host=/s&user=ann&password=s3cret&table=items&column=emb",
    "postgres://ann@h/prod?PASSWORD=s3cret&table=items&column=emb",
])
def test_the_password_is_in_the_conninfo_only(raw):
    loc = parse(raw)
    pw = "s3cret" if "s3cret" in raw else "s3@cret"
    assert pw.replace("@", "%40") in loc.conninfo or pw in loc.conninfo
    for shown in (loc.name, repr(loc), str(loc), mask_secrets(raw), repr([loc]), f"{loc}"):
        assert "s3cret" not in shown and "s3%40cret" not in shown and "s3@cret" not in shown, shown
        assert "***" in shown
    # masking a report's JSON text (the CLI's last net) keeps it JSON, the locator shown masked
    assert json.loads(mask_secrets(json.dumps({"index": raw, "n": 1}))) == {"index": loc.name, "n": 1}
    # a library message echoing the password, in either spelling, is masked
    msg = loc.redact(f"connection to server failed for password {pw} / {quote(pw)}")
    assert pw not in msg and quote(pw) not in msg and msg.count("***") == 2


def test_an_empty_password_stays_empty_and_locators_compare_by_content():
    loc = parse("postgresql://postgres:@/postgres?host=/tmp/x&table=t&column=c")
    assert loc.name == "postgresql://postgres:@/postgres?host=/tmp/x&table=t&column=c" and loc.secrets == ()
    assert parse("x.parquet?column=a") == Locator("parquet", "x.parquet", "x.parquet?column=a", column="a")


# ---- real stores of one table, every form -------------------------------------------------------------


def _arrow(X, ids, labels=True, fixed=True):
    import pyarrow as pa

    vec = (pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), X.shape[1]) if fixed
           else pa.array(X.tolist(), pa.list_(pa.float32())))
    cols = {"id": pa.array(ids, pa.int64()), "emb": vec}
    if labels:
        cols["label"] = pa.array([LABELS[i % N] for i in range(len(ids))])
    return pa.table(cols)


def _npy(d: Path, name, X, ids, labels=False) -> Path:
    np.save(d / f"{name}.npy", X)
    with open(d / f"{name}.jsonl", "w", encoding="utf-8") as f:
        for i, v in enumerate(ids):
            f.write(json.dumps({"id": int(v), **({"label": LABELS[i]} if labels else {})}) + "\n")
    return d / f"{name}.npy"


def _pg_table(pg_uri, table, X):
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
        conn.execute(sql.SQL(f"CREATE TABLE {{}} (id bigint PRIMARY KEY, emb vector({X.shape[1]}), label text)").format(
            sql.Identifier(table)))
        with conn.cursor().copy(sql.SQL("COPY {} (id, emb, label) FROM STDIN").format(sql.Identifier(table))) as cp:
            for i, x in enumerate(X):
                cp.write_row([i, "[" + ",".join(repr(float(v)) for v in x) + "]", LABELS[i]])
        conn.execute(sql.SQL("CREATE INDEX ON {} USING hnsw (emb vector_cosine_ops)").format(sql.Identifier(table)))
        port = conn.execute("SHOW port").fetchone()[0]
    return port


def pg_forms(pg_uri: str, table: str, port: str) -> dict[str, str]:
    """The table through every documented spelling of a libpq URI (the server trusts local
    connections, so a password is accepted and ignored: it must still never be shown)."""
    assert pg_uri.startswith("postgresql://postgres:@/postgres?host="), pg_uri
    sock = pg_uri.split("host=", 1)[1]
    sel = f"table={table}&column=emb"
    return {
        "pg_fixture": f"{pg_uri}&{sel}",
        "pg_user_at": f"postgresql://postgres@/postgres?host={sock}&{sel}",
        "pg_no_authority": f"postgresql:///postgres?host={sock}&user=postgres&{sel}",
        "pg_postgres_scheme": f"postgres:///postgres?host={sock}&user=postgres&{sel}&id=id",
        "pg_host_port": f"postgresql://postgres@{quote(sock, safe='')}:{port}/postgres?{sel}",
        "pg_netloc_password": f"postgresql://postgres:hunter2@/postgres?host={sock}&{sel}",
        "pg_param_password": f"postgresql:///postgres?{sel}&host={sock}&user=postgres&password=hunter2",
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory, request):
    """T in every form; the .npy references (T, B, Q with id sidecars), labels, qrels, scores and a
    head; the FAISS indexes recall reads."""
    pytest.importorskip("pyarrow")
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("locators")
    ids = list(range(N))
    forms: dict[str, str] = {}
    pq.write_table(_arrow(T, ids), d / "t.parquet", row_group_size=16)
    forms["parquet"] = str(d / "t.parquet")
    forms["parquet_selectors"] = str(d / "t.parquet") + "?column=emb&id=id"
    (d / "t_parts").mkdir()
    for k, s in enumerate(range(0, N, 25)):
        pq.write_table(_arrow(T, ids, fixed=False).slice(s, 25), d / "t_parts" / f"part-{k:03d}.parquet")
    forms["parquet_folder"] = str(d / "t_parts")
    feather.write_feather(_arrow(T, ids, fixed=False), d / "t.arrow", chunksize=20)
    forms["arrow"] = str(d / "t.arrow")
    feather.write_feather(_arrow(T, ids), d / "t.feather")
    forms["feather"] = str(d / "t.feather")
    if _have("lancedb"):
        import lancedb

        lancedb.connect(str(d / "db")).create_table("t", _arrow(T, ids))
        forms["lancedb_abs"] = f"lancedb://{d / 'db'}/t"
        forms["lancedb_rel"] = "lancedb://db/t?column=emb"  # relative to the run's folder
        forms["lance"] = str(d / "db" / "t.lance")
    if _have("faiss"):
        import faiss

        idx = faiss.IndexIDMap(faiss.IndexFlatIP(D))
        idx.add_with_ids(T, np.arange(N, dtype=np.int64))
        faiss.write_index(idx, str(d / "t.faiss"))
        forms["faiss_idmap"] = str(d / "t.faiss")
        hn = faiss.IndexHNSWFlat(D, 8)
        hn.add(T)
        faiss.write_index(hn, str(d / "t.index"))
        forms["faiss_hnsw_index"] = str(d / "t.index")
    pg_uri = None
    if _have("pgserver") and _have("psycopg"):
        pg_uri = request.getfixturevalue("pg_uri")
        forms.update(pg_forms(pg_uri, "loc_t", _pg_table(pg_uri, "loc_t", T)))
    ref = {"T": _npy(d, "T", T, ids, labels=True), "B": _npy(d, "B", B, ids), "Q": _npy(d, "Q", Q, range(1000, 1020))}
    ref["labels"] = d / "labels.jsonl"
    ref["labels"].write_text("".join(json.dumps({"id": i, "label": LABELS[i]}) + "\n" for i in ids))
    ref["pairs"] = d / "pairs.jsonl"  # 0/1 per pair for threshold
    ref["pairs"].write_text("".join(json.dumps({"id": i, "label": int(i % 2 == 0)}) + "\n" for i in ids))
    ref["scores"] = d / "scores.jsonl"
    ref["scores"].write_text("".join(json.dumps({"id": i, "score": float((i * 7) % 5)}) + "\n" for i in ids))
    ref["qrels"] = d / "qrels.tsv"
    ref["qrels"].write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{1000 + q}\t{c}\t1\n" for q in range(20) for c in (q, (q + 7) % N)))
    return {"dir": d, "forms": forms, "ref": ref, "pg_uri": pg_uri}


def _have(mod: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(mod) is not None


TIMING = re.compile(r"(^|_)ms(_|$)|seconds|per_second")


def figures(d, prefix=""):
    out = {}
    if isinstance(d, dict):
        for k, v in d.items():
            if k not in ("seconds", "latency", "inputs", "models", "plot", "notes", "meta") and not TIMING.search(k):
                out.update(figures(v, f"{prefix}{k}."))
    elif isinstance(d, (list, tuple)):
        for i, v in enumerate(d):
            out.update(figures(v, f"{prefix}{i}."))
    elif isinstance(d, (int, float)) and not isinstance(d, bool):
        out[prefix[:-1]] = float(d)
    return out


def assert_same_figures(got, want, what, ids=True):
    fg, fw = figures(got), figures(want)
    if not ids:  # a store without ids: the rows it names carry no id
        fg, fw = ({k: v for k, v in f.items() if not any(re.search(r"(^|_)ids?$", part) for part in k.split("."))}
                  for f in (fg, fw))
    assert set(fg) == set(fw), (what, set(fg) ^ set(fw))
    bad = {k: (fg[k], fw[k]) for k in fw if not (np.isnan(fw[k]) and np.isnan(fg[k])) and abs(fg[k] - fw[k]) > 1e-9}
    assert not bad, (what, bad)


#: command -> (arguments with X for the embedding argument under test, an output the run writes or
#: None). Every command of spec.COMMANDS that reads an embedding argument is here or in NOT_HERE.
RUNS = {
    "aag": (["X", "{labels}", "--resamples", "20", "--map-queries", "30", "--json"], None),
    "probe": (["X", "{labels}", "{B}", "{labels}", "--resamples", "20", "--json"], None),
    "sts": (["X", "{B}", "{scores}", "--resamples", "20", "--json"], None),
    "train-head": (["X", "{labels}", "--kind", "lda", "-o", "{out}.safetensors", "--json"], "safetensors"),
    "project": (["X", "--head", "{head}", "-o", "{out}.npy", "-q"], "npy"),
    "neighbors": (["X", "{B}", "--k", "5", "--resamples", "20", "--json"], None),
    "anisotropy": (["X", "{B}", "--perms", "2", "--resamples", "20", "--json"], None),
    "retrieve": (["{Q}", "X", "{qrels}", "--k", "1", "--k", "10", "--resamples", "20", "--json"], None),
    "recall": (["{flat}", "--queries", "X", "--k", "5", "--resamples", "20", "--json"], None),
    "drift": (["X", "{B}", "--permutations", "20", "--json"], None),
    "compress": (["write", "X", "--to", "int8", "-o", "{out}.npy", "-q"], "npy"),
    "compress sweep": (["sweep", "--retrieval", "{Q}", "X", "{qrels}", "--precisions", "int8,binary",
                        "--resamples", "10", "--json"], None),
    "threshold": (["X", "{B}", "{pairs}", "--resamples", "20", "--json"], None),
    # the declared measurements (embedcheck.measures), as a plugin's would be
    "hubness": (["X", "--k", "5", "--resamples", "20", "--null-draws", "1", "--json"], None),
    "dedup": (["X", "--threshold", "0.5", "--floor-pairs", "1000", "--json"], None),
    "integrity": (["X", "--null-draws", "1", "--json"], None),
    "upgrade": (["X", "{B}", "--queries-old", "{Q}", "--queries-new", "{Q}", "--method", "procrustes,ridge",
                 "--resamples", "20", "--json"], None),
    "audit": (["X", "{labels}", "--k", "5", "--json"], None),
    "map": (["X", "--method", "pca", "-o", "{out}.html", "--json"], None),
}
#: commands with an embedding argument that the matrix does not run, and why
NOT_HERE = {
    "physscore": "its EMB rows are matched to the protocol's phrases by their text: a store of the phrase "
                 "embeddings is read by the same opener (covered by the rest of the matrix)",
    "shards": "splits and merges .npy files and shard sets, not stores",
}


def test_the_matrix_covers_every_command_that_takes_embeddings():
    from embedcheck.spec import COMMANDS, measurements

    takes = {c.name for c in COMMANDS if c.measurement or c.name in ("train-head", "project", "shards")}
    takes |= {m.group or m.name for m in measurements() if m.source == "built-in"}  # a verb: its command
    assert takes == {r.split()[0] for r in RUNS} | set(NOT_HERE), takes ^ ({r.split()[0] for r in RUNS} | set(NOT_HERE))


def _args(spec, x, w, out):
    ref = w["ref"]
    fill = {k: str(v) for k, v in ref.items()} | {"out": str(out), "head": str(w["head"]), "flat": str(w["flat"])}
    return [x if a == "X" else a.format(**fill) for a in spec]


@pytest.fixture(scope="module")
def matrix_world(world, tmp_path_factory):
    faiss = pytest.importorskip("faiss")
    from typer.testing import CliRunner

    from embedcheck.cli import app

    d = world["dir"]
    flat = faiss.IndexFlatIP(D)
    flat.add(B)
    faiss.write_index(flat, str(d / "flat.faiss"))
    world["flat"] = d / "flat.faiss"
    r = CliRunner().invoke(app, ["train-head", str(world["ref"]["T"]), str(world["ref"]["labels"]), "--kind", "lda",
                                 "-o", str(d / "head.safetensors"), "-q"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    world["head"] = d / "head.safetensors"
    return world


#: forms without ids (a FAISS index without an IndexIDMap) and the commands that need a store's ids
NO_IDS = {"faiss_hnsw_index"}
NEED_IDS = {"retrieve", "compress sweep", "upgrade"}


def _run_cmd(cli, cmd, spec, out_kind, x, w, out, form=""):
    args = _args(spec, x, w, out)
    res = cli([cmd.split()[0], *args])
    if form in NO_IDS and cmd in NEED_IDS:  # refused in one line naming the missing ids
        assert_one_line_error(res)
        assert "has no id column" in res.stderr or "carry no ids" in res.stderr, res
        return None
    assert res.exit_code == 0, (cmd, x, res)
    if out_kind == "npy":
        return np.load(f"{out}.npy")
    got = res.json()
    return got


def test_every_form_through_every_command_gives_the_figures_of_the_npy(cli, matrix_world, monkeypatch):
    """One run per (form, command), in this process: the report's figures (latency and input
    names left out) or the written vectors equal those of the run on the .npy of the same rows;
    no password is ever shown."""
    w = matrix_world
    monkeypatch.chdir(w["dir"])  # lancedb://db/t is relative to the run's folder
    out = w["dir"] / "out"
    out.mkdir(exist_ok=True)
    want = {cmd: _run_cmd(cli, cmd, spec, kind, str(w["ref"]["T"]), w, out / f"ref_{cmd.replace(' ', '_')}")
            for cmd, (spec, kind) in RUNS.items()}
    assert len(w["forms"]) >= 7
    for form, x in w["forms"].items():
        for cmd, (spec, kind) in RUNS.items():
            got = _run_cmd(cli, cmd, spec, kind, x, w, out / f"{form}_{cmd.replace(' ', '_')}", form)
            if got is None:
                continue
            if kind == "npy":
                assert np.array_equal(got, want[cmd]), (form, cmd)
            else:
                assert "hunter2" not in json.dumps(got), (form, cmd)
                assert_same_figures(got, want[cmd], (form, cmd), ids=form not in NO_IDS)


def test_recall_opens_the_index_through_every_pg_form(cli, world):
    """recall INDEX with each libpq spelling (the measured defect: postgresql:///db?host=... became
    'postgresql:/db?host=...' and libpq refused it): the same report as the fixture's own URI, the
    ground truth read from the table equals the rows, and no password shown."""
    if world["pg_uri"] is None:
        pytest.skip("no PostgreSQL (pgserver, psycopg)")
    pytest.importorskip("pgvector")
    from embedcheck.io.stores import index_vectors, open_index

    w = world
    forms = {k: v for k, v in w["forms"].items() if k.startswith("pg_")}
    args = ["--queries", str(w["ref"]["Q"]), "--k", "5", "--resamples", "20", "--json"]
    base = cli(["recall", forms["pg_fixture"], *args])
    assert base.exit_code == 0, base
    for name, loc in forms.items():
        res = cli(["recall", loc, *args])
        assert res.exit_code == 0, (name, res)
        assert "hunter2" not in res.stdout + res.stderr
        rep = res.json()
        assert rep["kind"] == "pgvector-hnsw" and rep["n"] == N and rep["dim"] == D
        assert_same_figures(rep, base.json(), name)
        idx = open_index(loc)
        try:
            ids, X = index_vectors(idx)
            assert np.array_equal(ids, np.arange(N)) and np.array_equal(X, T), name
            assert "hunter2" not in idx.locator and "hunter2" not in repr(idx)
        finally:
            idx.close()


def test_the_measured_defect_recall_on_a_uri_without_authority(cli, world):
    """The issue's own command line."""
    if world["pg_uri"] is None:
        pytest.skip("no PostgreSQL (pgserver, psycopg)")
    loc = world["forms"]["pg_no_authority"]
    res = cli(["recall", loc, "--queries", world["ref"]["Q"], "--k", "5", "--resamples", "0", "--json"])
    assert res.exit_code == 0, res
    assert res.json()["index"] == loc and "invalid connection option" not in res.stderr


# ---- folder stores keep their files inside ------------------------------------------------------------


def test_a_folder_store_refuses_a_file_linked_from_outside(cli, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    pq.write_table(_arrow(T, list(range(N))), outside / "secret.parquet")
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(_arrow(T[:30], list(range(30))), folder / "part-000.parquet")
    os.symlink(outside / "secret.parquet", folder / "part-001.parquet")
    res = cli(["drift", folder, folder, "--permutations", "5", "--report", tmp_path / "r.json"])
    assert_one_line_error(res)
    assert "part-001.parquet resolves outside the store's folder" in res.stderr and "secret.parquet" in res.stderr, res
    assert not (tmp_path / "r.json").exists()
    # a link that stays inside is fine, and so is the whole folder reached through a link
    os.remove(folder / "part-001.parquet")
    (folder / "sub").mkdir()
    pq.write_table(_arrow(T[30:], list(range(30, N))), folder / "sub" / "b.parquet")
    os.symlink(folder / "sub" / "b.parquet", folder / "part-001.parquet")
    os.symlink(folder, tmp_path / "via_link")
    for x in (folder, tmp_path / "via_link"):
        from embedcheck.io.source import open_source
        from embedcheck.io.stores import close_all

        close_all()
        assert np.array_equal(np.asarray(open_source(str(x))), T), x


def test_a_lance_dataset_refuses_a_data_file_linked_from_outside(cli, tmp_path):
    lancedb = pytest.importorskip("lancedb")
    import shutil

    lancedb.connect(str(tmp_path / "db")).create_table("t", _arrow(T, list(range(N))))
    lancedb.connect(str(tmp_path / "other")).create_table("t", _arrow(B, list(range(N))))
    data = sorted((tmp_path / "db" / "t.lance" / "data").iterdir())
    other = sorted((tmp_path / "other" / "t.lance" / "data").iterdir())
    assert len(data) == 1 and len(other) == 1
    shutil.copy(other[0], tmp_path / "copy.lance")
    os.remove(data[0])
    os.symlink(tmp_path / "copy.lance", data[0])  # same name, the bytes of another table, outside
    for loc in (str(tmp_path / "db" / "t.lance"), f"lancedb://{tmp_path / 'db'}/t"):
        res = cli(["anisotropy", loc, str(tmp_path / "db" / "t.lance"), "--perms", "2"])
        assert_one_line_error(res)
        assert "resolves outside the store's folder" in res.stderr and "copy.lance" in res.stderr, res


# ---- duplicate ids ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["parquet", "lance", "faiss"])
def test_duplicate_store_ids_are_one_warning_with_their_count(cli, tmp_path, kind):
    """A store whose ids repeat: one warning line with the count and the first repeat as it is
    opened, whether or not the command pairs rows by id; never twice in one run."""
    ids = list(range(N))
    ids[10], ids[20], ids[30] = 5, 5, 6  # rows 10, 20, 30 repeat ids 5, 5 and 6
    if kind == "parquet":
        pq = pytest.importorskip("pyarrow.parquet")
        pq.write_table(_arrow(T, ids), tmp_path / "dup.parquet")
        loc = str(tmp_path / "dup.parquet")
    elif kind == "lance":
        lancedb = pytest.importorskip("lancedb")
        lancedb.connect(str(tmp_path / "db")).create_table("dup", _arrow(T, ids))
        loc = f"lancedb://{tmp_path / 'db'}/dup"
    else:
        faiss = pytest.importorskip("faiss")
        idx = faiss.IndexIDMap(faiss.IndexFlatIP(D))
        idx.add_with_ids(T, np.asarray(ids, dtype=np.int64))
        faiss.write_index(idx, str(tmp_path / "dup.faiss"))
        loc = str(tmp_path / "dup.faiss")
    want = f"warning: store {loc} has 3 duplicate ids (first: 5)"
    np.save(tmp_path / "b.npy", B)  # no sidecar: nothing to pair with
    for args in (["neighbors", loc, tmp_path / "b.npy", "--k", "3", "--resamples", "10", "--json"],
                 ["drift", loc, tmp_path / "b.npy", "--permutations", "5", "--json"],
                 ["anisotropy", loc, loc, "--perms", "2", "--json"]):  # the same store twice: still once
        from embedcheck.io.stores import close_all

        close_all()
        res = cli(args)
        lines = [ln for ln in res.stderr.splitlines() if "duplicate id" in ln]
        assert res.exit_code == 0, res
        assert len(lines) == 1 and lines[0].startswith(want), res.stderr
    # commands that refuse repeated ids: their one error line alone, the opening warning dropped
    for args in (["hubness", loc, "--k", "3", "--null-draws", "0", "--resamples", "10"],
                 ["dedup", loc, "--threshold", "0.9"]):
        from embedcheck.io.stores import close_all

        close_all()
        res = cli(args)
        assert_one_line_error(res)
        assert "repeat" in res.stderr and "5" in res.stderr, res.stderr


# ---- FAISS indexes that do not keep the vectors -----------------------------------------------------


def _faiss_file(tmp_path, kind):
    faiss = pytest.importorskip("faiss")
    X = np.random.default_rng(0).standard_normal((300, D)).astype(np.float32)
    p = tmp_path / f"{kind}.faiss"
    if kind == "binary":
        b = faiss.IndexBinaryFlat(64)
        b.add(np.packbits(X > 0, axis=1).repeat(8, axis=1)[:, :8])
        faiss.write_index_binary(b, str(p))
        return p, X
    idx = {"lsh": lambda: faiss.IndexLSH(D, 16), "rabitq": lambda: faiss.IndexRaBitQ(D),
           "pca_flat": lambda: faiss.index_factory(D, "PCA4,Flat"), "pq": lambda: faiss.IndexPQ(D, 2, 4),
           "sq8": lambda: faiss.IndexScalarQuantizer(D, faiss.ScalarQuantizer.QT_8bit),
           "hnsw_sq": lambda: faiss.IndexHNSWSQ(D, faiss.ScalarQuantizer.QT_8bit, 4),
           "flat": lambda: faiss.IndexFlatL2(D), "ivf_flat": lambda: faiss.IndexIVFFlat(faiss.IndexFlatL2(D), D, 4)}[kind]()
    idx.train(X)
    idx.add(X)
    faiss.write_index(idx, str(p))
    return p, X


@pytest.mark.parametrize("kind", ["binary", "lsh", "rabitq", "pca_flat"])
def test_a_faiss_index_whose_reconstruction_is_not_the_vectors_is_refused(cli, tmp_path, kind):
    p, _ = _faiss_file(tmp_path, kind)
    res = cli(["drift", p, p, "--permutations", "5", "--report", tmp_path / "r.json"])
    assert_one_line_error(res)
    assert str(p) in res.stderr and ("not the vectors" in res.stderr), res
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("kind, exact", [("flat", True), ("ivf_flat", True), ("pq", False), ("sq8", False),
                                         ("hnsw_sq", False)])
def test_faiss_indexes_that_keep_the_vectors_exactly_or_as_floats_are_read(cli, tmp_path, kind, exact):
    """Flat and IVF-Flat give the vectors back exactly, silently; PQ / SQ give their float
    reconstruction, with one warning saying it is an approximation."""
    import faiss

    p, X = _faiss_file(tmp_path, kind)
    inner = faiss.read_index(str(p))
    if isinstance(inner, faiss.IndexIVF):
        inner.make_direct_map()
    R = inner.reconstruct_n(0, 300)
    assert np.array_equal(R, X) is exact
    np.save(tmp_path / "r.npy", R)
    np.save(tmp_path / "o.npy", np.random.default_rng(1).standard_normal((300, D)).astype(np.float32))
    got = cli(["anisotropy", p, tmp_path / "o.npy", "--perms", "2", "--json"])
    want = cli(["anisotropy", tmp_path / "r.npy", tmp_path / "o.npy", "--perms", "2", "--json"])
    assert got.exit_code == 0 and want.exit_code == 0, got
    assert_same_figures(got.json(), want.json(), kind)
    assert ("approximation" in got.stderr) is (not exact), got.stderr
