"""``dedup``: its pairs, groups, threshold forms, leakage and kept ids against brute force written here
(numpy's all-pairs cosines, ``np.percentile``, scipy's ``connected_components`` and Wilson interval),
bad input, gates, and a parquet store giving the ``.npy``'s figures; through the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_one_line_error
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.stats import binomtest

import embedcheck
from embedcheck.geometry import dedup as D

N, DIM = 2500, 32


def _rows(n: int, seed: int) -> np.ndarray:
    """Rows near 300 centres: some pairs far above the floor, most not."""
    base = np.random.default_rng(0).standard_normal((300, DIM)).astype(np.float32)  # one set of centres
    rng = np.random.default_rng(seed + 1)
    noise = rng.uniform(0.2, 1.0, (n, 1)) * rng.standard_normal((n, DIM))
    return (base[rng.integers(0, 300, n)] + noise).astype(np.float32)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("dedup")
    X, T = _rows(N, 0), _rows(600, 1)
    np.save(d / "x.npy", X)
    (d / "x.jsonl").write_text("".join(json.dumps({"id": f"doc-{k}", "text": f"text {k}"}) + "\n" for k in range(N)))
    np.save(d / "t.npy", T)
    (d / "t.jsonl").write_text("".join(json.dumps({"id": f"test-{k}"}) + "\n" for k in range(len(T))))
    return d, X, T


def _cos(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    An = A / np.linalg.norm(A, axis=1, keepdims=True)
    Bn = B / np.linalg.norm(B, axis=1, keepdims=True)
    return (An.astype(np.float64) @ Bn.T.astype(np.float64)).astype(np.float32)


def _brute_pairs(X: np.ndarray, t: float) -> set[tuple[int, int]]:
    G = _cos(X, X)
    iu = np.triu_indices(X.shape[0], 1)
    hit = G[iu] >= np.float32(t)
    return set(zip(iu[0][hit].tolist(), iu[1][hit].tolist()))


def _components(n: int, pairs: set[tuple[int, int]]) -> np.ndarray:
    i, j = (np.array(v, dtype=np.int64) for v in zip(*pairs)) if pairs else (np.zeros(0, int), np.zeros(0, int))
    _, lab = connected_components(coo_matrix((np.ones(i.size), (i, j)), shape=(n, n)), directed=False)
    return lab


def _kept(lab: np.ndarray) -> list[int]:
    return sorted({int(lab_): int(np.flatnonzero(lab == lab_)[0]) for lab_ in np.unique(lab)}.values())


def _near(a: float, b: float) -> bool:
    """Within float32 rounding of a cosine (brute force here in float64, the pass in float32)."""
    return abs(a - b) < 1e-6


def test_pairs_and_groups_at_a_cosine_equal_brute_force(cli, data):
    d, X, _ = data
    res = cli(["dedup", d / "x.npy", "--threshold", "0.9", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    pairs = _brute_pairs(X, 0.9)
    # the margin: no brute-force cosine so close to 0.9 that float32 rounding could move it across
    G = _cos(X, X)[np.triu_indices(N, 1)]
    assert not np.any(np.abs(G - 0.9) < 1e-6)
    assert 50 < len(pairs) < 5000
    assert rep["pairs"] == len(pairs) and rep["threshold"] == 0.9 and rep["threshold_from"] == "--threshold"
    lab = _components(N, pairs)
    sizes = np.bincount(lab)
    assert rep["groups"] == int((sizes > 1).sum()) and rep["rows_in_groups"] == int(sizes[sizes > 1].sum())
    assert rep["kept"] == lab.max() + 1 and rep["removed"] == N - rep["kept"]
    assert rep["duplicate_share"] == rep["removed"] / N
    assert rep["largest_group"] == int(sizes.max())
    nn = np.where(np.eye(N, dtype=bool), -np.inf, _cos(X, X)).max(axis=1)
    for c in rep["curve"]:
        assert c["near_duplicate_share"] == pytest.approx(float(np.mean(nn >= np.float32(c["threshold"]))), abs=1e-3)
    at = next(c for c in rep["curve"] if c["threshold"] == 0.9)
    assert at["near_duplicate_share"] == rep["near_duplicate_share"]
    # the largest groups: their kept row is the group's lowest row, ids and texts from the sidecar
    big = rep["largest_groups"][0]
    members = np.flatnonzero(lab == lab[big["kept_row"]])
    assert big["size"] == members.size == sizes.max() and big["kept_row"] == members[0]
    assert big["kept_id"] == f"doc-{members[0]}" and big["kept_text"] == f"text {members[0]}"
    assert big["removed_rows"] == members[1:11].tolist()
    # sampled pairs: real pairs above the threshold, in their band, named by the sidecar
    assert rep["examples"] and sum(b["pairs"] for b in rep["bands"]) == len(pairs)
    for e in rep["examples"]:
        assert (e["a_row"], e["b_row"]) in pairs and e["a_id"] == f"doc-{e['a_row']}"
        assert _near(e["cosine"], float(_cos(X[[e["a_row"]]], X[[e["b_row"]]])[0, 0])) and e["cosine"] >= e["band"]


def test_the_floor_percentile_is_numpys_percentile_of_the_floor(cli, data):
    d, X, _ = data
    rep = cli(["dedup", d / "x.npy", "--floor-percentile", "99.9", "--floor-pairs", "50000", "--seed", "3",
               "--json"]).json()
    U = X.astype(np.float64) / np.linalg.norm(X.astype(np.float64), axis=1, keepdims=True)
    floor = D.floor_cosines(U, 50000, 3)
    t = float(np.percentile(floor, 99.9))
    assert rep["threshold"] == t and rep["threshold_from"] == "--floor-percentile"
    assert rep["floor"]["p99_9"] == t and rep["floor"]["p50"] == float(np.percentile(floor, 50))
    assert rep["pairs"] == len(_brute_pairs(X, t))
    # the default is no longer the floor's 99.99th percentile (a rank among all pairs, which groups same-topic
    # rows on real data) but a cosine that means a copy, 0.95
    default = cli(["dedup", d / "x.npy", "--floor-pairs", "50000", "--seed", "3", "--json"]).json()
    assert default["threshold"] == 0.95 and default["threshold_from"] == "--threshold" and default["threshold_default"]
    assert default["pairs"] == len(_brute_pairs(X, 0.95)) and rep["threshold_default"] is False


def test_pairs_lists_every_pair_with_both_texts_and_a_chaining_floor_percentile_warns(cli, tmp_path):
    a, b = np.eye(64)[0], np.eye(64)[1]
    step = np.arccos(0.9)  # rows along an arc, each 0.9 to the next: one chain at a low threshold, none at 0.95
    arc = np.array([np.cos(i * step) * a + np.sin(i * step) * b for i in range(8)])
    rest = np.random.default_rng(2).standard_normal((400, 64))
    X = np.vstack([arc, rest]).astype(np.float32)
    np.save(tmp_path / "c.npy", X)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": f"c{k}", "text": f"t{k}"}) + "\n" for k in range(len(X))))
    res = cli(["dedup", tmp_path / "c.npy", "--floor-percentile", "99.99", "--floor-pairs", "50000",
               "--pairs", tmp_path / "p.jsonl", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["chained_groups"] >= 1 and "chain" in res.stderr and "warning:" in res.stderr
    lines = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    want = _brute_pairs(X, rep["threshold"])
    assert len(lines) == rep["pairs"] == len(want)
    assert {(x["a_row"], x["b_row"]) for x in lines} == set(want)
    assert all(x["a_text"] == f"t{x['a_row']}" and x["b_id"] == f"c{x['b_row']}" for x in lines)
    plain = cli(["dedup", tmp_path / "c.npy", "--floor-pairs", "50000", "--json"])
    assert plain.exit_code == 0 and plain.json()["chained_groups"] == 0 and "warning" not in plain.stderr


def test_keep_rows_leaves_exactly_that_many_groups(cli, data):
    d, X, _ = data
    rep = cli(["dedup", d / "x.npy", "--keep-rows", "1800", "--json"]).json()
    assert rep["kept"] == 1800 and rep["threshold_from"] == "--keep-rows"
    # the cut sits on one pair's cosine (float32 in the pass, float64 here): just below it the brute
    # force leaves 1800 groups, just above it more
    t = rep["threshold"]
    assert _components(N, _brute_pairs(X, t - 2e-6)).max() + 1 == 1800
    assert _components(N, _brute_pairs(X, t + 2e-6)).max() + 1 > 1800
    every = cli(["dedup", d / "x.npy", "--keep-rows", str(N), "--json"]).json()
    assert every["kept"] == N and every["pairs"] == 0


def test_leakage_is_the_brute_force_share_with_scipys_wilson_interval(cli, data):
    d, X, T = data
    res = cli(["dedup", d / "x.npy", "--threshold", "0.9", "--leakage-of", d / "t.npy", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    S = _cos(T, X)
    leaked = S.max(axis=1) >= np.float32(0.9)
    k = int(leaked.sum())
    assert 10 < k < 590
    assert rep["leakage"] == k / len(T) and rep["leakage_check"]["leaked_rows"] == k
    ci = binomtest(k, len(T)).proportion_ci(method="wilson")
    assert rep["leakage_ci95"] == [ci.low, ci.high]
    for e in rep["leakage_check"]["examples"]:
        q = e["test_row"]
        assert leaked[q] and e["train_row"] == int(np.argmax(S[q])) and e["test_id"] == f"test-{q}"
        assert e["train_id"] == f"doc-{e['train_row']}" and _near(e["cosine"], float(S[q].max()))


def test_output_holds_the_kept_rows_ids(cli, data, tmp_path):
    d, X, _ = data
    out = tmp_path / "kept.jsonl"
    res = cli(["dedup", d / "x.npy", "--threshold", "0.9", "-o", out, "--json"])
    assert res.exit_code == 0, res
    kept = _kept(_components(N, _brute_pairs(X, 0.9)))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == [{"row": r, "id": f"doc-{r}"} for r in kept]
    assert res.json()["output"]["rows"] == len(kept)


def test_copy_holds_the_kept_rows_and_their_sidecar_rows(cli, data, tmp_path):
    d, X, _ = data
    res = cli(["dedup", d / "x.npy", "--threshold", "0.9", "--copy", tmp_path / "c.npy", "--json"])
    assert res.exit_code == 0, res
    kept = _kept(_components(N, _brute_pairs(X, 0.9)))
    assert np.array_equal(np.load(tmp_path / "c.npy"), X[kept])
    lines = (d / "x.jsonl").read_text().splitlines()
    assert (tmp_path / "c.jsonl").read_text().splitlines() == [lines[r] for r in kept]
    meta = json.loads((tmp_path / "c.meta.json").read_text())
    assert meta["command"] == "dedup" and meta["rows"] == len(kept) and meta["options"]["threshold"] == 0.9
    again = cli(["dedup", tmp_path / "c.npy", "--threshold", "0.9", "--json"]).json()
    assert again["n"] == len(kept) and again["pairs"] == 0  # two kept rows are never a pair


def test_copy_to_a_store_carries_the_ids_and_a_store_that_exists_is_refused(cli, data, tmp_path):
    import pyarrow.parquet as pq

    d, X, _ = data
    out = tmp_path / "c.parquet"
    assert cli(["dedup", d / "x.npy", "--threshold", "0.9", "--copy", out, "--json"]).exit_code == 0
    kept = _kept(_components(N, _brute_pairs(X, 0.9)))
    t = pq.read_table(out)
    assert t.column("id").to_pylist() == [f"doc-{r}" for r in kept]
    assert np.array_equal(np.array(t.column("embedding").to_pylist(), dtype=np.float32), X[kept])
    before = out.read_bytes()
    res = cli(["dedup", d / "x.npy", "--threshold", "0.9", "--copy", out])
    assert_one_line_error(res)
    assert "--copy" in res.stderr and "exists" in res.stderr and out.read_bytes() == before


@pytest.mark.parametrize("args,option", [(("--threshold", "1.5"), "--threshold"),
                                         (("--floor-percentile", "0"), "--floor-percentile"),
                                         (("--floor-percentile", "100"), "--floor-percentile"),
                                         (("--keep-rows", str(N + 1)), "--keep-rows"),
                                         (("--threshold", "0.9", "--keep-rows", "10"), "--keep-rows"),
                                         (("--threshold", "0.9", "--floor-percentile", "99"), "--floor-percentile")])
def test_bad_input_is_one_line_naming_the_option_and_nothing_written(cli, data, tmp_path, args, option):
    d, _, _ = data
    res = cli(["dedup", d / "x.npy", *args, "-o", tmp_path / "kept.jsonl", "--report", tmp_path / "r.json"])
    assert_one_line_error(res)
    assert option in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_output_over_the_test_set_or_stdout_is_refused_before_any_work(cli, data, tmp_path):
    d, _, _ = data
    for f in ("t.npy", "t.jsonl"):
        (tmp_path / f).write_bytes((d / f).read_bytes())
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for flag, out, words in (("-o", tmp_path / "t.npy", ("--output", "t.npy")), ("-o", "-", ("--output", "stdout")),
                             ("--copy", tmp_path / "t.npy", ("--copy", "t.npy")),
                             ("--copy", tmp_path / "t.jsonl", ("--copy", "t.jsonl"))):
        res = cli(["dedup", d / "x.npy", "--threshold", "0.9", "--leakage-of", tmp_path / "t.npy", flag, out])
        assert_one_line_error(res)
        assert all(w in res.stderr for w in words), res.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_gates_fire_and_pass(cli, data):
    d, _, _ = data
    base = ["dedup", d / "x.npy", "--threshold", "0.9", "--leakage-of", d / "t.npy", "--json"]
    rep = cli(base).json()
    share, leak = rep["duplicate_share"], rep["leakage"]
    assert cli([*base, "--fail-above", str(share + 1e-3), "--fail-above", f"leakage={leak + 1e-3}"]).exit_code == 0
    bare = cli([*base, "--fail-above", str(share - 1e-3)])
    assert bare.exit_code == 1 and "FAIL duplicate_share" in bare.stderr
    fired = cli([*base, "--fail-above", f"leakage={leak - 1e-3}"])
    assert fired.exit_code == 1 and [g["passed"] for g in fired.json()["gates"]] == [False]
    assert_one_line_error(cli([*base, "--fail-above", "leakage=1.5"]))  # a fraction: refused before work


def test_a_parquet_store_gives_the_npy_figures(data, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d, X, _ = data
    pq.write_table(pa.table({"id": [f"doc-{k}" for k in range(N)], "text": [f"text {k}" for k in range(N)],
                             "embedding": pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), DIM)}),
                   tmp_path / "x.parquet")
    kw = dict(leakage_of=str(d / "t.npy"), floor_pairs=20000, seed=1)
    a = embedcheck.dedup(str(d / "x.npy"), **kw).to_dict()
    b = embedcheck.dedup(str(tmp_path / "x.parquet"), **kw).to_dict()
    a["leakage_check"].pop("test"), b["leakage_check"].pop("test")
    assert a == b and a["pairs"] > 0


def test_ray_gives_the_local_report_over_several_query_blocks(cli, data, ray_local):
    """2,500 rows are three query blocks of the one pass: their pairs and nearest rows merged from
    Ray's tasks give the local report, byte for byte."""
    d, _, _ = data
    args = ["dedup", d / "x.npy", "--threshold", "0.9", "--leakage-of", d / "t.npy", "--floor-pairs", "20000", "--json"]
    local, ray = cli(args), cli([*args, "--engine", "ray"])
    assert local.exit_code == 0 and ray.exit_code == 0, ray
    assert local.json() == ray.json() and local.json()["pairs"] > 0


