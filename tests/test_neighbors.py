"""``neighbors``: exact blocked k-NN against a float64 brute force (ties included), the overlap
figures against sets computed by hand, the bootstrap interval against a plain row bootstrap, and
the command's exit codes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_one_line_error

from embedcheck.geometry.neighbors import knn, neighbors


def brute_knn(X: np.ndarray, k: int, queries: np.ndarray | None = None) -> np.ndarray:
    """float64 unit rows, every cosine, each row sorted by (-cosine, index), self excluded."""
    U = X.astype(np.float64)
    U = U / np.linalg.norm(U, axis=1, keepdims=True)
    n = len(U)
    q = np.arange(n) if queries is None else queries
    out = []
    for i in q:
        s = np.array([float(np.dot(U[i], U[j])) for j in range(n)])
        s[i] = -np.inf
        out.append(np.lexsort((np.arange(n), -s))[:k])
    return np.array(out)


def sparse_half(n: int, d: int, seed: int) -> np.ndarray:
    """Rows with four entries ±0.5: unit norm exactly, every cosine a multiple of 1/4 computed
    exactly in any order — massive exact ties."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, d), dtype=np.float32)
    for i in range(n):
        X[i, rng.choice(d, 4, replace=False)] = rng.choice([-0.5, 0.5], 4)
    return X


@pytest.mark.parametrize("k", [1, 5, 12])
def test_knn_equals_brute_force_on_gaussian_rows(k):
    X = np.random.default_rng(0).standard_normal((240, 24)).astype(np.float32)
    got, _ = knn(X, k)
    assert np.array_equal(got, brute_knn(X, k))


def test_knn_ties_follow_the_smaller_index_rule_and_are_rechecked():
    X = sparse_half(200, 8, seed=1)
    got, rechecked = knn(X, 7)
    assert np.array_equal(got, brute_knn(X, 7))
    assert rechecked > 0  # ties at the k-th place cannot be decided in float32: re-done in float64


def test_knn_duplicate_rows_and_tiny_blocks():
    rng = np.random.default_rng(2)
    base = rng.standard_normal((60, 10))
    X = np.concatenate([base, base[:30], base[:15]]).astype(np.float64)  # exact copies: exact ties
    q = np.array([0, 5, 29, 61, 100, 104])
    got, _ = knn(X, 4, q, block_bytes=1)  # one query row per block
    assert np.array_equal(got, brute_knn(X, 4, q))


def test_knn_float16_input_and_k_bounds():
    X = np.random.default_rng(3).standard_normal((50, 6)).astype(np.float16)
    got, _ = knn(X, 49)  # every other row
    assert np.array_equal(got, brute_knn(X, 49))
    with pytest.raises(Exception, match="k must be between 1 and n - 1"):
        knn(X, 50)


def test_overlap_top1_and_label_figures_match_sets():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((150, 12))
    B = A + 0.7 * rng.standard_normal(A.shape)
    y = rng.integers(0, 3, 150)
    res = neighbors(A, B, 6, labels=y, seed=0)
    NA, NB = brute_knn(A, 6), brute_knn(B, 6)
    inter = np.array([len(set(a) & set(b)) for a, b in zip(NA, NB)])
    assert res.overlap == pytest.approx(inter.mean() / 6, abs=1e-15)
    assert res.top1_changed == pytest.approx(np.mean(NA[:, 0] != NB[:, 0]), abs=1e-15)
    lab = res.labels
    assert lab["same_label_a"] == pytest.approx(np.mean(y[NA] == y[:, None]))
    assert lab["same_label_b"] == pytest.approx(np.mean(y[NB] == y[:, None]))
    enter = [(i, j) for i in range(150) for j in NB[i] if j not in set(NA[i])]
    leave = [(i, j) for i in range(150) for j in NA[i] if j not in set(NB[i])]
    assert lab["entering"] == len(enter) == lab["leaving"] == len(leave)
    assert lab["entering_same_label"] == pytest.approx(np.mean([y[i] == y[j] for i, j in enter]))
    assert lab["leaving_same_label"] == pytest.approx(np.mean([y[i] == y[j] for i, j in leave]))
    lo, hi = res.overlap_ci95
    assert lo < res.overlap < hi


def test_identical_embeddings_overlap_one():
    X = np.random.default_rng(5).standard_normal((80, 8))
    res = neighbors(X, X.copy(), 5)
    assert res.overlap == 1.0 and res.top1_changed == 0.0 and res.overlap_ci95 == [1.0, 1.0]


def test_multinomial_bootstrap_matches_a_row_bootstrap():
    """The interval is drawn as a multinomial over the k + 1 overlap values; a plain bootstrap over
    rows gives the same distribution: its 2.5/97.5 % quantiles agree within Monte Carlo error."""
    rng = np.random.default_rng(6)
    A = rng.standard_normal((400, 10))
    B = A + 1.0 * rng.standard_normal(A.shape)
    res = neighbors(A, B, 5, resamples=20000, seed=1)
    per_row = res.overlap_counts / 5
    draws = np.random.default_rng(7).integers(0, 400, size=(20000, 400))
    ref = np.quantile(per_row[draws].mean(axis=1), [0.025, 0.975])
    se = per_row.std() / np.sqrt(400)
    assert res.overlap_ci95 == pytest.approx(list(ref), abs=0.1 * se)


