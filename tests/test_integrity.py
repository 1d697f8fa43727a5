"""``integrity``: rows embedded here with sentence-transformers itself (the packaged all-MiniLM-L6-v2)
under known recipes — plain, a ``passage: `` prefix, max_seq_length 128 on long texts, unnormalised —
and one row whose text was edited afterwards, written to a ``.npy`` with its sidecar and to parquet:
each row attributed to its true recipe, the shares equal to the counts, the edited row named; the
health header against numpy on rows with NaN, zero and repeated rows and ids; the gates; a store
without texts; a model folder that does not exist; nothing written to the input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error

from embedcheck.geometry import integrity as G

ROOT = Path(__file__).resolve().parents[1]
MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def _tweets() -> list[str]:
    with open(ROOT / "examples" / "data" / "tweets.csv", encoding="utf-8") as f:
        return [r["tweet"] for r in csv.DictReader(f)]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def planted(minilm_path, tmp_path_factory):
    """39 rows: 20 plain (8 of them long: between 128 and 256 tokens), 6 with ``passage: ``, 6 long
    ones at max_seq_length 128, 6 unnormalised, and one whose stored text was edited after embedding."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(minilm_path), device="cpu")
    tw = _tweets()
    tok = st.tokenizer

    def long_text(start: int) -> str:
        parts, i = [], start
        while len(tok(" ".join(parts))["input_ids"]) < 170:
            parts.append(tw[i])
            i += 1
        return " ".join(parts)

    longs = [long_text(100 + 15 * j) for j in range(14)]
    assert all(130 < len(tok(t)["input_ids"]) < 256 for t in longs)
    plain = tw[:12] + longs[:8]
    passage, trunc, raw = tw[12:18], longs[8:14], tw[18:24]
    edited = tw[24]

    # the model ends in a Normalize module: unnormalised rows are those of its first two modules
    # (transformer and pooling), as a pipeline that stored the pooled vectors has them
    pooled = SentenceTransformer(modules=[st[0], st[1]], device="cpu")

    def enc(texts, *, prompt=None, length=256, normalize=True):
        m = st if normalize else pooled
        m.max_seq_length = length
        out = m.encode(texts, prompt=prompt, convert_to_numpy=True)
        m.max_seq_length = 256
        return np.asarray(out, dtype=np.float32)

    X = np.concatenate([enc(plain), enc(passage, prompt="passage: "), enc(trunc, length=128),
                        enc(raw, normalize=False), enc([edited])])
    assert np.all(np.abs(np.linalg.norm(X[32:38], axis=1) - 1) > 0.01)  # the raw rows are not unit rows
    texts = plain + passage + trunc + raw + [edited + " (edited later)"]
    truth = (["plain"] * 20 + ["passage"] * 6 + ["msl128"] * 6 + ["raw"] * 6 + [None])
    ids = [f"r{i}" for i in range(len(texts))]
    d = tmp_path_factory.mktemp("integrity")
    np.save(d / "mixed.npy", X)
    with open(d / "mixed.jsonl", "w", encoding="utf-8") as f:
        for i, (k, t) in enumerate(zip(ids, texts)):
            f.write(json.dumps({"index": i, "id": k, "text": t}) + "\n")
    (d / "mixed.meta.json").write_text(json.dumps({"model": {"id": MODEL}, "prompt": None, "max_seq_length": 256,
                                                    "normalized": True}))
    from embedcheck.io.stores import write_store

    write_store(str(d / "mixed.parquet"), iter([X]), dim=X.shape[1], columns={"id": ids, "text": texts},
                metadata={"model": MODEL, "normalized": True, "options": {"prompt": None, "max_seq_length": 256}})
    clean = enc(tw[:16])
    np.save(d / "clean.npy", clean)
    with open(d / "clean.jsonl", "w", encoding="utf-8") as f:
        for i, t in enumerate(tw[:16]):
            f.write(json.dumps({"index": i, "id": f"c{i}", "text": t}) + "\n")
    def save(name, V, rows):
        np.save(d / f"{name}.npy", V)
        with open(d / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for i, t in enumerate(rows):
                f.write(json.dumps({"index": i, "id": f"{name}{i}", "text": t}) + "\n")

    save("passage", enc(tw[:10], prompt="passage: "), tw[:10])  # an e5-style corpus
    save("queries", enc(tw[30:36], prompt="query: "), tw[30:36])  # e5-style queries
    # the passage corpus's own texts as queries: stored without the 'query: ' prefix the corpus
    # expects (qplain), and as that recipe embeds them (qquery); query i is judged relevant to row i
    save("qplain", enc(tw[:10]), tw[:10])
    save("qquery", enc(tw[:10], prompt="query: "), tw[:10])
    for name in ("qplain", "qquery"):
        (d / f"{name}.qrels.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                             + "".join(f"{name}{i}\tpassage{i}\t1\n" for i in range(10)))
    return {"dir": d, "X": X, "texts": texts, "truth": truth, "ids": ids}


TRUE = {"plain": ("", 256, True), "passage": ("passage: ", 256, True), "msl128": ("", 128, True),
        "raw": ("", 256, False)}


def _check_attribution(rep: dict, planted: dict) -> None:
    recipes = {r["recipe"]: r for r in rep["recipes"]}
    assert rep["sampled_rows"] == 39 and rep["unexplained_rows"] == 1
    for row in rep["rows"]:
        want = planted["truth"][row["row"]]
        if want is None:
            assert row["recipe"] is None
            continue
        r = recipes[row["recipe"]]
        assert (r["prefix"], r["max_seq_length"], r["normalized"]) == TRUE[want], (row, want)
        assert r["model"] == MODEL
        assert row["best_cosine"] >= 0.99999
    counts = {name: sum(1 for t in planted["truth"] if t == name) for name in TRUE}
    by_truth = {TRUE[k]: v for k, v in counts.items()}
    assert len(rep["recipes"]) == 4
    for r in rep["recipes"]:
        k = by_truth[(r["prefix"], r["max_seq_length"], r["normalized"])]
        assert r["rows"] == k and r["share"] == k / 39
        assert r["share_ci95"] == pytest.approx(G.wilson(k, 39))
    assert rep["match_share"] == 20 / 39 and rep["recipe"]["prefix"] == "" and rep["recipe"]["normalized"] is True
    (u,) = rep["unexplained"]
    assert u["row"] == 38 and u["id"] == "r38" and u["text"].endswith("(edited later)") and u["best_cosine"] < 0.99999
    assert rep["mixed"] == 1.0


def test_each_row_is_attributed_to_its_recipe_npy(cli, planted):
    d = planted["dir"]
    before = _snapshot(d)
    res = cli(["integrity", d / "mixed.npy", "--rows", "all", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    _check_attribution(rep, planted)
    assert rep["claimed"]["model"] == MODEL and rep["claimed"]["agrees"] == {
        "model": True, "prefix": True, "max_seq_length": True, "normalized": True, "precision": None}
    assert rep["health"]["model_claimed"] == MODEL
    stages = rep["tried"]["stages"]
    assert stages[0]["stage"] == "probe" and stages[0]["candidates"] == 15  # 5 prefixes x 3 lengths
    assert set(rep["tried"]["max_seq_lengths"]) == {128, 256, 512}
    assert _snapshot(d) == before  # nothing written beside the input


def test_each_row_is_attributed_to_its_recipe_parquet(cli, planted):
    d = planted["dir"]
    res = cli(["integrity", d / "mixed.parquet", "--rows", "all", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    _check_attribution(rep, planted)
    assert rep["health"]["model_claimed"] == MODEL and rep["claimed"]["from"].endswith("metadata")


def test_gates_fire_on_a_mixed_index_and_pass_on_a_clean_one(cli, planted):
    d = planted["dir"]
    res = cli(["integrity", d / "mixed.npy", "--rows", "all", "--fail-below", "match_share=0.99",
               "--fail-above", "mixed=0.5", "--json"])
    assert res.exit_code == 1, res
    gates = {g["name"]: g for g in res.json()["gates"]}
    assert not gates["match_share"]["passed"] and not gates["mixed"]["passed"]
    res = cli(["integrity", d / "clean.npy", "--fail-below", "0.99", "--fail-above", "mixed=0.5", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["match_share"] == 1.0 and rep["mixed"] == 0.0 and rep["unexplained_rows"] == 0
    assert rep["match_share_ci95"] == pytest.approx(G.wilson(16, 16))
    assert rep["claimed"] is None  # no .meta.json beside it


def test_text_field_names_a_store_column(cli, planted, tmp_path):
    from embedcheck.io.stores import write_store

    d = planted["dir"]
    X = np.load(d / "clean.npy")
    texts = [json.loads(line)["text"] for line in open(d / "clean.jsonl", encoding="utf-8")]
    write_store(str(tmp_path / "c.parquet"), iter([X]), dim=X.shape[1],
                columns={"id": [f"c{i}" for i in range(16)], "abstract": texts})
    res = cli(["integrity", tmp_path / "c.parquet", "--json"])
    assert res.json()["match_share"] is None  # no 'text' column
    rep = cli(["integrity", tmp_path / "c.parquet", "--text-field", "abstract", "--json"]).json()
    assert rep["match_share"] == 1.0 and rep["texts_from"] == "field 'abstract'" and rep["health"]["duplicate_ids"] == 0
    res = cli(["integrity", tmp_path / "c.parquet", "--text-field", "body", "--json"])
    assert_one_line_error(res)
    assert "--text-field" in res.stderr and "body" in res.stderr


def test_a_seeded_sample_of_rows(cli, planted):
    d = planted["dir"]
    a = cli(["integrity", d / "clean.npy", "--rows", "5", "--seed", "3", "--json"]).json()
    b = cli(["integrity", d / "clean.npy", "--rows", "5", "--seed", "3", "--json"]).json()
    assert a["sampled_rows"] == 5 and [r["row"] for r in a["rows"]] == [r["row"] for r in b["rows"]]
    want = np.sort(np.random.default_rng(3).choice(np.arange(16), 5, replace=False))
    assert [r["row"] for r in a["rows"]] == want.tolist()


def test_health_header_equals_numpy(cli, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 12)).astype(np.float32)
    X[:20] /= np.linalg.norm(X[:20], axis=1, keepdims=True)
    X[3, 4] = np.nan
    X[7, 0] = np.inf
    X[10] = 0.0
    X[30] = X[31] = X[32]  # two copies of row 32 ahead of it
    X[40] = X[5]
    np.save(tmp_path / "h.npy", X)
    ids = [f"i{i}" for i in range(50)]
    ids[45] = ids[44] = "i0"
    with open(tmp_path / "h.jsonl", "w") as f:
        for i, k in enumerate(ids):
            f.write(json.dumps({"id": k}) + "\n")
    before = _snapshot(tmp_path)
    res = cli(["integrity", tmp_path / "h.npy", "--null-draws", "3", "--json"])
    assert res.exit_code == 0, res
    h = res.json()["health"]
    nrm = np.linalg.norm(X.astype(np.float64), axis=1)
    finite = np.isfinite(X).all(axis=1)
    assert h["rows"] == 50 and h["dim"] == 12 and h["dtype"] == "float32"
    assert h["unit_norm_rows"] == int((finite & (np.abs(nrm - 1) <= 1e-3)).sum()) == 18  # rows 3 and 10 no longer unit
    assert h["unit_norm_share"] == 18 / 50
    assert h["nonfinite_rows"] == 2 and h["nonfinite_examples"] == [3, 7]
    assert h["zero_rows"] == 1 and h["zero_examples"] == [10]
    uniq = len({row.tobytes() for row in X})
    assert h["duplicate_vectors"] == 50 - uniq == 3 and h["duplicate_vector_groups"] == 2
    assert [30, 31] in h["duplicate_vector_examples"] and [5, 40] in h["duplicate_vector_examples"]
    assert h["duplicate_ids"] == 50 - len(set(ids)) == 2 and h["duplicate_id_examples"] == ["i0"]
    ok = finite & (nrm > 0)
    assert h["norm"]["median"] == pytest.approx(float(np.median(nrm[ok])), rel=1e-12)
    assert _snapshot(tmp_path) == before


def test_a_store_that_refuses_nan_rows_gives_the_header_it_can_and_says_so(cli, tmp_path):
    from embedcheck.io.stores import write_store

    X = np.random.default_rng(0).normal(size=(20, 8)).astype(np.float32)
    X[3, 2] = np.nan
    write_store(str(tmp_path / "nan.parquet"), iter([X]), dim=8, columns={"id": [f"a{i}" for i in range(20)]})
    before = _snapshot(tmp_path)
    res = cli(["integrity", tmp_path / "nan.parquet", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["health"]["rows"] == 20 and rep["health"]["dim"] == 8 and rep["health"]["dtype"] == "float32"
    assert "row 3" in rep["notes"][0] and rep["label_free"] is None
    warn = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert len(warn) == 1 and "row 3" in warn[0], res.stderr
    assert _snapshot(tmp_path) == before


def test_without_texts_the_label_free_checks_run_and_one_line_says_what_needs_texts(cli, tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 16)).astype(np.float32)
    X[:60] /= np.linalg.norm(X[:60], axis=1, keepdims=True)  # unit and unnormalised rows side by side
    np.save(tmp_path / "t.npy", X)
    res = cli(["integrity", tmp_path / "t.npy", "--null-draws", "2", "--fail-above", "mixed=0.5", "--json"])
    assert res.exit_code == 1, res  # the label-free norm check finds two kinds of rows
    on = cli(["integrity", tmp_path / "t.npy", "--null-draws", "2", "--fail-on", "mixed", "--json"])
    assert on.exit_code == 1 and on.json()["gates"][0]["name"] == "populations_mixed", on
    assert "FAIL integrity populations = mixed (needs not mixed)" in on.stderr
    rep = res.json()
    assert rep["populations"] == "mixed"
    assert rep["match_share"] is None and "needs texts" in rep["needs_texts"]
    assert rep["label_free"]["norms"] == {"unit_rows": 60, "other_rows": 60, "mixed": True}
    assert rep["mixed"] == 1.0
    notes = [line for line in res.stderr.splitlines() if "texts" in line]
    assert len(notes) == 1 and notes[0].startswith("notice:"), res.stderr


def test_the_split_reads_one_shared_direction_as_clean_and_two_as_mixed():
    from embedcheck.measures.integrity import label_free_mixed, split_says_mixed

    rng = np.random.default_rng(2)
    e = np.eye(16)
    one = rng.normal(size=(300, 16)) + 4 * e[0]  # one population around one mean direction
    sp = G.split_test(one, draws=5, seed=0)
    assert sp["mean_norm"] > 0.5 and sp["centroid_cosine"] > 0.5 and not split_says_mixed(sp)
    two = np.concatenate([rng.normal(size=(150, 16)) + 4 * e[0], rng.normal(size=(150, 16)) + 4 * e[1]])
    sp = G.split_test(two, draws=5, seed=0)
    U = two / np.linalg.norm(two, axis=1, keepdims=True)
    c0, c1 = U[:150].mean(axis=0), U[150:].mean(axis=0)
    assert sp["centroid_cosine"] == pytest.approx(c0 @ c1 / np.linalg.norm(c0) / np.linalg.norm(c1), abs=0.02)
    assert sp["smaller_group_share"] == 0.5 and split_says_mixed(sp)
    assert label_free_mixed(G.norm_mix(two), sp)
    centred = rng.normal(size=(300, 16))  # no shared direction: the split is not read
    sp = G.split_test(centred, draws=5, seed=0)
    assert sp["mean_norm"] < 0.1 and sp["centroid_cosine"] < -0.5 and not split_says_mixed(sp)


def test_a_model_folder_that_does_not_exist_is_one_error_line(cli, planted, tmp_path):
    d = planted["dir"]
    before = _snapshot(d)
    missing = tmp_path / "no-such-model"
    res = cli(["integrity", d / "clean.npy", "--model", missing, "--json"])
    assert_one_line_error(res)
    assert str(missing) in res.stderr
    assert _snapshot(d) == before


def test_bad_rows_option_is_one_error_line(cli, planted):
    res = cli(["integrity", planted["dir"] / "clean.npy", "--rows", "lots", "--json"])
    assert_one_line_error(res)
    assert "--rows" in res.stderr


def test_queries_are_checked_against_the_recipe_the_corpus_expects(cli, planted):
    d = planted["dir"]
    # a plain corpus expects plain queries: 'query: ' queries are all mismatched
    rep = cli(["integrity", d / "clean.npy", "--queries", d / "queries.npy", "--json"]).json()
    q = rep["queries"]
    assert q["sampled_rows"] == 6 and q["recipe"]["prefix"] == "query: "
    assert q["expected"] == {"model": MODEL, "prefix": "", "normalized": True}
    assert q["expected_share"] == 0.0 and len(q["mismatched"]) == 6
    # a 'passage: ' corpus expects 'query: ' queries: all of them match
    res = cli(["integrity", d / "passage.npy", "--queries", d / "queries.npy", "--fail-below",
               "queries.expected_share=0.99", "--json"])
    assert res.exit_code == 0, res
    q = res.json()["queries"]
    assert res.json()["recipe"]["prefix"] == "passage: " and q["expected"]["prefix"] == "query: "
    assert q["expected_share"] == 1.0 and q["expected_share_ci95"] == pytest.approx(G.wilson(6, 6))


def test_queries_without_texts_or_of_another_dimension_are_one_error_line(cli, planted, tmp_path):
    d = planted["dir"]
    np.save(tmp_path / "q.npy", np.load(d / "queries.npy"))
    res = cli(["integrity", d / "clean.npy", "--queries", tmp_path / "q.npy", "--json"])
    assert_one_line_error(res)
    assert "--queries" in res.stderr and "texts" in res.stderr
    np.save(tmp_path / "q8.npy", np.ones((3, 8), dtype=np.float32))
    res = cli(["integrity", d / "clean.npy", "--queries", tmp_path / "q8.npy", "--json"])
    assert_one_line_error(res)
    assert "dimension 8" in res.stderr


def test_qrels_price_the_queries_recipe_as_retrieve_scores_both(cli, planted):
    """--qrels: nDCG@10 of the queries as stored equals ``retrieve`` on them; re-embedded with the
    recipe the corpus expects (``query: `` for a ``passage: `` corpus) it equals ``retrieve`` on the
    queries sentence-transformers embeds with that prompt; the change is their paired difference."""
    import embedcheck

    d = planted["dir"]
    rep = cli(["integrity", d / "passage.npy", "--queries", d / "qplain.npy", "--qrels", d / "qplain.qrels.tsv",
               "--resamples", "200", "--json"]).json()
    q = rep["queries"]
    assert q["expected"]["prefix"] == "query: " and q["expected_share"] == 0.0
    price = q["price"]
    stored = embedcheck.retrieve(str(d / "qplain.npy"), str(d / "passage.npy"), str(d / "qplain.qrels.tsv"),
                                 k=[10], resamples=0).to_dict()
    fixed = embedcheck.retrieve(str(d / "qquery.npy"), str(d / "passage.npy"), str(d / "qquery.qrels.tsv"),
                                k=[10], resamples=0).to_dict()
    want_a, want_b = stored["metrics"]["ndcg_at_10"], fixed["metrics"]["ndcg_at_10"]
    assert price["judged_queries"] == 10
    assert price["ndcg_at_10_stored"] == pytest.approx(want_a, abs=1e-12)
    assert price["ndcg_at_10_reembedded"] == pytest.approx(want_b, abs=1e-6)
    assert price["change"] == pytest.approx(want_b - want_a, abs=1e-6)
    lo, hi = price["change_ci95"]
    assert lo <= price["change"] <= hi and price["verdict"] in {"better", "worse", "inconclusive", "equivalent"}
    bad = cli(["integrity", d / "passage.npy", "--qrels", d / "qplain.qrels.tsv"])
    assert_one_line_error(bad)
    assert "--qrels" in bad.stderr and "--queries" in bad.stderr
