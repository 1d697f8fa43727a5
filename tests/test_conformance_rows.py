"""Row identity across input kinds: every row a report names carries the same ``id`` and ``text``
whatever the rows are stored in — a ``.npy`` with its ``.jsonl`` sidecar, a shard set, parquet,
Arrow, Lance, pgvector (a real server, the ``pg_uri`` fixture) — because the commands take them from
the row source (:class:`embedcheck.io.source.Source`), never from a path's sidecar.

Also: drift's per-cluster flags under multiple-testing control (Fisher's exact p-values, Holm's
adjustment) against a brute-force closed-testing computation.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

import embedcheck
from embedcheck.geometry import drift as geo
from embedcheck.io.source import open_source

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

DIM = 16
N_REF, N_CUR = 120, 110


def _rows():
    rng = np.random.default_rng(7)
    ref = rng.normal(size=(N_REF, DIM)).astype(np.float32)
    cur = rng.normal(size=(N_CUR, DIM)).astype(np.float32)
    cur[:40] += 1.5  # a region that moved: clusters and typical rows to name
    return ref, cur


REF, CUR = _rows()
QUERIES = (REF[:30] + np.random.default_rng(8).normal(scale=0.3, size=(30, DIM))).astype(np.float32)
SIDES = {
    "ref": (REF, [f"r-{i:04d}" for i in range(N_REF)], [f"référence {i} «{i * 7 % 13}»" for i in range(N_REF)]),
    "cur": (CUR, [f"c-{i:04d}" for i in range(N_CUR)], [f"courant {i} — ü{i % 5}" for i in range(N_CUR)]),
    "ref2": ((REF + np.random.default_rng(9).normal(scale=0.5, size=REF.shape)).astype(np.float32),
             [f"r-{i:04d}" for i in range(N_REF)], [f"référence {i} «{i * 7 % 13}»" for i in range(N_REF)]),
    "q": (QUERIES, [f"q-{i:04d}" for i in range(30)], [f"query {i}" for i in range(30)]),
}
KINDS = ["npy", "shards", "parquet", "arrow", "lance", "pgvector"]


def _table(X, ids, texts):
    vec = pa.FixedSizeListArray.from_arrays(pa.array(X.astype(np.float32).ravel()), X.shape[1])
    return pa.table({"id": pa.array(ids, pa.string()), "emb": vec, "text": pa.array(texts, pa.string())})


def _put(kind: str, folder: Path, name: str, pg: str | None) -> str:
    X, ids, texts = SIDES[name]
    folder.mkdir(parents=True, exist_ok=True)
    if kind in ("npy", "shards"):
        np.save(folder / f"{name}.npy", X)
        with open(folder / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for i, t in zip(ids, texts):
                f.write(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n")
        if kind == "npy":
            return str(folder / f"{name}.npy")
        embedcheck.shards_split(folder / f"{name}.npy", 25, folder / f"{name}_shards")
        return str(folder / f"{name}_shards")
    if kind == "parquet":
        pq.write_table(_table(X, ids, texts), folder / f"{name}.parquet", row_group_size=32)
        return str(folder / f"{name}.parquet")
    if kind == "arrow":
        import pyarrow.feather as feather

        feather.write_feather(_table(X, ids, texts), folder / f"{name}.arrow", chunksize=40)
        return str(folder / f"{name}.arrow")
    if kind == "lance":
        lance = pytest.importorskip("lance")
        lance.write_dataset(_table(X, ids, texts), str(folder / f"{name}.lance"))
        return str(folder / f"{name}.lance")
    if kind == "pgvector":
        import psycopg
        from psycopg import sql

        table = f"rows_{name}"
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
            conn.execute(sql.SQL("CREATE TABLE {} (id text PRIMARY KEY, emb vector({}), text text)").format(
                sql.Identifier(table), sql.Literal(DIM)))
            with conn.cursor().copy(sql.SQL("COPY {} (id, emb, text) FROM STDIN").format(sql.Identifier(table))) as cp:
                for i, x in enumerate(X):
                    cp.write_row([ids[i], "[" + ",".join(repr(float(f)) for f in x) + "]", texts[i]])
        return f"{pg}&table={table}&column=emb"
    raise AssertionError(kind)


_MADE: dict = {}


@pytest.fixture
def inputs(request, tmp_path_factory):
    """``inputs(kind)`` → {'ref', 'cur', 'q'}: the same rows (ids, texts) in an input of that kind."""

    def make(kind):
        if kind not in _MADE:
            pg = request.getfixturevalue("pg_uri") if kind == "pgvector" else None
            d = tmp_path_factory.mktemp(f"rows_{kind}")
            _MADE[kind] = {name: _put(kind, d, name, pg) for name in SIDES}
        return _MADE[kind]

    return make


def _named_rows(report: dict) -> list[dict]:
    """Every row entry of a drift report (cluster examples, typical rows), in report order."""
    out = [it["example"] for it in report["clusters"]["items"] if "example" in it]
    return out + report["typical"]["cur"] + report["typical"]["ref"]


def _keys(d, prefix=""):
    if isinstance(d, dict):
        for k, v in d.items():
            yield f"{prefix}{k}"
            yield from _keys(v, f"{prefix}{k}.")
    elif isinstance(d, list):
        for v in d:
            yield from _keys(v, prefix)


# ---- the Source carries the rows' identity -------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_source_gives_ids_and_texts_of_every_input_kind(inputs, kind):
    for name in ("ref", "cur"):
        src = open_source(inputs(kind)[name])
        X, ids, texts = SIDES[name]
        assert src.ids() == ids and src.texts() == texts
        assert src.labels() is None  # no such field in any of them
        np.testing.assert_array_equal(np.asarray(src), X)
        assert src.row_fields([3, 0]) == {3: {"id": ids[3], "text": texts[3]}, 0: {"id": ids[0], "text": texts[0]}}


def test_an_array_has_no_row_identity():
    src = open_source(REF)
    assert src.ids() is None and src.texts() is None and src.row_fields([1]) == {1: {}}


def test_a_sidecar_of_another_row_count_names_no_row(tmp_path):
    """Never the wrong id on a row: a sidecar one record short is refused when the input is opened,
    in one line naming the sidecar and both counts (the one sidecar policy, io/sidecar.py) — no
    longer dropped in silence."""
    from embedcheck.errors import InputError

    np.save(tmp_path / "x.npy", REF)
    (tmp_path / "x.jsonl").write_text("".join(json.dumps({"id": f"z{i}"}) + "\n" for i in range(N_REF - 1)))
    with pytest.raises(InputError) as exc:
        open_source(tmp_path / "x.npy").ids()
    msg = str(exc.value)
    assert "x.jsonl" in msg and f"{N_REF - 1} records" in msg and str(N_REF) in msg and "\n" not in msg


# ---- drift ------------------------------------------------------------------------------------------


def _drift(x):
    return embedcheck.drift(x["ref"], x["cur"], permutations=20, clusters=3, top=3, folds=3).to_dict()


@pytest.fixture(scope="module")
def drift_npy(tmp_path_factory):
    d = tmp_path_factory.mktemp("rows_drift_npy")
    return _drift({name: _put("npy", d, name, None) for name in ("ref", "cur")})


@pytest.mark.parametrize("kind", KINDS)
def test_drift_names_every_row_with_the_id_and_text_of_the_npy_case(inputs, drift_npy, kind):
    got = _drift(inputs(kind))
    want_rows, got_rows = _named_rows(drift_npy), _named_rows(got)
    assert len(want_rows) == 3 + 3 + 3
    for e in want_rows:  # the reference itself is right: each row's own id and text
        _, ids, texts = SIDES[e["side"]]
        assert e["id"] == ids[e["row"]] and e["text"] == texts[e["row"]], e
    assert got_rows == want_rows
    assert got["mmd"] == drift_npy["mmd"] and got["clusters"] == drift_npy["clusters"]


def test_cli_drift_on_two_pgvector_tables_names_rows_by_id_and_text(inputs, drift_npy, cli):
    x = inputs("pgvector")
    res = cli(["drift", x["ref"], x["cur"], "--permutations", "20", "--clusters", "3", "--top", "3",
               "--folds", "3", "--json"])
    assert res.exit_code == 0, res
    assert _named_rows(json.loads(res.stdout)) == _named_rows(drift_npy)


# ---- neighbors: names no row (its report is the same whatever the input) -----------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_neighbors_reports_the_same_over_every_input_kind_and_names_no_row(inputs, kind):
    def run(x):
        return embedcheck.neighbors(x["ref"], x["ref2"], k=5, resamples=50).to_dict()

    want, got = run(inputs("npy")), run(inputs(kind))
    assert 0.2 < want["overlap"] < 1.0  # B is another embedding of the same rows
    assert got == want  # rows matched by id alike (its inputs.rows_matched_by included)
    assert want["inputs"]["rows_matched_by"] == {"B": "id"}
    assert not {"id", "text", "example", "row"} & {k.rsplit(".", 1)[-1] for k in _keys(got)}


# ---- recall: the worst query by its id ----------------------------------------------------------------


@pytest.fixture(scope="module")
def ivf(tmp_path_factory):
    faiss = pytest.importorskip("faiss")
    d = tmp_path_factory.mktemp("rows_ivf")
    quant = faiss.IndexFlatL2(DIM)
    index = faiss.IndexIVFFlat(quant, DIM, 8)
    index.train(REF)
    index.add(REF)
    index.nprobe = 1  # approximate: some queries miss some neighbours
    path = d / "ref.faiss"
    faiss.write_index(index, str(path))
    return str(path)


@pytest.mark.parametrize("kind", KINDS)
def test_recall_names_the_worst_query_by_the_id_of_the_npy_case(inputs, ivf, kind):
    def run(q):
        return embedcheck.recall(ivf, queries=q, k=10, resamples=0).to_dict()

    want = run(inputs("npy")["q"])
    got = run(inputs(kind)["q"])
    per = embedcheck.recall(ivf, queries=QUERIES, k=10, resamples=0).results["per_query"]["recall"]
    worst = int(np.flatnonzero(per == per.min())[0])
    assert per.min() < 1.0  # a worst query worth naming
    assert want["recall"]["worst_query"] == SIDES["q"][1][worst]
    assert got["recall"] == want["recall"] and got["knn_recall"] == want["knn_recall"]


# ---- drift's cluster flags: Fisher's exact p, Holm's adjustment ---------------------------------------


def _fisher_brute(k1, n1, k2, n2):
    """Two-sided Fisher p by enumeration: tables with the cluster's size, at most as likely."""
    size, N = k1 + k2, n1 + n2

    def prob(x):  # CUR rows in the cluster: hypergeometric
        return math.comb(n2, x) * math.comb(n1, size - x) / math.comb(N, size)

    p_obs = prob(k2)
    return sum(prob(x) for x in range(max(0, size - n1), min(size, n2) + 1) if prob(x) <= p_obs * (1 + 1e-7))


