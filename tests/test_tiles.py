"""The neighbourhood passes' tile kernels (embedcheck.geometry.tiles), compiled and numpy, against
brute force: the exact top-k search over many tiles (the candidate pass after the first tile) and
dedup's range pass (pairs, each row's nearest, one corpus and two), on rows with exact duplicates
and many tied scores."""

from __future__ import annotations

import numpy as np
import pytest

from embedcheck.geometry import dedup as D
from embedcheck.geometry import search, tiles
from embedcheck.geometry.retrieval import select_topk, tie_ranks


@pytest.fixture(params=["compiled", "numpy"])
def formulation(request, monkeypatch):
    if request.param == "compiled" and not tiles.compiled():
        pytest.skip("the tile kernels were not built (no C compiler at install): the numpy formulation runs")
    monkeypatch.setattr(tiles, "_FORCE_NUMPY", request.param == "numpy")
    return request.param


def _tied_rows(n=3000, d=12, seed=5):
    rng = np.random.default_rng(seed)
    X = np.round(rng.standard_normal((n, d)), 1).astype(np.float32)  # many equal cosines
    X[200:260] = X[0:60]  # exact duplicates
    return X


def _unit_scores(Q, C):
    from embedcheck.geometry.retrieval import cosine

    return np.asarray(cosine(Q, C), dtype=np.float32)


def test_search_over_many_tiles_equals_a_full_sort_by_the_tie_rule(formulation):
    X = _tied_rows()
    Q = X[::7]
    ranks = tie_ranks(np.random.default_rng(1).permutation(X.shape[0]))
    top = search.search_topk(Q, X, 12, ranks, query_block=100, corpus_rows=1100, tile=256)
    S = _unit_scores(Q, X)  # the same float32 cosine, one GEMM per row block: compare orders by it
    want = np.lexsort((np.broadcast_to(ranks, S.shape), -S), axis=1)[:, :12]
    want_s = np.take_along_axis(S, want, axis=1)
    assert np.allclose(np.take_along_axis(S, top.rows, axis=1), want_s, atol=1e-6)
    assert np.allclose(top.scores, want_s, atol=1e-6)
    assert all(len(set(r)) == 12 for r in top.rows.tolist())
    assert (top.rows == want).mean() > 0.9  # ties broken by the tie rule, not by position
    # scored in the same tiles both ways: the kernels decide only which entries go on, so the two
    # formulations give the same rows and scores bit for bit
    tiles._FORCE_NUMPY = not tiles._FORCE_NUMPY
    other = search.search_topk(Q, X, 12, ranks, query_block=100, corpus_rows=1100, tile=256)
    assert np.array_equal(top.rows, other.rows) and np.array_equal(top.scores, other.scores)


@pytest.mark.parametrize("two_sets", [False, True], ids=["one corpus", "test against train"])
def test_range_pass_equals_all_pairs_and_nearest_by_brute_force(formulation, two_sets):
    X = _tied_rows()
    C, Q = (X[:2000], X[2000:]) if two_sets else (X, None)
    r = D.range_pairs(C, 0.95, queries=Q, query_block=300, corpus_rows=900, tile=250)
    G = _unit_scores(C if Q is None else Q, C).astype(np.float64)
    if Q is None:
        iu = np.triu_indices(C.shape[0], 1)
        hit = G[iu] >= np.float32(0.95) - 1e-6
        want = set(zip(iu[0][hit].tolist(), iu[1][hit].tolist()))
        np.fill_diagonal(G, -np.inf)
    else:
        a, b = np.nonzero(G >= np.float32(0.95) - 1e-6)
        want = set(zip(a.tolist(), b.tolist()))
    got = set(zip(r.i.tolist(), r.j.tolist()))
    # a pair within 1e-6 of the threshold may fall on either side between two GEMM shapes
    near = {p for p in want if abs(G[p] - 0.95) < 1e-6}
    assert got - near <= want and want - near <= got
    assert np.allclose(r.nn_cos, G.max(axis=1), atol=1e-6)
    dup = np.arange(200, 260) if Q is None else np.zeros(0, dtype=int)
    assert np.all(r.nn_cos[dup] >= 1 - 1e-6)  # the exact duplicates find their copies
    tiles._FORCE_NUMPY = not tiles._FORCE_NUMPY
    o = D.range_pairs(C, 0.95, queries=Q, query_block=300, corpus_rows=900, tile=250)
    for f in ("i", "j", "cos", "nn_row", "nn_cos"):
        assert np.array_equal(getattr(r, f), getattr(o, f)), f


def test_reach_refuses_a_row_over_its_limit_and_pads_the_others(formulation):
    S = np.array([[0.5, 0.9, 0.9, 0.1], [0.2, 0.3, 0.95, 0.4]], dtype=np.float32)
    thr = np.array([0.9, 0.95], dtype=np.float32)
    rows, vals, rks = tiles.reach(S, thr, np.array([7, 6, 5, 4]), 100, 2)
    assert rows.tolist() == [[101, 102], [102, 100]]
    assert vals[0].tolist() == pytest.approx([0.9, 0.9]) and vals[1, 1] == -np.inf
    assert rks.tolist() == [[6, 5], [5, np.iinfo(np.int64).max]]
    assert tiles.reach(S, np.array([0.0, 0.0], dtype=np.float32), np.arange(4), 0, 3) is None


def test_a_wide_block_selects_the_same_top_k_as_a_full_sort(formulation):
    rng = np.random.default_rng(3)
    for t, k in ((4096, 1), (9000, 10)):
        S = np.round(rng.standard_normal((32, t)), 1).astype(np.float32)
        ranks = rng.permutation(t).astype(np.int64)
        cols, vals = select_topk(S, ranks, k)
        want = np.lexsort((np.broadcast_to(ranks, S.shape), -S), axis=1)[:, :k]
        assert np.array_equal(cols, want) and np.array_equal(vals, np.take_along_axis(S, want, axis=1))


def test_the_local_engine_on_two_cores_gives_the_bytes_of_one(monkeypatch):
    """The exact top-k search and dedup's range pass run their tasks on the free cores in process
    (``imap(cores=True)``: each task with BLAS on one thread, results in task order): the rows,
    scores and pairs are the same bytes on one worker thread and on two."""
    X = _tied_rows(n=2500)
    ranks = tie_ranks(np.arange(X.shape[0]))
    got = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("EMBEDCHECK_THREADS", threads)
        top = search.search_topk(X[::3], X, 9, ranks, query_block=64, corpus_rows=700, tile=300)
        r = D.range_pairs(X, 0.9, query_block=128, corpus_rows=600, tile=200)
        lk = D.range_pairs(X[:1500], 0.9, queries=X[1500:], query_block=128, corpus_rows=600, tile=200)
        got[threads] = [top.rows.tobytes(), top.scores.tobytes(),
                        *(getattr(x, f).tobytes() for x in (r, lk) for f in ("i", "j", "cos", "nn_row", "nn_cos"))]
    assert got["1"] == got["2"]
