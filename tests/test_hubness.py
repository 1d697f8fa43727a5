"""``hubness``: the k-occurrence figures against a brute force written here (a full cosine matrix,
numpy's sort, scipy's skewness, the Robin Hood index's closed form), the null's reading on rows
that are and are not hubby, the top hubs by id and text with their reasons, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import skew

import embedcheck
from embedcheck.geometry import hubness as H


def _brute_nk(Q: np.ndarray, C: np.ndarray, k: int, in_corpus: bool) -> np.ndarray:
    Qn = Q / np.linalg.norm(Q, axis=1, keepdims=True)
    Cn = C / np.linalg.norm(C, axis=1, keepdims=True)
    S = Qn.astype(np.float64) @ Cn.T.astype(np.float64)
    if in_corpus:
        np.fill_diagonal(S, -np.inf)
    top = np.argsort(-S, axis=1, kind="stable")[:, :k]
    return np.bincount(top.ravel(), minlength=C.shape[0])


@pytest.fixture
def gauss(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    return tmp_path / "x.npy", X


def test_figures_equal_a_brute_force_in_corpus(gauss):
    path, X = gauss
    rep = embedcheck.hubness(str(path), k=7, resamples=50, null_draws=0, top=3).to_dict()
    nk = _brute_nk(X, X, 7, True)
    assert rep["k_skewness"] == pytest.approx(float(skew(nk)), rel=1e-12)
    assert rep["robin_hood"] == pytest.approx(0.5 * np.abs(nk - nk.mean()).sum() / nk.sum(), rel=1e-12)
    assert rep["hub_share"] == pytest.approx(float(np.mean(nk > 14)), abs=0)
    assert rep["antihub_share"] == pytest.approx(float(np.mean(nk == 0)), abs=0)
    assert rep["k_occurrence"]["max"] == int(nk.max()) and rep["k_occurrence"]["mean"] == pytest.approx(7.0)
    assert [h["n_k"] for h in rep["top_hubs"]] == sorted(nk, reverse=True)[:3]
    for key in ("k_skewness", "robin_hood", "hub_share", "antihub_share"):
        lo, hi = rep[f"{key}_ci95"]
        assert lo <= rep[key] <= hi, key  # the interval holds its estimate


def test_figures_equal_a_brute_force_with_queries(gauss, tmp_path):
    path, X = gauss
    Q = np.random.default_rng(4).normal(size=(150, 32)).astype(np.float32)
    np.save(tmp_path / "q.npy", Q)
    rep = embedcheck.hubness(str(path), queries=str(tmp_path / "q.npy"), k=5, resamples=20, null_draws=0).to_dict()
    nk = _brute_nk(Q, X, 5, False)
    assert rep["queries"] == 150 and rep["k_skewness"] == pytest.approx(float(skew(nk)), rel=1e-12)
    assert rep["antihub_share"] == float(np.mean(nk == 0))


def test_an_exact_duplicate_ranked_above_the_row_itself_is_still_left_out():
    X = np.random.default_rng(0).normal(size=(30, 6)).astype(np.float32)
    X[5] = X[4]  # rows 4 and 5 tie: one of them ranks ahead of the other in the other's list
    rows, _ = H.neighbours(X, X, 3, in_corpus=True)
    assert rows.shape == (30, 3)
    assert not (rows == np.arange(30)[:, None]).any()
    assert 5 in rows[4] and 4 in rows[5]


def test_the_null_reads_gaussian_rows_as_not_high_and_planted_hubs_as_high(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 24)).astype(np.float32)
    X[:, 0] += 2.0  # a shared direction, as real embeddings have: the null (same mean and covariance) has it too
    np.save(tmp_path / "plain.npy", X)
    plain = embedcheck.hubness(str(tmp_path / "plain.npy"), resamples=200, null_draws=3).to_dict()
    assert plain["reading"].startswith("not above"), plain["reading"]
    # 12 near-copies of the shared direction: they fill the top-k lists of most queries together
    Y = X.copy()
    Y[:12] = 0.0
    Y[:12, 0] = 2.0
    Y[:12] += 0.01 * rng.normal(size=(12, 24))
    lines = [json.dumps({"id": f"doc{i}", "text": "Cookie notice." if i < 12 else f"An ordinary abstract number {i} of some length."})
             for i in range(300)]
    np.save(tmp_path / "hubby.npy", Y.astype(np.float32))
    (tmp_path / "hubby.jsonl").write_text("\n".join(lines) + "\n")
    hubby = embedcheck.hubness(str(tmp_path / "hubby.npy"), resamples=200, null_draws=3, top=5).to_dict()
    assert hubby["reading"].startswith("high"), hubby["reading"]
    assert hubby["k_skewness_ci95"][0] > hubby["null"]["k_skewness"]["max"]
    top = hubby["top_hubs"]
    assert all(h["row"] < 12 and h["id"] == f"doc{h['row']}" and h["text"] == "Cookie notice." for h in top)
    assert all("near duplicate" in h["why"] and "near the mean direction" in h["why"] and "short text" in h["why"]
               and "repeated in 11 other" in h["why"] for h in top), top


def test_cli_gates_on_the_declared_direction_and_pairs_hub_share(cli, gauss, tmp_path):
    path, X = gauss
    ok = cli(["hubness", path, "--resamples", "50", "--null-draws", "0", "--fail-above", "k_skewness=100", "--json"])
    assert ok.exit_code == 0, ok
    rep = ok.json()
    assert rep["schema"] == "embedcheck.hubness/1" and rep["gates"][0]["passed"]
    bad = cli(["hubness", path, "--resamples", "50", "--null-draws", "0", "--fail-above", f"k_skewness={rep['k_skewness'] / 2}"])
    assert bad.exit_code == 1
    np.save(tmp_path / "b.npy", (X + 0.3 * np.random.default_rng(9).normal(size=X.shape)).astype(np.float32))
    paired = cli(["hubness", path, "--against", tmp_path / "b.npy", "--resamples", "50", "--null-draws", "0", "--json"])
    assert paired.exit_code == 0, paired
    assert {"hub_share", "antihub_share"} <= set(paired.json()["paired"])
    err = cli(["hubness", path, "--k", "0"])
    assert err.exit_code == 2 and "--k" in err.stderr


# ---- repairs: each arm against its formula written out here -------------------------------------------


def _unit(X):
    X = np.asarray(X, dtype=np.float64)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _nk_of(S: np.ndarray, k: int, n: int) -> np.ndarray:
    top = np.argsort(-S, axis=1, kind="stable")[:, :k]
    return np.bincount(top.ravel(), minlength=n)


@pytest.fixture
def pair(tmp_path):
    rng = np.random.default_rng(5)
    C = rng.normal(size=(220, 16)) + np.r_[3.0, np.zeros(15)]
    Q = rng.normal(size=(60, 16)) + np.r_[3.0, np.zeros(15)]
    np.save(tmp_path / "c.npy", C.astype(np.float32))
    np.save(tmp_path / "q.npy", Q.astype(np.float32))
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": f"d{i}"}) + "\n" for i in range(220)))
    (tmp_path / "q.jsonl").write_text("".join(json.dumps({"id": f"q{i}"}) + "\n" for i in range(60)))
    qrels = [(f"q{i}", f"d{j}", 1) for i in range(60) for j in rng.choice(220, size=3, replace=False)]
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels))
    return tmp_path, C.astype(np.float32).astype(np.float64), Q.astype(np.float32).astype(np.float64), qrels


def test_every_repair_equals_its_formula_and_ndcg_equals_trec_eval(pair):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    d, C, Q, qrels = pair
    k, n = 10, C.shape[0]
    rep = embedcheck.hubness(str(d / "c.npy"), queries=str(d / "q.npy"), qrels=str(d / "qrels.tsv"), repair="all",
                             k=k, resamples=50, null_draws=0).to_dict()
    arms = {a["repair"]: a for a in rep["repairs"]}
    Cu, Qu = _unit(C), _unit(Q)
    S = Qu @ Cu.T
    mu = Cu.mean(axis=0)
    expect = {"centring": _unit(Qu - mu) @ _unit(Cu - mu).T}
    rc = np.sort(Cu @ Cu.T - 2 * np.eye(n), axis=1)[:, ::-1][:, :k].mean(axis=1)  # self left out
    rq = np.sort(S, axis=1)[:, ::-1][:, :k].mean(axis=1)
    expect["csls"] = 2 * S - rq[:, None] - rc[None, :]
    expect["qbnorm"] = np.exp(20 * S) / np.exp(20 * S).sum(axis=0, keepdims=True)  # the bank: the queries
    # empirical mutual proximity over every corpus row (n < the sample size), among the cosine top 100
    SC = Cu @ Cu.T
    mp = np.array([[np.mean((S[i] < S[i, c]) & (SC[c] < S[i, c])) for c in range(n)] for i in range(Q.shape[0])])
    cand = np.argsort(-S, axis=1, kind="stable")[:, :100]
    masked = np.full_like(mp, -1.0)
    np.put_along_axis(masked, cand, np.take_along_axis(mp, cand, axis=1) + 1e-9 * np.take_along_axis(S, cand, axis=1), axis=1)
    expect["mutual-proximity"] = masked
    qrel = {}
    for q, dd, g in qrels:
        qrel.setdefault(q, {})[dd] = g
    ev = pytrec_eval.RelevanceEvaluator(qrel, {"ndcg_cut.10"})
    def ndcg(score):
        top = np.argsort(-score, axis=1, kind="stable")[:, :10]
        run = {f"q{i}": {f"d{j}": float(10 - r) for r, j in enumerate(top[i])} for i in range(len(top))}
        return np.mean([v["ndcg_cut_10"] for v in ev.evaluate(run).values()])
    plain = ndcg(S)
    assert rep["ndcg_at_10"] == pytest.approx(plain, abs=1e-12)
    for name, score in expect.items():
        nk = _nk_of(score, k, n)
        assert arms[name]["k_skewness"] == pytest.approx(float(skew(nk)), rel=1e-9), name
        assert arms[name]["antihub_share"] == float(np.mean(nk == 0)), name
        assert arms[name]["ndcg_change"] == pytest.approx(ndcg(score) - plain, abs=1e-12), name
        assert arms[name]["verdict"] in ("better", "worse", "inconclusive", "equivalent", "non-inferior", "underpowered")


def test_centring_lowers_hubness_on_rows_with_a_shared_direction(pair):
    d, *_ = pair
    rep = embedcheck.hubness(str(d / "c.npy"), repair="centring", resamples=100, null_draws=0).to_dict()
    assert rep["repairs"][0]["k_skewness"] < rep["k_skewness"]


def test_repair_and_qrels_refusals_name_the_option(cli, pair):
    d, *_ = pair
    bad = cli(["hubness", d / "c.npy", "--repair", "magic"])
    assert bad.exit_code == 2 and "repair" in bad.stderr and "centring" in bad.stderr
    bad = cli(["hubness", d / "c.npy", "--qrels", d / "qrels.tsv"])
    assert bad.exit_code == 2 and "--qrels needs --queries" in bad.stderr


@pytest.mark.parametrize("arm", ["csls", "qbnorm", "centring"])
def test_retrieve_rerank_pairs_the_repair_with_plain_cosine(cli, pair, arm):
    d, *_ = pair
    hub = embedcheck.hubness(str(d / "c.npy"), queries=str(d / "q.npy"), qrels=str(d / "qrels.tsv"), repair=arm,
                             resamples=50, null_draws=0).to_dict()
    res = cli(["retrieve", d / "q.npy", d / "c.npy", d / "qrels.tsv", "--rerank", arm, "--resamples", "50", "--json"])
    assert res.exit_code == 0, res
    rep = res.json()
    nd = rep["paired"]["ndcg_at_10"]
    assert rep["metrics"]["ndcg_at_10"] == pytest.approx(hub["ndcg_at_10"], abs=1e-12) == pytest.approx(nd["a"], abs=1e-12)
    assert nd["b"] == pytest.approx(hub["repairs"][0]["ndcg_at_10"], abs=1e-12)
    assert rep["paired"]["against"].startswith(f"--rerank {arm}")
    bad = cli(["retrieve", d / "q.npy", d / "c.npy", d / "qrels.tsv", "--rerank", "nope"])
    assert bad.exit_code == 2 and "--rerank" in bad.stderr


def test_k_at_or_above_the_rows_is_one_line_naming_k(cli, gauss):
    path, X = gauss
    res = cli(["hubness", path, "--k", str(len(X))])
    assert res.exit_code == 2 and res.stderr.startswith("error: --k must be below the 400 rows"), res
    assert cli(["hubness", path, "--k", str(len(X) - 1), "--resamples", "10", "--null-draws", "0", "--json"]).exit_code == 0


def test_a_parquet_store_gives_the_npy_figures_and_names_its_hubs_from_its_columns(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    from conftest import FIXTURES

    X = np.load(FIXTURES / "topics.npy")
    ids = [f"r{i}" for i in range(len(X))]
    texts = [f"a text of row {i}" for i in range(len(X))]
    pq.write_table(pa.table({"id": ids, "text": texts, "embedding": pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), X.shape[1])}),
                   tmp_path / "t.parquet")
    np.save(tmp_path / "t.npy", X)
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in zip(ids, texts)))
    a = embedcheck.hubness(str(tmp_path / "t.parquet"), resamples=50, null_draws=1, top=3).to_dict()
    b = embedcheck.hubness(str(tmp_path / "t.npy"), resamples=50, null_draws=1, top=3).to_dict()
    assert a == b
    assert [(h["id"], h["text"]) for h in a["top_hubs"]] == [(ids[h["row"]], texts[h["row"]]) for h in a["top_hubs"]]


def test_knn_label_accuracy_equals_scikit_learn_and_each_repair_is_paired(cli, tmp_path):
    """--labels: plain cosine's leave-one-out k-NN accuracy is scikit-learn's KNeighborsClassifier
    (brute cosine, predict(None): each row left out); each repair's accuracy is the majority vote over
    its own repaired neighbours, and its change the paired difference on the same rows."""
    from pathlib import Path

    from sklearn.neighbors import KNeighborsClassifier

    fix = Path(__file__).resolve().parent.parent / "fixtures"
    X = np.load(fix / "topics.npy")
    y = np.array([json.loads(line)["label"] for line in (fix / "topics.labels.jsonl").read_text().splitlines()])
    rep = embedcheck.hubness(str(fix / "topics.npy"), labels=str(fix / "topics.labels.jsonl"), k=7,
                             repair="csls,mutual-proximity", resamples=200, null_draws=0).to_dict()
    sk = KNeighborsClassifier(n_neighbors=7, metric="cosine", algorithm="brute").fit(X, y)
    plain = (sk.predict(None) == y).astype(float)
    assert rep["knn_accuracy"] == pytest.approx(plain.mean(), abs=1e-12)
    lo, hi = rep["knn_accuracy_ci95"]
    assert lo < rep["knn_accuracy"] < hi
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    for arm in rep["repairs"]:
        rows, _ = H.repaired_neighbours(U, U, 7, arm["repair"], in_corpus=True, seed=0)
        votes = [sorted(set(y[r]), key=lambda c: (-list(y[r]).count(c), c))[0] for r in rows]
        acc = np.mean(np.array(votes) == y)
        assert arm["knn_accuracy"] == pytest.approx(acc, abs=1e-12), arm["repair"]
        assert arm["knn_accuracy_change"] == pytest.approx(acc - plain.mean(), abs=1e-12)
        assert arm["knn_verdict"] in ("better", "worse", "inconclusive")
    r = cli(["hubness", str(fix / "topics.npy"), "--labels", str(fix / "topics.labels.jsonl"),
             "--queries", str(fix / "topics_test.npy")])
    assert r.exit_code == 2 and r.stderr.startswith("error: --labels needs the in-corpus form"), r.stderr
    short = tmp_path / "short.jsonl"
    short.write_text("".join(json.dumps({"label": "a"}) + "\n" for _ in range(10)))
    r = cli(["hubness", str(fix / "topics.npy"), "--labels", str(short)])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "--labels" in r.stderr and "Traceback" not in r.stderr, r.stderr
