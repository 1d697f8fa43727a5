"""``integrity`` on a real pgvector table and on ``--engine ray``: 30 SciFact abstracts embedded by
sentence-transformers itself, with foreign rows planted as in docs/integrity.md's measured case
(4 with a ``passage: `` prefix, 2 long abstracts at max_seq_length 128, 1 left unnormalised),
written to a pgvector table (vectors, ids and texts) and to a ``.npy`` with its sidecar. On the
table every foreign row is attributed to its recipe, each true share lies inside its interval, and
the report equals the ``.npy``'s; on Ray the figures equal the local run's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedcheck.geometry import integrity as G

N = 30
#: the planted rows of each kind (the rest are plain)
PLANTED = {"passage": 4, "msl128": 2, "raw": 1}


@pytest.fixture(scope="module")
def scifact_store(minilm_path, shared_data, tmp_path_factory):
    from sentence_transformers import SentenceTransformer

    with open(shared_data / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(N), f)]
    rows.sort(key=lambda r: str(r["_id"]))  # the table reads its rows in id order: the .npy holds them so too
    texts = [r["text"] for r in rows]
    ids = [str(r["_id"]) for r in rows]
    st = SentenceTransformer(str(minilm_path), device="cpu")
    tokens = np.array([len(st.tokenizer(t)["input_ids"]) for t in texts])
    rng = np.random.default_rng(0)
    order = rng.permutation(N)
    n_passage = PLANTED["passage"]
    passage = order[:n_passage]
    long_rest = [int(i) for i in order[n_passage:] if tokens[i] > 140]
    trunc = np.array(long_rest[:PLANTED["msl128"]])
    raw = np.array([int(i) for i in order[n_passage:] if int(i) not in set(trunc.tolist())][:PLANTED["raw"]])
    truth = np.array(["plain"] * N, dtype=object)
    truth[passage], truth[trunc], truth[raw] = "passage", "msl128", "raw"
    X = np.asarray(st.encode(texts, convert_to_numpy=True), dtype=np.float32)
    X[passage] = st.encode([texts[i] for i in passage], prompt="passage: ", convert_to_numpy=True)
    st.max_seq_length = 128
    X[trunc] = st.encode([texts[i] for i in trunc], convert_to_numpy=True)
    st.max_seq_length = 256
    pooled = SentenceTransformer(modules=[st[0], st[1]], device="cpu")  # before the Normalize module
    X[raw] = pooled.encode([texts[i] for i in raw], convert_to_numpy=True)
    d = tmp_path_factory.mktemp("scifact_integrity")
    np.save(d / "s.npy", X)
    with open(d / "s.jsonl", "w", encoding="utf-8") as f:
        for i, (k, t) in enumerate(zip(ids, texts)):
            f.write(json.dumps({"index": i, "id": k, "text": t}) + "\n")
    return {"npy": d / "s.npy", "X": X, "ids": ids, "texts": texts, "truth": truth}


TRUE = {"plain": ("", 256, True), "passage": ("passage: ", 256, True), "msl128": ("", 128, True),
        "raw": ("", 256, False)}
SHARE = {**{k: v / N for k, v in PLANTED.items()}, "plain": (N - sum(PLANTED.values())) / N}

_REPORTS: dict = {}


def _local(cli, store) -> dict:
    if "local" not in _REPORTS:
        res = cli(["integrity", store["npy"], "--rows", "all", "--json"])
        assert res.exit_code == 0, res
        _REPORTS["local"] = res.json()
    return _REPORTS["local"]


def _check(rep: dict, store: dict) -> None:
    assert rep["sampled_rows"] == N and rep["unexplained_rows"] == 0
    recipes = {r["recipe"]: r for r in rep["recipes"]}
    for row in rep["rows"]:
        r = recipes[row["recipe"]]
        want = store["truth"][row["row"]]
        assert (r["prefix"], r["max_seq_length"], r["normalized"], r["precision"]) == (*TRUE[want], "fp32"), row
        assert row["id"] == store["ids"][row["row"]]
    assert len(rep["recipes"]) == 4
    for r in rep["recipes"]:
        kind = next(k for k, v in TRUE.items() if v == (r["prefix"], r["max_seq_length"], r["normalized"]))
        k = int((store["truth"] == kind).sum())
        assert r["rows"] == k and r["share"] == k / N and r["share_ci95"] == pytest.approx(G.wilson(k, N))
        lo, hi = r["share_ci95"]
        assert lo <= SHARE[kind] <= hi
    assert rep["match_share"] == SHARE["plain"] and rep["mixed"] == 1.0


def test_pgvector_table_every_foreign_row_named_and_the_npy_report(cli, scifact_store, pg_uri):
    from embedcheck.io.stores import write_store

    X, store = scifact_store["X"], scifact_store
    uri = f"{pg_uri}&table=integrity_scifact&column=emb"
    write_store(uri, iter([X]), dim=X.shape[1], columns={"id": store["ids"], "text": store["texts"]},
                metadata={"model": "sentence-transformers/all-MiniLM-L6-v2", "normalized": True,
                          "options": {"prompt": None, "max_seq_length": 256}}, overwrite=True)
    res = cli(["integrity", uri, "--rows", "all", "--json"])
    assert res.exit_code == 0, res
    pg = res.json()
    _check(pg, store)
    assert pg["claimed"]["agrees"]["model"] is True and pg["claimed"]["from"].endswith("metadata")
    npy = _local(cli, store)
    _check(npy, store)
    assert pg["recipes"] == npy["recipes"] and pg["rows"] == npy["rows"] and pg["unexplained"] == npy["unexplained"]
    assert pg["health"]["rows"] == npy["health"]["rows"] == N and pg["health"]["unit_norm_rows"] == N - PLANTED["raw"]
    assert pg["match_share_ci95"] == npy["match_share_ci95"]


def test_engine_ray_gives_the_local_figures(cli, scifact_store, ray_local):
    local = _local(cli, scifact_store)
    res = cli(["integrity", scifact_store["npy"], "--rows", "all", "--engine", "ray", "--json"])
    assert res.exit_code == 0, res
    ray = res.json()
    _check(ray, scifact_store)
    assert ray["recipes"] == local["recipes"]  # names, rows, shares, intervals, reproduces
    assert ray["match_share"] == local["match_share"] and ray["match_share_ci95"] == local["match_share_ci95"]
    assert [r["recipe"] for r in ray["rows"]] == [r["recipe"] for r in local["rows"]]
    a = np.array([r["best_cosine"] for r in ray["rows"]])
    b = np.array([r["best_cosine"] for r in local["rows"]])
    assert np.max(np.abs(a - b)) <= 1e-6
    assert ray["tried"]["stages"] == local["tried"]["stages"]