def test_the_search_effect_equals_retrieve_before_and_after(cli, tmp_path):
    """--queries --qrels: nDCG@10 over every row equals retrieve on the whole corpus; over the kept rows
    it equals retrieve on the corpus without the copies, once the judgements of removed copies have
    passed to their kept originals; the change is their paired difference."""
    from pathlib import Path

    fix = Path(__file__).resolve().parent.parent / "fixtures"
    C = np.load(fix / "retrieve_corpus.npy").astype(np.float64)
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    dids = [json.loads(x)["id"] for x in (fix / "retrieve_corpus.jsonl").read_text().splitlines()]
    lines = (fix / "retrieve_qrels.tsv").read_text().splitlines()
    head, rows = lines[0], [line.split("\t") for line in lines[1:]]
    judged = sorted({r[1] for r in rows})[:15]
    src = [dids.index(d) for d in judged]
    rng = np.random.default_rng(5)
    copies = C[src] + 1e-4 * rng.standard_normal((len(src), C.shape[1]))
    X = np.vstack([C, copies]).astype(np.float32)
    ids = dids + [f"copy-{d}" for d in judged]
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "x.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    # the judgements of five originals name their copy instead (the copy is the row dedup removes)
    swap = set(judged[:5])
    moved = [[q, f"copy-{d}" if d in swap else d, g] for q, d, g in rows]
    (tmp_path / "q.tsv").write_text("\n".join([head] + ["\t".join(r) for r in moved]) + "\n")
    qrels_copy = str(tmp_path / "q.tsv")
    Qp = str(fix / "retrieve_queries.npy")
    rep = cli(["dedup", tmp_path / "x.npy", "--threshold", "0.999", "--queries", Qp, "--qrels", qrels_copy,
               "--resamples", "200", "--json"]).json()
    assert rep["removed"] == len(judged), rep["removed"]
    qids = [json.loads(x)["id"] for x in (fix / "retrieve_queries.jsonl").read_text().splitlines()]
    Q = np.load(Qp)
    before = embedcheck.retrieve(Q, X, qrels_copy, resamples=0, query_ids=qids, doc_ids=ids).metric("ndcg@10")
    after = embedcheck.retrieve(Q, C.astype(np.float32), str(fix / "retrieve_qrels.tsv"), resamples=0,
                                query_ids=qids, doc_ids=dids).metric("ndcg@10")
    s = rep["search"]
    assert s["ndcg_at_10"] == pytest.approx(before, abs=1e-9)
    assert s["ndcg_at_10_deduplicated"] == pytest.approx(after, abs=1e-9)
    assert s["ndcg_change"] == pytest.approx(after - before, abs=1e-9)
    assert s["judgements_moved"] == sum(1 for _, d, _ in moved if d.startswith("copy-"))
    r = cli(["dedup", tmp_path / "x.npy", "--queries", Qp])
    assert r.exit_code == 2 and r.stderr.startswith("error: --queries and --qrels go together"), r.stderr


