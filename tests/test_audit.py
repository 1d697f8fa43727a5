"""``audit``: its checks against brute force written here (numpy's all-pairs cosines and top k, the
k-occurrences, identical bytes) and against cleanlab (a test dependency, never imported by the
package) on the same out-of-fold probabilities and features; planted invalid rows, duplicates,
chains and a file sorted by label; bad input; gates; ``--rows-out``; through the CLI in process."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error
from scipy.stats import spearmanr

import embedcheck
from embedcheck.geometry import audit as A
from embedcheck.geometry import label_issues as L
from embedcheck.measures.audit import COLUMNS

K = 10


def _topics() -> tuple[np.ndarray, np.ndarray]:
    X = np.load(FIXTURES / "topics.npy")
    y = np.array([json.loads(x)["label"] for x in (FIXTURES / "topics.labels.jsonl").read_text().splitlines()])
    return X, y


def _unit(X: np.ndarray) -> np.ndarray:
    return (X / np.linalg.norm(X.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)


def _noisy(c: int, n: int = 1500, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian classes in 32 dimensions with 5 % of labels flipped (seeded): rows, noisy labels, flips."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(c, 32)) * 0.6
    yt = rng.integers(0, c, n)
    X = mu[yt] + rng.normal(size=(n, 32))
    y = yt.copy()
    f = rng.random(n) < 0.05
    y[f] = (y[f] + rng.integers(1, c, f.sum())) % c
    return X.astype(np.float32), y, f


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    A_, B_ = set(np.flatnonzero(a)), set(np.flatnonzero(b))
    return len(A_ & B_) / max(1, len(A_ | B_))


# ---- against cleanlab -----------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["topics", "2", "4", "6"])
def test_label_issues_agree_with_cleanlab_on_the_same_probabilities(case):
    cleanlab_filter = pytest.importorskip("cleanlab.filter")
    from cleanlab.count import get_confident_thresholds
    from cleanlab.rank import get_label_quality_scores

    if case == "topics":
        X, labels = _topics()
        y = np.unique(labels, return_inverse=True)[1]
    else:
        X, y, _ = _noisy(int(case))
    P, converged = L.oof_probabilities(X, y, folds=5, seed=0)
    assert converged and np.allclose(P.sum(axis=1), 1.0)
    r = L.find_issues(y, P)
    theirs = cleanlab_filter.find_label_issues(y, P, filter_by="prune_by_noise_rate")
    assert _jaccard(r.issues, theirs) >= 0.9, (r.issues.sum(), theirs.sum())
    assert spearmanr(r.scores, get_label_quality_scores(y, P)).statistic >= 0.99
    margin = L.label_scores(y, P, "normalized_margin")
    assert spearmanr(margin, get_label_quality_scores(y, P, method="normalized_margin")).statistic >= 0.99
    np.testing.assert_allclose(r.thresholds, get_confident_thresholds(y, P), rtol=1e-9)


def test_confident_learning_against_the_paper_written_out():
    """Thresholds, the confident joint and the prune counts, by loops over the rows (the paper's eqs.)."""
    X, y, _ = _noisy(3, n=600, seed=4)
    P, _ = L.oof_probabilities(X, y, folds=5, seed=0)
    n, c = P.shape
    t = np.array([np.mean([P[i, j] for i in range(n) if y[i] == j]) for j in range(c)])
    C = np.zeros((c, c), dtype=int)
    for i in range(n):
        above = [j for j in range(c) if P[i, j] >= t[j]]
        if above:
            C[y[i], max(above, key=lambda j: P[i, j])] += 1
    counts = np.bincount(y, minlength=c)
    Ct = np.array([C[i] / C[i].sum() * counts[i] for i in range(c)])
    Q = Ct / Ct.sum()
    r = L.find_issues(y, P)
    np.testing.assert_allclose(r.thresholds, t, rtol=1e-12)
    assert (r.joint_counts == C).all()
    np.testing.assert_allclose(r.joint, Q, rtol=1e-12)
    want = np.zeros(n, dtype=bool)
    for i in range(c):
        for j in range(c):
            if i != j and round(n * Q[i, j]) > 0:
                rows = [x for x in range(n) if y[x] == i]
                rows.sort(key=lambda x: (-(P[x, j] - P[x, i]), x))
                want[rows[:round(n * Q[i, j])]] = True
    want &= P.argmax(axis=1) != y
    assert (r.issues == want).all()
    assert r.noise_rate == pytest.approx(1 - np.trace(Q), abs=1e-12)


def test_outlier_scores_rank_as_cleanlabs_with_the_same_k():
    """cleanlab's OutOfDistribution scores features by exp(-mean distance to the k nearest): on unit rows
    its default metric here is cosine (the same distance); with a euclidean index the distance is
    sqrt(2 (1 - cos)), monotone per pair, so the mean's ranking moves a little — both >= 0.99."""
    pytest.importorskip("cleanlab")
    from cleanlab.outlier import OutOfDistribution
    from sklearn.neighbors import NearestNeighbors

    X, _ = _topics()
    U = _unit(X)
    _, cos = A.graph(U, K)
    score, _, _ = A.outliers(cos)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = OutOfDistribution(params={"k": K}).fit_score(features=U)
        eu = OutOfDistribution(params={"k": K, "knn": NearestNeighbors(n_neighbors=K, metric="euclidean").fit(U)})
        theirs_eu = eu.fit_score(features=U)
    assert spearmanr(-score, theirs).statistic >= 0.99
    assert spearmanr(-score, theirs_eu).statistic >= 0.99


# ---- the graph and the row checks against brute force -------------------------------------------

def test_the_graph_is_numpys_exact_top_k_and_hubs_its_k_occurrence():
    X, _ = _topics()
    U = _unit(X)
    nb, cos = A.graph(U, K)
    S = U.astype(np.float64) @ U.astype(np.float64).T
    np.fill_diagonal(S, -np.inf)
    want = np.argsort(-S, axis=1, kind="stable")[:, :K]
    assert (np.sort(nb, axis=1) == np.sort(want, axis=1)).mean() > 0.999  # float32 vs float64 ties at the k-th
    np.testing.assert_allclose(cos, np.take_along_axis(S, nb, axis=1), atol=1e-6)
    from embedcheck.geometry.hubness import k_occurrence

    assert (k_occurrence(nb, len(U)) == np.bincount(nb.ravel(), minlength=len(U))).all()


def test_outlier_flags_follow_the_stated_fence():
    X, _ = _topics()
    rng = np.random.default_rng(3)
    far = rng.normal(size=(6, X.shape[1])).astype(np.float32) * 5  # random directions, far from every topic
    Z = np.vstack([X, far])
    _, cos = A.graph(_unit(Z), K)
    s, flag, thr = A.outliers(cos)
    np.testing.assert_allclose(s, (1 - cos.astype(np.float64)).mean(axis=1))
    q1, q3 = np.percentile(s, [25, 75])
    assert thr == pytest.approx(q3 + 1.5 * (q3 - q1))
    assert (flag == (s > thr)).all()
    assert flag[-6:].all() and flag[:-6].mean() < 0.02  # the fixture's own rows: 1.5 % above the fence


def test_exact_and_near_duplicates_groups_diameters_and_chains():
    rng = np.random.default_rng(5)
    base = rng.normal(size=(200, 16)).astype(np.float32)
    X = base.copy()
    X[10] = X[3]                                      # an exact copy of row 3
    X[20] = X[3] + np.float32(1e-3)                   # a near copy of it (cosine ~ 1)
    X[30] = -0.0 * X[3] + X[3]                        # the same bytes again
    assert A.exact_duplicates(X).tolist()[:31] == [*range(10), 3, *range(11, 30), 3]
    # a chain: rows along an arc, each step cosine 0.96 to the next, the ends far apart
    a, b = np.eye(16)[0], np.eye(16)[1]
    step = np.arccos(0.96)
    chain = np.array([np.cos(i * step) * a + np.sin(i * step) * b for i in range(8)], dtype=np.float32)
    Z = np.vstack([X, chain])
    U = _unit(Z)
    nb, cos = A.graph(U, 5)
    ex = A.exact_duplicates(Z)
    g = A.near_duplicates(U, nb, cos, 0.95, exact=ex)
    assert g.group[10] == g.group[20] == g.group[30] == 3 and g.group[3] == 3
    last = len(Z) - 8
    assert (g.group[last:] == last).all()
    k = list(g.heads).index(last)
    want = float((U[last:].astype(np.float64) @ U[last:].astype(np.float64).T).min())
    assert g.diameters[k] == pytest.approx(want) and g.chains[k]
    assert not g.chains[list(g.heads).index(3)]


def test_order_sorted_by_label_is_flagged_and_shuffled_is_not():
    X, labels = _topics()
    order = np.argsort(labels, kind="stable")
    nb, _ = A.graph(_unit(X[order]), K)
    sorted_test = A.order_test(nb, np.arange(len(X)), len(X), 199, 0)
    assert sorted_test["p_value"] == pytest.approx(1 / 200) and sorted_test["ratio"] < 0.8
    perm = np.random.default_rng(0).permutation(len(X))
    nb, _ = A.graph(_unit(X[perm]), K)
    shuffled = A.order_test(nb, np.arange(len(X)), len(X), 199, 0)
    assert shuffled["p_value"] > 0.05 and abs(shuffled["ratio"] - 1) < 0.05
    assert shuffled["null_mean_gap"] == pytest.approx((len(X) + 1) / 3, rel=0.02)  # E|i - j| of random positions


def test_ctfidf_keywords_name_the_clusters_words():
    texts = ["goal match striker", "match referee goal", "vote senate bill", "senate vote election"]
    kw = A.ctfidf_keywords(texts, np.array([0, 0, 1, 1]), 2, top=2)
    assert set(kw[0]) == {"goal", "match"} and set(kw[1]) == {"senate", "vote"}


# ---- the command --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("audit")
    X, labels = _topics()
    X = X.copy()
    X[5] = np.nan
    X[7] = 0.0
    X[9] = X[8]
    np.save(d / "x.npy", X)
    (d / "x.jsonl").write_text("".join(json.dumps({"id": f"r{k}", "text": f"topic text {labels[k]} {k}"}) + "\n"
                                       for k in range(len(X))))
    (d / "y.jsonl").write_text("".join(json.dumps({"id": f"r{k}", "label": str(v)}) + "\n" for k, v in enumerate(labels)))
    return d


def _args(d, *extra):
    return ["audit", d / "x.npy", d / "y.jsonl", "--permutations", "99", *extra]


def test_the_command_counts_invalid_rows_keeps_them_out_and_writes_every_row(cli, files):
    d = files
    out = d / "rows.jsonl"
    res = cli([*_args(d, "--rows-out", out), "--json"])
    assert res.exit_code == 0, res
    r = res.json()
    assert r["n"] == 600 and r["valid_rows"] == 598
    assert r["invalid"]["count"] == 2 and [x["id"] for x in r["invalid"]["rows"]] == ["r5", "r7"]
    assert r["invalid"]["kinds"] == {"non-finite": 1, "all-zero": 1}
    assert r["duplicates"]["exact_rows"] == 1
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 600 and list(rows[0]) == list(COLUMNS)
    assert rows[5]["is_invalid"] and rows[5]["is_label_issue"] is None and rows[5]["k_occurrence"] is None
    assert rows[9]["is_exact_duplicate"] and rows[9]["duplicate_group"] == 8
    assert sum(bool(x["is_label_issue"]) for x in rows) == r["label_issues"]["count"]
    assert sum(bool(x["is_outlier"]) for x in rows) == r["outliers"]["count"]
    assert sum(bool(x["is_hub"]) for x in rows) == r["hubs"]["count"]
    assert sum(x["k_occurrence"] or 0 for x in rows) == 598 * K
    assert rows[0]["text"].startswith("topic text") and rows[0]["id"] == "r0"
    flagged = {x["id"] for x in rows if x["is_label_issue"] or x["is_outlier"] or x["is_hub"]
               or (x["duplicate_group"] is not None and x["duplicate_group"] != int(x["id"][1:]))}
    assert r["issues"] == len(flagged) + 2
    from scipy.stats import binomtest

    ci = binomtest(r["label_issues"]["count"], 598).proportion_ci(method="wilson")
    assert r["label_issues"]["share_ci95"] == pytest.approx([ci.low, ci.high])


def test_rows_out_parquet_holds_the_same_rows(cli, files):
    pq = pytest.importorskip("pyarrow.parquet")
    d = files
    res = cli([*_args(d, "--rows-out", d / "rows.parquet", "--clusters", "1"), "--json"])
    assert res.exit_code == 0, res
    t = pq.read_table(d / "rows.parquet").to_pylist()
    assert len(t) == 600 and list(t[0]) == list(COLUMNS) and t[7]["is_invalid"]


def test_gates_on_issue_shares(cli, files):
    d = files
    fail = cli([*_args(d, "--fail-above", "label_issues.share=0.03", "--clusters", "1"), "--json"])
    assert fail.exit_code == 1 and not fail.json()["gates"][0]["passed"]
    ok = cli([*_args(d, "--fail-above", "label_issues.share=0.5", "--clusters", "1"), "--json"])
    assert ok.exit_code == 0, ok


def test_the_summary_names_the_rows(cli, files):
    res = cli([*_args(files, "--format", "table")])
    assert res.exit_code == 0, res
    lines = res.stdout.splitlines()
    assert lines[0].startswith("audit: ") and "issues in 600 rows" in lines[0]
    assert any(ln.strip().startswith("label issues") for ln in lines)
    assert any(ln.strip().startswith("r") and "topic text" in ln for ln in lines)
    assert max(len(ln) for ln in lines) <= 80 and "…" not in res.stdout


def test_without_labels_the_label_checks_are_skipped_with_a_notice(cli, files):
    res = cli(["audit", files / "x.npy", "--permutations", "99", "--clusters", "2", "--json"])
    assert res.exit_code == 0, res
    assert "label_issues" not in res.json() and "notice: audit: no labels given" in res.stderr


@pytest.mark.parametrize("what", ["length", "one-class", "one-row", "k"])
def test_bad_input_is_one_line_and_writes_nothing(cli, files, tmp_path, what):
    d = files
    y = [json.loads(x)["label"] for x in (d / "y.jsonl").read_text().splitlines()]
    lab = tmp_path / "lab.txt"
    extra: list = []
    if what == "length":
        lab.write_text("\n".join(y[:-1]) + "\n")
    elif what == "one-class":
        lab.write_text("\n".join("a" for _ in y) + "\n")
    elif what == "one-row":
        lab.write_text("\n".join(["lonely", *y[1:]]) + "\n")
    else:
        lab.write_text("\n".join(y) + "\n")
        extra = ["--k", "598"]
    out = tmp_path / "rows.jsonl"
    res = cli(["audit", d / "x.npy", lab, "--rows-out", out, *extra])
    assert_one_line_error(res)
    assert {"length": "rows", "one-class": "one class", "one-row": "one row", "k": "k must be below"}[what] in res.stderr
    assert not out.exists()


def test_the_api_gives_the_clis_report(files):
    rep = embedcheck.audit(str(files / "x.npy"), str(files / "y.jsonl"), permutations=99, clusters=2)
    assert rep.to_dict()["label_issues"]["count"] > 0 and rep.to_dict()["order_verdict"] == "iid-consistent"


def test_a_saved_graph_is_reused_and_refused_for_other_rows(cli, files, tmp_path):
    d = files
    g = tmp_path / "g.npz"
    first = cli([*_args(d, "--graph", g, "--clusters", "1"), "--json"])
    assert first.exit_code == 0, first
    saved = g.read_bytes()
    again = cli([*_args(d, "--graph", g, "--clusters", "1"), "--json"])
    assert again.exit_code == 0, again
    assert g.read_bytes() == saved
    a, b = first.json(), again.json()
    assert a["outliers"] == b["outliers"] and a["hubs"]["examples"] == b["hubs"]["examples"]
    X = np.load(d / "x.npy")
    X[0] *= 2  # other rows: the same graph would be wrong
    np.save(tmp_path / "other.npy", X)
    bad = cli(["audit", tmp_path / "other.npy", "--graph", g, "--permutations", "99"])
    assert_one_line_error(bad)
    assert "other rows" in bad.stderr


def test_only_the_last_inputs_may_be_optional():
    from embedcheck.spec import Input, Measurement, Outcome

    def run(inputs, *, engine, seed):
        return Outcome(body={})

    with pytest.raises(ValueError, match="only the last inputs"):
        Measurement("x-opt", "h", run, inputs=(Input("embeddings"), Input("a", "labels", optional=True),
                                               Input("b", "labels")))
    with pytest.raises(ValueError, match="first input"):
        Measurement("x-opt", "h", run, inputs=(Input("embeddings", optional=True),))
    from embedcheck.errors import InputError

    with pytest.raises(InputError, match="takes 1 to 2 input"):
        embedcheck.audit()
