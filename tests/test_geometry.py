"""AAG, variance share, label MAP, permutation and bootstrap against brute-force computations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from embedcheck.geometry import aag as geometry
from embedcheck.geometry import label_map as geometry_map
from embedcheck.io.npy import load_matrix


def _data(n=1003, d=24, seed=0, dtype=np.float64):
    """Imbalanced three-class string labels with a weak class signal and a common direction."""
    rng = np.random.default_rng(seed)
    y = rng.choice(np.array(["neg", "neutral", "pos"]), p=[0.6, 0.3, 0.1], size=n)
    X = rng.normal(size=(n, d)) + 1.5 * np.eye(d)[0]
    X[y == "pos", 1] += 1.0
    X[y == "neg", 2] += 0.5
    return X.astype(dtype), y


def brute_aag(X, y):
    U = np.asarray(X, dtype=np.float64)
    U = U / np.linalg.norm(U, axis=1, keepdims=True)
    S = U @ U.T.copy()  # X @ Y.T (not the symmetric fast path)
    same = y[:, None] == y[None, :]
    off = ~np.eye(len(y), dtype=bool)
    within = {}
    for c in np.unique(y):
        m = (y == c)
        blk = S[np.ix_(m, m)][~np.eye(m.sum(), dtype=bool)]
        within[str(c)] = blk.mean() if blk.size else None
    return S[same & off].mean() - S[~same].mean(), S[same & off].mean(), S[~same].mean(), within


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_aag_equals_brute_force_all_dtypes_and_odd_chunks(dtype):
    X, y = _data(dtype=dtype)
    res = geometry.aag(X, y, chunk=64)  # 1003 is not a multiple of 64
    a, ms, md, within = brute_aag(X, y)
    assert res.aag == pytest.approx(a, abs=1e-10)
    assert res.mean_same == pytest.approx(ms, abs=1e-10)
    assert res.mean_diff == pytest.approx(md, abs=1e-10)
    for c, v in within.items():
        assert res.within[c] == pytest.approx(v, abs=1e-10)
    counts = {c: int((y == c).sum()) for c in np.unique(y)}
    assert res.class_counts == counts
    assert res.n_same_pairs == sum(k * (k - 1) // 2 for k in counts.values())
    assert res.n_same_pairs + res.n_diff_pairs == len(y) * (len(y) - 1) // 2


def test_aag_on_memmap_matches_in_memory(tmp_path):
    X, y = _data(n=777, dtype=np.float32)
    np.save(tmp_path / "x.npy", X)
    M = load_matrix(tmp_path / "x.npy")
    assert isinstance(M, np.memmap)
    assert geometry.aag(M, y, chunk=100).aag == pytest.approx(geometry.aag(X, y).aag, abs=1e-12)
    assert geometry.aag(M, y, chunk=100).aag == pytest.approx(brute_aag(X, y)[0], abs=1e-10)


def test_aag_int_and_string_labels_agree():
    X, y = _data(n=300)
    codes = np.unique(y, return_inverse=True)[1]
    assert geometry.aag(X, codes).aag == pytest.approx(geometry.aag(X, y).aag, abs=1e-14)


def test_aag_singleton_class_and_errors():
    X, y = _data(n=50)
    y = y.copy()
    y[7] = "lonely"
    res = geometry.aag(X, y)
    assert res.within["lonely"] is None
    assert res.aag == pytest.approx(brute_aag(X, y)[0], abs=1e-12)
    with pytest.raises(ValueError, match="two classes"):
        geometry.aag(X, np.zeros(50, dtype=int))
    with pytest.raises(ValueError, match="single row"):
        geometry.aag(X[:3], np.array([0, 1, 2]))


def test_aag_known_closed_form():
    # two tight opposite clusters: same-pair cosine 1, different-pair cosine -1 → AAG = 2
    X = np.array([[1.0, 0], [2, 0], [3, 0], [-1, 0], [-5, 0]])
    res = geometry.aag(X, np.array([1, 1, 1, 0, 0]))
    assert (res.aag, res.mean_same, res.mean_diff) == (2.0, 1.0, -1.0)


def brute_variance_share(X, y):
    U = np.asarray(X, dtype=np.float64)
    U = U / np.linalg.norm(U, axis=1, keepdims=True)
    C = np.cov(U.T, bias=True)
    mu = U.mean(0)
    M = np.stack([U[y == c].mean(0) - mu for c in np.unique(y)])
    Q = np.linalg.qr(M.T)[0][:, : np.linalg.matrix_rank(M)]
    return np.trace(Q.T @ C @ Q) / np.trace(C)


def test_variance_share_binary_is_share_along_mean_difference():
    X, y = _data(n=600)
    yb = (y == "pos").astype(int)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    w = U[yb == 1].mean(0) - U[yb == 0].mean(0)
    w /= np.linalg.norm(w)
    C = np.cov(U.T, bias=True)
    expected = w @ C @ w / np.trace(C)
    got = geometry.variance_share(X, yb, chunk=37)
    assert got.variance_share_dims == 1
    assert got.variance_share == pytest.approx(expected, rel=1e-9)


def test_variance_share_multiclass_span():
    X, y = _data(n=900)
    got = geometry.variance_share(X, y)
    assert got.variance_share_dims == 2
    assert got.variance_share == pytest.approx(brute_variance_share(X, y), rel=1e-9)


def brute_map(X, y, queries=None):
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    aps = []
    for i in (range(len(y)) if queries is None else queries):
        m = np.arange(len(y)) != i
        aps.append(average_precision_score(y[m] == y[i], U[m] @ U[i]))
    return 100 * np.mean(aps)


def test_label_map_equals_sklearn_average_precision():
    X, y = _data(n=401)
    res = geometry_map.label_map(X, y, block=37)
    assert res.queries == 401 and not res.sampled
    assert res.map == pytest.approx(brute_map(X, y), abs=1e-4)  # float32 cosines


def test_label_map_sampled_queries_are_seeded_and_exact_on_those_queries():
    X, y = _data(n=300)
    r1 = geometry_map.label_map(X, y, queries=50, seed=3)
    r2 = geometry_map.label_map(X, y, queries=50, seed=3)
    assert r1 == r2 and r1.sampled and r1.queries == 50
    q = np.sort(np.random.default_rng(3).choice(np.arange(300), size=50, replace=False))
    assert r1.map == pytest.approx(brute_map(X, y, q), abs=1e-4)


@pytest.mark.parametrize("N,R", [(5, 1), (5, 2), (6, 3), (7, 7)])
def test_expected_random_ap_closed_form_by_enumeration(N, R):
    aps = []
    for perm in itertools.permutations(range(N)):
        rel = np.array([p < R for p in perm])
        aps.append(np.mean([rel[: k + 1].sum() / (k + 1) for k in np.flatnonzero(rel)]))
    assert geometry_map.expected_random_ap(np.array([N]), np.array([R]))[0] == pytest.approx(np.mean(aps), abs=1e-12)


def test_label_map_chance_level_matches_shuffled_labels():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 8))
    y = rng.choice([0, 1, 2], p=[0.5, 0.3, 0.2], size=400)
    res = geometry_map.label_map(X, y)
    # pure noise: observed MAP is within a couple of points of the closed-form chance
    assert abs(res.map - res.chance) < 2.0


def test_permutation_null_matches_brute_force_and_is_seeded():
    X, y = _data(n=200)
    out = geometry.aag_permutation_null(X, y, 30, seed=5)
    rng = np.random.default_rng(5)
    null = np.array([brute_aag(X, y[rng.permutation(200)])[0] for _ in range(30)])
    observed = brute_aag(X, y)[0]
    assert out["null_mean"] == pytest.approx(null.mean(), abs=1e-6)
    assert out["null_sd"] == pytest.approx(null.std(ddof=1), abs=1e-6)
    assert out["p_value"] == pytest.approx((1 + (null >= observed).sum()) / 31)
    assert out == geometry.aag_permutation_null(X, y, 30, seed=5)
    # a real signal: no shuffled labelling beats it
    assert out["p_value"] == pytest.approx(1 / 31)


def test_permutation_null_on_noise_is_not_significant():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 16))
    y = rng.integers(0, 2, 300)
    assert geometry.aag_permutation_null(X, y, 99, seed=0)["p_value"] > 0.05


def test_bootstrap_matches_weighted_brute_force():
    X, y = _data(n=150)
    out = geometry.aag_bootstrap(X, y, 20, seed=9, level=0.9)
    rng = np.random.default_rng(9)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    S = U @ U.T.copy()
    vals = []
    for _ in range(20):
        idx = rng.integers(0, 150, 150)
        w = np.bincount(idx, minlength=150).astype(float)
        W = np.outer(w, w)
        np.fill_diagonal(W, 0)  # a row is never paired with its own copy
        same = y[:, None] == y[None, :]
        vals.append((S * W)[same].sum() / W[same].sum() - (S * W)[~same].sum() / W[~same].sum())
    lo, hi = np.quantile(vals, [0.05, 0.95])
    assert out["ci_low"] == pytest.approx(lo, abs=1e-9)
    assert out["ci_high"] == pytest.approx(hi, abs=1e-9)
    assert out["ci_low"] <= geometry.aag(X, y).aag <= out["ci_high"]


def test_label_map_streams_raw_rows_when_too_large_for_memory(monkeypatch):
    """Past the in-memory limit the candidates are streamed and scaled by 1/|x_j| (cosine, not dot)."""
    X, y = _data(n=257)
    X = X * np.random.default_rng(4).uniform(0.1, 10, (257, 1))  # rows far from unit length
    expected = geometry_map.label_map(X, y).map
    monkeypatch.setattr(geometry, "_maybe_in_memory", lambda X, limit_bytes=0: X)
    monkeypatch.setattr(geometry, "iter_chunks", lambda n, chunk=0: (slice(s, min(s + 50, n)) for s in range(0, n, 50)))
    assert geometry_map.label_map(X, y, block=64).map == pytest.approx(expected, abs=1e-4)
    assert expected == pytest.approx(brute_map(X, y), abs=1e-4)


def test_aag_with_many_classes_uses_the_sparse_path():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(700, 12))
    y = rng.integers(0, 100, 700)  # > 64 classes
    assert geometry.aag(X, y, chunk=128).aag == pytest.approx(brute_aag(X, y)[0], abs=1e-10)