def _holm_closed_testing(p):
    """Holm's adjusted p-values as closed testing with Bonferroni local tests: H_i is rejected at α
    iff every intersection H_S (i ∈ S) has min_{j∈S} p_j ≤ α/|S|, so adj_i = max_{S∋i} |S|·min_S p."""
    m = len(p)
    adj = []
    for i in range(m):
        others = [j for j in range(m) if j != i]
        best = 0.0
        for r in range(m):
            for S in itertools.combinations(others, r):
                T = (i, *S)
                best = max(best, len(T) * min(p[j] for j in T))
        adj.append(min(1.0, best))
    return adj


def test_fisher_p_equals_the_enumerated_hypergeometric_tail():
    for k1, n1, k2, n2 in [(3, 10, 7, 10), (40, 500, 62, 490), (0, 30, 5, 30), (12, 120, 12, 110)]:
        assert geo.fisher_p(k1, n1, k2, n2) == pytest.approx(_fisher_brute(k1, n1, k2, n2), rel=1e-9)


def test_holm_equals_closed_testing_brute_force():
    rng = np.random.default_rng(3)
    for m in (1, 2, 5, 8):
        for _ in range(20):
            p = rng.uniform(0, 0.2, m) ** rng.uniform(0.5, 3)
            np.testing.assert_allclose(geo.holm(p), _holm_closed_testing(list(p)), rtol=1e-12, atol=0)
    np.testing.assert_allclose(geo.holm([0.01, 0.04, 0.03, 0.5]), [0.04, 0.09, 0.09, 0.5])
    p = [0.02, 0.02, 0.3]  # ties: both 3 x 0.02
    np.testing.assert_allclose(geo.holm(p), [0.06, 0.06, 0.3])


