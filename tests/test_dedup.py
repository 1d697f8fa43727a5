"""dedup's maths against brute force (numpy all-pairs, scipy connected_components)."""

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from embedcheck.geometry import dedup as D


def _data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((200, 32)).astype(np.float32)
    return (base[rng.integers(0, 200, n)] + 0.25 * rng.standard_normal((n, 32))).astype(np.float32)


def test_pairs_nearest_groups_keep_equal_brute_force():
    X = _data()
    n = X.shape[0]
    r = D.range_pairs(X, 0.9, query_block=256, corpus_rows=700, tile=300)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    G = U @ U.T
    iu = np.triu_indices(n, 1)
    hit = G[iu] >= 0.9
    assert set(zip(r.i.tolist(), r.j.tolist())) == set(zip(iu[0][hit].tolist(), iu[1][hit].tolist()))
    np.fill_diagonal(G, -np.inf)
    assert np.allclose(G.max(1), r.nn_cos, atol=1e-5)
    _, lab = connected_components(coo_matrix((np.ones(hit.sum()), (iu[0][hit], iu[1][hit])), shape=(n, n)), directed=False)
    assert len(D.groups(n, r.i, r.j).kept) == lab.max() + 1
    rr = D.range_pairs(X, D.keep_bound(r.nn_cos, 1000))
    t = D.threshold_for_keep(n, rr.i, rr.j, rr.cos, 1000)
    m = rr.cos >= np.float32(t)
    assert len(D.groups(n, rr.i[m], rr.j[m]).kept) == 1000


def test_pairs_on_20000_rows_equal_exact_all_pairs_on_the_default_grid():
    """The issue's exactness check at its size: 20,000 rows through the default grid (two corpus
    tiles, twenty query blocks, the diagonal tile's triangle), against numpy all-pairs in float64
    blocks; a pair within 1e-6 of the threshold may fall either side of a float32 GEMM."""
    rng = np.random.default_rng(11)
    base = rng.standard_normal((2000, 32))
    X = (base[rng.integers(0, 2000, 20000)] + 0.15 * rng.standard_normal((20000, 32))).astype(np.float32)
    r = D.range_pairs(X, 0.97)
    U = X.astype(np.float64)
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    want, near = set(), set()
    for s in range(0, 20000, 2000):
        G = U[s:s + 2000] @ U.T
        a, b = np.nonzero(G >= 0.97 - 1e-6)
        keep = b > a + s
        for i, j, c in zip((a[keep] + s).tolist(), b[keep].tolist(), G[a[keep], b[keep]].tolist()):
            (near if abs(c - 0.97) < 1e-6 else want).add((i, j))
    got = set(zip(r.i.tolist(), r.j.tolist()))
    assert len(want) > 1000 and want <= got and got - want <= near