def test_query_sample_is_seeded_and_exact():
    rng = np.random.default_rng(8)
    A = rng.standard_normal((120, 6))
    B = rng.standard_normal((120, 9))
    r1 = neighbors(A, B, 3, queries=30, seed=11)
    r2 = neighbors(A, B, 3, queries=30, seed=11)
    assert r1.sampled and len(r1.queries) == 30 and len(set(r1.queries.tolist())) == 30
    assert np.array_equal(r1.queries, r2.queries) and r1.to_dict() == r2.to_dict()
    assert np.array_equal(r1.neighbors_a, brute_knn(A, 3, r1.queries))
    assert np.array_equal(r1.neighbors_b, brute_knn(B, 3, r1.queries))


# ---- the command --------------------------------------------------------------------------------


def _pair(tmp_path, n=200, d=16, noise=0.5, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)).astype(np.float32)
    B = (A + noise * rng.standard_normal((n, d))).astype(np.float32)
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", B)
    return tmp_path / "a.npy", tmp_path / "b.npy", A, B


def test_cli_report_gate_and_same_bytes(cli, tmp_path):
    a, b, A, B = _pair(tmp_path)
    y = np.arange(200) % 4
    np.save(tmp_path / "y.npy", y)
    res = cli(["neighbors", a, b, "--k", "5", "--labels", tmp_path / "y.npy", "--seed", "3"])
    assert res.exit_code == 0, res
    rep = res.json()
    assert rep["schema"] == "embedcheck.neighbors/1" and rep["k"] == 5 and rep["queries"] == 200
    NA, NB = brute_knn(A, 5), brute_knn(B, 5)
    assert rep["overlap"] == pytest.approx(np.mean([len(set(x) & set(z)) for x, z in zip(NA, NB)]) / 5)
    assert sum(rep["overlap_histogram"]) == 200
    assert "bootstrap over query rows, 1000 resamples, seed 3" in rep["ci_method"]
    again = cli(["neighbors", a, b, "--k", "5", "--labels", tmp_path / "y.npy", "--seed", "3"])
    assert again.stdout == res.stdout
    ok = cli(["neighbors", a, b, "--k", "5", "--min-overlap", f"{rep['overlap'] - 1e-9}"])
    assert ok.exit_code == 0 and ok.json()["gates"][0]["passed"]
    fail = cli(["neighbors", a, b, "--k", "5", "--min-overlap", f"{rep['overlap'] + 1e-9}"])
    assert fail.exit_code == 1 and not fail.json()["gates"][0]["passed"]


def test_cli_bad_input(cli, tmp_path):
    a, b, _, _ = _pair(tmp_path)
    np.save(tmp_path / "short.npy", np.ones((10, 16), dtype=np.float32))
    assert_one_line_error(cli(["neighbors", a, tmp_path / "short.npy"]))
    res = cli(["neighbors", a, b, "--k", "200"])
    assert_one_line_error(res)
    assert "--k 200" in res.stderr
    assert_one_line_error(cli(["neighbors", a, b, "--min-overlap", "1.5"]))
    np.save(tmp_path / "y.npy", np.zeros(5))
    assert_one_line_error(cli(["neighbors", a, b, "--labels", tmp_path / "y.npy"]))


def test_knn_near_ties_below_float32_resolution_are_decided_in_float64():
    """Rows 1e-5 apart: their cosines differ by ~1e-10, below float32's resolution (the float32
    values tie or swap) and far above float64's (the float64 values decide)."""
    rng = np.random.default_rng(9)
    base = rng.standard_normal((40, 32))
    X = np.concatenate([base, base + 1e-5 * rng.standard_normal(base.shape), base - 1e-5 * rng.standard_normal(base.shape)])
    got, _ = knn(X, 5)
    assert np.array_equal(got, brute_knn(X, 5))


@pytest.mark.parametrize("tile", [3, 7, 64])
def test_knn_column_tiles_merge_exactly(monkeypatch, tile):
    """Column tiles narrower than the candidate set, of odd widths, with ties across tiles."""
    import embedcheck.geometry.neighbors as nb

    monkeypatch.setattr(nb, "COLUMN_TILE", tile)
    X = np.random.default_rng(10).standard_normal((150, 12))
    assert np.array_equal(nb.knn(X, 5)[0], brute_knn(X, 5))
    T = sparse_half(120, 8, seed=3)
    assert np.array_equal(nb.knn(T, 6, np.arange(0, 120, 7))[0], brute_knn(T, 6, np.arange(0, 120, 7)))