def test_the_flag_uses_the_adjusted_p_value():
    # cluster 0: raw p below 0.05 but not after Holm over 8 clusters; cluster 1: below after too
    counts = [(40, 62), (20, 60)] + [(70, 63)] * 6
    nr, nc = sum(c[0] for c in counts), sum(c[1] for c in counts)
    raw, adj, moved = geo.cluster_flags(counts, nr, nc, 0.05)
    want_raw = [_fisher_brute(kr, nr, kc, nc) for kr, kc in counts]
    np.testing.assert_allclose(raw, want_raw, rtol=1e-9)
    np.testing.assert_allclose(adj, _holm_closed_testing(want_raw), rtol=1e-9)
    assert raw[0] < 0.05 <= adj[0] and not moved[0]  # unadjusted it would be flagged
    assert adj[1] < 0.05 and moved[1]
    assert moved.tolist() == [a < 0.05 for a in adj]


def test_drift_report_flags_are_holm_of_fisher_on_its_own_counts(drift_npy):
    cl = drift_npy["clusters"]
    assert cl["correction"] == "holm" and cl["alpha"] == 0.05
    items = cl["items"]
    nr, nc = sum(i["ref"] for i in items), sum(i["cur"] for i in items)
    raw = [_fisher_brute(i["ref"], nr, i["cur"], nc) for i in items]
    adj = _holm_closed_testing(raw)
    for it, r, a in zip(items, raw, adj):
        assert it["p_value"] == pytest.approx(r, rel=1e-9) and it["p_adjusted"] == pytest.approx(a, rel=1e-9)
        assert it["moved"] == (it["p_adjusted"] < 0.05)
    assert cl["moved"] == sum(it["moved"] for it in items)
    assert cl["moved"] >= 1  # the region that moved is found