def test_the_labels_effect_is_aag_before_and_after_on_one_row_bootstrap(cli, tmp_path):
    """--labels: AAG over every row equals ``aag`` on the file; over the kept rows it equals ``aag`` on
    the rows ``-o`` keeps (and a brute force over their pairs); the change is their difference, with
    an interval from the same resampled rows (computed again here from the seed)."""
    from pathlib import Path

    fix = Path(__file__).resolve().parent.parent / "fixtures"
    X0 = np.load(fix / "topics.npy")
    lab0 = [json.loads(x)["label"] for x in (fix / "topics.labels.jsonl").read_text().splitlines()]
    # 40 near-copies of rows of one topic: duplicates inflate that topic's same-label pairs
    src = [i for i, t in enumerate(lab0) if t == lab0[0]][:40]
    rng = np.random.default_rng(3)
    X = np.vstack([X0, X0[src] + 1e-4 * rng.standard_normal((len(src), X0.shape[1]))]).astype(np.float32)
    lab = lab0 + [lab0[i] for i in src]
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "x.jsonl").write_text("".join(json.dumps({"id": f"r{k}", "label": t}) + "\n" for k, t in enumerate(lab)))
    res = cli(["dedup", tmp_path / "x.npy", "--threshold", "0.999", "--labels", tmp_path / "x.jsonl",
               "--resamples", "200", "-o", tmp_path / "kept.jsonl", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    e = rep["labels_effect"]
    kept = [json.loads(x)["row"] for x in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert rep["removed"] == e["removed_rows"] >= len(src) and len(kept) == rep["kept"]
    lab_a = np.array(lab)
    assert e["aag"] == pytest.approx(embedcheck.aag(X, lab_a).to_dict()["aag"], abs=1e-9)
    want = embedcheck.aag(X[kept], lab_a[kept]).to_dict()["aag"]
    assert e["aag_deduplicated"] == pytest.approx(want, abs=1e-9)
    U = X[kept].astype(np.float64) / np.linalg.norm(X[kept], axis=1, keepdims=True)
    iu = np.triu_indices(len(kept), 1)
    same = (lab_a[kept][:, None] == lab_a[kept][None, :])[iu]
    C = (U @ U.T)[iu]
    assert e["aag_deduplicated"] == pytest.approx(C[same].mean() - C[~same].mean(), abs=1e-9)
    assert e["aag_change"] == pytest.approx(e["aag_deduplicated"] - e["aag"], abs=1e-12)
    a, b, ba, bb = D.aag_effect(X / np.linalg.norm(X, axis=1, keepdims=True), np.unique(lab_a, return_inverse=True)[1],
                                np.array(kept), 200, 0)
    lo, hi = e["aag_change_ci95"]
    assert lo <= e["aag_change"] <= hi and np.quantile(bb - ba, 0.01) <= lo and hi <= np.quantile(bb - ba, 0.99)
    (tmp_path / "one.jsonl").write_text("".join(json.dumps({"id": f"r{k}", "label": "x"}) + "\n" for k in range(len(lab))))
    bad = cli(["dedup", tmp_path / "x.npy", "--threshold", "0.999", "--labels", tmp_path / "one.jsonl"])
    assert_one_line_error(bad)
    assert "--labels" in bad.stderr


@pytest.mark.parametrize("argv,want", [
    (["dedup", "{bad}"], "embeddings {bad}: row 7 has NaN"),
    (["dedup", "{good}", "--leakage-of", "{bad}"], "--leakage-of {bad}: row 7 has NaN"),
    (["hubness", "{bad}", "--null-draws", "0"], "embeddings {bad}: row 7 has NaN"),
    (["hubness", "{good}", "--queries", "{bad}", "--null-draws", "0"], "--queries {bad}: row 7 has NaN"),
])
def test_a_refused_row_is_named_by_the_input_it_came_from(cli, tmp_path, argv, want):
    # the exact passes named their two sides "queries" and "corpus" whatever the command: a NaN row of
    # dedup's or hubness's own embeddings was reported as "--queries FILE", and one of --leakage-of too
    X = np.random.default_rng(0).standard_normal((60, 8)).astype(np.float32)
    np.save(tmp_path / "good.npy", X)
    X[7] = np.nan
    np.save(tmp_path / "bad.npy", X)
    names = {"bad": tmp_path / "bad.npy", "good": tmp_path / "good.npy"}
    r = cli([a.format(**names) for a in argv])
    assert r.exit_code == 2 and r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr
    assert r.stderr.startswith("error: " + want.format(**names)), r.stderr
