"""Label MAP without a full argsort per row: the same MAP and per-query APs as the brute-force
reference (the previous implementation: stable argsort of every full row, ties by row order)."""

from __future__ import annotations

import numpy as np
import pytest

from embedcheck.geometry import label_map as geometry_map


def reference_aps(X: np.ndarray, y: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Brute force: float32 cosines, each query ranks all others descending, ties by row order."""
    from embedcheck.rows import unit_rows

    U = unit_rows(X, dtype=np.float32)
    n = len(y)
    aps = []
    for q in queries:
        s = U[q] @ U.T
        s[q] = -np.inf
        order = np.argsort(-s, kind="stable")[: n - 1]
        rel = y[order] == y[q]
        prec = np.cumsum(rel) / np.arange(1, n, dtype=np.float64)
        aps.append((prec * rel).sum() / rel.sum())
    return np.array(aps)


def _tied_data(n: int, d: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random rows plus rows on a few exact unit directions (entries ±1/2 in 4 dims, or ±1 on one
    axis): their cosines are exact in any summation order, so many relevant and irrelevant rows
    tie exactly and the row-order tie rule decides."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)).astype(np.float32)
    m = n // 2
    X[:m] = 0.5 * rng.choice([-1.0, 1.0], size=(m, 4)).astype(np.float32)
    X[m // 2:m:3] = 0.0
    X[np.arange(m // 2, m, 3), rng.integers(0, 4, len(range(m // 2, m, 3)))] = 1.0
    X = np.hstack([X, np.zeros((n, d - 4), np.float32)]) if d > 4 else X
    y = rng.integers(0, k, n)
    return X, y


@pytest.mark.parametrize("n,d,k,block", [(300, 6, 2, 64), (257, 4, 5, 31), (120, 4, 3, 256)])
def test_label_map_equals_full_sort_reference_with_ties(n, d, k, block):
    X, y = _tied_data(n, d, k, seed=n)
    res = geometry_map.label_map(X, y, block=block, threads=1)
    counts = np.bincount(y)
    q = np.flatnonzero(counts[y] >= 2)
    ref = reference_aps(X, y, q)
    # enough exact ties between relevant and irrelevant rows to exercise the tie rule
    assert len(np.unique(X[: n // 2], axis=0)) < 30 and k >= 2
    np.testing.assert_allclose(res.ap, ref, rtol=0, atol=1e-12)
    assert res.map == pytest.approx(100 * ref.mean(), abs=1e-9)
    assert res.queries == len(q)


def test_label_map_threads_and_blocks_do_not_change_the_result():
    X, y = _tied_data(400, 5, 3, seed=7)
    a = geometry_map.label_map(X, y, block=400, threads=1)
    b = geometry_map.label_map(X, y, block=33, threads=3)
    assert a.map == b.map
    np.testing.assert_array_equal(a.ap, b.ap)


def test_label_map_sampled_queries_ap_in_query_order():
    X, y = _tied_data(300, 4, 2, seed=3)
    res = geometry_map.label_map(X, y, queries=40, seed=5)
    q = np.sort(np.random.default_rng(5).choice(np.arange(300), size=40, replace=False))
    np.testing.assert_allclose(res.ap, reference_aps(X, y, q), rtol=0, atol=1e-12)


def test_label_map_streamed_path_matches_reference(monkeypatch):
    from embedcheck.geometry import aag

    X, y = _tied_data(200, 4, 2, seed=11)
    monkeypatch.setattr(aag, "_maybe_in_memory", lambda X: X)  # the too-large-for-memory branch
    monkeypatch.setattr(geometry_map, "_maybe_in_memory", lambda X: X)
    res = geometry_map.label_map(X.astype(np.float64), y, block=50)
    np.testing.assert_allclose(res.ap, reference_aps(X, y, np.arange(200)), rtol=0, atol=1e-6)


def test_ap_field_is_not_in_the_report_dict():
    X, y = _tied_data(60, 3, 2, seed=1)
    res = geometry_map.label_map(X, y)
    assert set(res.to_dict()) == {"map", "chance", "queries", "sampled"}
    assert res.ap.shape == (60,) and np.all((res.ap > 0) & (res.ap <= 1))


def _reference_from_scores(S: np.ndarray, qi: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Brute force on given cosines: stable argsort of each negated row (query excluded)."""
    n = S.shape[1]
    aps = []
    for t, q in enumerate(qi):
        s = S[t].astype(np.float64)
        s[q] = -np.inf
        order = np.argsort(-s, kind="stable")[: n - 1]  # -0.0 == +0.0 in float64 too
        rel = codes[order] == codes[q]
        prec = np.cumsum(rel) / np.arange(1, n, dtype=np.float64)
        aps.append((prec * rel).sum() / rel.sum())
    return np.array(aps)


@pytest.mark.parametrize("max_ties", [16, 0])
def test_rank_block_on_given_cosines_with_signed_zeros_and_ties(monkeypatch, max_ties):
    """The key map on hand-made cosines: -0.0 and +0.0 tie, ±1, tiny and subnormal values, exact
    ties of relevant and irrelevant columns; with the argsort fallback forced too."""
    monkeypatch.setattr(geometry_map, "_MAX_TIES", max_ties)
    rng = np.random.default_rng(2)
    n, b = 64, 12
    pool = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-30, -1e-30, 1e-40, -1e-40, 0.25, 1.0000001],
                    dtype=np.float32)
    S = rng.choice(pool, size=(b, n)).astype(np.float32)
    S[:, ::5] = rng.uniform(-1, 1, size=S[:, ::5].shape).astype(np.float32)
    codes = rng.integers(0, 3, n)
    qi = np.sort(rng.choice(n, size=b, replace=False))
    order = np.argsort(codes[qi], kind="stable")  # _rank_block takes rows grouped by class
    qi, S = qi[order], S[order]
    got = geometry_map._rank_block(S, qi, codes)
    np.testing.assert_allclose(got, _reference_from_scores(S, qi, codes), rtol=0, atol=1e-12)
    assert (np.signbit(S) & (S == 0)).any()  # the data does hold -0.0


@pytest.mark.parametrize("k,max_ties", [(2, 16), (3, 16), (7, 16), (2, 4), (7, 4)])
def test_label_map_quantised_rows_many_tie_values_per_row(monkeypatch, k, max_ties):
    """Rows with 16 entries ±1 among 32 (unit entries ±1/4, so cosines are exact multiples of
    1/16 in any summation order): each row has many distinct tied cosines, beyond the vectorised
    tie fix's per-row limit (up to 15 here; with the limit at 4, rows of one chunk take both
    paths), plus one singleton class whose row is skipped as a query."""
    monkeypatch.setattr(geometry_map, "_MAX_TIES", max_ties)
    rng = np.random.default_rng(k)
    n = 240
    X = np.zeros((n, 32), dtype=np.float32)
    for i in range(n):
        X[i, rng.choice(32, size=16, replace=False)] = rng.choice([-1.0, 1.0], size=16)
    y = rng.integers(0, k, n)
    y[5] = k  # a class with one row
    res = geometry_map.label_map(X, y, block=50, threads=1)
    q = np.flatnonzero(np.bincount(y)[y] >= 2)
    assert 5 not in q and res.queries == len(q) == n - 1
    np.testing.assert_allclose(res.ap, reference_aps(X, y, q), rtol=0, atol=1e-12)
    sampled = geometry_map.label_map(X, y, queries=30, seed=1, block=7, threads=2)
    qs = np.sort(np.random.default_rng(1).choice(q, size=30, replace=False))
    np.testing.assert_allclose(sampled.ap, reference_aps(X, y, qs), rtol=0, atol=1e-12)


def test_label_map_refuses_non_finite_embeddings():
    X, y = _tied_data(50, 4, 2, seed=2)
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        geometry_map.label_map(X, y)
